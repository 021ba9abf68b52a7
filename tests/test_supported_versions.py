"""The supported versions, said the same way in each place: every floor pyproject.toml declares
for the library and its `redis` and `valkey` extras is pinned, exactly, in tests/oldest.txt (what
`make oldest` installs and tests), and docs/support.md names each of those versions."""

from __future__ import annotations

import tomllib
from typing import Final

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from tests.support.machine import ROOT

PROJECT: Final = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
OLDEST: Final = ROOT / "tests" / "oldest.txt"
SUPPORT_PAGE: Final = ROOT / "docs" / "support.md"
# The extras whose packages the library imports (the rest serve tools around it).
LIBRARY_EXTRAS: Final = ("redis", "valkey")


def declared_floors() -> dict[str, Version]:
    """Each package the library or its store extras require, with the lowest version declared."""
    extras = PROJECT["optional-dependencies"]
    lines = [*PROJECT["dependencies"], *(line for extra in LIBRARY_EXTRAS for line in extras[extra])]
    floors: dict[str, Version] = {}
    for line in lines:
        requirement = Requirement(line)
        lowest = [Version(spec.version) for spec in requirement.specifier if spec.operator == ">="]
        assert lowest, f"{line!r} in pyproject.toml declares no floor"
        floors[canonicalize_name(requirement.name)] = lowest[0]
    return floors


def oldest_pins() -> dict[str, Version]:
    """The packages tests/oldest.txt pins to one version (`==`), with that version."""
    pins: dict[str, Version] = {}
    for line in OLDEST.read_text().splitlines():
        text = line.partition("#")[0].strip()
        if not text:
            continue
        requirement = Requirement(text)
        exact = [Version(spec.version) for spec in requirement.specifier if spec.operator == "=="]
        if exact:
            pins[canonicalize_name(requirement.name)] = exact[0]
    return pins


def test_the_oldest_versions_tested_are_exactly_the_declared_floors() -> None:
    assert oldest_pins() == declared_floors()


def test_the_support_page_names_each_oldest_version_beside_its_package() -> None:
    rows = [line.lower() for line in SUPPORT_PAGE.read_text().splitlines() if line.startswith("|")]
    unnamed = [
        f"{name} {version}"
        for name, version in oldest_pins().items()
        if not any(name in row.replace("_", "-") and f"`{version}`" in row for row in rows)
    ]
    assert not unnamed, f"docs/support.md's tables do not name these oldest versions: {unnamed}"
