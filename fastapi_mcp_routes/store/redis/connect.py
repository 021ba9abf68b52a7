"""The client `RedisStore.from_url` makes for a URL: one Redis, a Redis Cluster, or the primary
that Sentinels name.

    redis://[user:password@]host:port/db             one Redis (rediss:// TLS, unix:// a socket)
    redis+cluster://[user:password@]host:port[,...]  a Cluster, found from any node named
    redis+sentinel://[user:password@]host:port[,...]/primary-name[/db]
                                                     the primary the Sentinels name

`rediss+cluster://` and `rediss+sentinel://` speak TLS to the Cluster's nodes and to the
primary. Redis has no URL of its own for a Cluster or for Sentinels: these follow the shape
other clients use, several `host:port` separated by commas.
"""

from __future__ import annotations

import sys
from typing import Any, Final, TypeAlias
from urllib.parse import unquote

import redis.asyncio
from redis.asyncio.cluster import ClusterNode
from redis.asyncio.sentinel import Sentinel
from redis.exceptions import RedisError

# The clients `RedisStore` runs on: redis-py's, or valkey-py's (`Any`, as the package does not
# import valkey).
RedisClient: TypeAlias = "redis.asyncio.Redis | redis.asyncio.RedisCluster | Any"

_DEFAULT_PORT: Final = 6379
_SENTINEL_PORT: Final = 26379
_CLUSTER_SCHEMES: Final = {"redis+cluster": False, "rediss+cluster": True}  # scheme -> TLS
_SENTINEL_SCHEMES: Final = {"redis+sentinel": False, "rediss+sentinel": True}
_SENTINEL_OPTIONS: Final = ("socket_timeout", "socket_connect_timeout", "retry")


def errors_of(client: RedisClient) -> tuple[type[BaseException], ...]:
    """What the client raises when Redis cannot be reached or refuses a step: redis-py's
    `RedisError`, valkey-py's `ValkeyError` (once valkey is imported, as any valkey client has
    it), and `OSError` from a socket below either."""
    valkey = sys.modules.get("valkey.exceptions")
    errors: tuple[type[BaseException], ...] = (RedisError, OSError)
    if valkey is not None:
        errors += (valkey.ValkeyError,)
    return errors


def connect(url: str, options: dict[str, Any]) -> tuple[RedisClient, tuple[Any, ...]]:
    """A client for `url` with `options`, and what must be closed once done with it."""
    scheme, _, rest = url.partition("://")
    if scheme in _CLUSTER_SCHEMES:
        cluster = _cluster(rest, _CLUSTER_SCHEMES[scheme], options, url)
        return cluster, (cluster,)
    if scheme in _SENTINEL_SCHEMES:
        return _sentinel_primary(rest, _SENTINEL_SCHEMES[scheme], options, url)
    client = redis.asyncio.Redis.from_url(url, **options)
    return client, (client,)


def _cluster(rest: str, tls: bool, options: dict[str, Any], url: str) -> redis.asyncio.RedisCluster:
    where, path = _split(rest, url)
    if path.strip("/") not in ("", "0"):
        raise ValueError(f"a Redis Cluster has database 0 only, got {shown(url)!r}")
    credentials, nodes = _addresses(where, _DEFAULT_PORT, url)
    startup = [ClusterNode(host, port) for host, port in nodes]
    return redis.asyncio.RedisCluster(startup_nodes=startup, ssl=tls, **credentials, **options)


def _sentinel_primary(rest: str, tls: bool, options: dict[str, Any], url: str) -> tuple[RedisClient, tuple[Any, ...]]:
    where, path = _split(rest, url)
    name, _, db = path.strip("/").partition("/")
    if not name or not (db == "" or db.isdigit()):
        raise ValueError(
            f"a Sentinel URL names the primary and may name a database: /primary-name[/db], got {shown(url)!r}"
        )
    credentials, sentinels = _addresses(where, _SENTINEL_PORT, url)
    # The Sentinels get the timeouts and retry (`sentinel_kwargs` unless given), not the
    # primary's credentials or TLS.
    timeouts: dict[str, Any] = {key: options[key] for key in _SENTINEL_OPTIONS if key in options}
    sentinel_options = options.pop("sentinel_kwargs", None) or timeouts
    manager = Sentinel(sentinels, sentinel_kwargs=sentinel_options, **options)
    primary = manager.master_for(name, ssl=tls, db=int(db or 0), **credentials)
    return primary, (primary, *manager.sentinels)


def _split(rest: str, url: str) -> tuple[str, str]:
    """The addresses (with any credentials) and the path of a URL without its scheme."""
    where, slash, path = rest.partition("/")
    if "?" in path or "?" in where or "#" in rest:
        raise ValueError(f"pass a Cluster's or Sentinels' options as keyword arguments, not in the URL: {shown(url)!r}")
    return where, slash + path


def _addresses(where: str, default_port: int, url: str) -> tuple[dict[str, Any], list[tuple[str, int]]]:
    """The credentials (`username`, `password`) and `host:port` pairs of `user:password@a:1,b:2`."""
    userinfo, at, hosts = where.rpartition("@")
    credentials: dict[str, Any] = {}
    if at:
        user, colon, password = userinfo.partition(":")
        if user:
            credentials["username"] = unquote(user)
        if colon:
            credentials["password"] = unquote(password)
    pairs = []
    for address in hosts.split(","):
        host, port = _host_and_port(address, default_port)
        if not host:
            raise ValueError(f"every address of the URL needs a host, got {shown(url)!r}")
        pairs.append((host, port))
    return credentials, pairs


def _host_and_port(address: str, default_port: int) -> tuple[str, int]:
    if address.startswith("["):  # an IPv6 address: [::1]:6379
        host, _, port = address[1:].partition("]")
        port = port.removeprefix(":")
    else:
        host, _, port = address.partition(":")
    if port and not port.isdigit():
        raise ValueError(f"a port is a number, got {address!r}")
    return host, int(port) if port else default_port


def shown(url: str) -> str:
    """The URL as a log line or an error may show it: a password in it is replaced by `***`."""
    scheme, _, rest = url.partition("://")
    userinfo, at, hosts = rest.rpartition("@")
    if not at or ":" not in userinfo:
        return url
    return f"{scheme}://{userinfo.partition(':')[0]}:***@{hosts}"
