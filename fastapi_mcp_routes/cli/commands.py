"""The commands, wired with Typer: each reads its options, calls the module that does its work,
and prints. A `CliError` anywhere ends the command with its sentence on stderr and status 1."""

from __future__ import annotations

import json
import logging
import sys
from enum import StrEnum
from functools import partial
from pathlib import Path
from typing import Annotated, Any, Final

import anyio
import typer
from fastapi import FastAPI
from fastapi.routing import iter_route_contexts
from rich.console import Console

from fastapi_mcp_routes.cli.arguments import caller_headers, tool_arguments
from fastapi_mcp_routes.cli.asgi import running
from fastapi_mcp_routes.cli.calling import CallRequest, call_tool, notification_line, tool_named
from fastapi_mcp_routes.cli.checking import check_endpoint
from fastapi_mcp_routes.cli.clients import CLIENTS, snippet
from fastapi_mcp_routes.cli.endpoints import Endpoint, find_endpoint
from fastapi_mcp_routes.cli.errors import CliError
from fastapi_mcp_routes.cli.inventory import take_inventory
from fastapi_mcp_routes.cli.loading import load_app
from fastapi_mcp_routes.cli.printable import printable
from fastapi_mcp_routes.cli.progress import Progress, progress_line
from fastapi_mcp_routes.cli.questions import Answerer
from fastapi_mcp_routes.cli.results import FAILED, print_answer
from fastapi_mcp_routes.cli.tables import print_inventory
from fastapi_mcp_routes.tools.registry import ToolTable

CALL_TIMEOUT_S: Final = 300.0

cli = typer.Typer(
    name="fastapi-mcp-routes",
    help="Inspect, check and call the MCP endpoint a FastAPI app serves with fastapi-mcp-routes.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Plain help, as click writes it: no type column, so a flag shows no `<bool>`.
    rich_markup_mode=None,
)

App = Annotated[
    str, typer.Argument(metavar="APP", help="The app as 'module:attribute', as uvicorn takes it: example_app.main:app.")
]
AppDir = Annotated[Path, typer.Option("--app-dir", help="Where the app's code is; put first on the import path.")]
Factory = Annotated[bool, typer.Option("--factory", help="APP is a function that builds the app: call it.")]
Headers = Annotated[
    list[str] | None,
    typer.Option("--header", "-H", help="A header the caller sends, 'Name: value' (an API key, a bearer token)."),
]
AsJson = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]


class Client(StrEnum):
    claude_desktop = CLIENTS[0]
    claude_code = CLIENTS[1]
    cursor = CLIENTS[2]
    vscode = CLIENTS[3]


@cli.command("list")
def list_command(target: App, as_json: AsJson = False, app_dir: AppDir = Path(), factory: Factory = False) -> None:
    """List what the app's MCP endpoint serves, with the route behind each.

    Every tool, resource, resource template and prompt, whoever may see it; --json prints them
    as the lists give them, each with its route.
    """
    endpoint, table = _discover(target, app_dir, factory)
    inventory = take_inventory(endpoint, table)
    if as_json:
        # Descriptions are the app's text, often someone else's: escaped as `call` prints results.
        typer.echo(printable(json.dumps(inventory.as_json(), indent=2, ensure_ascii=False)))
    else:
        print_inventory(Console(), inventory)


@cli.command("check")
def check_command(target: App, app_dir: AppDir = Path(), factory: Factory = False) -> None:
    """Check that the app's MCP endpoint would start, without serving it.

    Status 0 and a one-line summary, or status 1 and the error that would stop the app (for CI).
    Marked routes on a router the app never includes are a warning, and an error when the
    endpoint serves nothing else.
    """
    endpoint = _find(target, app_dir, factory)
    report = check_endpoint(endpoint, target.partition(":")[0])
    for warning in report.warnings:
        typer.echo(f"Warning: {warning}", err=True)
    for error in report.errors:
        typer.echo(f"Error: {error}", err=True)
    if report.errors or report.summary is None:
        raise typer.Exit(FAILED)
    typer.echo(f"OK: {report.summary}")


@cli.command("call", context_settings={"allow_interspersed_args": True})
def call_command(
    target: App,
    tool: Annotated[str, typer.Argument(metavar="TOOL", help="The tool's name, as `list` shows it.")],
    pairs: Annotated[
        list[str] | None,
        typer.Argument(metavar="[KEY=VALUE]...", help="Arguments; a value is JSON where it parses, else text."),
    ] = None,
    json_args: Annotated[str | None, typer.Option("--json-args", help="Arguments as one JSON object.")] = None,
    header: Headers = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Confirm a tool that changes data without asking.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the raw result (or error) as JSON.")] = False,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds the whole call may take.")] = CALL_TIMEOUT_S,
    app_dir: AppDir = Path(),
    factory: Factory = False,
) -> None:
    """Call one tool through the app's MCP endpoint, in process.

    The app's lifespan runs, and the call is a real MCP request to the endpoint: the route's
    guards, validation, confirmation and exception handlers apply as for any client. A tool that
    changes data asks for confirmation on a terminal; --yes confirms it without asking.
    """
    if not timeout > 0:
        raise CliError(f"--timeout must be a positive number of seconds, got {timeout:g}.")
    headers = caller_headers(header or [])
    endpoint, table = _discover(target, app_dir, factory)
    found = tool_named(table, tool)
    arguments = tool_arguments(pairs or [], json_args, found.definition.get("inputSchema", {}))
    terminal = sys.stdin.isatty()
    request = CallRequest(found, arguments, headers, can_ask=terminal or yes)
    answer = Answerer(terminal=terminal, yes=yes)
    _quiet_library_info()
    message = anyio.run(_call, endpoint, request, answer, timeout)
    deployment = endpoint.served.deployment
    status = print_answer(
        message,
        raw=as_json,
        gated=found.confirm,
        tokens_outlive_a_run=deployment.secret.shared and deployment.store.shared,
    )
    raise typer.Exit(status)


@cli.command("config")
def config_command(
    client: Annotated[Client, typer.Argument(metavar="CLIENT", help=f"One of {', '.join(CLIENTS)}.")],
    url: Annotated[str, typer.Argument(metavar="URL", help="The running endpoint: http://127.0.0.1:8000/mcp.")],
    name: Annotated[
        str | None, typer.Option("--name", help="The server's name in the client; by default the URL's host name.")
    ] = None,
    header: Headers = None,
) -> None:
    """Print what connects an MCP client to a running endpoint.

    The snippet goes to stdout, and one line on stderr says where it goes.
    """
    made = snippet(client.value, url, name, caller_headers(header or []))
    typer.echo(made.text)
    typer.echo(made.where, err=True)


async def _call(endpoint: Endpoint, request: CallRequest, answer: Answerer, timeout: float) -> Any:
    app = endpoint.app
    try:
        with anyio.fail_after(timeout):
            async with running(app) as state:
                tell = partial(_tell, frames=request.tool.stream)
                return await call_tool(app, state, endpoint.path, request, answer, tell)
    except TimeoutError:
        raise CliError(f"The call did not finish within {timeout:g} s (--timeout).") from None


def _tell(message: Any, *, frames: bool) -> None:
    line = notification_line(message, frames=frames)
    if line is not None:
        typer.echo(line, err=True)


def _find(target: str, app_dir: Path, factory: bool) -> Endpoint:
    with progress_line(f"Importing {target}…") as progress:
        return _found(target, app_dir, factory, progress)


def _discover(target: str, app_dir: Path, factory: bool) -> tuple[Endpoint, ToolTable]:
    """The app's endpoint and its tool table, built as the endpoint builds it at startup."""
    with progress_line(f"Importing {target}…") as progress:
        endpoint = _found(target, app_dir, factory, progress)
        try:
            return endpoint, endpoint.served.registry.table()
        except ValueError as exc:
            raise CliError(f"The app's MCP endpoint would not start: {exc}") from None


def _found(target: str, app_dir: Path, factory: bool, progress: Progress) -> Endpoint:
    app = load_app(target, app_dir, factory)
    progress.update(f"Discovering routes… {_count_routes(app):,} routes")
    return find_endpoint(app, target)


def _count_routes(app: FastAPI) -> int:
    return sum(1 for _ in iter_route_contexts(app.routes))


def _quiet_library_info() -> None:
    """The library's INFO lines (the startup line, an audit line per call) are a server's log;
    a command's output is its result. Warnings still show."""
    logger = logging.getLogger("fastapi_mcp_routes")
    if logger.level == logging.NOTSET:
        logger.setLevel(logging.WARNING)


def run() -> None:
    """Run the command line; a `CliError` ends it with its sentence and status 1."""
    try:
        cli()
    except CliError as exc:
        typer.echo(f"Error: {exc}", err=True)
        sys.exit(FAILED)
