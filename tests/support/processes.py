"""Processes a test starts and stops: uvicorn with its workers, any command; each in a process
group of its own, its output kept for the failure message."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from tests.support.machine import HOST, ROOT, free_port

PROCESS_START_S = 30.0  # the bound on a process getting ready: a worker imports the whole app
STOP_S = 10.0  # how long a stopped process may take to exit before it is killed
_Ready = TypeVar("_Ready")


@dataclass(frozen=True, slots=True)
class Running:
    """A process this test run started, in a process group of its own, and its output so far."""

    process: subprocess.Popen[bytes]
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_until(self, ready: Callable[[Running], _Ready | None], what: str) -> _Ready:
        """Poll `ready` until it says yes (there is no other signal from another process);
        fails with the process's output once it exits or `PROCESS_START_S` passes."""
        deadline = time.monotonic() + PROCESS_START_S
        while True:
            found = ready(self)
            if found:
                return found
            status = exit_status(self.process)
            if status is not None:
                raise RuntimeError(f"{what} exited with status {status} before it was ready:\n{self.log()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{what} was not ready within {PROCESS_START_S} s:\n{self.log()}")
            time.sleep(0.05)


def _with_the_starting_thread() -> Callable[[], None] | None:
    """What a started process runs before its command so that it gets SIGTERM once the thread
    that started it ends (Linux `prctl(PR_SET_PDEATHSIG)`); None elsewhere."""
    try:
        prctl = ctypes.CDLL(None).prctl
    except AttributeError:
        return None
    set_death_signal = 1  # PR_SET_PDEATHSIG

    def end_with_the_starting_thread() -> None:
        prctl(set_death_signal, signal.SIGTERM)

    return end_with_the_starting_thread


END_WITH_THE_STARTING_THREAD = _with_the_starting_thread()


@contextmanager
def start_process(command: list[str], env: Mapping[str, str] | None = None, *, cwd: Path = ROOT) -> Iterator[Running]:
    """Run `command` from `cwd` (the project's root unless told) in a process group of its own, with
    `env` added to this environment, its output kept in a file; at the end the group gets SIGTERM,
    then SIGKILL after `STOP_S`. Call it from the thread that lives as long as the process should
    (pytest's own): on Linux the process also gets SIGTERM once that thread ends, so a test run
    killed before its cleanup leaves no server behind."""
    with tempfile.TemporaryDirectory(prefix="fastapi-mcp-routes-") as directory:
        log_path = Path(directory) / "output.log"
        # Appended to, so reading the file never moves where the process writes.
        with log_path.open("ab") as output:
            process = subprocess.Popen(
                command,
                cwd=cwd,
                env={**os.environ, **(env or {})},
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=END_WITH_THE_STARTING_THREAD,
            )
        try:
            yield Running(process, log_path)
        finally:
            _stop(process)


def exit_status(process: subprocess.Popen[bytes]) -> int | None:
    """The status a process exited with, or None while it runs. The process is not reaped
    (WNOWAIT): while the leader of a group is a zombie, the group's id cannot be reused, so a
    signal to the group reaches only what is left of it (say a worker it orphaned)."""
    if process.returncode is not None:
        return process.returncode
    exited = os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    return exited.si_status if exited is not None else None


def _stop(process: subprocess.Popen[bytes]) -> None:
    _signal_group(process, signal.SIGTERM)
    deadline = time.monotonic() + STOP_S
    while time.monotonic() < deadline and exit_status(process) is None:
        time.sleep(0.05)
    _signal_group(process, signal.SIGKILL)
    process.wait()


def _signal_group(process: subprocess.Popen[bytes], signal_number: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # the whole group has exited
        os.killpg(process.pid, signal_number)


@contextmanager
def serve_processes(app_path: str, *, workers: int = 1, env: Mapping[str, str] | None = None) -> Iterator[str]:
    """Serve `app_path` ("module:attribute", importable from the project's root) with `python -m
    uvicorn --workers K` in a process group of its own, `env` added to this environment; yields
    the base URL once every worker has started, and stops the group at the end."""
    with serve_process_group(app_path, workers=workers, env=env) as (url, _):
        yield url


@contextmanager
def serve_process_group(
    app_path: str,
    *,
    workers: int = 1,
    env: Mapping[str, str] | None = None,
    python: Sequence[str] = (sys.executable,),
    cwd: Path = ROOT,
) -> Iterator[tuple[str, Running]]:
    """`serve_processes`, yielding the process group too (a test may kill it, as a crash would).
    `python` is the interpreter and its options (another virtualenv's, say), run from `cwd`, where
    `app_path` is imported from."""
    port = free_port()
    command = [*python, "-m", "uvicorn", app_path, "--host", HOST, "--port", str(port)]
    command += ["--workers", str(workers), "--no-access-log", "--timeout-graceful-shutdown", "2"]

    def started(running: Running) -> bool:
        # uvicorn logs the address once it listens, and each worker the end of its startup; a
        # worker that fails is started again and again, so its first traceback ends the wait.
        log = running.log()
        if "Traceback (most recent call last)" in log:
            raise RuntimeError(f"uvicorn serving {app_path} failed to start:\n{log}")
        return "Uvicorn running on" in log and log.count("Application startup complete.") >= workers

    with start_process(command, env, cwd=cwd) as running:
        running.wait_until(started, f"uvicorn serving {app_path} with {workers} worker(s)")
        yield f"http://{HOST}:{port}", running
