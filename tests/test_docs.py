"""The documentation cannot rot: the site builds strictly, and every Python block in it runs.

Each ```python block of the site's pages (docs/), of README.md, CONTRIBUTING.md and CHANGELOG.md
is one of three kinds, told by an HTML comment on the line before it (invisible once rendered):

- no comment: a whole module, as a reader would save it. It is type-checked against the package
  (`mypy --strict`, one run for all), then run in a process of its own from the repository's root (so it
  can import `example_app`); the `test_*` functions it defines are called, as pytest would.
- `<!-- typecheck-only: why -->`: type-checked, not run (it talks to a server, say).
- `<!-- fragment: why -->`: a piece of a larger program (it uses an `app` the page has not
  defined, say). It must still parse as Python.

A block that fails says which page and line it came from; one that cannot stand alone must say so
with a comment, never silently.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.machine import ROOT

PAGES = sorted((ROOT / "docs").rglob("*.md")) + [
    ROOT / name for name in ("README.md", "CONTRIBUTING.md", "CHANGELOG.md")
]
FENCE = re.compile(r"^```python\n(.*?)^```$", re.M | re.S)
MARK = re.compile(r"<!-- (fragment|typecheck-only): (.+?) -->\s*\Z")
RUN_TIMEOUT_S = 120
# Runs a block as its own module, then each test it defines, as pytest would collect them.
RUNNER = """
import runpy, sys
namespace = runpy.run_path(sys.argv[1], run_name="__docs_block__")
for name, value in list(namespace.items()):
    if name.startswith("test_") and callable(value):
        value()
"""


@dataclass(frozen=True)
class Block:
    page: str
    line: int
    code: str
    kind: str  # "run", "typecheck-only" or "fragment"

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"

    @property
    def module(self) -> str:
        return re.sub(r"\W", "_", f"docs_{self.page.removesuffix('.md')}_{self.line}")


def blocks_in(page: str, text: str) -> list[Block]:
    """The Python blocks of one page's Markdown, each with the kind its marker gives it."""
    found = []
    for match in FENCE.finditer(text):
        before = text[: match.start()]
        mark = MARK.search(before)
        kind = mark.group(1) if mark else "run"
        found.append(Block(page, before.count("\n") + 2, match.group(1), kind))
    return found


BLOCKS = [
    block for path in PAGES for block in blocks_in(path.relative_to(ROOT).as_posix(), path.read_text(encoding="utf-8"))
]
CHECKED = [block for block in BLOCKS if block.kind != "fragment"]
RUN = [block for block in BLOCKS if block.kind == "run"]


def test_the_pages_hold_python_blocks_of_each_kind() -> None:
    # A pattern that stopped matching would leave nothing to check and pass.
    assert {block.kind for block in BLOCKS} == {"run", "typecheck-only", "fragment"}
    assert len(RUN) >= 5


@pytest.mark.parametrize("block", BLOCKS, ids=[block.id for block in BLOCKS])
def test_every_block_parses(block: Block) -> None:
    try:
        ast.parse(block.code, filename=block.id)
    except SyntaxError as error:
        pytest.fail(f"{block.id}: not Python: {error}")


@pytest.mark.processes
def test_the_blocks_type_check_against_the_package(tmp_path: Path) -> None:
    for block in CHECKED:
        (tmp_path / f"{block.module}.py").write_text(block.code, encoding="utf-8")
    # As strictly as the package itself: a reader's copy of an example should check clean too.
    config = tmp_path / "mypy.ini"
    config.write_text("[mypy]\nstrict = True\n", encoding="utf-8")
    checked = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--no-incremental",
            "--check-untyped-defs",
            "--no-error-summary",
            "--config-file",
            str(config),
            "--python-executable",
            sys.executable,
            *sorted(str(path) for path in tmp_path.glob("docs_*.py")),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    where = {f"{block.module}.py": block for block in CHECKED}

    def located(line: str) -> str:
        name, _, rest = line.partition(":")
        block = where.get(Path(name).name)
        if block is None:
            return line
        number, _, message = rest.partition(":")
        return f"{block.page}:{block.line + int(number) - 1}:{message}" if number.isdigit() else line

    errors = [located(line) for line in checked.stdout.splitlines() if line.strip()]
    assert not errors, "\n".join(errors)
    assert checked.returncode == 0, checked.stderr


@pytest.mark.processes
@pytest.mark.parametrize("block", RUN, ids=[block.id for block in RUN])
def test_a_block_runs_as_written(block: Block, tmp_path: Path) -> None:
    module = tmp_path / f"{block.module}.py"
    module.write_text(block.code, encoding="utf-8")
    ran = subprocess.run(
        [sys.executable, "-c", RUNNER, str(module)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )
    assert ran.returncode == 0, f"{block.id} failed:\n{ran.stdout[-3000:]}\n{ran.stderr[-3000:]}"


# -- the README, which the package index renders outside the repository --------------------------

README = (ROOT / "README.md").read_text(encoding="utf-8")
SITE_URL = re.search(r"^site_url: (\S+)$", (ROOT / "mkdocs.yml").read_text(encoding="utf-8"), re.M)
LINK = re.compile(r"\]\(([^)\s]+)\)")
# Pages the site makes of files outside docs/ (docs/hooks.py).
GENERATED = {"contributing", "changelog"}


def readme_links(markdown: str) -> list[str]:
    """Every address the README's rendered page links to or loads a picture from."""
    return LINK.findall(markdown)


def test_the_readme_is_a_short_page() -> None:
    assert len(README.splitlines()) < 250


def test_the_readmes_links_are_absolute_and_each_reaches_a_page_of_the_site() -> None:
    # A relative link or image breaks on the package index's page; one into the site must name a
    # page or a file the site is built from.
    assert SITE_URL is not None
    site = SITE_URL.group(1)
    links = readme_links(README)
    assert len(links) > 10
    for link in links:
        assert link.startswith("https://"), f"README.md links to {link!r}: relative links break on the package index"
        if not link.startswith(site):
            continue
        path = link.removeprefix(site).partition("#")[0].strip("/")
        if path in GENERATED:
            continue
        candidates = (
            [ROOT / "docs" / path]
            if "." in path.rsplit("/", 1)[-1]
            else [
                ROOT / "docs" / f"{path}.md" if path else ROOT / "docs" / "index.md",
                ROOT / "docs" / path / "index.md",
            ]
        )
        assert any(candidate.is_file() for candidate in candidates), (
            f"README.md links to {link}, which no page of docs/ makes"
        )
