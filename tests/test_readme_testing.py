"""The README's "Testing your tools": each of its Python blocks run as written, as a user's test
module would be, and each of its tests called."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.support.machine import ROOT

SECTION = "## Testing your tools"
BLOCK = re.compile(r"```python\n(# (test_\w+\.py)\n.*?)```", re.S)


def readme_blocks() -> list[tuple[str, str]]:
    """The section's Python blocks, by the file name each one's first line gives it."""
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index(SECTION) :]
    section = section[: section.index("\n## ", len(SECTION))]
    return [(name, code) for code, name in BLOCK.findall(section)]


BLOCKS = readme_blocks()


def test_the_section_shows_both_ways() -> None:
    assert [name for name, _ in BLOCKS] == ["test_tools_testclient.py", "test_tools_sdk.py"]


@pytest.mark.parametrize(("name", "code"), BLOCKS, ids=[name for name, _ in BLOCKS])
def test_a_readme_block_runs_and_its_tests_pass(name: str, code: str) -> None:
    namespace: dict[str, Any] = {"__name__": name.removesuffix(".py")}
    exec(compile(code, name, "exec"), namespace)  # the README's own code
    tests = [value for key, value in namespace.items() if key.startswith("test_") and callable(value)]
    assert tests
    for test in tests:
        test()
