"""How often one tool call goes back into a module of the library it had already left.

Runs the benchmark app in process, opens a session, warms the call up, then traces one
session-era `tools/call` of `get_item` (or `--stateless`: the 2026-07-28 call) from the moment
the request reaches the app until its answer is sent. Every Python call and return in a module
of `fastapi_mcp_routes` is followed. A module is *left* once none of its functions is running
any more; a *return* is a call into a module that was left: the call walked back to it rather
than straight down the layers and back up. Calling a helper of another module in a loop, or two
helpers of one module one after the other, returns to it; so does a callback into a caller.

It prints each return (module and function, in order) and the count. Not a timing: the count is
exact for a given commit, so a before/after pair needs one run of each.
`python benchmarks/call_path.py [--stateless]`.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import Any, Final

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_app import build_app
from profile_tool_call import GET_ARGUMENTS, call, open_session, tool_call

LIBRARY: Final = "fastapi_mcp_routes"


class Returns:
    """A profile hook that notes every call into a module of the library that had been left."""

    def __init__(self) -> None:
        self.running: Counter[str] = Counter()  # frames of each module running now
        self.seen: set[str] = set()
        self.returns: list[str] = []

    def __call__(self, frame: FrameType, event: str, argument: object) -> None:
        if event not in ("call", "return"):
            return
        module = frame.f_globals.get("__name__", "")
        if not isinstance(module, str) or not module.startswith(LIBRARY):
            return
        if event == "return":
            self.running[module] -= 1
            return
        if module in self.seen and not self.running[module]:
            self.returns.append(f"{module.removeprefix(LIBRARY + '.')}:{frame.f_code.co_name}")
        self.seen.add(module)
        self.running[module] += 1


async def run(options: argparse.Namespace) -> None:
    app: Any = build_app(10)
    async with app.router.lifespan_context(app):
        session_id = await open_session(app)
        arm = tool_call("tool-get", None if options.stateless else session_id, "get_item", GET_ARGUMENTS)
        for _ in range(3):  # caches filled, as on a server that has served a while
            await call(app, arm)
        hook = Returns()
        sys.setprofile(hook)
        try:
            await call(app, arm)
        finally:
            sys.setprofile(None)
    era = "2026-07-28" if options.stateless else "session-era"
    for where in hook.returns:
        print(" ", where)
    print(f"{era} tools/call: {len(hook.returns)} returns to a module already left, {len(hook.seen)} modules")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--stateless", action="store_true", help="trace a 2026-07-28 call instead")
    asyncio.run(run(parser.parse_args(argv)))


if __name__ == "__main__":
    main()
