"""`python -m fastapi_mcp_routes` and the `fastapi-mcp-routes` command (the `cli` extra)."""

from __future__ import annotations

import sys
from typing import Final

# What the command line imports that the package itself does not need.
_EXTRA: Final = frozenset({"typer", "rich", "click"})
_INSTALL: Final = (
    "The fastapi-mcp-routes command needs its cli extra, which is not installed: pip install 'fastapi-mcp-routes[cli]'"
)


def main() -> None:
    """Run the command line, or say in one sentence how to install it."""
    try:
        from fastapi_mcp_routes.cli.commands import run
    except ImportError as exc:
        if (exc.name or "").partition(".")[0] not in _EXTRA:
            raise
        print(_INSTALL, file=sys.stderr)
        sys.exit(1)
    run()


if __name__ == "__main__":
    main()
