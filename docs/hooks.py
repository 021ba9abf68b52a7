"""MkDocs hooks: CONTRIBUTING.md and CHANGELOG.md, kept at the repository's root, served as pages.

Links in them (and in docs/architecture.md) are written for readers of the repository; here they
are pointed at the site's own pages.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parent.parent
FROM_ROOT = {"contributing.md": "CONTRIBUTING.md", "changelog.md": "CHANGELOG.md"}
# A repository link -> the site page it becomes.
REPOSITORY_LINKS = {
    "../CONTRIBUTING.md": "contributing.md",
    "../CHANGELOG.md": "changelog.md",
    "CHANGELOG.md": "changelog.md",
    "docs/architecture.md": "architecture.md",
}
LINK = re.compile(r"\]\(([^)#\s]+)(#[^)\s]*)?\)")


def on_files(files: Files, config: Any) -> Files:
    for page, source in FROM_ROOT.items():
        files.append(File.generated(config, page, content=(ROOT / source).read_text(encoding="utf-8")))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    def point(match: re.Match[str]) -> str:
        target = REPOSITORY_LINKS.get(match.group(1))
        return match.group(0) if target is None else f"]({target}{match.group(2) or ''})"

    return LINK.sub(point, markdown)
