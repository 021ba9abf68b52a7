"""The caller's credentials as the app's own security schemes read them, for `visible` predicates.

Teams whose routes check an API key or a token themselves (`Security(api_key)`, a `JWTBearer`
dependency) give no `auth=` to the endpoint, so no principal is known when a list is built.
A `visible` predicate taking a second parameter is handed `Credentials` instead: looked up by
a scheme instance of the app, it gives what that scheme returns for the caller (the key, the
`HTTPAuthorizationCredentials`, the `Principal`), and a scheme that refuses or finds nothing is
absent.

Listing stays side-effect free and cheap:
- only the pure schemes are run (`PURE_SCHEMES`: FastAPI's own security classes, exactly those,
  and `JWTBearer`), never a dependency above or beside them; looking up anything else is a
  `TypeError`, which hides the tool as any failing predicate does;
- each on the request a route would get (the headers it inherits from the caller), once per
  list however many predicates read it, and only when one does.

Predicates are synchronous and the schemes are not, so a scheme is run between two askings:
the first read of a scheme raises `Unread` through the predicate (a `BaseException`, so the
predicate's own `except Exception` lets it pass), `settled` runs the scheme and asks again.
A pure predicate gives the same answer when asked twice.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, TypeVar, overload

from fastapi.security import (
    APIKeyCookie,
    APIKeyHeader,
    APIKeyQuery,
    HTTPAuthorizationCredentials,
    HTTPBasic,
    HTTPBasicCredentials,
    HTTPBearer,
    HTTPDigest,
    OAuth2,
    OAuth2AuthorizationCodeBearer,
    OAuth2PasswordBearer,
    OpenIdConnect,
    SecurityScopes,
)
from fastapi.security.http import HTTPBase
from starlette.exceptions import HTTPException
from starlette.requests import Request

from fastapi_mcp_routes.auth.dpop import DPOP_SCOPE_KEY
from fastapi_mcp_routes.auth.jwt import JWTBearer, Principal

if TYPE_CHECKING:  # tools/invoke.py reaches this module through the marks it reads
    from fastapi_mcp_routes.tools.invoke import Caller

logger = logging.getLogger("fastapi_mcp_routes")

# Schemes that read only the request and, with auto_error (their default), raise 401 or 403
# when it lacks what they read: calling one has no effect but its answer.
PURE_SCHEMES: Final = frozenset(
    {
        APIKeyCookie,
        APIKeyHeader,
        APIKeyQuery,
        HTTPBase,
        HTTPBasic,
        HTTPBearer,
        HTTPDigest,
        JWTBearer,
        OAuth2,
        OAuth2AuthorizationCodeBearer,
        OAuth2PasswordBearer,
        OpenIdConnect,
    }
)

# The most schemes one list request runs: an app has a few; a predicate that builds a new scheme
# each time it is asked would otherwise be asked again for ever.
MAX_SCHEMES: Final = 32

_T = TypeVar("_T")
_Text = APIKeyHeader | APIKeyQuery | APIKeyCookie | OAuth2PasswordBearer | OAuth2AuthorizationCodeBearer | OpenIdConnect
_Authorization = HTTPBearer | HTTPDigest


class Credentials:
    """What the app's security schemes read from this caller, looked up by scheme instance:
    `credentials[api_key]`, `credentials.get(jwt_bearer)`, `api_key in credentials`.

    A scheme is run the first time it is looked up, on the request the route would get; one
    that refuses the caller or finds nothing is absent (`KeyError`, `None`, `False`). Not
    iterable: a scheme nobody looks up is never run."""

    __slots__ = ()

    @overload
    def __getitem__(self, scheme: _Text) -> str: ...
    @overload
    def __getitem__(self, scheme: HTTPBasic) -> HTTPBasicCredentials: ...
    @overload
    def __getitem__(self, scheme: _Authorization) -> HTTPAuthorizationCredentials: ...
    @overload
    def __getitem__(self, scheme: JWTBearer) -> Principal: ...
    @overload
    def __getitem__(self, scheme: object) -> Any: ...
    def __getitem__(self, scheme: object) -> Any:
        raise KeyError(scheme)

    @overload
    def get(self, scheme: _Text) -> str | None: ...
    @overload
    def get(self, scheme: HTTPBasic) -> HTTPBasicCredentials | None: ...
    @overload
    def get(self, scheme: _Authorization) -> HTTPAuthorizationCredentials | None: ...
    @overload
    def get(self, scheme: JWTBearer) -> Principal | None: ...
    @overload
    def get(self, scheme: object) -> Any: ...
    def get(self, scheme: object) -> Any:
        """What `scheme` read from the caller, or `None` where it is absent."""
        try:
            return self[scheme]
        except KeyError:
            return None

    def __contains__(self, scheme: object) -> bool:
        try:
            self[scheme]
        except KeyError:
            return False
        return True


class Unread(BaseException):
    """A scheme looked up that this list request has not run yet."""

    def __init__(self, scheme: object) -> None:
        super().__init__(scheme)
        self.scheme = scheme


class NoCredentials(Credentials):
    """The `Credentials` of a caller that presents none: every scheme absent."""

    __slots__ = ()

    def __getitem__(self, scheme: object) -> Any:
        _check_pure(scheme)
        raise KeyError(scheme)


class SchemeReads(Credentials):
    """One caller's `Credentials` for one list request: each scheme run at most once."""

    __slots__ = ("_read", "_request")

    def __init__(self, caller: Caller) -> None:
        self._request = Request(_scope(caller))
        # By the scheme's identity, the scheme kept so its id is not reused: what it returned,
        # `None` when absent.
        self._read: dict[int, tuple[object, Any]] = {}

    def __getitem__(self, scheme: object) -> Any:
        read = self._read.get(id(scheme))
        if read is None:
            _check_pure(scheme)
            if len(self._read) >= MAX_SCHEMES:
                raise RuntimeError(f"visible predicates looked up more than {MAX_SCHEMES} security schemes in one list")
            raise Unread(scheme)
        if read[1] is None:
            raise KeyError(scheme)
        return read[1]

    async def settled(self, ask: Callable[[], _T]) -> _T:
        """`ask()`'s answer, once every scheme it looks up has been run."""
        while True:
            try:
                return ask()
            except Unread as unread:
                await self._run(unread.scheme)

    async def _run(self, scheme: Any) -> None:
        try:
            if isinstance(scheme, JWTBearer):
                value = await scheme(self._request, SecurityScopes())  # the token's own scopes, none asked
            else:
                value = await scheme(self._request)
        except HTTPException:
            value = None
        except Exception:
            logger.exception("a security scheme failed while a list was built; it reads as absent")
            value = None
        self._read[id(scheme)] = (scheme, value)


def _check_pure(scheme: object) -> None:
    if type(scheme) not in PURE_SCHEMES:
        raise TypeError(
            "a visible predicate looks up only FastAPI's security schemes and JWTBearer in its "
            f"credentials, got {scheme!r}"
        )


def _scope(caller: Caller) -> dict[str, Any]:
    """A request as a route would get it from this caller, with no arguments: the schemes read
    only its headers, a `JWTBearer` the server's address for its challenge, and a DPoP-bound
    one the proof of the list's own HTTP request, as a route called as a tool does."""
    scope: dict[str, Any] = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.4"},
        "http_version": caller.http_version,
        "method": "GET",
        "scheme": caller.scheme,
        "path": caller.root_path + "/",
        "raw_path": (caller.root_path + "/").encode(),
        "root_path": caller.root_path,
        "query_string": b"",
        "headers": list(caller.headers),
        "client": caller.client,
        "server": caller.server,
        "extensions": {},
    }
    if caller.proof is not None:
        scope[DPOP_SCOPE_KEY] = caller.proof
    return scope
