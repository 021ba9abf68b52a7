"""Virtualenvs of their own under `.tools/clients/` for clients whose pins conflict with the test
extra's, made on first use and remade when their packages change."""

from __future__ import annotations

import fcntl
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Final

import pytest

from tests.support.machine import ROOT

CLIENTS: Final = ROOT / ".tools" / "clients"
INSTALL_TIMEOUT_S: Final = 900.0  # a first install on a slow network; later runs reuse it


def client_python(name: str, packages: Sequence[str]) -> Path:
    """The Python of the virtualenv `.tools/clients/<name>` with exactly `packages` installed;
    one test run at a time makes it."""
    venv = CLIENTS / name
    python = venv / "bin" / "python"
    wanted = "\n".join(packages)
    stamp = venv / ".requirements"
    CLIENTS.mkdir(parents=True, exist_ok=True)
    with (CLIENTS / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stamp.exists() and stamp.read_text() == wanted:
            return python
        steps = (
            [sys.executable, "-m", "venv", "--clear", str(venv)],
            [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *packages],
        )
        for step in steps:
            done = subprocess.run(step, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S, check=False)
            if done.returncode != 0:
                pytest.fail(
                    f"could not install {' '.join(packages)} into {venv} ({' '.join(step[:4])} ... exited "
                    f"{done.returncode}): {done.stderr[-2000:]}\nInstall them by hand: {sys.executable} -m venv {venv} "
                    f"&& {python} -m pip install {' '.join(packages)}",
                    pytrace=False,
                )
        stamp.write_text(wanted)
    return python
