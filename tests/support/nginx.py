"""nginx in front of several processes, configured by docs/nginx.conf, the file users copy.

The tests render that file with their own ports (its upstream's servers and its `listen`) and
include it in a main configuration of their own, which keeps nginx's pid, logs and temporary
files in a folder of the run's; nginx runs in the foreground as a process of the test's, and is
stopped by whoever started it. Without an nginx binary the tests fail saying how to get one.

    python -m tests.support.nginx --port 8080 --directory /tmp/x http://127.0.0.1:8001 ...

runs that nginx in this process's place (the conformance script's balancer), until stopped.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import socket
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Final
from urllib.parse import urlsplit

from tests.support.machine import HOST, ROOT, free_port
from tests.support.processes import Running, serve_process_group, start_process

SITE: Final = ROOT / "docs" / "nginx.conf"
_NGINX_FOLDERS: Final = ("/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin")
# What the tests replace in docs/nginx.conf: the upstream's servers, and the address it listens on.
_UPSTREAM_SERVER: Final = re.compile(r"^([ \t]*)server 127\.0\.0\.1:\d+;[ \t]*\n", re.MULTILINE)
_LISTEN: Final = re.compile(r"^([ \t]*)listen 80;", re.MULTILINE)
# The temporary folders nginx makes at startup; Debian's defaults are under /var/lib/nginx.
_TEMP_PATHS: Final = ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")


class NginxMissing(LookupError):
    """No nginx binary to start."""


def nginx_binary() -> str | None:
    """nginx on PATH, or where packages put it (/usr/sbin is not on every user's PATH)."""
    found = shutil.which("nginx")
    if found is not None:
        return found
    candidates = (os.path.join(folder, "nginx") for folder in _NGINX_FOLDERS)
    return next((path for path in candidates if os.access(path, os.X_OK)), None)


def nginx_missing() -> str | None:
    """Why no nginx can be started here, and how to get one; `None` when one can."""
    if nginx_binary() is not None:
        return None
    return "The load-balancer tests need nginx: run `make nginx`, or apt install nginx."


def render_site(upstreams: Sequence[str], port: int) -> str:
    """docs/nginx.conf with the test's ports: its upstream's servers are `upstreams` (base URLs
    such as http://127.0.0.1:8001; one may appear twice), and it listens on 127.0.0.1:`port`."""
    if not upstreams:
        raise ValueError("nginx needs at least one upstream URL, got none")
    text = SITE.read_text()
    servers = list(_UPSTREAM_SERVER.finditer(text))
    listens = list(_LISTEN.finditer(text))
    if not servers or len(listens) != 1:
        raise ValueError(
            f"{SITE} must name its processes as `server 127.0.0.1:PORT;` lines and listen with one "
            f"`listen 80;` line, so that the tests can put their ports in; found {len(servers)} and {len(listens)}"
        )
    indent = servers[0].group(1)
    ours = "".join(f"{indent}server {_address(url)};\n" for url in upstreams)
    # From the last to the first, so the earlier matches' positions still hold.
    for found in reversed(servers):
        text = text[: found.start()] + (ours if found is servers[0] else "") + text[found.end() :]
    return _LISTEN.sub(rf"\1listen {HOST}:{port};", text)


def _address(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname or not parts.port or parts.path.strip("/"):
        raise ValueError(f"an upstream must be an http://host:port URL without a path, got {url!r}")
    return f"{parts.hostname}:{parts.port}"


def main_config(directory: Path, site: Path) -> str:
    """The main configuration: `site` in its `http` block, as Debian's nginx.conf includes
    conf.d/, and every file nginx writes in `directory`. One worker process, so that its round
    robin is the only one (each nginx worker keeps its own turn)."""
    temp_paths = "".join(f"    {name}_temp_path {directory / name};\n" for name in _TEMP_PATHS)
    # Started by root, nginx runs its workers as `nobody`, who may not enter the run's folder.
    user = "user root;\n" if os.geteuid() == 0 else ""
    return (
        f"{user}worker_processes 1;\n"
        f"pid {directory / 'nginx.pid'};\n"
        "error_log stderr warn;\n"
        "events {\n    worker_connections 1024;\n}\n"
        "http {\n"
        "    access_log off;\n"
        f"{temp_paths}"
        f"    include {site};\n"
        "}\n"
    )


def nginx_command(upstreams: Sequence[str], port: int, directory: Path) -> list[str]:
    """Write the configuration into `directory`; the command that runs nginx with it in the
    foreground. `NginxMissing` without an nginx binary."""
    binary = nginx_binary()
    if binary is None:
        raise NginxMissing(nginx_missing())
    site = directory / "site.conf"
    site.write_text(render_site(upstreams, port))
    config = directory / "nginx.conf"
    config.write_text(main_config(directory, site))
    return [binary, "-p", str(directory), "-e", "stderr", "-c", str(config), "-g", "daemon off;"]


def _listening(port: int) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=1):
            return True
    except OSError:
        return False


@contextmanager
def nginx(*upstreams: str) -> Iterator[str]:
    """nginx, configured by docs/nginx.conf, in front of `upstreams` (base URLs); yields its
    base URL once it listens, and stops it at the end."""
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="fastapi-mcp-routes-nginx-") as directory:
        command = nginx_command(upstreams, port, Path(directory))
        with start_process(command) as running:
            running.wait_until(lambda _: _listening(port), f"nginx on port {port}")
            yield f"http://{HOST}:{port}"


@dataclass(frozen=True, slots=True)
class Replicas:
    """Single-worker processes of one app (their base URLs and process groups), and nginx in
    front of them (`balanced`)."""

    urls: tuple[str, ...]
    running: tuple[Running, ...]
    balanced: str

    @property
    def first(self) -> str:
        return self.urls[0]

    @property
    def second(self) -> str:
        return self.urls[1]


@contextmanager
def replicas_behind_nginx(app_path: str, env: Mapping[str, str], count: int = 2) -> Iterator[Replicas]:
    """`count` single-worker uvicorn processes serving `app_path`, each with `env` added to this
    environment (the shared secret, and the store's URL: a standalone Redis, a Cluster, a
    Sentinel), behind nginx; all stopped at the end."""
    with ExitStack() as stack:
        served = [stack.enter_context(serve_process_group(app_path, env=env)) for _ in range(count)]
        urls = tuple(url for url, _ in served)
        balanced = stack.enter_context(nginx(*urls))
        yield Replicas(urls, tuple(running for _, running in served), balanced)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Run nginx, configured by docs/nginx.conf, in front of upstreams.")
    parser.add_argument("--port", type=int, required=True, help="the port on 127.0.0.1 nginx listens on")
    parser.add_argument("--directory", type=Path, required=True, help="an empty folder for nginx's files")
    parser.add_argument("upstreams", nargs="+", metavar="UPSTREAM_URL", help="base URL of a process")
    args = parser.parse_args(argv)
    try:
        command = nginx_command(args.upstreams, args.port, args.directory.resolve())
    except (NginxMissing, ValueError) as error:
        parser.exit(1, f"{error}\n")
    sys.stdout.flush()
    os.execv(command[0], command)  # nginx takes this process's place: a signal to it stops nginx


if __name__ == "__main__":
    main()
