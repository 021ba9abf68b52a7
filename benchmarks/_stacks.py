"""Which of uvicorn's two stacks a server runs, and which CPU the servers and the client run on.

uvicorn parses HTTP with h11 on asyncio's loop unless httptools and uvloop are installed
(`uvicorn[standard]`, the `bench` extra), when its `auto` picks them. Production runs the
latter, where REST itself is cheaper, so a library's fixed cost per call weighs more there;
the benchmarks name the stack they run rather than take what `auto` finds.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from typing import Final

from _http import BenchmarkError, can_pin


@dataclass(frozen=True, slots=True)
class Stack:
    """The HTTP parser and event loop a uvicorn server runs (its `--http` and `--loop`)."""

    http: str
    loop: str

    @property
    def label(self) -> str:
        return f"{self.http} + {self.loop}"


H11: Final = Stack("h11", "asyncio")  # uvicorn without extras
STANDARD: Final = Stack("httptools", "uvloop")  # uvicorn[standard]
STANDARD_MODULES: Final = ("httptools", "uvloop")


def check_standard_stack() -> None:
    """httptools and uvloop must import here, where the servers' interpreter runs: a server asked
    for them would fail to start, and measuring h11 alone would answer another question."""
    missing = []
    for module in STANDARD_MODULES:
        try:
            importlib.import_module(module)
        except ImportError as error:
            missing.append(f"{module} ({error})")
    if missing:
        raise BenchmarkError(
            f"the {STANDARD.label} server needs httptools and uvloop, and this interpreter cannot import "
            f"{' nor '.join(missing)}: install the bench extra with `pip install -e '.[bench]'`, or run "
            "`make bench`, which does"
        )


@dataclass(frozen=True, slots=True)
class Pinning:
    """The CPU every server runs on, and the one the client runs on."""

    server_cpu: int
    client_cpu: int


def choose_pinning(wanted: bool) -> tuple[Pinning | None, str]:
    """Servers on the last CPU this process may use and the client on the first, when there are
    two or more and the platform can pin; and what was chosen, said in words."""
    if not wanted:
        return None, "none (--no-pin)"
    if not can_pin():
        return None, "none (this platform cannot pin processes to a CPU)"
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        return None, f"none (one CPU to run on: {cpus[0]})"
    pinning = Pinning(server_cpu=cpus[-1], client_cpu=cpus[0])
    return pinning, f"servers on CPU {pinning.server_cpu}, this client on CPU {pinning.client_cpu}"


def pin_client(pinning: Pinning | None) -> None:
    """Run this process (its thread, and the threads it starts) on the client's CPU."""
    if pinning is not None:
        os.sched_setaffinity(0, {pinning.client_cpu})
