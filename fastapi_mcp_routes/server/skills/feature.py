"""The skills extension (SEP-2640, `io.modelcontextprotocol/skills`), as the dispatcher serves
it: `skills/list`, `skills/get` and `resources/directory/read` in both eras, the extension
offered in `initialize` and `server/discover`, and the resources capability its files are read
through (`resources/read` hands skill URIs to `SkillMethods.read`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fastapi_mcp_routes.server.features import BOTH_ERAS, Feature, Method
from fastapi_mcp_routes.server.skills.methods import SkillMethods
from fastapi_mcp_routes.tools.registry import ToolTable
from fastapi_mcp_routes.wire.constants import SKILLS_EXTENSION


def skills_feature(methods: SkillMethods, *, guarded: bool) -> Feature:
    """Declare the extension's methods; a guarded directory's answers are each caller's own."""
    return Feature(
        "skills",
        methods=(
            Method("skills/list", methods.list, private=guarded),
            Method("skills/get", methods.get, private=guarded),
            Method("resources/directory/read", methods.read_directory, private=guarded),
        ),
        capability=_capability,
        extensions=_extension,
        extension_eras=BOTH_ERAS,
    )


def _capability(table: ToolTable) -> Mapping[str, Any]:
    # Skill files are resources: a server declaring the extension declares resources too (the
    # resources feature, declared after this one, offers more where the app has resources).
    return {"resources": {}}


def _extension(table: ToolTable) -> Mapping[str, Any]:
    return {SKILLS_EXTENSION: {"directoryRead": True}}
