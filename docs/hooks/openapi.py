"""A mkdocs hook: the API reference page (`reference/api.md`) generated at build time from
the OpenAPI document the API itself serves (`GET /v1/openapi.json`), so the reference
cannot drift from the routes and models."""

from __future__ import annotations

import json
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

PAGE = "reference/api.md"
_METHODS = ("get", "post", "patch", "put", "delete")


def on_files(files: Files, config: MkDocsConfig) -> Files:
    from functions.api.handler import API_TITLE, API_VERSION, app

    document = json.loads(app.get_openapi_json_schema(title=API_TITLE, version=API_VERSION))
    files.append(File.generated(config, PAGE, content=render(document)))
    return files


def render(document: dict[str, Any]) -> str:
    lines = [
        "# API reference",
        "",
        f"Generated from the OpenAPI document of {document['info']['title']} "
        f"{document['info']['version']}, which the API serves at `GET /v1/openapi.json`. Every "
        "route needs an IAM-signed (SigV4) request; how errors look and what each status means "
        "is in [Using the API](../api.md).",
        "",
    ]
    for path in sorted(document["paths"]):
        for method in _METHODS:
            operation = document["paths"][path].get(method)
            if operation is not None:
                lines += _operation(method, path, operation)
    lines += ["## Schemas", ""]
    for name, schema in sorted(document.get("components", {}).get("schemas", {}).items()):
        if name in ("HTTPValidationError", "ValidationError", "ResponseValidationError"):
            continue  # Powertools' own error models: the API answers in its own shape
        lines += _schema(name, schema)
    return "\n".join(lines) + "\n"


def _operation(method: str, path: str, operation: dict[str, Any]) -> list[str]:
    lines = [f"## `{method.upper()} {path}`", "", operation.get("summary", ""), ""]
    if operation.get("description"):
        lines += [operation["description"], ""]
    parameters = operation.get("parameters", [])
    if parameters:
        lines += ["| parameter | in | required | type | description |", "|---|---|---|---|---|"]
        for parameter in parameters:
            schema = parameter.get("schema", {})
            name = (
                schema.get("title", parameter["name"]) if parameter["in"] == "header" else parameter["name"]
            )
            description = parameter.get("description") or schema.get("description", "")
            lines.append(
                f"| `{name}` | {parameter['in']} | {'yes' if parameter.get('required') else 'no'} "
                f"| {_type(schema)} | {_cell(description)} |"
            )
        lines.append("")
    body = operation.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
    if body:
        lines += [f"Body: {_type(body)}.", ""]
    answers = []
    for status, response in sorted(operation.get("responses", {}).items()):
        schema = response.get("content", {}).get("application/json", {}).get("schema")
        if status.startswith("2") and schema:
            answers.append(f"`{status}` {_type(schema)}")
    errors = sorted(status for status in operation.get("responses", {}) if status[0] in "45")
    if errors:
        answers.append(f"errors ({', '.join(errors)}) [ErrorBody](#errorbody)")
    if answers:
        lines += [f"Answers: {'; '.join(answers)}.", ""]
    return lines


def _schema(name: str, schema: dict[str, Any]) -> list[str]:
    lines = [f"### {name}", ""]
    if schema.get("description"):
        lines += [schema["description"], ""]
    if "enum" in schema:
        return [*lines, "One of " + ", ".join(f"`{value}`" for value in schema["enum"]) + ".", ""]
    properties = schema.get("properties", {})
    if properties:
        required = set(schema.get("required", []))
        lines += ["| field | type | required | description |", "|---|---|---|---|"]
        for field, spec in properties.items():
            lines.append(
                f"| `{field}` | {_type(spec)} | {'yes' if field in required else 'no'} "
                f"| {_cell(spec.get('description', ''))} |"
            )
        lines.append("")
    return lines


def _type(schema: dict[str, Any]) -> str:
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#{name.lower()})"
    for union in ("anyOf", "oneOf"):
        if union in schema:
            kinds = [_type(member) for member in schema[union] if member.get("type") != "null"]
            nullable = any(member.get("type") == "null" for member in schema[union])
            return " or ".join(kinds) + (" (or null)" if nullable else "")
    kind = schema.get("type", "any")
    if kind == "array":
        return f"array of {_type(schema.get('items', {}))}"
    bounds = (
        ("minimum", "≥"),
        ("maximum", "≤"),
        ("exclusiveMinimum", ">"),
        ("minLength", "length ≥"),
        ("maxLength", "length ≤"),
    )
    limits = [f"{label} {schema[key]:g}" for key, label in bounds if key in schema]
    if "const" in schema:
        return f"`{schema['const']}`"
    return kind + (f" ({', '.join(limits)})" if limits else "")


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")
