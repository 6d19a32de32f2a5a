"""How an AWS error answers a delivery: worth another attempt, or final. The one
classification, for a target's call and for assuming its execution role alike: throttling
and service faults are worth retrying; a target that does not exist, access denied or a
request AWS refuses fails at once."""

from __future__ import annotations

from botocore.exceptions import BotoCoreError, ClientError, ParamValidationError

from scheduler_core.ports import Delivery

# Throttling and service faults, whatever their status: a later attempt may get through.
# EventBridge reports InternalFailure and ThrottlingException per entry, without a status.
RETRYABLE_AWS_CODES = frozenset(
    {
        # throttling (botocore's own list, and each target service's spelling)
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestThrottled",
        "RequestThrottledException",
        "TooManyRequestsException",
        "RequestLimitExceeded",
        "SlowDown",
        "KMSThrottling",
        "KMSThrottlingException",
        "KmsThrottled",
        "EC2ThrottledException",
        # service faults and timeouts
        "InternalError",
        "InternalFailure",
        "InternalException",
        "InternalServerError",
        "ServiceException",
        "ServiceUnavailable",
        "ServiceUnavailableException",
        "RequestTimeout",
        "RequestTimeoutException",
        # a Lambda function that is being created, updated or restored (409/502): it will be ready
        "ResourceConflictException",
        "ResourceNotReadyException",
        "SnapStartNotReadyException",
        "ENILimitReachedException",
        "EC2UnexpectedException",
        "SubnetIPAddressLimitReachedException",
    }
)
# Final although some carry a 5xx status (Lambda answers 502 for a function whose KMS key or
# VPC set-up is broken): the target is missing, forbidden or misconfigured, and trying again
# within a run's backoff will meet the same answer.
FINAL_AWS_CODES = frozenset(
    {
        # does not exist
        "NotFound",
        "NotFoundException",
        "ResourceNotFoundException",
        "QueueDoesNotExist",
        "AWS.SimpleQueueService.NonExistentQueue",
        # not allowed
        "AccessDenied",
        "AccessDeniedException",
        "AuthorizationError",
        "InvalidClientTokenId",
        "UnrecognizedClientException",
        "NotAuthorizedForSourceException",
        "NotAuthorizedForDetailTypeException",
        "KMSAccessDenied",
        "KMSAccessDeniedException",
        "KmsAccessDenied",
        "EC2AccessDeniedException",
        # broken set-up of the target
        "KMSDisabled",
        "KMSDisabledException",
        "KmsDisabled",
        "KMSNotFound",
        "KMSNotFoundException",
        "KmsNotFound",
        "KMSInvalidState",
        "KMSInvalidStateException",
        "KmsInvalidState",
        "InvalidSecurityGroupIDException",
        "InvalidSubnetIDException",
        "InvalidRuntimeException",
        "InvalidZipFileException",
    }
)


def aws_error_retryable(code: str, status: int | None = None) -> bool:
    """Whether an AWS target's error `code` (with the HTTP `status` of the answer, when there
    was one) is worth another attempt. Codes neither list names follow their status: 429 and
    5xx are retried, anything else (a 4xx: a request AWS refuses) fails at once."""
    if code in FINAL_AWS_CODES:
        return False
    if code in RETRYABLE_AWS_CODES:
        return True
    return status is not None and (status == 429 or status >= 500)


def aws_failure(service: str, error: ClientError | BotoCoreError) -> Delivery:
    """The failed delivery an AWS client error means."""
    if isinstance(error, ClientError):
        code = str(error.response.get("Error", {}).get("Code", ""))
        status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        return Delivery(
            ok=False, error=f"{service} {code}: {error}", retryable=aws_error_retryable(code, status)
        )
    if isinstance(error, ParamValidationError):  # botocore refused to send it: so would AWS
        return Delivery(ok=False, error=f"{service} request refused: {error}", retryable=False)
    return Delivery(ok=False, error=f"{service} unreachable: {error}", retryable=True)
