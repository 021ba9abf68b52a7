"""Credentials checked for the bounds only: `Limits.verify_credentials`.

A credential header anyone can make up earns nothing (store/policy.py, `holder_of`) unless the
app says how to check it. The app's check runs at most once a minute per credential: its
answer is kept under a digest of the credentials (never the credentials themselves), the
accepted apart from the refused, so a flood of made-up keys pushes out no accepted key's
answer, and a request whose key was checked lately costs a digest and a dict lookup.
"""

from __future__ import annotations

import hashlib
import inspect
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any, Final

logger = logging.getLogger("fastapi_mcp_routes")

# How long an answer is kept: a revoked key keeps its rank in the bounds at most this long.
ANSWER_TTL_S: Final = 60.0
# Answers kept of each kind, accepted and refused; about 100 bytes each.
ANSWERS_KEPT: Final = 4096
_DIGEST_BYTES: Final = 16
# The hook failing is logged at most this often: a flood of keys must not flood the log.
FAILURE_LOG_S: Final = 60.0
_OWN_ACCOUNT: Final = b"credentials\x00"
_NAMED_ACCOUNT: Final = b"named\x00"

Verify = Callable[[Mapping[str, str]], Any]


class CredentialCheck:
    """Asks the app's `verify_credentials` which account a request's credentials belong to."""

    __slots__ = ("_accepted", "_clock", "_failure_logged", "_headers", "_refused", "_verify")

    def __init__(
        self, verify: Verify, credential_headers: frozenset[bytes], clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._verify = verify
        self._headers = credential_headers
        self._clock = clock
        self._accepted: OrderedDict[bytes, tuple[bytes, float]] = OrderedDict()
        self._refused: OrderedDict[bytes, float] = OrderedDict()
        self._failure_logged = -FAILURE_LOG_S

    async def account(self, headers: list[tuple[bytes, bytes]], identity: bytes) -> bytes | None:
        """The account of the credentials in `headers` (their canonical form `identity`), or
        `None` when the app does not accept them."""
        digest = hashlib.blake2b(identity, digest_size=_DIGEST_BYTES).digest()
        now = self._clock()
        accepted = self._accepted.get(digest)
        if accepted is not None and accepted[1] > now:
            return accepted[0]
        refused = self._refused.get(digest)
        if refused is not None and refused > now:
            return None
        account = await self._ask(headers, digest)
        if account is None:
            _keep(self._refused, digest, now + ANSWER_TTL_S)
        else:
            _keep(self._accepted, digest, (account, now + ANSWER_TTL_S))
        return account

    async def _ask(self, headers: list[tuple[bytes, bytes]], digest: bytes) -> bytes | None:
        given = {name.decode("latin-1"): value.decode("latin-1") for name, value in headers if name in self._headers}
        try:
            answer = self._verify(given)
            if inspect.isawaitable(answer):
                answer = await answer
        except Exception:
            # The caller counts as anonymous: a failing check must not rank anyone higher.
            now = self._clock()
            if now - self._failure_logged >= FAILURE_LOG_S:
                self._failure_logged = now
                logger.exception("Limits.verify_credentials failed; its caller counts as anonymous")
            return None
        if answer is True:
            return _OWN_ACCOUNT + digest
        if isinstance(answer, str) and answer:
            return _NAMED_ACCOUNT + answer.encode()
        return None


def _keep(kept: OrderedDict[bytes, Any], digest: bytes, value: Any) -> None:
    kept[digest] = value
    kept.move_to_end(digest)
    if len(kept) > ANSWERS_KEPT:
        kept.popitem(last=False)
