"""The built wheel: what it requires, and what installing it would bring along. No python-jose and
no ecdsa (whose timing attack is never to be fixed), PyJWT with its crypto backend instead.

Resolving an install asks the package index; where the index cannot be reached the test fails
and says so, since a skipped check would let the dependency back in unseen.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

pytestmark = pytest.mark.processes

ROOT = Path(__file__).resolve().parent.parent
REFUSED = {"python-jose", "ecdsa"}
PIP_TIMEOUT_S = 600


def pip(*arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pip", "--disable-pip-version-check", *arguments],
        capture_output=True,
        text=True,
        timeout=PIP_TIMEOUT_S,
        check=False,
    )


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # Built from a copy, so no build directory left by an earlier build slips old modules in.
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(
        ROOT / "fastapi_mcp_routes", source / "fastapi_mcp_routes", ignore=shutil.ignore_patterns("__pycache__")
    )
    out = tmp_path_factory.mktemp("wheel")
    built = pip("wheel", "--no-deps", "--wheel-dir", str(out), str(source))
    assert built.returncode == 0, (
        f"the wheel did not build; is the package index (where setuptools comes from) reachable?\n{built.stderr}"
    )
    (wheel,) = out.glob("fastapi_mcp_routes-*.whl")
    return wheel


def test_the_wheel_requires_pyjwt_and_neither_python_jose_nor_ecdsa(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        (metadata,) = [name for name in archive.namelist() if name.endswith(".dist-info/METADATA")]
        lines = archive.read(metadata).decode().splitlines()
    required = [
        Requirement(line.removeprefix("Requires-Dist:").strip()) for line in lines if line.startswith("Requires-Dist:")
    ]
    always = {canonicalize_name(r.name): r for r in required if r.marker is None}
    assert "pyjwt" in always
    assert "crypto" in always["pyjwt"].extras
    assert REFUSED.isdisjoint(canonicalize_name(r.name) for r in required)


def test_installing_the_wheel_brings_neither_python_jose_nor_ecdsa(wheel: Path) -> None:
    resolved = pip("install", "--dry-run", "--ignore-installed", "--quiet", "--report", "-", str(wheel))
    assert resolved.returncode == 0, (
        "pip could not resolve the wheel's dependencies; is the package index reachable?\n" + resolved.stderr
    )
    installed = {canonicalize_name(item["metadata"]["name"]) for item in json.loads(resolved.stdout)["install"]}
    assert {"pyjwt", "cryptography", "fastapi-mcp-routes"} <= installed
    assert installed.isdisjoint(REFUSED)
