"""Validate WebSocket messages against Kalshi's published AsyncAPI (vendored in ``tests/``).

``tests/published/kalshi-openapi/asyncapi.yaml`` (the WebSocket API v2, unchanged, its source
line first) describes every message as a JSON Schema under ``components/schemas``. A message is
matched to its schema by its ``type`` (server to client: ``fill``, ``user_order``,
``order_group_updates``, ``subscribed``, ``error``...) or its ``cmd`` (client to server:
``subscribe``...), the ``const`` each payload schema gives that property; two schemas sharing a
``type`` (``ok``) pass if either does. ``$ref`` resolves within the same file. Formats are
checked (``uuid`` among them), and ``strict`` (the default) refuses a property the schema does
not declare, as :mod:`tests.support.openapi` does for the REST answers.

Control frames have schemas too: Kalshi's Ping carries ``heartbeat``, its Pong and a client's
frames an empty body (:func:`validate_control_frame`).
"""

from __future__ import annotations

import copy
import functools
from typing import Any

import orjson
import pytest
import yaml
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

from tests.support.openapi import SPEC_DIR, strict_schema

ASYNCAPI_FILE = SPEC_DIR / "asyncapi.yaml"
"""The vendored AsyncAPI document."""


@functools.cache
def document() -> dict[str, Any]:
    """The AsyncAPI document, parsed once."""
    if not ASYNCAPI_FILE.is_file():
        pytest.fail(f"{ASYNCAPI_FILE} is missing: the vendored AsyncAPI file is needed")
    parsed: dict[str, Any] = yaml.safe_load(ASYNCAPI_FILE.read_text(encoding="utf-8"))
    return parsed


@functools.cache
def _schemas_by(discriminator: str) -> dict[str, tuple[str, ...]]:
    """``const`` of ``discriminator`` (``type`` or ``cmd``) -> the payload schemas that fix it."""
    found: dict[str, list[str]] = {}
    for name, schema in document()["components"]["schemas"].items():
        const = schema.get("properties", {}).get(discriminator, {}).get("const")
        if isinstance(const, str):
            found.setdefault(const, []).append(name)
    return {const: tuple(names) for const, names in found.items()}


def _validator(schema_name: str, *, strict: bool) -> Draft202012Validator:
    components = document()["components"]
    root = {**copy.deepcopy(components["schemas"][schema_name]), "components": components}
    if strict:
        root = strict_schema(root)
    return Draft202012Validator(root, format_checker=Draft202012Validator.FORMAT_CHECKER)


def _validate(message: bytes | str | dict[str, Any], discriminator: str, *, strict: bool) -> str:
    payload = orjson.loads(message) if isinstance(message, (bytes, str)) else message
    if not isinstance(payload, dict):
        pytest.fail(f"a WebSocket message is not a JSON object: {payload!r:.300}")
    kind = payload.get(discriminator)
    names = _schemas_by(discriminator).get(str(kind))
    if names is None:
        pytest.fail(f"no published message has {discriminator} {kind!r}: {payload!r:.300}")
    failures = []
    for name in names:
        try:
            _validator(name, strict=strict).validate(payload)
            return name
        except ValidationError as error:
            where = "/".join(str(part) for part in error.absolute_path) or "(message)"
            failures.append(f"{name} at {where}: {error.message}")
    pytest.fail(
        f"{discriminator} {kind!r} does not match asyncapi.yaml: "
        + "; ".join(failures)
        + f"\nmessage: {payload!r:.600}"
    )


def validate_server_message(message: bytes | str | dict[str, Any], *, strict: bool = True) -> str:
    """Fail the test unless ``message`` is a message Kalshi's stream may send; its schema name."""
    return _validate(message, "type", strict=strict)


def validate_command(message: bytes | str | dict[str, Any], *, strict: bool = True) -> str:
    """Fail the test unless ``message`` is a published client command; its schema name."""
    return _validate(message, "cmd", strict=strict)


def validate_control_frame(message_name: str, payload: bytes) -> None:
    """Fail the test unless ``payload`` is the published body of control frame ``message_name``
    (``outgoingPing``: Kalshi's Ping; ``outgoingPong``, ``incomingPing``, ``incomingPong``)."""
    schema = document()["components"]["messages"][message_name]["payload"]
    try:
        Draft202012Validator(schema).validate(payload.decode())
    except (ValidationError, UnicodeDecodeError) as error:
        pytest.fail(f"{message_name} body {payload!r} does not match asyncapi.yaml: {error}")


__all__ = [
    "ASYNCAPI_FILE",
    "document",
    "validate_command",
    "validate_control_frame",
    "validate_server_message",
]
