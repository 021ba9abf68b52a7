"""What a user is shown of a call's arguments when asked to confirm it: every name, nowhere to hide.

A confirmation question is a line of text in a client's dialog, so the arguments must be cut to
fit, and the cutting must not become a hiding place: 600 spaces in a `body` sent first pushed a
`title` of "DROP EVERYTHING" out of the first 500 characters of the JSON. So:
- every argument is shown as `name=value`, names sorted (the caller's order is the caller's
  choice), and no top-level name is ever left out;
- a long value is elided in its middle, with its length: `"abc…xyz" (600 chars)`;
- objects and arrays are summarised the same way, to a bounded depth and number of entries,
  with how many are not shown: `{a=1, b=2, …3 more}`, `[…40 items]`;
- a string is quoted, with `"` and `\\` escaped, so no value can close its own quotes and
  pass for the next argument; control, zero-width, bidirectional and other invisible
  characters are shown as `\\u` escapes, and a run of more than three blanks as one marker,
  `⟨600 blanks⟩`.

A summary is tried at decreasing detail until it fits in `MAX_SUMMARY` characters. When even
the briefest form of every argument does not fit, there is no summary (`None`): a question
that cannot show every argument is never asked (server/confirmation/gate.py says what happens instead).
"""

from __future__ import annotations

import heapq
import re
import unicodedata
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from fastapi_mcp_routes.wire.json import dumps

# Characters of arguments in one question: about what a client's dialog shows without scrolling.
MAX_SUMMARY: Final = 2000
ELLIPSIS: Final = "…"
# A run of more blanks than this is one marker; fewer are shown (escaped where not a space).
_BLANKS_SHOWN: Final = 3
_PIECE: Final = re.compile(rf"\s{{{_BLANKS_SHOWN + 1},}}|.", re.DOTALL)
_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")
_ESCAPES: Final = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_SCALAR_CHARS: Final = 16  # a number is shown whole up to this long, whatever the detail


@dataclass(frozen=True, slots=True)
class Detail:
    """How much of each value a summary shows."""

    chars: int  # characters of a string shown before its middle is elided
    entries: int  # entries of an object or array shown
    depth: int  # levels of objects and arrays opened


# Tried in this order until the summary fits: full, brief, then names with short values only.
DETAILS: Final = (Detail(80, 8, 3), Detail(24, 3, 1), Detail(8, 0, 0))


def summarize(arguments: Mapping[str, Any], limit: int = MAX_SUMMARY) -> str | None:
    """Every argument as `name=value`, at most `limit` characters; `None` when even the
    briefest form of every argument does not fit."""
    if not arguments:
        return "no arguments"
    names = sorted(arguments)
    for detail in DETAILS:
        text = ", ".join(f"{_name(name)}={_value(arguments[name], detail, detail.depth)}" for name in names)
        if len(text) <= limit:
            return text
    return None


def shorten(text: str, chars: int, quote: str = "") -> str:
    """`text` shown visibly (see `visible`) between `quote`s, its middle elided past `chars`
    characters, with its length. The work is bounded by `chars`, not by the text's length."""
    front, whole = _leading(_pieces(text), chars)
    if whole:
        return quote + "".join(front) + quote
    head, _ = _leading(iter(front), chars - chars // 3)
    tail, _ = _leading(_trailing(text, chars // 3), chars // 3)
    shown = "".join(head) + ELLIPSIS + "".join(reversed(tail))
    return f"{quote}{shown}{quote} ({_count(len(text), 'char')})"


def visible(text: str) -> str:
    """`text` with what prints as nothing, or moves other text, shown as escapes, and each run
    of more than three blanks as one marker."""
    return "".join(_pieces(text))


def _pieces(text: str) -> Iterator[str]:
    """`text` as pieces that each show on screen: a character, an escape, or a blank run's marker."""
    return (_piece(match.group()) for match in _PIECE.finditer(text))


def _piece(piece: str) -> str:
    if len(piece) > 1:
        return f"⟨{len(piece)} blanks⟩"
    if piece in _ESCAPES:
        return _ESCAPES[piece]
    if piece == " " or not unicodedata.category(piece).startswith(("C", "Z")):
        return piece
    code = ord(piece)
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def _leading(pieces: Iterator[str], chars: int) -> tuple[list[str], bool]:
    """The first pieces that fit in `chars`, and whether they are all of them."""
    taken: list[str] = []
    for piece in pieces:
        chars -= len(piece)
        if chars < 0:
            return taken, False
        taken.append(piece)
    return taken, True


def _trailing(text: str, chars: int) -> Iterator[str]:
    """The pieces of the last `chars` characters of `text`, last first; a run of blanks is
    taken whole, so its marker counts all of it."""
    start = max(len(text) - chars, 0)
    before = text[:start]
    start -= len(before) - len(before.rstrip())
    return reversed(list(_pieces(text[start:])))


def _name(name: str) -> str:
    # Never elided: a top-level name is the tool's own (unknown names are refused before
    # anyone is asked), and every one must be seen.
    return name if _NAME.fullmatch(name) else f'"{visible(name)}"'


def _key(key: str, detail: Detail) -> str:
    return key if _NAME.fullmatch(key) and len(key) <= detail.chars else _string(key, detail)


def _value(value: Any, detail: Detail, depth: int) -> str:
    if isinstance(value, str):
        return _string(value, detail)
    if isinstance(value, Mapping):
        return _object(value, detail, depth)
    if isinstance(value, list):
        return _array(value, detail, depth)
    return shorten(dumps(value).decode(), max(detail.chars, _SCALAR_CHARS))  # a number, true, false, null


def _string(text: str, detail: Detail) -> str:
    return shorten(text, detail.chars, '"')


def _object(value: Mapping[str, Any], detail: Detail, depth: int) -> str:
    if not value:
        return "{}"
    if depth == 0:
        return f"{{{ELLIPSIS}{_count(len(value), 'key')}}}"
    keys = heapq.nsmallest(detail.entries, value)  # the first in sorted order, without sorting them all
    shown = [f"{_key(key, detail)}={_value(value[key], detail, depth - 1)}" for key in keys]
    return "{" + ", ".join(shown + _more(len(value) - len(shown))) + "}"


def _array(value: list[Any], detail: Detail, depth: int) -> str:
    if not value:
        return "[]"
    if depth == 0:
        return f"[{ELLIPSIS}{_count(len(value), 'item')}]"
    shown = [_value(item, detail, depth - 1) for item in value[: detail.entries]]
    return "[" + ", ".join(shown + _more(len(value) - len(shown))) + "]"


def _more(hidden: int) -> list[str]:
    return [f"{ELLIPSIS}{hidden} more"] if hidden else []


def _count(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")
