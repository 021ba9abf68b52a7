"""The release as `make dist` builds it: an sdist and a wheel from `python -m build`, each with the
license, the version and the classifiers in its metadata, and both passing `twine check --strict`
(what the package index would refuse or render badly); what the wheel requires and what installing
it would bring along: PyJWT with its crypto backend, and never python-jose or ecdsa (whose timing
attack is never to be fixed). And `__version__`, which is the installed distribution's. A file
in the tree that git does not track refuses the release rather than ship in it.

Then the wheel as a user gets it: installed alone into a virtualenv of its own (`python -m venv`,
`pip install <wheel>`), run from an empty directory so that the checkout cannot be imported by
accident. What it holds then is exactly what the wheel requires, followed through each installed
distribution's own requirements; each dependency it always requires is one its modules load; every
file of the package besides its modules (the explorer's page, `py.typed`, RedisStore's Lua scripts)
is on disk; and, with uvicorn and the `skills` extra added, it serves the example app, which an MCP
client lists and calls and whose explorer page it serves.

Building asks the package index for setuptools, and resolving an install asks it for the
dependencies; where it cannot be reached the test fails and says so, since a skipped check would
let a dependency back in unseen.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from collections.abc import Iterable, Mapping
from email.message import Message
from email.parser import HeaderParser
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

import fastapi_mcp_routes
from example_app.main import app as checkout_example
from tests.support.processes import serve_process_group
from tests.support.sdk import mcp_client
from tests.support.servers import serve
from tests.support.waits import WAIT_S

# One worker runs the whole module (`make unit` distributes by group): the build and the fresh
# virtualenv are made once, not once per worker that draws one of these tests.
pytestmark = pytest.mark.xdist_group("dist")

ROOT = Path(__file__).resolve().parent.parent
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
BUILD_TIMEOUT_S = 600
PIP_TIMEOUT_S = 600
REFUSED = {"python-jose", "ecdsa"}
# What a `make` hands the commands it runs (`make unit` runs these tests): its flags and depth.
MAKE_FLAGS = {"MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES"}


def test_the_version_is_the_one_pyproject_declares() -> None:
    assert fastapi_mcp_routes.__version__ == PROJECT["version"]


def clean_checkout(source: Path) -> Path:
    """A git checkout in `source` of the checkout's tracked files as they are now, nothing else in
    it: what `make dist` sees on a clean checkout, so nothing an earlier build or run left in the
    tree slips in."""
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=False)
    assert tracked.returncode == 0, f"the release is built from git's tracked files: {tracked.stderr.decode()}"
    for name in tracked.stdout.decode().split("\0"):
        if name and (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(ROOT / name, source / name)
    for command in (["git", "init", "--quiet"], ["git", "add", "--all"]):
        done = subprocess.run(command, cwd=source, capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stderr
    return source


def make_dist(source: Path) -> subprocess.CompletedProcess[str]:
    """`make dist` in `source`, with the tools of this run's virtualenv (never reinstalled: its
    stamp is taken as made), and none of the flags of a `make` this run is under."""
    venv = Path(sys.prefix)
    environment = {name: value for name, value in os.environ.items() if name not in MAKE_FLAGS}
    return subprocess.run(
        ["make", "--no-print-directory", "-o", f"{venv}/.installed", "dist", f"VENV={venv}"],
        cwd=source,
        env=environment,
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_S,
        check=False,
    )


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    source = clean_checkout(tmp_path_factory.mktemp("source"))
    built = make_dist(source)
    assert built.returncode == 0, (
        f"make dist failed; is the package index (where setuptools comes from) reachable?\n"
        f"{built.stdout[-4000:]}\n{built.stderr[-4000:]}"
    )
    return source / "dist"


@pytest.mark.processes
@pytest.mark.parametrize("left", ["fastapi_mcp_routes/explorer/static/server-key.pem", "fastapi_mcp_routes/scratch.py"])
def test_make_dist_refuses_a_file_git_does_not_track(tmp_path: Path, left: str) -> None:
    # Both match the package's patterns (its package-data globs, its modules): built from the
    # working tree they would ship.
    source = clean_checkout(tmp_path)
    (source / left).write_text("-----BEGIN PRIVATE KEY-----\n")
    refused = make_dist(source)
    assert refused.returncode != 0, refused.stdout
    assert f"fastapi_mcp_routes-{PROJECT['version']}.tar.gz: {left}" in refused.stderr
    assert f"fastapi_mcp_routes-{PROJECT['version']}-py3-none-any.whl: {left}" in refused.stderr
    assert not (source / "dist").exists()


def only(directory: Path, pattern: str) -> Path:
    (found,) = directory.glob(pattern)
    return found


def wheel_files(dist: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(only(dist, "fastapi_mcp_routes-*.whl")) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def sdist_files(dist: Path) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    with tarfile.open(only(dist, "fastapi_mcp_routes-*.tar.gz")) as archive:
        for member in archive.getmembers():
            extracted = archive.extractfile(member)
            if extracted is not None:
                files[member.name] = extracted.read()
    return files


def metadata_of(files: dict[str, bytes], suffix: str) -> Message:
    (name,) = [name for name in files if name.endswith(suffix)]
    return HeaderParser().parsestr(files[name].decode())


@pytest.mark.processes
def test_the_license_is_in_the_wheel_and_the_sdist(dist: Path) -> None:
    license_text = (ROOT / "LICENSE").read_bytes()
    assert license_text.startswith(b"MIT License")
    in_wheel = wheel_files(dist)
    (wheel_license,) = [name for name in in_wheel if name.endswith(".dist-info/licenses/LICENSE")]
    assert in_wheel[wheel_license] == license_text
    in_sdist = sdist_files(dist)
    assert in_sdist[f"fastapi_mcp_routes-{PROJECT['version']}/LICENSE"] == license_text


@pytest.mark.processes
def test_the_sdist_holds_the_package_and_its_metadata_only(dist: Path) -> None:
    # Not a part of the test suite, which would not run without the rest of it (tests/support,
    # the example apps, the conformance fixtures): the checkout is where the tests run.
    top = f"fastapi_mcp_routes-{PROJECT['version']}/"
    files = {name.removeprefix(top) for name in sdist_files(dist)}
    extra = {
        name
        for name in files
        if not name.startswith(("fastapi_mcp_routes/", "fastapi_mcp_routes.egg-info/"))
        and name not in {"LICENSE", "README.md", "pyproject.toml", "PKG-INFO", "setup.cfg", "MANIFEST.in"}
    }
    assert not extra
    assert "fastapi_mcp_routes/__init__.py" in files


@pytest.mark.processes
@pytest.mark.parametrize(("archive", "metadata"), [("wheel", ".dist-info/METADATA"), ("sdist", "/PKG-INFO")])
def test_the_metadata_names_the_version_license_and_classifiers(dist: Path, archive: str, metadata: str) -> None:
    files = wheel_files(dist) if archive == "wheel" else sdist_files(dist)
    if archive == "sdist":  # the top-level PKG-INFO, not the one in the egg-info folder
        files = {name: data for name, data in files.items() if name.count("/") == 1}
    fields = metadata_of(files, metadata)
    assert fields["Name"] == "fastapi-mcp-routes"
    assert fields["Version"] == PROJECT["version"] == "0.2.0"
    assert fields["License-Expression"] == "MIT"
    assert fields.get_all("License-File") == ["LICENSE"]
    assert fields["Author"] == "fastapi-mcp-routes contributors"
    assert fields["Requires-Python"] == ">=3.11"
    assert fields["Description-Content-Type"] == "text/markdown"
    classifiers = set(fields.get_all("Classifier") or [])
    assert classifiers == set(PROJECT["classifiers"])
    assert {
        "Framework :: FastAPI",
        "Typing :: Typed",
        "Programming Language :: Python :: 3.11",
        "Programming Language :: Python :: 3.12",
        "Programming Language :: Python :: 3.13",
        "Development Status :: 4 - Beta",
        "Intended Audience :: Developers",
    } <= classifiers
    assert "fastapi" in (fields["Keywords"] or "").split(",")


@pytest.mark.processes
def test_the_wheel_carries_its_typing_marker_and_the_explorer_page(dist: Path) -> None:
    names = set(wheel_files(dist))
    assert "fastapi_mcp_routes/py.typed" in names
    assert any(name.startswith("fastapi_mcp_routes/explorer/static/") for name in names)


@pytest.mark.processes
def test_twine_check_strict_passes_on_both(dist: Path) -> None:
    archives = sorted(str(path) for path in dist.iterdir())
    assert len(archives) == 2
    checked = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", *archives],
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_S,
        check=False,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.count("PASSED") == 2


def wheel_requirements(dist: Path) -> list[Requirement]:
    """The wheel's Requires-Dist, extras' included (each behind its `extra == ...` marker)."""
    fields = metadata_of(wheel_files(dist), ".dist-info/METADATA")
    return [Requirement(line) for line in fields.get_all("Requires-Dist") or []]


def pip(*arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pip", "--disable-pip-version-check", *arguments],
        capture_output=True,
        text=True,
        timeout=PIP_TIMEOUT_S,
        check=False,
    )


@pytest.mark.processes
def test_the_wheel_requires_pyjwt_and_neither_python_jose_nor_ecdsa(dist: Path) -> None:
    required = wheel_requirements(dist)
    always: dict[str, Requirement] = {canonicalize_name(r.name): r for r in required if r.marker is None}
    assert "pyjwt" in always
    assert "crypto" in always["pyjwt"].extras
    assert REFUSED.isdisjoint(canonicalize_name(r.name) for r in required)


@pytest.mark.processes
def test_installing_the_wheel_brings_neither_python_jose_nor_ecdsa(dist: Path) -> None:
    wheel = only(dist, "fastapi_mcp_routes-*.whl")
    resolved = pip("install", "--dry-run", "--ignore-installed", "--quiet", "--report", "-", str(wheel))
    assert resolved.returncode == 0, (
        "pip could not resolve the wheel's dependencies; is the package index reachable?\n" + resolved.stderr
    )
    installed = {canonicalize_name(item["metadata"]["name"]) for item in json.loads(resolved.stdout)["install"]}
    assert {"pyjwt", "cryptography", "fastapi-mcp-routes"} <= installed
    assert installed.isdisjoint(REFUSED)


# -- the wheel installed into a fresh virtualenv -----------------------------------------------

# Run by the fresh virtualenv's Python: every distribution it holds, with its version and what it
# requires, and the values its environment markers are evaluated against (PEP 508's names).
DISTRIBUTIONS_PROBE = """
import importlib.metadata, json, os, platform, sys

def full_version(info):
    version = f"{info.major}.{info.minor}.{info.micro}"
    return version if info.releaselevel == "final" else f"{version}{info.releaselevel[0]}{info.serial}"

print(json.dumps({
    "distributions": [
        {"name": found.metadata["Name"], "version": found.version, "requires": found.requires or []}
        for found in importlib.metadata.distributions()
    ],
    "environment": {
        "implementation_name": sys.implementation.name,
        "implementation_version": full_version(sys.implementation.version),
        "os_name": os.name,
        "platform_machine": platform.machine(),
        "platform_python_implementation": platform.python_implementation(),
        "platform_release": platform.release(),
        "platform_system": platform.system(),
        "platform_version": platform.version(),
        "python_full_version": platform.python_version(),
        "python_version": ".".join(platform.python_version_tuple()[:2]),
        "sys_platform": sys.platform,
    },
}))
"""
# Run by the fresh virtualenv's Python once the wheel is in: where the package was imported from,
# its version, each of its modules that could not be imported and the module it lacked, and the
# distributions whose modules are loaded once every other module is.
IMPORTS_PROBE = """
import importlib, importlib.metadata, json, pkgutil, sys
import fastapi_mcp_routes

unimportable = {}
for module in pkgutil.walk_packages(fastapi_mcp_routes.__path__, "fastapi_mcp_routes."):
    if not module.name.endswith(".__main__"):
        try:
            importlib.import_module(module.name)
        except ModuleNotFoundError as exc:
            unimportable[module.name] = exc.name
providers = importlib.metadata.packages_distributions()
print(json.dumps({
    "file": fastapi_mcp_routes.__file__,
    "version": fastapi_mcp_routes.__version__,
    "unimportable": unimportable,
    "loaded": sorted({name for module in list(sys.modules) for name in providers.get(module.partition(".")[0], [])}),
}))
"""
# What `python -m venv` may bring besides the interpreter (setuptools only before Python 3.12).
VENV_BRINGS = {"pip", "setuptools"}
# The modules the package imports from an extra's distributions (for one of its features), so that
# a module the base install lacks is one an extra brings: the module -> its distribution.
EXTRAS_MODULES = {
    "redis": "redis",
    "valkey": "valkey",
    "typer": "typer",
    "rich": "rich",
    "yaml": "pyyaml",
    "opentelemetry": "opentelemetry-api",
    "pytest": "pytest",  # store/testing.py: the stores' contract suite, for a store's own tests
}


@dataclasses.dataclass(frozen=True, slots=True)
class Distribution:
    version: str
    requires: tuple[Requirement, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class FreshInstall:
    """The wheel in a virtualenv of its own, nothing else installed, and what it held then."""

    python: Path  # the virtualenv's, always run with -I from `cwd`: the checkout is never on its path
    cwd: Path  # empty while the fixture reads the install: nothing of the checkout is importable from it
    brought: Mapping[str, Distribution]  # what `python -m venv` installed, by canonical name
    installed: Mapping[str, Distribution]  # once the wheel was installed
    environment: Mapping[str, str]  # its environment markers' values
    package: Path  # the installed fastapi_mcp_routes directory
    version: str  # its __version__
    unimportable: Mapping[str, str | None]  # a module of the package -> the module it lacked
    loaded: frozenset[str]  # distributions loaded once every module of the package is imported


def run_fresh(python: Path, cwd: Path, *arguments: str, failure: str) -> str:
    """What `python -I arguments` printed; fails the test saying `failure` when it exits non-zero."""
    done = subprocess.run(
        [str(python), "-I", *arguments], cwd=cwd, capture_output=True, text=True, timeout=PIP_TIMEOUT_S, check=False
    )
    if done.returncode != 0:
        pytest.fail(f"{failure} (exit status {done.returncode}):\n{done.stderr[-4000:]}", pytrace=False)
    return done.stdout


def install_fresh(python: Path, cwd: Path, *requirements: str) -> None:
    run_fresh(
        python,
        cwd,
        *("-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-input", *requirements),
        failure=f"pip could not install {' '.join(requirements)} into a virtualenv; is the package index reachable?",
    )


def distributions_of(probed: Mapping[str, Any]) -> dict[str, Distribution]:
    return {
        canonicalize_name(found["name"]): Distribution(found["version"], tuple(map(Requirement, found["requires"])))
        for found in probed["distributions"]
    }


@pytest.fixture(scope="module")
def fresh(dist: Path, tmp_path_factory: pytest.TempPathFactory) -> FreshInstall:
    # Everything is read right after the install, so that what a test installs later (a server)
    # changes nothing another test checks, whichever runs first.
    venv = tmp_path_factory.mktemp("fresh") / "venv"
    cwd = tmp_path_factory.mktemp("fresh-cwd")
    created = subprocess.run(
        [sys.executable, "-m", "venv", str(venv)], capture_output=True, text=True, timeout=PIP_TIMEOUT_S, check=False
    )
    assert created.returncode == 0, created.stdout + created.stderr
    python = venv / "bin" / "python"
    before = json.loads(run_fresh(python, cwd, "-c", DISTRIBUTIONS_PROBE, failure="listing a new virtualenv failed"))
    install_fresh(python, cwd, str(only(dist, "fastapi_mcp_routes-*.whl")))
    after = json.loads(run_fresh(python, cwd, "-c", DISTRIBUTIONS_PROBE, failure="listing the install failed"))
    imported = json.loads(run_fresh(python, cwd, "-c", IMPORTS_PROBE, failure="importing the installed package failed"))
    return FreshInstall(
        python=python,
        cwd=cwd,
        brought=distributions_of(before),
        installed=distributions_of(after),
        environment=after["environment"],
        package=Path(imported["file"]).parent,
        version=imported["version"],
        unimportable=imported["unimportable"],
        loaded=frozenset(canonicalize_name(name) for name in imported["loaded"]),
    )


def required_by(found: Distribution, extras: Iterable[str], environment: Mapping[str, str]) -> list[Requirement]:
    """What `found` requires where it is installed, with `extras` of it asked for."""
    asked = ["", *extras]  # "": what it requires without any extra
    return [
        requirement
        for requirement in found.requires
        if requirement.marker is None
        or any(requirement.marker.evaluate({**environment, "extra": extra}) for extra in asked)
    ]


def closure(fresh: FreshInstall, root: str) -> tuple[set[str], list[str]]:
    """The distributions `root` requires, their requirements in turn, and so on (each with the
    extras asked of it), as installed; and what of that is missing or at a version not allowed."""
    reached: set[str] = set()
    asked: set[tuple[str, str]] = set()
    problems: list[str] = []
    pending = [(root, "")]
    while pending:
        name, extra = pending.pop()
        if (name, extra) in asked:
            continue
        asked.add((name, extra))
        reached.add(name)
        for requirement in required_by(fresh.installed[name], [extra] if extra else [], fresh.environment):
            needed = canonicalize_name(requirement.name)
            found = fresh.installed.get(needed)
            if found is None:
                problems.append(f"{name} requires {requirement}, which is not installed")
            elif not requirement.specifier.contains(found.version, prereleases=True):
                problems.append(f"{name} requires {requirement}, but {needed} {found.version} is installed")
            else:
                pending += [(needed, ""), *((needed, canonicalize_name(extra)) for extra in requirement.extras)]
    return reached, problems


@pytest.mark.processes
def test_the_fresh_install_imports_the_wheel_with_its_version(dist: Path, fresh: FreshInstall) -> None:
    assert fresh.package.is_relative_to(fresh.python.parent.parent), fresh.package
    assert fresh.package.name == "fastapi_mcp_routes"
    assert fresh.version == PROJECT["version"] == fresh.installed["fastapi-mcp-routes"].version
    assert list(fresh.installed["fastapi-mcp-routes"].requires) == wheel_requirements(dist)


@pytest.mark.processes
def test_the_fresh_install_holds_exactly_what_the_wheel_requires(fresh: FreshInstall) -> None:
    assert set(fresh.brought) <= VENV_BRINGS
    required, problems = closure(fresh, "fastapi-mcp-routes")
    assert problems == []
    assert {"fastapi", "starlette", "pydantic", "pyjwt", "cryptography", "limits"} <= required
    unrequired = set(fresh.installed) - required - set(fresh.brought)
    assert unrequired == set(), f"installed, yet nothing the wheel requires asks for them: {sorted(unrequired)}"
    leaked = set(fresh.installed) & {"uvicorn", "redis", "valkey", "typer", "rich", "pyyaml"}
    assert leaked == set(), "a server or an extra's distribution came with the base install"


@pytest.mark.processes
def test_the_wheel_always_requires_nothing_an_extra_is_for(dist: Path, fresh: FreshInstall) -> None:
    # Only the package's own requirements: a dependency of a dependency may be one an extra names
    # too (FastAPI 0.165 requires opentelemetry-api, which the `otel` extra asks for in its own
    # right, the package's telemetry importing it).
    required = wheel_requirements(dist)
    always = {canonicalize_name(requirement.name) for requirement in required if requirement.marker is None}
    extras = metadata_of(wheel_files(dist), ".dist-info/METADATA").get_all("Provides-Extra") or []
    assert {"redis", "valkey", "cli", "skills", "otel", "bench", "test"} <= set(extras)
    for extra in extras:
        wanted = {
            canonicalize_name(requirement.name)
            for requirement in required
            if requirement.marker is not None and requirement.marker.evaluate({**fresh.environment, "extra": extra})
        }
        assert wanted, extra
        assert wanted.isdisjoint(always), f"the extra {extra!r} asks for {sorted(wanted & always)}, always required"


@pytest.mark.processes
def test_each_runtime_dependency_is_one_the_package_imports(dist: Path, fresh: FreshInstall) -> None:
    # "Exactly what the package imports, nothing more" (pyproject.toml): each dependency the wheel
    # always requires is loaded once every module of the package is; and each module the base
    # install cannot import lacks only a module an extra brings.
    always = {
        canonicalize_name(requirement.name) for requirement in wheel_requirements(dist) if requirement.marker is None
    }
    assert always - fresh.loaded == set(), "required, yet loaded by no module of the package"
    in_extras = {
        canonicalize_name(requirement.name)
        for requirement in wheel_requirements(dist)
        if requirement.marker is not None
    }
    lacking = {module: (missing or "").partition(".")[0] for module, missing in fresh.unimportable.items()}
    assert {
        module: missing for module, missing in lacking.items() if EXTRAS_MODULES.get(missing) not in in_extras
    } == {}
    assert "fastapi_mcp_routes.store.redis" in lacking  # RedisStore needs its extra, and said so


@pytest.mark.processes
def test_the_fresh_install_has_every_file_of_the_package_besides_its_modules(fresh: FreshInstall) -> None:
    # From the checkout's package, not from pyproject's package-data: a pattern dropped there
    # leaves its files out of the wheel, and this fails.
    source = ROOT / "fastapi_mcp_routes"
    data = sorted(
        path.relative_to(source)
        for path in source.rglob("*")
        if path.is_file() and path.suffix not in {".py", ".pyc"} and "__pycache__" not in path.parts
    )
    assert {
        "py.typed",
        "explorer/static/explorer.html",
        "explorer/static/explorer.js",
        "explorer/static/explorer.css",
    } <= {path.as_posix() for path in data}
    assert any(path.match("store/redis/lua/*.lua") for path in data)
    absent = [path.as_posix() for path in data if not (fresh.package / path).is_file()]
    assert absent == [], f"missing from the installed package in {fresh.package}"
    assert [
        path.as_posix() for path in data if (fresh.package / path).read_bytes() != (source / path).read_bytes()
    ] == []


@pytest.mark.processes
def test_the_fresh_install_serves_the_example_app_over_mcp(dist: Path, fresh: FreshInstall) -> None:
    # The example needs a server and, for the skill it serves, the `skills` extra; nothing else.
    install_fresh(fresh.python, fresh.cwd, "uvicorn", f"{only(dist, 'fastapi_mcp_routes-*.whl')}[skills]")
    shutil.copytree(ROOT / "example_app", fresh.cwd / "example_app", ignore=shutil.ignore_patterns("__pycache__"))
    with serve_process_group("example_app.main:app", python=(str(fresh.python), "-I"), cwd=fresh.cwd) as (url, _):
        names, note = anyio.run(listed_and_called, url)
        with httpx.Client(base_url=url, timeout=WAIT_S) as http:
            rest_note = http.get("/notes/1")
            page = http.get("/mcp/explorer")
            script = http.get("/mcp/explorer", params={"file": "explorer.js"})
    with serve(checkout_example) as checkout_url:
        checkout_names, _ = anyio.run(listed_and_called, checkout_url)
    assert "get_note" in names
    assert names == checkout_names
    assert note == rest_note.json()
    assert note["title"] == "Welcome"
    static = fresh.package / "explorer" / "static"
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    template = (static / "explorer.html").read_text()
    assert page.text == template.replace("{{docs}}", "/docs").replace("{{openapi}}", "/openapi.json")
    assert script.status_code == 200
    assert script.content == (static / "explorer.js").read_bytes()


async def listed_and_called(url: str) -> tuple[list[str], dict[str, Any]]:
    """The tools an anonymous client lists, and what get_note answers for the first note."""
    with anyio.fail_after(WAIT_S):
        async with mcp_client(url) as client:
            assert client.server_info is not None  # initialized
            tools = (await client.list_tools()).tools
            called = await client.call_tool("get_note", {"note_id": 1})
    assert not called.is_error, called
    assert called.structured_content is not None
    return sorted(tool.name for tool in tools), called.structured_content
