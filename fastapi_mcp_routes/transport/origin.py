"""Origin and Host checks: cross-site requests from browsers, and DNS rebinding.

A browser page may POST to any address it can reach, so a request whose `Origin` is neither
this server's own nor one the deployment allows is refused (spec 2025-11-25, basic/transports,
"Security Warning"). A DNS-rebinding page makes its Origin and Host agree, so the Origin check
alone cannot catch it; a server reached on a loopback address therefore also refuses any Host
that is not a loopback name. Wherever it is reached, a Host that is not a host and an optional
port is refused: `evil.example@127.0.0.1` names 127.0.0.1 to a URL parser, but a Host header
carries no userinfo (RFC 9110 section 7.2), so only an attacker sends one.
"""

from __future__ import annotations

import functools
import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

from fastapi_mcp_routes.options import strings

_LOOPBACK_NAMES: Final = frozenset({"localhost", "localhost.", "ip6-localhost"})
_WILDCARD: Final = "*"
# RFC 9110 section 7.2, Host = uri-host [ ":" port ]: an IP literal in brackets, or a name or
# IPv4 address (the characters DNS names use: RFC 3986 allows more, no resolver does).
_HOST: Final = re.compile(r"(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+)(?::[0-9]*)?")


@dataclass(frozen=True, slots=True)
class OriginPolicy:
    """What the endpoint accepts; `None` for allowed origins or hosts means "no extra ones"."""

    allowed_origins: frozenset[str]
    allowed_hosts: frozenset[str]

    @classmethod
    def build(cls, allowed_origins: Iterable[str] | None, allowed_hosts: Iterable[str] | None) -> OriginPolicy:
        origins = frozenset(_normal_origin(o) for o in strings("allowed_origins", allowed_origins))
        hosts = frozenset(h.lower() for h in strings("allowed_hosts", allowed_hosts))
        return cls(origins, hosts)

    def refusal(self, host: str | None, server_address: str | None, origin: str | None, scheme: str) -> str | None:
        """Why a request with this Host and Origin is refused, or None when both are allowed."""
        if not self.host_allowed(host, server_address):
            return "Forbidden: this Host is not allowed."
        if not self.origin_allowed(origin, host, scheme):
            return "Forbidden: this Origin is not allowed."
        return None

    def origin_allowed(self, origin: str | None, host: str | None, scheme: str) -> bool:
        """Absent, same-origin, or listed; `"*"` among the allowed origins disables the check."""
        if origin is None or _WILDCARD in self.allowed_origins:
            return True
        normal = _normal_origin(origin)
        if normal in self.allowed_origins:
            return True
        try:
            parts = urlsplit(normal)
        except ValueError:  # e.g. an unbalanced IPv6 bracket
            return False
        return bool(host) and parts.scheme == scheme and parts.netloc == (host or "").lower()

    def host_allowed(self, host: str | None, server_address: str | None) -> bool:
        """A Host that is a host[:port]: off loopback any, on loopback only loopback names or
        listed hosts."""
        if host and not _well_formed(host):
            return False
        if server_address is None or not _is_loopback(server_address):
            return True
        if not host:
            return False
        host = host.lower()
        if _WILDCARD in self.allowed_hosts or host in self.allowed_hosts:
            return True
        hostname = _hostname(host)
        return hostname in self.allowed_hosts or hostname in _LOOPBACK_NAMES or _is_loopback(hostname)


def _normal_origin(origin: str) -> str:
    return origin.strip().rstrip("/").lower()


@functools.lru_cache(maxsize=256)  # Host values repeat; the cache is bounded
def _well_formed(host: str) -> bool:
    return _HOST.fullmatch(host) is not None


@functools.lru_cache(maxsize=256)  # Host values repeat; the cache is bounded
def _hostname(host: str) -> str:
    try:
        return urlsplit("//" + host).hostname or ""
    except ValueError:  # e.g. an unbalanced IPv6 bracket: no host we could allow
        return ""


@functools.lru_cache(maxsize=256)  # a server has few addresses; Host values repeat
def _is_loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address.strip("[]")).is_loopback
    except ValueError:
        return False
