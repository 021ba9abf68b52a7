"""RFC 6570 URI templates, levels 1 to 3: parse, expand, and match a URI back to its variables.

A resource template (`notes://{note_id}`, `files:///{+path}`, `search://notes{?q,limit}`) is
matched against the URI a client reads, and its variables become the route's path and query
parameters. Matching is the inverse of expansion: each expression becomes a pattern that
accepts what expansion could have produced, and the values are percent-decoded. Query
expressions (`{?...}`, `{&...}`) are read by name from the URI's query, in any order, so a
client that writes `?limit=5&q=x` for `{?q,limit}` is understood too; after a literal query
(`notes?fixed=yes{&q}`) they continue it.

Where a value could also hold the text that separates it from the next (`{name}.{ext}`), the
earlier value takes as much as it can (`archive.tar.gz` is `archive.tar` and `gz`): the next
value cannot hold that text. So a URI has one way to be split, and the match takes time in
proportion to its length; letting both values hold it made a URI that almost matches a template
of three variables take its length cubed. Two values with nothing between them (`{a}{b}`)
cannot be told apart at all, and are refused.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final
from urllib.parse import parse_qsl, quote, unquote

# Operators of levels 2 and 3 (RFC 6570, 2.2); "" is simple string expansion (level 1).
_OPERATORS: Final = frozenset("+#./;?&")
_QUERY: Final = frozenset("?&")  # read by name from the URI's query
_NAMED: Final = frozenset(";?&")  # values expand as name=value
_EXPRESSION: Final = re.compile(r"{([^{}]*)}")
_VARIABLE_NAME: Final = re.compile(r"(?:[A-Za-z0-9_]|%[0-9A-Fa-f]{2})(?:\.?(?:[A-Za-z0-9_]|%[0-9A-Fa-f]{2}))*")
# RFC 3986 2.2 and 2.3: what reserved expansion (`+`, `#`) leaves as it is.
_UNRESERVED: Final = "-._~"
_RESERVED: Final = ":/?#[]@!$&'()*+,;="
# What each operator puts first, and between values (RFC 6570, appendix A).
_PREFIX: Final = {"": "", "+": "", "#": "#", ".": ".", "/": "/", ";": ";", "?": "?", "&": "&"}
_SEPARATOR: Final = {"": ",", "+": ",", "#": ",", ".": ".", "/": "/", ";": ";", "?": "&", "&": "&"}
# What ends one value, by operator, when matching: each character that separates values.
_STOPS: Final = {"": "/?#,", "+": "?#,", "#": ",", ".": "/?#.", "/": "/?#", ";": ";/?#"}
# The value of an expression with one variable has no "," to stop at (`{+path}` of "a,b.txt").
_SOLE_STOPS: Final = {**_STOPS, "": "/?#", "+": "?#", "#": "\n"}
# Operators whose expression always has its (first) value in a URI: the others may be absent.
_ALWAYS: Final = frozenset({"", "+", "#"})
# The group holding the query the `{?...}` and `{&...}` expressions read.
_QUERY_GROUP: Final = "query"


@dataclass(frozen=True, slots=True)
class Expression:
    operator: str  # "" or one of `_OPERATORS`
    names: tuple[str, ...]

    @property
    def reserved(self) -> bool:
        """Whether values keep reserved characters such as "/" (`{+path}`, `{#frag}`)."""
        return self.operator in ("+", "#")


@dataclass(frozen=True, slots=True)
class UriTemplate:
    """One parsed template: literal text and expressions, in order."""

    text: str
    parts: tuple[str | Expression, ...]
    pattern: re.Pattern[str]  # matches the whole URI; the query expressions' part is one group
    groups: Mapping[str, str]  # which group of `pattern` holds which variable
    query_names: tuple[str, ...]  # the variables of `{?...}` and `{&...}`

    @classmethod
    def parse(cls, text: str) -> UriTemplate:
        """Parse `text`; `ValueError` naming the template for anything beyond level 3."""
        if not isinstance(text, str) or not text:
            raise ValueError(f"a resource URI must be a non-empty string, got {text!r}")
        parts: list[str | Expression] = []
        position = 0
        for found in _EXPRESSION.finditer(text):
            parts.append(text[position : found.start()])
            parts.append(_expression(found.group(1), text))
            position = found.end()
        parts.append(text[position:])
        literal = "".join(part for part in parts if isinstance(part, str))
        if "{" in literal or "}" in literal:
            raise ValueError(f"the URI template {text!r} has an unmatched brace")
        names = [name for part in parts if isinstance(part, Expression) for name in part.names]
        if len(names) != len(set(names)):
            raise ValueError(f"the URI template {text!r} names a variable twice")
        query = [part for part in parts if isinstance(part, Expression) and part.operator in _QUERY]
        if query and any(part not in query for part in parts[parts.index(query[0]) + 1 :] if part):
            # The query expressions are read by name from the end of the URI, so nothing else
            # may follow them: neither text nor another kind of expression.
            raise ValueError(f"the URI template {text!r} has text after its query expression")
        kept = tuple(part for part in parts if part != "")
        pattern, groups = _matcher(kept, text)
        query_names = tuple(name for part in query for name in part.names)
        return cls(text, kept, pattern, groups, query_names)

    @property
    def variables(self) -> tuple[str, ...]:
        return tuple(name for part in self.parts if isinstance(part, Expression) for name in part.names)

    def variable(self, name: str) -> Expression:
        """The expression that holds variable `name`."""
        return next(part for part in self.parts if isinstance(part, Expression) and name in part.names)

    def expand(self, values: Mapping[str, str]) -> str:
        """The URI for these values; a variable without a value is left out (RFC 6570, 3.2.1)."""
        out: list[str] = []
        for part in self.parts:
            if isinstance(part, str):
                out.append(part)
                continue
            named = [(name, values[name]) for name in part.names if values.get(name) is not None]
            if not named:
                continue
            safe = _UNRESERVED + _RESERVED if part.reserved else _UNRESERVED
            encoded = []
            for name, value in named:
                text = quote(str(value), safe=safe)
                if part.operator in _NAMED:
                    text = f"{name}={text}" if text or part.operator != ";" else name
                encoded.append(text)
            out.append(_PREFIX[part.operator] + _SEPARATOR[part.operator].join(encoded))
        return "".join(out)

    def match(self, uri: str) -> dict[str, str] | None:
        """The variables' values (percent-decoded) if `uri` is an expansion of this template,
        else `None`. Variables the URI leaves out are absent."""
        query_names = self.query_names
        found = self.pattern.fullmatch(uri)
        if found is None:
            return None
        values: dict[str, str] = {}
        for group, name in self.groups.items():
            value = found.group(group)
            if value is not None:
                if self.variable(name).operator == ";":
                    value = value[1:]  # "=value", or "" for a bare `;name` (RFC 6570, 3.2.7)
                values[name] = unquote(value)
        query = found.group(_QUERY_GROUP) if query_names else None
        if query:
            for key, value in parse_qsl(query, keep_blank_values=True):
                if key not in query_names or key in values:
                    return None  # a parameter the template does not name, or named twice
                values[key] = value
        return values


def _expression(body: str, template: str) -> Expression:
    operator = body[:1] if body[:1] in _OPERATORS else ""
    names = tuple(body[len(operator) :].split(","))
    for name in names:
        if not _VARIABLE_NAME.fullmatch(name):
            # Prefixes (`{var:3}`) and explosion (`{var*}`) are level 4.
            raise ValueError(
                f"the URI template {template!r} has the expression {{{body}}}; variables are names of "
                "letters, digits and '_' in expressions of RFC 6570 levels 1 to 3"
            )
    return Expression(operator, names)


def _matcher(parts: tuple[str | Expression, ...], template: str) -> tuple[re.Pattern[str], dict[str, str]]:
    """A regular expression for the whole URI, and which group holds which variable. Every
    variable is optional as expansion allows, except that a simple or reserved expression must
    produce its first value (else the URI could match anything). The query expressions' part
    is one group, read by name: it starts with "?", or with "&" where the template's own text
    already opened the query."""
    regex: list[str] = []
    groups: dict[str, str] = {}
    query_start = "?"
    # What ends the values that may come last so far (the last one a URI always has, and any
    # after it it may lack: the most any of them could hold), once there is one.
    before: str | None = None
    between = ""  # the template's text since the last value
    for part in parts:
        if isinstance(part, str):
            regex.append(re.escape(part))
            query_start = "&" if "?" in part else query_start
            between += part
            continue
        if part.operator in _QUERY:
            continue
        lead = between + _PREFIX[part.operator]
        if before is not None and not lead:
            raise ValueError(
                f"the URI template {template!r} has {_shown(part)} right after another expression, with "
                "nothing between them to tell where one value ends"
            )
        stops = (_SOLE_STOPS if len(part.names) == 1 else _STOPS)[part.operator]
        values = []
        for index, name in enumerate(part.names):
            group = f"v{len(groups)}"
            groups[group] = name
            value = _value(stops, lead if index == 0 else "", before, "*" if part.operator == ";" else "+")
            if part.operator == ";":
                # "=value", or nothing for an empty value; `match` drops the "=".
                values.append(f"(?:;{re.escape(name)}(?P<{group}>(?:={value})?))?")
            elif part.operator in (".", "/"):
                values.append(f"(?:{re.escape(part.operator)}(?P<{group}>{value}))?")
            else:
                separator = "," if index else ""
                values.append(f"(?:{separator}(?P<{group}>{value}))" + ("?" if index else ""))
        prefix = "#" if part.operator == "#" else ""
        regex.append(re.escape(prefix) + "".join(values))
        always = part.operator in _ALWAYS and len(part.names) == 1
        before = stops if always or before is None else "".join(c for c in before if c in stops)
        between = ""
    if any(isinstance(part, Expression) and part.operator in _QUERY for part in parts):
        regex.append(f"(?:{re.escape(query_start)}(?P<{_QUERY_GROUP}>.*))?")
    return re.compile("".join(regex)), groups


def _value(stops: str, lead: str, before: str | None, repeat: str) -> str:
    """The pattern of one value ended by `stops`, after the text `lead`. Where the value before
    that text could hold it too, this one cannot, so the earlier value takes the most (see the
    module's docstring)."""
    ambiguous = lead and before is not None and not any(character in before + stops for character in lead)
    if ambiguous and len(lead) == 1:
        stops += lead
    character = f"[^{re.escape(stops)}]"
    if ambiguous and len(lead) > 1:
        character = f"(?:(?!{re.escape(lead)}){character})"
    return character + repeat


def _shown(part: Expression) -> str:
    return "{" + part.operator + ",".join(part.names) + "}"
