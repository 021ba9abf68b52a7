"""JWTBearer's keys from a JWKS URL: fetched off the event loop within a deadline, bounded in
size, fetched once for any number of unknown kids at a time and once per refresh interval; and
keys given at startup checked at startup."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
import httpx
import pytest
from fastapi import Depends, FastAPI, Response
from fastapi.responses import StreamingResponse

from fastapi_mcp_routes.auth.jwt import JWTBearer, Principal
from fastapi_mcp_routes.auth.keys import MAX_JWKS_BYTES
from tests.support.jwt import AUDIENCE, ISSUER, PRIVATE, PUBLIC, public_jwk, secret_jwk, token
from tests.support.servers import answering_with, connected, never_answering, serve
from tests.support.waits import WAIT_S

pytestmark = pytest.mark.anyio


def guarded(bearer: JWTBearer) -> FastAPI:
    app = FastAPI()

    @app.get("/me")
    async def me(principal: Principal = Depends(bearer)) -> dict[str, str]:  # noqa: B008
        return {"sub": principal.subject}

    @app.get("/health")
    async def health() -> dict[str, bool]:
        return {"ok": True}

    return app


class Issuer:
    """A JWKS endpoint on a real server that counts its fetches and can hold them until released."""

    def __init__(self, keys: list[dict[str, Any]]) -> None:
        self.keys = keys
        self.fetches = 0
        self.started = threading.Event()
        self.held = threading.Event()
        self.held.set()
        self.app = FastAPI()
        self.app.get("/jwks")(self.jwks)

    def jwks(self) -> dict[str, Any]:  # a sync route: it waits in a worker thread
        self.fetches += 1
        self.started.set()
        self.held.wait(WAIT_S)
        return {"keys": self.keys}


@pytest.fixture
def issuer() -> Iterator[tuple[Issuer, str]]:
    jwks = Issuer([public_jwk("k1")])
    with serve(jwks.app) as url:
        yield jwks, f"{url}/jwks"


async def _append(into: list[int], status: Any) -> None:
    into.append(await status)


async def me(http: httpx.AsyncClient, bearer_token: str) -> int:
    return (await http.get("/me", headers={"authorization": f"Bearer {bearer_token}"})).status_code


async def test_a_jwks_url_that_never_answers_is_bounded_and_the_loop_keeps_serving() -> None:
    statuses: list[int] = []
    with never_answering() as (url, connected_to):
        bearer = JWTBearer(issuer=ISSUER, audience=AUDIENCE, jwks_url=f"{url}/jwks", jwks_timeout_s=5)
        with anyio.fail_after(WAIT_S):
            async with connected(guarded(bearer)) as http, anyio.create_task_group() as tasks:
                tasks.start_soon(_append, statuses, me(http, token()))
                assert await anyio.to_thread.run_sync(connected_to.wait, WAIT_S)
                # The fetch hangs on its socket; the loop answers others meanwhile.
                assert (await http.get("/health")).json() == {"ok": True}
                assert statuses == []
    assert statuses == [401]  # refused once the fetch's deadline passed


async def test_many_unknown_kids_at_once_make_one_fetch(issuer: tuple[Issuer, str]) -> None:
    jwks, url = issuer
    # No refresh interval at all: only the fetch in flight keeps the others from fetching.
    bearer = JWTBearer(issuer=ISSUER, audience=AUDIENCE, jwks_url=url, jwks_refresh_s=0)
    jwks.held.clear()
    statuses: list[int] = []
    async with connected(guarded(bearer)) as http:
        with anyio.fail_after(WAIT_S):
            async with anyio.create_task_group() as tasks:
                for n in range(20):
                    tasks.start_soon(_append, statuses, me(http, token(kid=f"forged-{n}")))
                assert await anyio.to_thread.run_sync(jwks.started.wait, WAIT_S)
                await anyio.wait_all_tasks_blocked()
                jwks.held.set()
        assert statuses == [401] * 20
        assert jwks.fetches == 1
        assert await me(http, token(kid="k1")) == 200
        assert jwks.fetches == 1


async def test_unknown_kids_one_after_another_make_one_fetch_per_refresh_interval(
    issuer: tuple[Issuer, str],
) -> None:
    jwks, url = issuer
    bearer = JWTBearer(issuer=ISSUER, audience=AUDIENCE, jwks_url=url, jwks_refresh_s=3600)
    async with connected(guarded(bearer)) as http:
        assert await me(http, token(kid="k1")) == 200
        for n in range(10):
            assert await me(http, token(kid=f"forged-{n}")) == 401
        assert jwks.fetches == 1
        bearer.jwks_refresh_s = 0  # the interval has passed: the next unknown kid fetches again
        jwks.keys.append(public_jwk("k2"))
        assert await me(http, token(kid="k2")) == 200
        assert jwks.fetches == 2


async def test_a_caller_that_leaves_during_a_fetch_does_not_waste_it(issuer: tuple[Issuer, str]) -> None:
    jwks, url = issuer
    bearer = JWTBearer(issuer=ISSUER, audience=AUDIENCE, jwks_url=url, jwks_refresh_s=3600)
    jwks.held.clear()
    async with connected(guarded(bearer)) as http:
        with anyio.fail_after(WAIT_S):
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(me, http, token(kid="k1"))
                assert await anyio.to_thread.run_sync(jwks.started.wait, WAIT_S)
                tasks.cancel_scope.cancel()  # the caller goes away while the JWKS is on its way
                jwks.held.set()
        # The fetch finished for the next caller, within the interval that allows no other.
        assert await me(http, token(kid="k1")) == 200
        assert jwks.fetches == 1


def _oversized_keys() -> list[dict[str, Any]]:
    filler = public_jwk("filler")
    return [public_jwk("k1")] + [filler] * (2 * MAX_JWKS_BYTES // len(str(filler)))


async def test_an_oversized_jwks_is_refused() -> None:
    jwks = Issuer(_oversized_keys())
    with serve(jwks.app) as url:
        bearer = JWTBearer(issuer=ISSUER, audience=AUDIENCE, jwks_url=f"{url}/jwks")
        async with connected(guarded(bearer)) as http:
            assert await me(http, token(kid="k1")) == 401


async def test_an_endless_jwks_is_refused_without_reading_it_whole() -> None:
    issuer = FastAPI()

    @issuer.get("/jwks")
    async def endless() -> Response:
        async def chunks() -> AsyncIterator[bytes]:
            yield b'{"keys": ['
            while True:
                yield b'{"kty": "oct", "k": "AAAA"},' * 1024

        return StreamingResponse(chunks(), media_type="application/json")

    with serve(issuer) as url:
        # A deadline far past the test's bound: only the size bound can end this fetch in time.
        bearer = JWTBearer(issuer=ISSUER, audience=AUDIENCE, jwks_url=f"{url}/jwks", jwks_timeout_s=600)
        async with connected(guarded(bearer)) as http:
            with anyio.fail_after(WAIT_S):
                assert await me(http, token(kid="k1")) == 401


async def test_a_jwks_that_is_not_a_key_set_keeps_no_keys() -> None:
    issuer = FastAPI()

    @issuer.get("/jwks")
    def not_a_set() -> list[int]:
        return [1, 2, 3]

    with serve(issuer) as url:
        bearer = JWTBearer(issuer=ISSUER, audience=AUDIENCE, jwks_url=f"{url}/jwks")
        async with connected(guarded(bearer)) as http:
            assert await me(http, token(kid="k1")) == 401


@pytest.mark.parametrize(
    "answer",
    [
        b"not HTTP at all\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10\r\n{",
        b"HTTP/1.1 200 OK\r\nX: " + b"a" * 70_000 + b"\r\n\r\n",
        b"HTTP/1.1 200 OK\r\n" + b"X: a\r\n" * 200 + b"\r\n",
    ],
    ids=["no status line", "a chunked body cut short", "a header line too long", "too many headers"],
)
async def test_a_jwks_url_answering_what_is_not_http_refuses_the_token_without_a_crash(answer: bytes) -> None:
    with answering_with(answer) as url:
        bearer = JWTBearer(issuer=ISSUER, audience=AUDIENCE, jwks_url=f"{url}/jwks")
        async with connected(guarded(bearer)) as http:
            assert await me(http, token(kid="k1")) == 401
            assert (await http.get("/health")).status_code == 200


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"key": PUBLIC, "algorithms": ("RS256", "XS999")}, "must name JWS signature algorithms"),
        ({"key": PRIVATE}, "must be a PEM public key or certificate"),
        ({"key": "a shared secret"}, "an HMAC secret is given as a JWK"),
        ({"key": PUBLIC, "algorithms": ("HS256",)}, "none of the algorithms"),
        ({"key": secret_jwk("k1")}, "none of the algorithms"),
        ({"key": {**public_jwk("k1"), "d": "AQAB"}}, "must be a public key"),
        ({"jwks": {"keys": [secret_jwk("k1")]}}, "no key usable with the algorithms"),
        ({"jwks": {"keys": "k1"}}, "a list of keys"),
        ({"jwks_url": "file:///etc/passwd"}, "https:// or http:// URL"),
        ({"jwks_url": "https://idp.example/jwks", "jwks_timeout_s": 0}, "jwks_timeout_s must be a positive"),
    ],
)
async def test_a_bad_key_or_option_is_refused_at_startup(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        JWTBearer(issuer=ISSUER, audience=AUDIENCE, **options)
