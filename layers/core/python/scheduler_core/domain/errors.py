"""Errors the services raise; the API turns each into its status code and error body."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field


@dataclass
class SchedulerError(Exception):
    message: str
    details: list[dict[str, str]] = field(default_factory=list)
    code: str = "ERROR"
    status: int = 400

    def __str__(self) -> str:
        return self.message


def field_error(field_name: str, message: str) -> dict[str, str]:
    return {"field": field_name, "message": message}


@contextlib.contextmanager
def fields_within(item: str, named_in_message: bool = False) -> Iterator[None]:
    """A refusal of one item of a request (`item`: `tasks[2]`, `jobs[3]`) names its fields
    within the item (`jobs[3].target.url`), and with `named_in_message` its message starts
    with the item. A quota's limit (429) keeps its own name: the deployment's, not the item's."""
    try:
        yield
    except SchedulerError as error:
        details = error.details
        if error.status != 429:
            details = [detail | {"field": _within(item, detail.get("field", ""))} for detail in details]
        message = f"{item}: {error.message}" if named_in_message else error.message
        raise SchedulerError(message, details, error.code, error.status) from error


def _within(item: str, field_name: str) -> str:
    return f"{item}.{field_name}" if field_name else item


class InvalidRequest(SchedulerError):
    """The request is malformed (400)."""

    def __init__(self, message: str, details: list[dict[str, str]] | None = None) -> None:
        super().__init__(message, details or [], "VALIDATION_ERROR", 400)


class InvalidCursor(InvalidRequest):
    """A listing's cursor that is not one the listing handed out (`reason`: how so)."""

    def __init__(self, reason: object) -> None:
        super().__init__(
            "cursor is not valid; pass the next_cursor of the previous page",
            [
                field_error(
                    "cursor",
                    f"not a cursor this listing returned ({reason}); pass next_cursor back unchanged",
                )
            ],
        )


class NotFound(SchedulerError):
    def __init__(self, message: str) -> None:
        super().__init__(message, [], "NOT_FOUND", 404)


class Conflict(SchedulerError):
    def __init__(self, message: str) -> None:
        super().__init__(message, [], "CONFLICT", 409)


class PayloadTooLarge(SchedulerError):
    def __init__(self, message: str) -> None:
        super().__init__(message, [], "PAYLOAD_TOO_LARGE", 413)


class Unprocessable(SchedulerError):
    """Well-formed but impossible to honour, e.g. a schedule that never fires (422)."""

    def __init__(self, message: str, details: list[dict[str, str]] | None = None) -> None:
        super().__init__(message, details or [], "UNPROCESSABLE", 422)


class PreconditionFailed(SchedulerError):
    """An `If-Match` that names another version than the resource's (412)."""

    def __init__(self, message: str, details: list[dict[str, str]] | None = None) -> None:
        super().__init__(message, details or [], "PRECONDITION_FAILED", 412)


class Forbidden(SchedulerError):
    """The caller may not do this, e.g. pass a role that does not trust the scheduler for it (403)."""

    def __init__(self, message: str, details: list[dict[str, str]] | None = None) -> None:
        super().__init__(message, details or [], "FORBIDDEN", 403)
