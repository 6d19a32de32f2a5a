"""Opaque listing cursors: a page's resume key, base64url JSON. A cursor is accepted only
with exactly the key names of its listing and scalar values, so a forged or stale one is
`CursorNotValid` (the API's 400 naming `cursor`), never an error from the database."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Collection, Mapping
from typing import Any

from scheduler_core.ports import CursorNotValid


def encode_cursor(key: Mapping[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(key, separators=(",", ":")).encode()).decode()


def decode_cursor(cursor: str, key_names: Collection[str], optional: Collection[str] = ()) -> dict[str, Any]:
    """The key a cursor holds: exactly `key_names`, and any of `optional`."""
    try:
        key = json.loads(base64.urlsafe_b64decode(cursor.encode()))
    except (binascii.Error, ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise CursorNotValid("not base64url JSON") from exc
    if not isinstance(key, dict) or not set(key_names) <= set(key) <= {*key_names, *optional}:
        raise CursorNotValid("not this listing's key")
    if not all(
        isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))
        for value in key.values()
    ):
        raise CursorNotValid("a key value that is not a string or an integer")
    return key
