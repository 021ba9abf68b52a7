"""The release as `make dist` builds it: an sdist and a wheel from `python -m build`, each with the
license, the version and the classifiers in its metadata, and both passing `twine check --strict`
(what the package index would refuse or render badly); what the wheel requires and what installing
it would bring along: PyJWT with its crypto backend, and never python-jose or ecdsa (whose timing
attack is never to be fixed). And `__version__`, which is the installed distribution's.

Building asks the package index for setuptools, and resolving an install asks it for the
dependencies; where it cannot be reached the test fails and says so, since a skipped check would
let a dependency back in unseen.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from email.message import Message
from email.parser import HeaderParser
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

import fastapi_mcp_routes

ROOT = Path(__file__).resolve().parent.parent
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
BUILD_TIMEOUT_S = 600
PIP_TIMEOUT_S = 600
REFUSED = {"python-jose", "ecdsa"}


def test_the_version_is_the_one_pyproject_declares() -> None:
    assert fastapi_mcp_routes.__version__ == PROJECT["version"]


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # Built from a copy of what a release ships, so nothing an earlier build left in the tree slips in.
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(
        ROOT / "fastapi_mcp_routes", source / "fastapi_mcp_routes", ignore=shutil.ignore_patterns("__pycache__")
    )
    out = tmp_path_factory.mktemp("dist")
    built = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(out), str(source)],
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_S,
        check=False,
    )
    assert built.returncode == 0, (
        f"python -m build failed; is the package index (where setuptools comes from) reachable?\n"
        f"{built.stdout[-4000:]}\n{built.stderr[-4000:]}"
    )
    return out


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
    with zipfile.ZipFile(only(dist, "fastapi_mcp_routes-*.whl")) as archive:
        (metadata,) = [name for name in archive.namelist() if name.endswith(".dist-info/METADATA")]
        lines = archive.read(metadata).decode().splitlines()
    required = [
        Requirement(line.removeprefix("Requires-Dist:").strip()) for line in lines if line.startswith("Requires-Dist:")
    ]
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
