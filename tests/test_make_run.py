"""`make run PORT=...` and `make token PORT=...`: the example served on another port says so in
its RFC 9728 metadata, and the demo token minted for that port is accepted there."""

from __future__ import annotations

import os
import subprocess

import httpx
import pytest

from tests.support.machine import HOST, ROOT, free_port
from tests.support.processes import Running, start_process
from tests.support.waits import WAIT_S

pytestmark = pytest.mark.processes

METADATA = "/.well-known/oauth-protected-resource/mcp"
# Run under `make test`, the commands would inherit its job server and flags.
ALONE = {"MAKEFLAGS": "", "MFLAGS": "", "MAKELEVEL": ""}


def test_make_run_on_another_port_serves_metadata_and_accepts_tokens_for_that_port() -> None:
    port = free_port()
    base = f"http://{HOST}:{port}"

    def metadata(_: Running) -> dict[str, object] | None:
        try:
            answer = httpx.get(base + METADATA, timeout=WAIT_S)
        except httpx.TransportError:
            return None
        document: dict[str, object] = answer.json()
        return document

    with start_process(["make", "run", f"PORT={port}"], env=ALONE) as running:
        document = running.wait_until(metadata, "make run")
        assert document["resource"] == f"{base}/mcp"
        assert document["authorization_servers"] == [f"{base}/demo-issuer"]
        token = subprocess.run(
            ["make", "-s", "token", f"PORT={port}"],
            cwd=ROOT,
            env={**os.environ, **ALONE},
            capture_output=True,
            text=True,
            timeout=WAIT_S,
            check=True,
        ).stdout.strip()
        stats = httpx.get(f"{base}/stats", headers={"authorization": f"Bearer {token}"}, timeout=WAIT_S)
        assert stats.status_code == 200, stats.text
