"""Sealed session ids: what any process needs to serve a session, vouched for by the secret.

A session id is `Secret.seal` of the session's name in the store, the process that opened it,
its end of life, its negotiated version, its caller's trust and what the session keeps of the
client (the capability names and modes `declares` reads, the client's name and version), bound
to the credentials that opened it. It travels in a header on every request, so it carries only
that much. An id presented with other credentials fails its seal like an unknown one.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from fastapi_mcp_routes.server.sealing.secret import INSTANCE_BYTES, Secret
from fastapi_mcp_routes.store.base import Trust
from fastapi_mcp_routes.wire.errors import McpError
from fastapi_mcp_routes.wire.json import dumps, loads

SEALED_NAMES: Final = 8
SEALED_TEXT: Final = 64
# Sealed ids opened lately, by id and credentials: a live session's requests skip the decoding,
# which costs many times the look-up (`benchmarks/step_costs.py` times the session step).
OPENED_KEPT: Final = 4096
_PURPOSE: Final = "session id"


@dataclass(frozen=True, slots=True)
class SealedSession:
    """What a sealed session id says."""

    key: str  # the session's name in the store
    instance: bytes  # the process that opened it
    expires: int  # its end of life, in the clock's seconds
    protocol_version: str
    trust: Trust
    client_info: dict[str, str] | None
    client_capabilities: dict[str, Any] | None


class SessionIds:
    """Seals session ids for this process, and opens those of any process sharing the secret."""

    def __init__(self, secret: Secret, clock: Callable[[], float]) -> None:
        self._secret = secret
        self._clock = clock
        self._opened: OrderedDict[tuple[str, bytes], SealedSession] = OrderedDict()

    def seal(self, sealed: SealedSession, identity: bytes) -> str:
        payload = dumps(
            [
                sealed.key,
                base64.urlsafe_b64encode(sealed.instance).decode(),
                sealed.expires,
                sealed.protocol_version,
                int(sealed.trust),
                sealed.client_info,
                sealed.client_capabilities,
            ]
        )
        return self._secret.seal(_PURPOSE, payload, identity)

    def open(self, session_id: str, identity: bytes) -> SealedSession | None:
        """What a live id says, when it was sealed for these credentials; else `None`."""
        # By a digest of the credentials: a caller's long credentials are not kept here.
        kept_as = (session_id, hashlib.sha256(identity).digest() if identity else b"")
        seen = self._opened.get(kept_as)
        if seen is None:
            seen = self._decode(session_id, identity)
            if seen is None:
                return None
            self._opened[kept_as] = seen
            if len(self._opened) > OPENED_KEPT:
                self._opened.popitem(last=False)
        return seen if seen.expires > self._clock() else None

    def _decode(self, session_id: str, identity: bytes) -> SealedSession | None:
        payload = self._secret.open(_PURPOSE, session_id, identity)
        if payload is None:
            return None
        try:
            key, instance, expires, version, trust, info, capabilities = loads(payload)
            sealed = SealedSession(
                key, base64.urlsafe_b64decode(instance), expires, version, Trust(trust), info, capabilities
            )
        except (McpError, ValueError, TypeError, binascii.Error):
            return None  # sealed by this secret, so never in practice: a seal the code can no longer read
        if not isinstance(key, str) or len(sealed.instance) != INSTANCE_BYTES or not isinstance(expires, int):
            return None
        return sealed


def sealed_client_info(info: Mapping[str, Any] | None) -> dict[str, str] | None:
    if info is None:
        return None
    return {key: value[:SEALED_TEXT] for key in ("name", "version") if isinstance(value := info.get(key), str)}


def sealed_capabilities(kept: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """What a sealed id carries of the capabilities a session keeps: names and modes."""
    if kept is None:
        return None
    return {
        name[:SEALED_TEXT]: (
            {key[:SEALED_TEXT]: {} for key in list(value)[:SEALED_NAMES]} if isinstance(value, Mapping) else value
        )
        for name, value in list(kept.items())[:SEALED_NAMES]
    }
