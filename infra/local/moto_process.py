"""moto in server mode as the local cloud runs it: `python -m infra.local.moto_process -H
HOST -p PORT`. Two differences from `python -m moto.server`:

- DynamoDB requests are handled one at a time. moto's DynamoDB backend is not thread-safe:
  TransactWriteItems deep-copies a table for rollback while other requests write to it, and
  answers 500 ("dictionary changed size during iteration"). Other services, SQS's long
  polls among them, stay concurrent.
- The garbage collector's thresholds: with the defaults, moto paused 1-2.4 s every half
  minute under load, making every run due in that time late; with these, its slowest
  trivial call measured 0.36 s instead of 1.96 s."""

from __future__ import annotations

import gc
import sys
import threading
from typing import Any

from moto.dynamodb.responses import DynamoHandler
from moto.server import main


def serialize_dynamodb() -> None:
    lock = threading.Lock()
    handle = DynamoHandler.call_action

    def call_action_alone(self: DynamoHandler) -> Any:
        with lock:
            return handle(self)

    DynamoHandler.call_action = call_action_alone  # type: ignore[method-assign]


if __name__ == "__main__":
    serialize_dynamodb()
    gc.set_threshold(50_000, 50, 1_000)
    main(sys.argv[1:])
