"""The documentation cannot rot: the site builds strictly, and every Python block in it runs.

Each Python block of the site's pages (docs/), of README.md, CONTRIBUTING.md and CHANGELOG.md
(```python, ```py, ~~~python3, ```{.python}, indented in a list: any fence the site highlights as
Python) is one of three kinds, told by an HTML comment right before it (invisible once rendered):

- no comment: a whole module, as a reader would save it. It is type-checked against the package
  (`mypy --strict`, one run for all), then run in a process of its own from the repository's root (so it
  can import `example_app`); the tests it defines are run as pytest would collect them
  (`test_*` functions and the `test_*` methods of its `Test*` classes, coroutines to their end).
- `<!-- typecheck-only: why -->`: type-checked, not run (it talks to a server, say).
- `<!-- fragment: why -->`: a piece of a larger program (it uses an `app` the page has not
  defined, say). It must still parse as Python.

A block that fails says which page and line it came from; one that cannot stand alone must say so
with a comment, never silently, and a comment that marks no block fails too. The site's lists
are checked to render as lists, and the README's every address to work on the package index.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from tests.support.machine import ROOT

PAGES = sorted((ROOT / "docs").rglob("*.md")) + [
    ROOT / name for name in ("README.md", "CONTRIBUTING.md", "CHANGELOG.md")
]
# A fence as the site's Markdown (pymdownx.superfences) and the package index read one: three or
# more backticks or tildes, indented as deep as a list or an admonition puts it, then a language,
# bare, dotted or as an attribute's class, then options (title="shop.py").
OPENING = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>.*)$")
LANGUAGE = re.compile(r"^\.?(?P<bare>[\w#+-]+)|^\{[^}]*?\.(?P<attribute>[\w#+-]+)")
# Every name the highlighter shows as Python: a reader copies such a block as Python.
PYTHON = frozenset({"python", "py", "python3", "py3", "pyi"})
MARK_LINE = re.compile(r"^[ \t]*<!-- (fragment|typecheck-only): .+? -->[ \t]*$")
RUN_TIMEOUT_S = 120
# Runs a block as its own module, then each test it defines, as pytest would collect them: its
# test_ functions and the test_ methods of its own Test classes, a coroutine one run to its end.
RUNNER = """
import inspect, runpy, sys
import anyio
namespace = runpy.run_path(sys.argv[1], run_name="__docs_block__")
tests = []
for name, value in list(namespace.items()):
    if name.startswith("test_") and callable(value):
        tests.append(value)
    elif name.startswith("Test") and inspect.isclass(value) and value.__module__ == "__docs_block__":
        instance = value()
        tests += [getattr(instance, attr) for attr in dir(value) if attr.startswith("test_")]
for test in tests:
    if inspect.iscoroutinefunction(test):
        anyio.run(test)
    else:
        test()
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


@dataclass(frozen=True)
class Fence:
    opening: int  # the index of its opening line
    closing: int  # the index of its closing line (the page's length when it is never closed)
    language: str
    body: str


def fences(text: str) -> list[Fence]:
    """A page's fenced blocks, outermost only: a fence shown inside another is that one's text."""
    lines = text.split("\n")
    found = []
    start = 0
    while start < len(lines):
        opening = OPENING.match(lines[start])
        if opening is None or (opening["fence"][0] == "`" and "`" in opening["info"]):
            start += 1
            continue
        indent, fence = opening["indent"], opening["fence"]
        closing = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$")
        end = next((n for n in range(start + 1, len(lines)) if closing.match(lines[n])), len(lines))
        # The body loses the fence's own indentation, as the rendered page shows it.
        body = "".join(
            (line.removeprefix(indent) if line.startswith(indent) else line.lstrip(" \t")) + "\n"
            for line in lines[start + 1 : end]
        )
        language = LANGUAGE.match(opening["info"].strip())
        name = (language["bare"] or language["attribute"]) if language else ""
        found.append(Fence(start, end, name.lower(), body))
        start = end + 1
    return found


def fenced_lines(found: list[Fence]) -> set[int]:
    """The indexes of the lines inside those fences, their own fence lines included."""
    return {n for fence in found for n in range(fence.opening, fence.closing + 1)}


def blocks_in(page: str, text: str) -> list[Block]:
    """The Python blocks of one page's Markdown, each with the kind its marker gives it."""
    lines = text.split("\n")
    found = []
    for fence in fences(text):
        if fence.language in PYTHON:
            before = next((lines[n] for n in range(fence.opening - 1, -1, -1) if lines[n].strip()), "")
            mark = MARK_LINE.match(before)
            kind = mark.group(1) if mark else "run"
            found.append(Block(page, fence.opening + 2, fence.body, kind))
    return found


def stray_marks_in(text: str) -> list[int]:
    """The lines (from 1) of the markers outside every fence that stand before no Python block."""
    lines = text.split("\n")
    all_fences = fences(text)
    fenced = fenced_lines(all_fences)
    python = {fence.opening for fence in all_fences if fence.language in PYTHON}
    stray = []
    for number, line in enumerate(lines):
        if number in fenced or not MARK_LINE.match(line):
            continue
        after = next((n for n in range(number + 1, len(lines)) if lines[n].strip()), None)
        if after not in python:
            stray.append(number + 1)
    return stray


# A list item, and one nested by fewer than four spaces (the site's Markdown nests at four).
ITEM = re.compile(r"^(?P<indent> *)(?:[-*+]|\d+\.) ")


def glued_lists_in(text: str) -> list[int]:
    """The lines (from 1) of list items the site reads as text of the paragraph before them.

    GitHub starts a list right under a paragraph line, and nests it by two spaces; the site's
    Markdown (Python-Markdown) needs a blank line first, and four spaces, else the items run on
    as the paragraph's text, with their dashes.
    """
    lines = text.split("\n")
    fenced = fenced_lines(fences(text))
    glued = []
    for number in range(1, len(lines)):
        item = ITEM.match(lines[number])
        if item is None or number in fenced or number - 1 in fenced:
            continue
        before = lines[number - 1]
        after_paragraph = before.strip() and not before.startswith((" ", "#", "|", "<")) and not ITEM.match(before)
        nested_short = 0 < len(item["indent"]) < 4 and ITEM.match(before) is not None
        if after_paragraph or nested_short:
            glued.append(number + 1)
    return glued


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
    ran = run(block, tmp_path)
    assert ran.returncode == 0, f"{block.id} failed:\n{ran.stdout[-3000:]}\n{ran.stderr[-3000:]}"


def run(block: Block, directory: Path) -> subprocess.CompletedProcess[str]:
    """Run a block as its own module, then its tests, in a process of its own."""
    module = directory / f"{block.module}.py"
    module.write_text(block.code, encoding="utf-8")
    return subprocess.run(
        [sys.executable, "-c", RUNNER, str(module)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )


FAILING_TESTS = {
    "a function": "def test_it() -> None:\n    raise AssertionError('ran')\n",
    "a coroutine function": "async def test_it() -> None:\n    raise AssertionError('ran')\n",
    "a method of a test class": "class TestIt:\n    def test_it(self) -> None:\n        raise AssertionError('ran')\n",
    "a coroutine method": "class TestIt:\n    async def test_it(self) -> None:\n        raise AssertionError('ran')\n",
}


@pytest.mark.processes
@pytest.mark.parametrize("code", FAILING_TESTS.values(), ids=FAILING_TESTS.keys())
def test_a_blocks_failing_test_fails_it_whatever_its_form(code: str, tmp_path: Path) -> None:
    # Collected as pytest would: a test left uncalled, or a coroutine never awaited, would pass.
    ran = run(Block("page.md", 3, code, "run"), tmp_path)
    assert ran.returncode != 0
    assert "AssertionError: ran" in ran.stderr, ran.stderr


# -- the README, which the package index renders outside the repository --------------------------

README = (ROOT / "README.md").read_text(encoding="utf-8")
SITE_URL = re.search(r"^site_url: (\S+)$", (ROOT / "mkdocs.yml").read_text(encoding="utf-8"), re.M)
# Pages the site makes of files outside docs/ (docs/hooks.py).
GENERATED = {"contributing", "changelog"}


class _Addresses(HTMLParser):
    """The addresses an HTML page links to or loads from, in its order."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if value is not None and name in ("href", "src"):
                self.found.append(value)
            elif value is not None and name == "srcset":
                self.found.extend(part.split()[0] for part in value.split(",") if part.strip())


def readme_links(markdown: str) -> list[str]:
    """Every address the README's rendered page links to or loads a picture from."""
    # Rendered as CommonMark, as the package index renders it (markdown-it-py comes with Rich), so
    # a link in any of Markdown's forms is found (with a title, reference-style, in raw HTML) and
    # none in code.
    addresses = _Addresses()
    addresses.feed(MarkdownIt("commonmark").render(markdown))
    addresses.close()
    return addresses.found


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


# -- what the finders must see, however a page spells it ---------------------------------------


@pytest.mark.parametrize(
    "opening",
    [
        "```python",
        "```py",
        "```python3",
        "```Python",
        "~~~python",
        "````python",
        "```{.python}",
        "``` { .py }",
        "```.python",
        '```python title="shop.py"',
        '```py linenums="1"',
    ],
)
def test_a_python_block_is_found_whatever_its_fence(opening: str) -> None:
    closing = opening[: len(opening) - len(opening.lstrip("`~"))]
    text = f"# A page\n\nSave it:\n\n{opening}\nimport broken(\n{closing}\n\nThe end.\n"
    assert blocks_in("page.md", text) == [Block("page.md", 6, "import broken(\n", "run")]


def test_a_python_block_indented_in_a_list_is_found_and_dedented() -> None:
    text = (
        "1. Save it:\n\n"
        "    <!-- typecheck-only: it talks to a server -->\n"
        "    ```python\n"
        "    def f() -> int:\n"
        "        return 'x'\n"
        "    ```\n"
        "2. Run it.\n"
    )
    assert blocks_in("page.md", text) == [Block("page.md", 5, "def f() -> int:\n    return 'x'\n", "typecheck-only")]


def test_a_python_block_shown_inside_another_fence_is_text_of_that_fence() -> None:
    text = "How a page marks a block:\n\n````markdown\n<!-- fragment: why -->\n```python\nx\n```\n````\n"
    assert blocks_in("page.md", text) == []


def test_a_marker_applies_to_the_block_right_after_it_only() -> None:
    text = "<!-- fragment: why -->\n\nA sentence between.\n\n```python\nx = (\n```\n"
    assert [block.kind for block in blocks_in("page.md", text)] == ["run"]


def test_a_marker_that_stands_before_no_python_block_is_stray() -> None:
    text = (
        "<!-- fragment: why -->\n\nA sentence between.\n\n```python\nx = 1\n```\n"
        "<!-- typecheck-only: why -->\n```bash\nls\n```\n"
        "<!-- fragment: why -->\n\n```py\nx\n```\n"
        "````markdown\n<!-- fragment: shown, not meant -->\n````\n"
    )
    assert stray_marks_in(text) == [1, 8]


def test_every_marker_stands_right_before_a_python_block() -> None:
    stray = [
        f"{path.relative_to(ROOT).as_posix()}:{line}"
        for path in PAGES
        for line in stray_marks_in(path.read_text(encoding="utf-8"))
    ]
    assert not stray, f"these markers mark no Python block (a sentence or another fence between?): {stray}"


def test_a_list_glued_to_its_paragraph_or_nested_by_two_spaces_is_found() -> None:
    text = (
        "Some things:\n- one\n- two\n\nOthers:\n\n- three\n  - three a\n    - three a i\n"
        "- four\n    - four a\n  continued\n"
    )
    assert glued_lists_in(text) == [2, 8]


def test_every_list_of_the_site_renders_as_a_list() -> None:
    glued = [
        f"{path.relative_to(ROOT).as_posix()}:{line}"
        for path in PAGES
        if path.name != "README.md"  # the package index's Markdown is GitHub's
        for line in glued_lists_in(path.read_text(encoding="utf-8"))
    ]
    assert not glued, f"these items run on as text on the site (a blank line before, four spaces to nest): {glued}"


@pytest.mark.parametrize(
    "markdown",
    [
        '[the guide](docs/guide.md "The guide")',
        "[the guide](<docs/guide.md>)",
        "[the guide][guide]\n\n[guide]: docs/guide.md",
        '[the guide][]\n\n[the guide]: docs/guide.md "The guide"',
        '![a picture](docs/guide.md "A picture")',
        '<img src="docs/guide.md" alt="a picture">',
        '<p align="center"><img alt="a picture" src="docs/guide.md" width="600"></p>',
        '<a href="docs/guide.md">the guide</a>',
        '<picture><source srcset="docs/guide.md 2x"><img src="https://x.example/a.png"></picture>',
    ],
)
def test_a_readme_link_is_found_whatever_its_form(markdown: str) -> None:
    assert "docs/guide.md" in readme_links(f"# Title\n\nRead this first: {markdown}\n")


def test_a_readme_link_in_code_is_no_link() -> None:
    assert readme_links("Write `[x](docs/a.md)` and\n\n```\n[y](docs/b.md)\n```\n") == []


# -- the API reference ------------------------------------------------------------------------------


def test_every_public_name_has_an_entry_in_the_api_reference() -> None:
    import fastapi_mcp_routes

    entries = set()
    for page in (ROOT / "docs" / "reference").glob("*.md"):
        entries |= {name.rsplit(".", 1)[-1] for name in re.findall(r"^::: (\S+)$", page.read_text(), re.M)}
    missing = sorted(set(fastapi_mcp_routes.__all__) - entries)
    assert not missing, f"public names without an entry in docs/reference/: {missing}"
