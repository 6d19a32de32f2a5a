"""checkov's findings that do not apply to the stack, answered with a reason.

checkov (run on the synthesized template by `make test`) reads a resource's skips from its
CloudFormation Metadata, `{"checkov": {"skip": [{"id": ..., "comment": ...}]}}`: the reason
travels with the resource, as cdk-nag's acknowledgements (`Validations.acknowledge`) do.
"""

from __future__ import annotations

from aws_cdk import CfnResource
from constructs import IConstruct

CHECKOV_METADATA = "checkov"


def skip_checkov_check(construct: IConstruct, check_id: str, reason: str) -> None:
    """Skip checkov's `check_id` on the construct's CloudFormation resource, for `reason`
    (one line). Skips of the same resource add up."""
    resource = construct if isinstance(construct, CfnResource) else construct.node.default_child
    if not isinstance(resource, CfnResource):
        raise TypeError(f"{construct.node.path} has no CloudFormation resource to hold a checkov skip")
    metadata = resource.get_metadata(CHECKOV_METADATA) or {}
    skips = [*metadata.get("skip", []), {"id": check_id, "comment": reason}]
    resource.add_metadata(CHECKOV_METADATA, {"skip": skips})
