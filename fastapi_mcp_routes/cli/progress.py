"""The line shown on stderr while an app is imported and its routes discovered, when stderr is
a terminal: what is being done, then how many routes there are; erased once done."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol

from rich.console import Console
from rich.status import Status


class Progress(Protocol):
    def update(self, text: str) -> None: ...


class _Silent:
    """Where stderr is not a terminal (a pipe, a CI log), a progress line would only add noise."""

    def update(self, text: str) -> None:
        pass


class _Line:
    def __init__(self, status: Status) -> None:
        self._status = status

    def update(self, text: str) -> None:
        self._status.update(text)


@contextmanager
def progress_line(first: str) -> Iterator[Progress]:
    """A transient status line showing `first`, then whatever `update` says."""
    console = Console(stderr=True)
    if not console.is_terminal:
        yield _Silent()
        return
    with console.status(first) as status:
        yield _Line(status)
