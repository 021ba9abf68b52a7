"""A directory of skills, read once: each skill's front matter, its files with their digests,
and its folders, looked up by URI.

Requests never name a path on disk: a URI is looked up among the files found when the
directory was read, so `..`, an absolute path or an encoded one names nothing served. Symbolic
links are refused when reading, so nothing outside the directory is ever read. Each skill is
held to the extension's limits (512 files, 16 MiB) and to 512 folders nested 32 deep at most,
and the directory to `Skills`' own.
"""

from __future__ import annotations

import base64
import hashlib
import json
import mimetypes
import os
import re
import stat
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final
from urllib.parse import quote

from fastapi_mcp_routes.options import SKILL_MAX_BYTES, SKILL_MAX_FILES, Skills

SCHEME: Final = "skill://"
MANIFEST: Final = "SKILL.md"
DIRECTORY_TYPE: Final = "inode/directory"
# The Agent Skills naming rules: 1 to 64 lowercase letters, digits and single inner hyphens.
_NAME: Final = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")
_MAX_NAME: Final = 64
# How deep a SKILL.md's front matter may nest (its own mapping the first level), and a
# skill's folders (its own folder not counted).
_MAX_DEPTH: Final = 32
_FRONT_MATTER: Final = re.compile(r"---\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|$)", re.DOTALL)
_TEXT_TYPES: Final = frozenset({"application/json", "application/xml", "application/javascript", "application/yaml"})
_KNOWN_TYPES: Final = {".md": "text/markdown", ".yaml": "application/yaml", ".yml": "application/yaml"}


@dataclass(frozen=True, slots=True)
class SkillFile:
    """One file of a skill, as read."""

    uri: str
    data: bytes
    mime_type: str
    # Taken once, when the file is read: hashing on each list would cost the folder's size in
    # CPU per request.
    digest: str

    @classmethod
    def of(cls, uri: str, data: bytes, mime_type: str) -> SkillFile:
        return cls(uri, data, mime_type, "sha256:" + hashlib.sha256(data).hexdigest())

    @property
    def name(self) -> str:
        return self.uri.rsplit("/", 1)[-1]

    def manifest_entry(self) -> dict[str, Any]:
        return {"uri": self.uri, "digest": self.digest, "size": len(self.data)}

    def contents(self) -> dict[str, Any]:
        """The file as `resources/read` gives it: text where it is text, else base64."""
        entry: dict[str, Any] = {"uri": self.uri, "mimeType": self.mime_type}
        if self.mime_type.startswith("text/") or self.mime_type in _TEXT_TYPES:
            try:
                entry["text"] = self.data.decode("utf-8")
                return entry
            except UnicodeDecodeError:
                pass
        entry["blob"] = base64.b64encode(self.data).decode("ascii")
        return entry


@dataclass(frozen=True, slots=True)
class Skill:
    """One skill: its front matter and every file, `SKILL.md` first."""

    name: str
    uri: str  # its SKILL.md
    front_matter: Mapping[str, Any]
    files: tuple[SkillFile, ...]

    def entry(self) -> dict[str, Any]:
        """The skill as `skills/list` and `skills/get` give it."""
        return {
            "uri": self.uri,
            "frontmatter": dict(self.front_matter),
            "resources": [file.manifest_entry() for file in self.files],
        }

    def resource(self) -> dict[str, Any]:
        """Its SKILL.md as a resource is described: named and described by its front matter."""
        return {
            "uri": self.uri,
            "name": self.name,
            "description": self.front_matter["description"],
            "mimeType": "text/markdown",
        }


@dataclass(frozen=True, slots=True)
class SkillCatalog:
    """Every skill of a directory, in name order, and its files and folders by URI."""

    skills: tuple[Skill, ...]
    files: Mapping[str, SkillFile]
    folders: Mapping[str, tuple[dict[str, Any], ...]]  # a folder's URI: its direct children
    by_uri: Mapping[str, Skill]

    @classmethod
    def read(cls, options: Skills) -> SkillCatalog:
        """Read the directory `options` names; `ValueError` naming the file and the rule it
        breaks, so a wrong skill stops the app at startup."""
        root = Path(options.directory)
        if not root.is_dir():
            raise ValueError(f"Skills.directory {str(root)!r} is not a directory")
        skills: list[Skill] = []
        folders: dict[str, tuple[dict[str, Any], ...]] = {}
        total = 0
        for entry in sorted(os.scandir(root), key=lambda entry: entry.name):
            _refuse_links(entry.path)
            if not entry.is_dir(follow_symlinks=False):
                continue  # a README beside the skills is no skill
            if len(skills) == options.max_skills:
                raise ValueError(f"{str(root)!r} holds more than {options.max_skills} skills (Skills.max_skills)")
            skill, skill_folders = _read_skill(Path(entry.path))
            total += sum(len(file.data) for file in skill.files)
            if total > options.max_total_bytes:
                raise ValueError(
                    f"the skills in {str(root)!r} are more than {options.max_total_bytes} bytes together "
                    "(Skills.max_total_bytes)"
                )
            skills.append(skill)
            folders.update(skill_folders)
        files = {file.uri: file for skill in skills for file in skill.files}
        return cls(tuple(skills), files, folders, {skill.uri: skill for skill in skills})


def _read_skill(folder: Path) -> tuple[Skill, dict[str, tuple[dict[str, Any], ...]]]:
    name = folder.name
    if len(name) > _MAX_NAME or not _NAME.fullmatch(name):
        raise ValueError(
            f"skill folder {str(folder)!r}: a skill's name is 1 to {_MAX_NAME} lowercase letters, digits "
            "and single hyphens between them"
        )
    root_uri = SCHEME + name
    files: list[SkillFile] = []
    folders: dict[str, list[dict[str, Any]]] = {root_uri: []}
    total = 0
    for path, is_folder in _walk(folder):
        relative = path.relative_to(folder).as_posix()
        uri = f"{root_uri}/{quote(relative)}"
        parent = uri.rsplit("/", 1)[0]
        if is_folder:
            # A directory read lists a folder whole, and the walk goes down each one: the
            # extension bounds files only, so folders are bounded here.
            if len(folders) > SKILL_MAX_FILES:
                raise ValueError(f"skill {name!r} has more than {SKILL_MAX_FILES} folders")
            if relative.count("/") >= _MAX_DEPTH:
                raise ValueError(f"skill {name!r}: {relative!r} is nested more than {_MAX_DEPTH} deep")
            folders[uri] = []
            folders[parent].append({"uri": uri, "name": path.name, "mimeType": DIRECTORY_TYPE})
            continue
        if len(files) == SKILL_MAX_FILES:
            raise ValueError(f"skill {name!r} has more than {SKILL_MAX_FILES} files, the extension's limit")
        data = path.read_bytes()
        total += len(data)
        if total > SKILL_MAX_BYTES:
            raise ValueError(f"skill {name!r} is larger than {SKILL_MAX_BYTES} bytes, the extension's limit")
        file = SkillFile.of(uri, data, _mime_type(path.name))
        files.append(file)
        folders[parent].append({"uri": uri, "name": path.name, "mimeType": file.mime_type, "size": len(data)})
    manifest_uri = f"{root_uri}/{MANIFEST}"
    manifest = next((file for file in files if file.uri == manifest_uri), None)
    if manifest is None:
        raise ValueError(f"skill folder {str(folder)!r} has no {MANIFEST}")
    front_matter = _front_matter(manifest.data, folder / MANIFEST)
    if front_matter["name"] != name:
        raise ValueError(
            f"{str(folder / MANIFEST)!r} names the skill {front_matter['name']!r}: it must be its folder's "
            f"name, {name!r}"
        )
    ordered = (manifest, *(file for file in files if file is not manifest))
    skill = Skill(name, manifest_uri, front_matter, ordered)
    # Its SKILL.md is described by its front matter, as the extension asks of that resource.
    folders[root_uri] = [
        {**skill.resource(), "size": len(manifest.data)} if child["uri"] == manifest_uri else child
        for child in folders[root_uri]
    ]
    return skill, {uri: tuple(children) for uri, children in folders.items()}


def _walk(folder: Path) -> Iterator[tuple[Path, bool]]:
    """Every folder and file under `folder`, in name order, a folder before its contents;
    `ValueError` for a symbolic link or anything that is neither a file nor a folder."""
    for entry in sorted(os.scandir(folder), key=lambda entry: entry.name):
        _refuse_links(entry.path)
        mode = entry.stat(follow_symlinks=False).st_mode
        if stat.S_ISDIR(mode):
            yield Path(entry.path), True
            yield from _walk(Path(entry.path))
        elif stat.S_ISREG(mode):
            yield Path(entry.path), False
        else:
            raise ValueError(f"{entry.path!r} in a skill is neither a file nor a folder")


def _refuse_links(path: str) -> None:
    if os.path.islink(path):
        raise ValueError(f"{path!r} is a symbolic link: skills are served from their own files only")


def _front_matter(data: bytes, path: Path) -> dict[str, Any]:
    """The YAML front matter that begins a SKILL.md, as a JSON object."""
    # Imported when skills are served: the `skills` extra.
    try:
        import yaml  # type: ignore[import-untyped,unused-ignore]
    except ImportError:  # pragma: no cover - the extra is missing
        raise ValueError("serving skills needs PyYAML: pip install 'fastapi-mcp-routes[skills]'") from None
    text = data.decode("utf-8", errors="replace").removeprefix("\ufeff")
    found = _FRONT_MATTER.match(text)
    if found is None:
        raise ValueError(f"{str(path)!r} must begin with YAML front matter between '---' lines")
    _check_shape(yaml, found.group(1), path)
    try:
        front_matter = yaml.safe_load(found.group(1))
        json.dumps(front_matter, allow_nan=False)
    except (yaml.YAMLError, TypeError, ValueError) as exc:
        problem = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ValueError(
            f"{str(path)!r}: its front matter must be YAML that JSON can carry (quote dates): {problem}"
        ) from None
    if not isinstance(front_matter, dict):
        raise ValueError(f"{str(path)!r}: its front matter must be a mapping")
    for field in ("name", "description"):
        value = front_matter.get(field)
        if not isinstance(value, str) or not value:
            raise ValueError(f"{str(path)!r}: its front matter needs a non-empty {field!r}")
    return front_matter


def _check_shape(yaml: Any, text: str, path: Path) -> None:
    """Refuse aliases and deep nesting before the YAML is built: an alias is expanded when the
    front matter becomes JSON (nine lines of them are a billion strings), and building a deeply
    nested document overflows Python's stack. Its events are read flat, one at a time."""
    depth = 0
    try:
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(event, yaml.AliasEvent):
                raise ValueError(f"{str(path)!r}: its front matter may not use YAML aliases (*name)")
            if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                depth += 1
                if depth > _MAX_DEPTH:
                    raise ValueError(f"{str(path)!r}: its front matter is nested more than {_MAX_DEPTH} deep")
            elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                depth -= 1
    except yaml.YAMLError:
        return  # malformed: loading it says where


def _mime_type(name: str) -> str:
    known = _KNOWN_TYPES.get(os.path.splitext(name)[1].lower())
    if known is not None:
        return known
    guessed, _ = mimetypes.guess_type(name, strict=False)
    return guessed or "application/octet-stream"
