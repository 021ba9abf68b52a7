"""Whether a URL is under an allowed server URL: strict parsing, then a prefix match.

A URL is allowed when its scheme, host and port equal an allowed entry's and its path is the
entry's path or below it on a segment boundary (`https://api.example.com/v1` allows `/v1` and
`/v1/x`, not `/v10`). Hosts compare case-insensitively in their IDNA (ASCII) form, and ports
with the scheme's default made explicit. A non-ASCII host label is compared only when IDNA 2003
and IDNA 2008 encode it alike (`bücher` yes; `straße`, which one reads as `strasse`, no).

The parse is `urllib.parse.urlsplit`, plus refusals wherever another URL parser (the WHATWG
one in browsers and in the `url` crate behind pydantic, or the HTTP client a route fetches
with) could read a different host or path from the same text:
- whitespace, control or invisible characters anywhere (urlsplit silently drops tabs and
  newlines);
- a backslash anywhere (WHATWG reads it as `/`: `https://allowed.com\\@evil.com`);
- no `scheme://host` (`https:evil.com` has a host for WHATWG, not for urlsplit);
- user information (`https://allowed.com@evil.com`), a `%` in the authority, a host ending
  in a dot, an empty label, or a bracketed host that is not an IPv6 address;
- `.` or `..` path segments, also percent-encoded, full-width or followed by `;`, and an
  encoded `/` or `\\` in the path: a server may resolve them to a path outside the prefix.
Everything after the host is left as sent otherwise; a `#@allowed.com` fragment does not
change the host urlsplit reads, and that host is what is compared.
"""

from __future__ import annotations

import ipaddress
import re
import unicodedata
from dataclasses import dataclass
from encodings.idna import ToASCII
from typing import Final
from urllib.parse import unquote, urlsplit

DEFAULT_PORTS: Final = {"http": 80, "https": 443, "ws": 80, "wss": 443, "ftp": 21}
_MAX_PORT: Final = 65535
# A host label in ASCII form; `_` is not valid in host names but occurs in real ones.
_LABEL: Final = re.compile(r"[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?")
# The label separators IDNA recognises: the full stop and its ideographic and full-width forms.
_DOTS: Final = re.compile("[.\u3002\uff0e\uff61]")
_ENCODED_SEPARATOR: Final = re.compile(r"%(2f|5c)", re.IGNORECASE)


class UrlRefused(ValueError):
    """A URL that cannot be compared safely; the message says why, as a clause ("has ...")."""


@dataclass(frozen=True, slots=True)
class ServerUrl:
    """An absolute URL reduced to what decides where a request goes."""

    scheme: str
    host: str  # lower-case ASCII (IDNA) name, or a bracketed, compressed IPv6 address
    port: int | None  # explicit, else the scheme's default; None for a scheme without one
    path: str  # as sent, percent-encoding kept
    has_extras: bool  # a query or a fragment (or their empty markers `?`, `#`)

    def is_under(self, allowed: ServerUrl) -> bool:
        """Whether this URL is the allowed one or below its path, on a segment boundary."""
        if (self.scheme, self.host, self.port) != (allowed.scheme, allowed.host, allowed.port):
            return False
        base = allowed.path.rstrip("/")
        return not base or self.path == base or self.path.startswith(base + "/")


def parse_server_url(text: str) -> ServerUrl:
    """Parse an absolute URL strictly; `UrlRefused` says what makes it ambiguous."""
    if any(unicodedata.category(ch)[0] in "CZ" for ch in text):
        raise UrlRefused("contains whitespace, control or invisible characters")
    if "\\" in text:
        raise UrlRefused("contains a backslash")
    try:
        parts = urlsplit(text)
    except ValueError:
        raise UrlRefused("cannot be parsed as a URL") from None
    if not parts.scheme or not parts.netloc or not text[len(parts.scheme) :].startswith("://"):
        raise UrlRefused("is not an absolute URL of the form scheme://host/...")
    if "@" in parts.netloc:
        raise UrlRefused("has a user name or password before its host")
    if "%" in parts.netloc:
        raise UrlRefused("has a percent-encoded host")
    host, port = _host_and_port(parts.netloc, parts.scheme)
    _check_path(parts.path)
    has_extras = "?" in text or "#" in text
    return ServerUrl(parts.scheme, host, port, parts.path, has_extras)


def is_allowed(text: str, allowed: tuple[ServerUrl, ...]) -> bool:
    """Whether `text` is under one of the `allowed` URLs; `UrlRefused` when it is ambiguous."""
    url = parse_server_url(text)
    return any(url.is_under(entry) for entry in allowed)


def _host_and_port(netloc: str, scheme: str) -> tuple[str, int | None]:
    if netloc.startswith("["):
        inside, bracket, rest = netloc[1:].partition("]")
        if not bracket:
            raise UrlRefused("has an unclosed '[' in its host")
        host = _ipv6(inside)
    else:
        name = netloc.split(":", 1)[0]
        rest = netloc[len(name) :]
        host = _host_name(name)
    if not rest:
        return host, DEFAULT_PORTS.get(scheme)
    digits = rest[1:]
    if not rest.startswith(":") or not (digits.isascii() and digits.isdigit()) or int(digits) > _MAX_PORT:
        raise UrlRefused("has a malformed port")
    return host, int(digits)


def _ipv6(text: str) -> str:
    try:
        address = ipaddress.IPv6Address(text)
    except ValueError:
        raise UrlRefused("has a bracketed host that is not an IPv6 address") from None
    return f"[{address.compressed}]"


def _host_name(name: str) -> str:
    if not name:
        raise UrlRefused("has no host")
    try:
        labels = [_ascii_label(label) for label in _DOTS.split(name)]
    except UnicodeError:
        raise UrlRefused("has a host that is not a valid domain name") from None
    if labels[-1] == "":
        raise UrlRefused("has a host ending in a dot")
    if not all(_LABEL.fullmatch(label) for label in labels):
        raise UrlRefused("has a host that is not a valid domain name")
    return ".".join(labels)


def _ascii_label(label: str) -> str:
    if label.isascii():
        return label.lower()
    # IDNA 2003 (Python's codec) maps some characters before encoding (`ß` to `ss`, full-width
    # letters to ASCII) where IDNA 2008 (most HTTP clients) encodes them as they are or refuses
    # them: such a host could be two hosts. Only a label that no mapping changes is compared.
    mapped = ToASCII(label).decode("ascii")
    if mapped != "xn--" + label.lower().encode("punycode").decode("ascii"):
        raise UrlRefused("has a host name that IDNA versions read differently")
    return mapped


def _check_path(path: str) -> None:
    decoded = unquote(path)
    if _ENCODED_SEPARATOR.search(path):
        raise UrlRefused("has an encoded '/' or '\\' in its path")
    # Some servers (Tomcat) drop a segment's `;parameters`, so `..;` is `..` to them, and some
    # normalise Unicode (NFKC), so full-width dots are dots to them.
    segments = unicodedata.normalize("NFKC", decoded).split("/")
    if any(segment.split(";", 1)[0] in (".", "..") for segment in segments):
        raise UrlRefused("has a '.' or '..' segment in its path")
    if any(unicodedata.category(ch)[0] == "C" for ch in decoded):
        raise UrlRefused("has an encoded control character in its path")
