"""The release as `make dist` builds it: an sdist and a wheel from `python -m build`, each with the
license, the version and the classifiers in its metadata, and both passing `twine check --strict`
(what the package index would refuse or render badly). And `__version__`, which is the installed
distribution's.

Building asks the package index for setuptools; where it cannot be reached the test fails and
says so.
"""

from __future__ import annotations

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

import fastapi_mcp_routes

ROOT = Path(__file__).resolve().parent.parent
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
BUILD_TIMEOUT_S = 600


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
