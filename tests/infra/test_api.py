"""The REST API (DESIGN §7): routes, IAM auth, proxy integration, logging, the ApiUrl output."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from tests.infra.conftest import Synthesis

EXPECTED_ROUTES = {
    ("/v1/jobs", "GET"),
    ("/v1/jobs", "POST"),
    ("/v1/jobs/batch", "POST"),
    ("/v1/jobs/{job_id}", "GET"),
    ("/v1/jobs/{job_id}", "PATCH"),
    ("/v1/jobs/{job_id}", "DELETE"),
    ("/v1/jobs/{job_id}/{proxy+}", "ANY"),
    ("/v1/workflows", "GET"),
    ("/v1/workflows", "POST"),
    ("/v1/workflows/{workflow_id}", "GET"),
    ("/v1/workflows/{workflow_id}", "PATCH"),
    ("/v1/workflows/{workflow_id}", "DELETE"),
    ("/v1/workflows/{workflow_id}/{proxy+}", "ANY"),
    ("/v1/signing-secrets", "GET"),
    ("/v1/signing-secrets", "POST"),
    ("/v1/tenant", "GET"),
    ("/v1/openapi.json", "GET"),
    ("/v1/docs", "GET"),
}


def _paths(synthesis: Synthesis) -> dict[str, str]:
    """Resource logical id → its full path, e.g. `/v1/jobs/{job_id}`."""
    resources = synthesis.resources("AWS::ApiGateway::Resource")
    root = synthesis.resources("AWS::ApiGateway::RestApi")

    def path_of(logical_id: str) -> str:
        properties = resources[logical_id]["Properties"]
        parent = properties["ParentId"]
        prefix = "" if "Fn::GetAtt" in parent and parent["Fn::GetAtt"][0] in root else path_of(parent["Ref"])
        return f"{prefix}/{properties['PathPart']}"

    return {logical_id: path_of(logical_id) for logical_id in resources}


def _methods(synthesis: Synthesis) -> dict[tuple[str, str], Mapping[str, Any]]:
    """(path, verb) → the method's properties."""
    paths = _paths(synthesis)
    methods = [method["Properties"] for method in synthesis.resources("AWS::ApiGateway::Method").values()]
    return {(paths[method["ResourceId"]["Ref"]], method["HttpMethod"]): method for method in methods}


def _stage(synthesis: Synthesis) -> Mapping[str, Any]:
    (stage,) = synthesis.resources("AWS::ApiGateway::Stage").values()
    return stage["Properties"]  # type: ignore[no-any-return]


def test_the_api_has_exactly_the_v1_routes(synthesis: Synthesis) -> None:
    assert set(_methods(synthesis)) == EXPECTED_ROUTES


def test_every_api_method_requires_iam_auth(synthesis: Synthesis) -> None:
    methods = synthesis.resources("AWS::ApiGateway::Method")
    assert methods
    for logical_id, method in methods.items():
        assert method["Properties"]["AuthorizationType"] == "AWS_IAM", logical_id


def test_every_method_proxies_to_the_api_function(synthesis: Synthesis) -> None:
    api_function = synthesis.function_ids["api"]
    for route, method in _methods(synthesis).items():
        integration = method["Integration"]
        assert integration["Type"] == "AWS_PROXY", route
        assert integration["IntegrationHttpMethod"] == "POST", route
        assert api_function in json.dumps(integration["Uri"]), route


def test_every_method_validates_its_required_parameters(synthesis: Synthesis) -> None:
    (validator_id, validator) = next(iter(synthesis.resources("AWS::ApiGateway::RequestValidator").items()))
    assert validator["Properties"]["ValidateRequestParameters"] is True
    methods = _methods(synthesis)
    for route, method in methods.items():
        assert method["RequestValidatorId"] == {"Ref": validator_id}, route
    assert methods[("/v1/jobs/{job_id}", "GET")]["RequestParameters"] == {"method.request.path.job_id": True}
    assert methods[("/v1/jobs/{job_id}/{proxy+}", "ANY")]["RequestParameters"] == {
        "method.request.path.job_id": True,
        "method.request.path.proxy": True,
    }


def test_listing_declares_its_optional_filters(synthesis: Synthesis) -> None:
    """Documentation only (a proxy integration passes every query string), but it must match
    what the function reads."""
    parameters = _methods(synthesis)[("/v1/jobs", "GET")]["RequestParameters"]
    assert parameters == {
        f"method.request.querystring.{name}": False for name in ("status", "name_prefix", "limit", "cursor")
    }


def test_stage_writes_json_access_logs_to_its_log_group(synthesis: Synthesis) -> None:
    access_log = _stage(synthesis)["AccessLogSetting"]
    log_group_id = synthesis.logical_id(synthesis.stack.api.access_logs)
    assert {"Ref": log_group_id} in access_log["DestinationArn"]["Fn::Join"][1]
    fields = json.loads(access_log["Format"])
    assert {"requestId", "ip", "caller", "user", "httpMethod", "resourcePath", "status"} <= set(fields)


def test_stage_logs_errors_and_metrics_but_never_bodies_and_throttles_every_method(
    synthesis: Synthesis,
) -> None:
    stage = _stage(synthesis)
    assert stage["TracingEnabled"] is True
    assert stage["MethodSettings"] == [
        {
            "HttpMethod": "*",
            "ResourcePath": "/*",
            "LoggingLevel": "ERROR",
            "MetricsEnabled": True,
            "DataTraceEnabled": False,
            "ThrottlingRateLimit": 500,
            "ThrottlingBurstLimit": 1000,
        }
    ]


def test_the_stage_throttle_comes_from_the_context(narrowed: Synthesis) -> None:
    (settings,) = _stage(narrowed)["MethodSettings"]
    assert (settings["ThrottlingRateLimit"], settings["ThrottlingBurstLimit"]) == (50, 80)


def test_api_url_output_points_at_the_stage(synthesis: Synthesis) -> None:
    outputs = synthesis.template.find_outputs("*")
    # The others carry the functions' shared settings (see test_functions).
    assert "ApiUrl" in outputs
    rest_api_id = synthesis.logical_id(synthesis.stack.api.rest_api)
    parts = outputs["ApiUrl"]["Value"]["Fn::Join"][1]
    assert parts[0] == "https://"
    assert {"Ref": rest_api_id} in parts
    assert parts[-1] == f"/{_stage(synthesis)['StageName']}/"


def test_api_gateway_may_invoke_the_api_function_only_from_this_api(synthesis: Synthesis) -> None:
    rest_api_id = synthesis.logical_id(synthesis.stack.api.rest_api)
    permissions = [
        permission["Properties"]
        for permission in synthesis.resources("AWS::Lambda::Permission").values()
        if permission["Properties"]["Principal"] == "apigateway.amazonaws.com"
    ]
    assert len(permissions) == len(EXPECTED_ROUTES)
    for permission in permissions:
        assert permission["FunctionName"] == {"Fn::GetAtt": [synthesis.function_ids["api"], "Arn"]}
        assert {"Ref": rest_api_id} in permission["SourceArn"]["Fn::Join"][1]


def test_every_route_of_the_api_function_is_reachable_through_the_gateway(synthesis: Synthesis) -> None:
    """Each path and verb the API function serves (its OpenAPI document) has a gateway method:
    its own, or a `{proxy+}` ANY above it. (The function is tested in-process, where a route
    the gateway lacks still answers; deployed, API Gateway would answer 403 before it.)"""
    from functions.api.handler import app

    def shape(path: str) -> tuple[str, ...]:
        return tuple("{}" if part.startswith("{") else part for part in path.strip("/").split("/"))

    gateway = {(shape(path), verb) for path, verb in _methods(synthesis)}
    proxies = [path[:-1] for path, verb in gateway if path and path[-1] == "{}" and verb == "ANY"]
    schema = app.get_openapi_schema()
    unreachable = []
    for path, operations in (schema.paths or {}).items():
        for verb in ("get", "post", "put", "patch", "delete"):
            if getattr(operations, verb, None) is None:
                continue
            wanted = shape(path)
            routed = (wanted, verb.upper()) in gateway or any(
                len(wanted) > len(prefix) and wanted[: len(prefix)] == prefix for prefix in proxies
            )
            if not routed:
                unreachable.append(f"{verb.upper()} {path}")
    assert unreachable == [], "routes the gateway does not send to the function"


def test_the_api_is_named_after_its_stack_so_its_metrics_are_its_own(synthesis: Synthesis) -> None:
    [api] = synthesis.resources("AWS::ApiGateway::RestApi").values()
    assert api["Properties"]["Name"] == synthesis.stack.stack_name
