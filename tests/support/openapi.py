"""Validate a response body against Kalshi's published OpenAPI, vendored in ``tests/published/``.

The schema files are Kalshi's, vendored unchanged in ``tests/published/kalshi-openapi/`` with
their source line first (``tests/published/README.md``), so the suite needs nothing beside the
checkout. Each holds one operation; :func:`validate_response`
finds the file for ``(path, method)``, follows the operation's response for ``status`` (a
``$ref`` into ``components/responses`` included) and validates the JSON body against its schema,
resolving ``$ref`` within the same file. The documents are OpenAPI 3.0 (``nullable``), so the
validator is openapi-schema-validator's ``OAS30Validator``.

``strict`` (the default) also refuses a property the schema does not declare: a fake that sends
a field the real API does not would let the executor come to depend on it unnoticed.
"""

from __future__ import annotations

import copy
import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from jsonschema.exceptions import ValidationError
from openapi_schema_validator import OAS30Validator

SPEC_DIR = Path(__file__).resolve().parents[1] / "published" / "kalshi-openapi"
"""Where the vendored published schema files are."""

API_PREFIX = "/trade-api/v2"
"""The servers' base path: request paths carry it, the documents' ``paths`` do not."""


@dataclass(frozen=True)
class Operation:
    """One documented operation: the document it is in and its ``responses`` object."""

    source: Path
    document: dict[str, Any]
    responses: dict[str, Any]


@functools.cache
def operations() -> dict[tuple[str, str], Operation]:
    """Every ``(path without the prefix, METHOD)`` documented in the schema files."""
    files = sorted(SPEC_DIR.glob("*.yaml"))
    if not files:
        pytest.fail(f"no published OpenAPI files in {SPEC_DIR}: the vendored copies are missing")
    found: dict[tuple[str, str], Operation] = {}
    for source in files:
        document = yaml.safe_load(source.read_text(encoding="utf-8"))
        for path, item in document.get("paths", {}).items():
            for method, operation in item.items():
                found[(path, method.upper())] = Operation(source, document, operation["responses"])
    return found


def _resolve(document: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    """``node``, or what its local ``$ref`` (``#/a/b``) points at."""
    while "$ref" in node:
        target: Any = document
        for part in node["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        node = target
    return node


def strict_schema(node: Any) -> Any:
    """A copy of a schema tree in which every object with ``properties`` allows no others."""
    if isinstance(node, list):
        return [strict_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    strict = {key: strict_schema(value) for key, value in node.items()}
    if "properties" in strict and "additionalProperties" not in strict:
        strict["additionalProperties"] = False
    return strict


def response_schema(path: str, method: str, status: int) -> tuple[Operation, dict[str, Any]]:
    """The operation and the JSON schema of its ``status`` response (``default`` if undocumented).

    Fails the test when the path, method or status is not in the published API.
    """
    key = (path.removeprefix(API_PREFIX), method.upper())
    operation = operations().get(key)
    if operation is None:
        pytest.fail(f"{method} {path} is not in the published API files in {SPEC_DIR}")
    response = operation.responses.get(str(status), operation.responses.get("default"))
    if response is None:
        pytest.fail(f"{method} {path}: the published API documents no {status} response")
    response = _resolve(operation.document, response)
    schema = response["content"]["application/json"]["schema"]
    return operation, schema


def validate_response(
    path: str, method: str, status: int, body: bytes | dict[str, Any], *, strict: bool = True
) -> None:
    """Fail the test unless ``body`` is what the published API says ``method path`` answers
    with ``status``.

    Args:
        path: the request path, with or without ``/trade-api/v2``.
        method: the HTTP method.
        status: the response's status code.
        body: the raw JSON bytes (or the decoded object).
        strict: also refuse properties the schema does not declare.
    """
    operation, schema = response_schema(path, method, status)
    payload = orjson.loads(body) if isinstance(body, bytes) else body
    components = operation.document.get("components", {})
    # The body's schema as the root of a schema that carries the document's components, so a
    # ``#/components/...`` reference resolves within the same file.
    root = {**copy.deepcopy(schema), "components": components}
    if strict:
        root = strict_schema(root)
    try:
        OAS30Validator(root, format_checker=OAS30Validator.FORMAT_CHECKER).validate(payload)
    except ValidationError as error:
        where = "/".join(str(part) for part in error.absolute_path) or "(body)"
        pytest.fail(
            f"{method} {path} {status} does not match {operation.source.name}: "
            f"at {where}: {error.message}\nbody: {payload!r:.600}"
        )
