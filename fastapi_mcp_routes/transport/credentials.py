"""Credentials checked for the bounds only: `Limits.verify_credentials`.

A credential header anyone can make up earns nothing (store/policy.py, `holder_of`) unless the
app says how to check it. The app's check runs at most once a minute per credential: its
answer is kept under a digest of the credentials (never the credentials themselves), the
accepted apart from the refused, so a flood of made-up keys pushes out no accepted key's
answer, and a request whose key was checked lately costs a digest and a dict lookup.

The check is the app's code in every keyed request's path, so it is bounded too: requests with
the same new key wait for one check, not one each; a check that fails, or does not answer
within `CHECK_TIMEOUT_S`, ranks the caller as anonymous (logged at most once a minute), and is
asked again only `RETRY_AFTER_FAILURE_S` later, so a key service that hangs slows no request
for long.
"""

from __future__ import annotations

import hashlib
import inspect
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any, Final

import anyio

from fastapi_mcp_routes.wire.jsonrpc import truncate

logger = logging.getLogger("fastapi_mcp_routes")

# How long an answer is kept: a revoked key keeps its rank in the bounds at most this long.
ANSWER_TTL_S: Final = 60.0
# Answers kept of each kind, accepted and refused; about 100 bytes each.
ANSWERS_KEPT: Final = 4096
_DIGEST_BYTES: Final = 16
# The hook failing is logged at most this often: a flood of keys must not flood the log.
FAILURE_LOG_S: Final = 60.0
# How long a request waits for the app's check; past it the caller counts as anonymous.
CHECK_TIMEOUT_S: Final = 2.0
# How long a check that failed or did not answer is not asked again for the same credentials.
RETRY_AFTER_FAILURE_S: Final = 5.0
_OWN_ACCOUNT: Final = b"credentials\x00"
_NAMED_ACCOUNT: Final = b"named\x00"

Verify = Callable[[Mapping[str, str]], Any]


class CredentialCheck:
    """Asks the app's `verify_credentials` which account a request's credentials belong to."""

    __slots__ = ("_accepted", "_asking", "_clock", "_failure_logged", "_headers", "_refused", "_verify")

    def __init__(
        self, verify: Verify, credential_headers: frozenset[bytes], clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._verify = verify
        self._headers = credential_headers
        self._clock = clock
        self._accepted: OrderedDict[bytes, tuple[bytes, float]] = OrderedDict()
        self._refused: OrderedDict[bytes, float] = OrderedDict()
        self._failure_logged = -FAILURE_LOG_S
        # Checks under way, by digest: what requests with the same credentials wait for.
        self._asking: dict[bytes, _Pending] = {}

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
        pending = self._asking.get(digest)
        if pending is None:
            pending = self._asking[digest] = _Pending()
            try:
                pending.account, failed = await self._ask(headers, digest)
            finally:
                del self._asking[digest]
                pending.done.set()
            expires = now + (RETRY_AFTER_FAILURE_S if failed else ANSWER_TTL_S)
            if pending.account is None:
                _keep(self._refused, digest, expires)
            else:
                _keep(self._accepted, digest, (pending.account, expires))
        else:
            await pending.done.wait()
        return pending.account

    async def _ask(self, headers: list[tuple[bytes, bytes]], digest: bytes) -> tuple[bytes | None, bool]:
        """The app's answer as an account, and whether the check failed (raised, took too long,
        or answered what it may not)."""
        given = {name.decode("latin-1"): value.decode("latin-1") for name, value in headers if name in self._headers}
        answer: Any = None
        try:
            with anyio.move_on_after(CHECK_TIMEOUT_S) as waited:
                answer = self._verify(given)
                if inspect.isawaitable(answer):
                    answer = await answer
        except Exception:
            # The caller counts as anonymous: a failing check must not rank anyone higher.
            self._log_failure("Limits.verify_credentials failed; its caller counts as anonymous", logging.ERROR)
            return None, True
        if waited.cancelled_caught:
            self._log_failure(
                f"Limits.verify_credentials did not answer within {CHECK_TIMEOUT_S:g} s; its caller counts as anonymous"
            )
            return None, True
        if answer is True:
            return _OWN_ACCOUNT + digest, False
        if isinstance(answer, str) and answer:
            return _NAMED_ACCOUNT + answer.encode(), False
        if answer is None or answer is False:
            return None, False
        self._log_failure(
            f"Limits.verify_credentials returned {truncate(repr(answer))}, not an account name (a string), True, "
            "False or None; its caller counts as anonymous"
        )
        return None, True

    def _log_failure(self, message: str, level: int = logging.WARNING) -> None:
        now = self._clock()
        if now - self._failure_logged >= FAILURE_LOG_S:
            self._failure_logged = now
            logger.log(level, message, exc_info=level >= logging.ERROR)


class _Pending:
    """One check under way: the requests with the same credentials wait for its answer."""

    __slots__ = ("account", "done")

    def __init__(self) -> None:
        self.account: bytes | None = None
        self.done = anyio.Event()


def _keep(kept: OrderedDict[bytes, Any], digest: bytes, value: Any) -> None:
    kept[digest] = value
    kept.move_to_end(digest)
    if len(kept) > ANSWERS_KEPT:
        kept.popitem(last=False)
