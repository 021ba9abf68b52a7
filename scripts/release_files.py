"""Refuse a release holding a file git does not track. `make dist` builds from the working tree,
where a file left in the package directory (a key beside the explorer's page, a scratch module,
a Lua script being tried) matches the package's patterns and would ship in the sdist and the
wheel; so would whatever an old egg-info's SOURCES.txt still lists.

    python scripts/release_files.py dist
"""

from __future__ import annotations

import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Written by setuptools into the sdist, never taken from the tree.
GENERATED = {"PKG-INFO", "setup.cfg"}


def tracked() -> set[str]:
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=True)
    return set(listed.stdout.split("\0"))


def sdist_files(sdist: Path) -> list[str]:
    with tarfile.open(sdist) as archive:
        # Each name below the sdist's one top-level folder; setuptools writes the egg-info.
        names = [member.name.partition("/")[2] for member in archive.getmembers() if member.isfile()]
    return [name for name in names if name not in GENERATED and not name.partition("/")[0].endswith(".egg-info")]


def wheel_files(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        return [name for name in archive.namelist() if not name.partition("/")[0].endswith(".dist-info")]


def main(dist: Path) -> int:
    known = tracked()
    untracked = sorted(
        f"{archive.name}: {name}"
        for archive in sorted(dist.iterdir())
        for name in (sdist_files(archive) if archive.name.endswith(".tar.gz") else wheel_files(archive))
        if name not in known
    )
    if untracked:
        print(
            "the release holds files git does not track; commit them, or move them out of the package:\n  "
            + "\n  ".join(untracked),
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
