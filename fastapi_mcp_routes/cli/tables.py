"""`list` as text: the inventory under a one-line summary, as Rich tables (one per kind) where
the console is wide enough for them, else each entry as a few indented lines that wrap."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from rich.console import Console
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from fastapi_mcp_routes.cli.inventory import Entry, Inventory, ListedArgument, Section

# Annotation hints shown when true, in this order, by the word the table uses.
_HINTS = (
    ("readOnlyHint", "read-only"),
    ("destructiveHint", "destructive"),
    ("idempotentHint", "idempotent"),
    ("openWorldHint", "open-world"),
)
# Narrower than this, a table squeezes its columns until argument types are cut short.
WIDE_COLUMNS = 100
_INDENT = 2
_HIDDEN_NOTE = "hidden: not listed to a caller that sends no credential (calls still run the route's guards)"


def summary(inventory: Inventory) -> str:
    """`MCP endpoint /mcp: 9 tools, 1 resource, ...`: what the endpoint serves, counted."""
    counts = [(len(section.entries), section.listing.noun) for section in inventory.sections]
    counts.append((inventory.completions, "completion"))
    # The first list (the tools) always, the rest where there are some (as the startup line counts).
    shown = [counts[0], *(entry for entry in counts[1:] if entry[0])]
    served = ", ".join(f"{count} {what}{'' if count == 1 else 's'}" for count, what in shown)
    return f"MCP endpoint {inventory.path}: {served}"


def print_inventory(console: Console, inventory: Inventory) -> None:
    """The summary, then a table of each list the endpoint serves that has entries."""
    console.print(summary(inventory), highlight=False)
    wide = console.width >= WIDE_COLUMNS
    for section in inventory.sections:
        if section.entries and wide:
            console.print(_table(section))
        elif section.entries:
            _print_narrow(console, section)
    if any(entry.hidden_from_anonymous for entry in inventory.entries()):
        console.print(Text(_HIDDEN_NOTE, style="dim"))


def _print_narrow(console: Console, section: Section) -> None:
    """A section as lines: the entry's name and title, then its route, marks and arguments,
    indented, each wrapping at the console's width rather than cut short."""
    listing = section.listing
    legend = " (* a required argument)" if any(entry.arguments for entry in section.entries) else ""
    console.print(Text(listing.title + legend, style="italic"))
    for entry in section.entries:
        name = str(entry.definition.get(listing.label, ""))
        title = entry.definition.get("title")
        heading = Text(name, style="bold")
        if isinstance(title, str) and title:
            heading.append(f"  {title}", style="dim")
        lines = [_route(entry)]
        marks = _marks(entry).replace("\n", ", ")
        if marks:
            lines.append(Text(f"marks: {marks}"))
        if entry.arguments:
            lines.append(Text(f"arguments: {', '.join(map(_argument, entry.arguments))}"))
        console.print(Padding(heading, (0, 0, 0, _INDENT), expand=False))
        for line in lines:
            console.print(Padding(line, (0, 0, 0, 2 * _INDENT), expand=False))


def _table(section: Section) -> Table:
    listing = section.listing
    if listing.kind == "tool":
        return _tools(section.entries)
    # A resource has no arguments: its URI is all there is to it.
    return _features(
        listing.title, listing.heading, listing.label, section.entries, arguments=listing.kind != "resource"
    )


def _tools(tools: Sequence[Entry]) -> Table:
    table = Table(title="Tools", title_justify="left", show_lines=True)
    table.add_column("Tool", no_wrap=True)
    table.add_column("Route", no_wrap=True)
    table.add_column("Marks")
    table.add_column("Arguments (* required)")
    for tool in tools:
        table.add_row(
            _named(tool.name, tool.definition.get("title")), _route(tool), _marks(tool), _listed(tool.arguments)
        )
    return table


def _features(title: str, heading: str, key: str, entries: Iterable[Entry], *, arguments: bool = True) -> Table:
    table = Table(title=title, title_justify="left", show_lines=True)
    table.add_column(heading, no_wrap=True)
    table.add_column("Route", no_wrap=True)
    table.add_column("Marks")
    if arguments:
        table.add_column("Arguments (* required)")
    for entry in entries:
        label = _named(str(entry.definition.get(key, "")), entry.definition.get("title"))
        cells: list[Text | str] = [label, _route(entry), _marks(entry)]
        if arguments:
            cells.append(_listed(entry.arguments))
        table.add_row(*cells)
    return table


def _named(name: str, title: object) -> Text:
    text = Text(name, style="bold")
    if isinstance(title, str) and title:
        text.append(f"\n{title}", style="dim")
    return text


def _route(entry: Entry) -> Text:
    return Text(f"{entry.method} {entry.path}")


def _marks(entry: Entry) -> str:
    annotations = entry.definition.get("annotations") or {}
    marks = [word for hint, word in _HINTS if annotations.get(hint) is True]
    if entry.confirm:
        marks.append("confirm")
    if entry.task != "never":
        marks.append(f"task:{entry.task}")
    if entry.stream:
        marks.append("stream")
    if entry.hidden_from_anonymous:
        marks.append("hidden")
    mime = entry.definition.get("mimeType")
    if isinstance(mime, str) and entry.kind != "tool":
        marks.append(mime)
    return "\n".join(marks)


def _listed(arguments: Sequence[ListedArgument]) -> Text:
    return Text("\n".join(map(_argument, arguments)))


def _argument(argument: ListedArgument) -> str:
    return f"{argument.name}{'*' if argument.required else ''}: {argument.type}"
