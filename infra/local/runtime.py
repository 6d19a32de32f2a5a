"""The local cloud's Lambda runtime: one warm instance of one function per process.

Started by `FunctionHost` with the function's code as the working directory and its code
and layers on PYTHONPATH, the way Lambda lays out /var/task and /opt/python. Protocol:
one JSON request per line on stdin, one JSON reply per line on the original stdout; the
function's own output (logs, metrics) goes to stderr, which the host reads as its logs.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import time
import traceback
from typing import Any, TextIO


class LocalContext:
    """The Lambda context object, with the fields handlers and Powertools read."""

    def __init__(self, request: dict[str, Any]) -> None:
        self.function_name = os.environ["AWS_LAMBDA_FUNCTION_NAME"]
        self.function_version = os.environ.get("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
        self.memory_limit_in_mb = int(os.environ.get("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128"))
        self.invoked_function_arn = os.environ["LOCAL_FUNCTION_ARN"]
        self.aws_request_id = str(request["request_id"])
        self.log_group_name = f"/aws/lambda/{self.function_name}"
        self.log_stream_name = "local"
        self._deadline_ms = int(request["deadline_ms"])

    def get_remaining_time_in_millis(self) -> int:
        return max(0, self._deadline_ms - int(time.time() * 1000))


def _reply(channel: TextIO, body: dict[str, Any]) -> None:
    channel.write(json.dumps(body, default=str) + "\n")
    channel.flush()


def _error(exc: BaseException) -> dict[str, Any]:
    return {
        "ok": False,
        "errorType": type(exc).__name__,
        "errorMessage": str(exc),
        "stackTrace": traceback.format_exception(exc),
    }


def main() -> None:
    # Keep the real stdout for replies; everything the function prints goes to stderr.
    channel = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    module_name, _, attribute = os.environ["_HANDLER"].rpartition(".")
    try:
        handler = getattr(importlib.import_module(module_name), attribute)
    except Exception as exc:  # an init error: the host reports it and never invokes us
        traceback.print_exc()
        _reply(channel, {"ready": False} | _error(exc))
        return
    _reply(channel, {"ready": True})
    for line in sys.stdin:
        request = json.loads(line)
        try:
            result = handler(request["event"], LocalContext(request))
        except Exception as exc:
            traceback.print_exc()
            _reply(channel, _error(exc))
        else:
            _reply(channel, {"ok": True, "result": result})


if __name__ == "__main__":
    main()
