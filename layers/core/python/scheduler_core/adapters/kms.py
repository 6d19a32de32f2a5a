"""`Secrets` on KMS: a value is sealed with `Encrypt` under the deployment's secrets key and
an encryption context (what it belongs to), and opened with `Decrypt` under the same
context; KMS refuses any other. Opened values are kept in memory for a few minutes (a
worker delivers the same job's secret headers again and again; each Decrypt costs a call),
never written anywhere."""

from __future__ import annotations

import base64
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping

from scheduler_core.adapters.aws import AwsClients

OPENED_SECONDS = 300.0
OPENED_MAX = 4096


class KmsSecrets:
    def __init__(self, clients: AwsClients, key_id: str) -> None:
        self._clients = clients
        self._key_id = key_id
        self._opened: OrderedDict[tuple[str, tuple[tuple[str, str], ...]], tuple[float, str]] = OrderedDict()
        self._lock = threading.Lock()

    def seal(self, plaintext: str, context: Mapping[str, str]) -> str:
        reply = self._clients.kms().encrypt(
            KeyId=self._key_id, Plaintext=plaintext.encode(), EncryptionContext=dict(context)
        )
        return base64.b64encode(reply["CiphertextBlob"]).decode()

    def reseal(self, sealed: str, context: Mapping[str, str], new_context: Mapping[str, str]) -> str:
        """The same value sealed under `new_context`, by KMS ReEncrypt: it is never in the clear
        outside KMS."""
        reply = self._clients.kms().re_encrypt(
            CiphertextBlob=base64.b64decode(sealed),
            SourceEncryptionContext=dict(context),
            SourceKeyId=self._key_id,
            DestinationKeyId=self._key_id,
            DestinationEncryptionContext=dict(new_context),
        )
        return base64.b64encode(reply["CiphertextBlob"]).decode()

    def unseal(self, sealed: str, context: Mapping[str, str]) -> str:
        key = (sealed, tuple(sorted(context.items())))
        now = time.monotonic()
        with self._lock:
            found = self._opened.get(key)
            if found is not None and found[0] > now:
                self._opened.move_to_end(key)
                return found[1]
        reply = self._clients.kms().decrypt(
            KeyId=self._key_id, CiphertextBlob=base64.b64decode(sealed), EncryptionContext=dict(context)
        )
        plaintext = reply["Plaintext"].decode()
        with self._lock:
            self._opened[key] = (now + OPENED_SECONDS, plaintext)
            while len(self._opened) > OPENED_MAX:
                self._opened.popitem(last=False)
        return plaintext
