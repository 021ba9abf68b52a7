"""Text a route wrote, made safe to print on a terminal: results, error messages, progress and
log messages, questions.

A route's text is data, often data someone else chose (a note's title). Printed as it is, its
control characters would be obeyed, not shown: ESC and the C1 controls (U+009B is a one-character
ESC [) start sequences that clear the screen, retitle the window, rewrite what was printed
before or (OSC 52) write the clipboard; a carriage return overwrites its line; bidirectional
overrides show text in another order than it is. Each of those is printed as a `\\uXXXX` escape
instead, as the confirmation question shows them; newlines and tabs stay. In JSON text they can
only stand inside strings, where the escape is the same character, so JSON stays exact.
"""

from __future__ import annotations

import re
from typing import Final

# C0 controls but tab and newline, DEL and the C1 controls, and the bidirectional marks,
# embeddings, overrides and isolates (Unicode UAX #9).
_UNPRINTABLE: Final = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """`text` with every character a terminal would obey rather than show as a `\\uXXXX` escape."""
    return _UNPRINTABLE.sub(lambda found: f"\\u{ord(found.group()):04x}", text)
