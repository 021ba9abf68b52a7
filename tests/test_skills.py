"""Skills (SEP-2640): a folder of skills served beside the tools, in both eras: the extension
offered, `skills/list`, `skills/get`, `resources/directory/read`, and the files read through
`resources/read`; URIs that try to leave the folder; the extension's bounds; a guarded folder.
Through the official SDK client and over plain HTTP, against a real server."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import anyio
import httpx
import pytest
from fastapi import Depends, FastAPI, HTTPException, Request
from fastmcp import Client as FastMCPClient
from fastmcp.client.transports import StreamableHttpTransport
from fastmcp.skills import SkillsClientExtension
from mcp import MCPError, types

from fastapi_mcp_routes import Limits, Skills, mcp_routes
from tests.support.jsonrpc import HEADERS, SESSION_VERSION, open_session, rpc
from tests.support.sdk import mcp_client
from tests.support.servers import serve
from tests.support.stateless import STATELESS_VERSION, post_stateless, stateless_headers, stateless_request
from tests.support.waits import WAIT_S

EXAMPLE_SKILLS: Final = Path(__file__).parent.parent / "example_app" / "skills"
SKILL: Final = "skill://notes-workflow/SKILL.md"
TAGS: Final = "skill://notes-workflow/references/tags.md"
EXTENSION: Final = "io.modelcontextprotocol/skills"
KEY: Final = "skills-key"
VERSIONS: Final = {"legacy": SESSION_VERSION, "auto": STATELESS_VERSION}

pytestmark = pytest.mark.anyio


def skills_app(skills: Skills | str | os.PathLike[str], **options: Any) -> FastAPI:
    app = FastAPI()
    app.include_router(mcp_routes(app, skills=skills, **options))
    return app


def require_key(request: Request) -> None:
    if request.headers.get("x-api-key") != KEY:
        raise HTTPException(401, "the skills need an API key")


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    with serve(skills_app(EXAMPLE_SKILLS)) as url:
        yield url


@pytest.fixture(scope="module")
def guarded_url() -> Iterator[str]:
    with serve(skills_app(Skills(EXAMPLE_SKILLS, dependencies=[Depends(require_key)]))) as url:
        yield url


@pytest.fixture(params=["legacy", "auto"])
def mode(request: pytest.FixtureRequest) -> str:
    era: str = request.param
    return era


def digest(path: Path) -> str:
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


def result(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    body = response.json()
    assert "result" in body, body
    answer: dict[str, Any] = body["result"]
    return answer


def error(response: httpx.Response) -> dict[str, Any]:
    body = response.json()
    assert "error" in body, body
    failure: dict[str, Any] = body["error"]
    return failure


# -- the official SDK client, both eras -------------------------------------------------------


async def test_the_sdk_client_sees_the_extension_and_reads_a_skill_in_both_eras(base_url: str, mode: str) -> None:
    with anyio.fail_after(WAIT_S):
        async with mcp_client(base_url, mode=mode) as client:
            assert client.protocol_version == VERSIONS[mode]
            capabilities = client.server_capabilities.model_dump(by_alias=True, exclude_none=True)
            [manifest] = (await client.read_resource(SKILL)).contents
            [tags] = (await client.read_resource(TAGS)).contents
            with pytest.raises(MCPError) as unknown:
                await client.read_resource("skill://notes-workflow/missing.md")
    assert capabilities["extensions"][EXTENSION] == {"directoryRead": True}
    assert "resources" in capabilities
    assert isinstance(manifest, types.TextResourceContents)
    assert manifest.mime_type == "text/markdown"
    assert manifest.text == (EXAMPLE_SKILLS / "notes-workflow" / "SKILL.md").read_text()
    assert isinstance(tags, types.TextResourceContents)
    assert tags.text.startswith("# Tags")
    assert unknown.value.error.code in (-32002, -32602)


async def test_fastmcp_lists_reads_and_verifies_a_skill(base_url: str) -> None:
    """FastMCP's client ships the extension: it checks each file's size and digest and the
    front matter against the entry before it hands the skill over."""
    client = FastMCPClient(StreamableHttpTransport(f"{base_url}/mcp"), extensions=[SkillsClientExtension()])
    with anyio.fail_after(WAIT_S):
        async with client:
            [listed] = await client.list_skills()
            got = await client.get_skill(SKILL)
            skill = await client.read_skill(SKILL)
    assert listed.uri == got.uri == SKILL
    assert skill.name == "notes-workflow"
    assert sorted(skill.files) == ["SKILL.md", "references/tags.md"]


# -- plain HTTP: enumeration, the manifest, directories -----------------------------------------


def test_skills_list_and_get_give_the_front_matter_and_every_file_with_its_digest(base_url: str) -> None:
    folder = EXAMPLE_SKILLS / "notes-workflow"
    expected = {
        "uri": SKILL,
        "frontmatter": {
            "name": "notes-workflow",
            "description": (
                "Keep the notes service tidy - find a note, change it, tag it and delete it with the notes tools."
            ),
            "license": "MIT",
            "metadata": {"version": "1.0"},
        },
        "resources": [
            {"uri": SKILL, "digest": digest(folder / "SKILL.md"), "size": (folder / "SKILL.md").stat().st_size},
            {
                "uri": TAGS,
                "digest": digest(folder / "references" / "tags.md"),
                "size": (folder / "references" / "tags.md").stat().st_size,
            },
        ],
    }
    with httpx.Client(base_url=base_url) as http:
        listed = result(post_stateless(http, "skills/list"))
        got = result(post_stateless(http, "skills/get", {"uri": SKILL}))
        unknown = error(post_stateless(http, "skills/get", {"uri": "skill://refunds/SKILL.md"}))
        bad_cursor = error(post_stateless(http, "skills/list", {"cursor": "bm90LW91cnM="}))
        # The session era serves the same methods.
        session = open_session(http)
        in_session = http.post("/mcp", json=rpc("skills/list"), headers=session)
    assert listed["skills"] == [expected]
    assert "nextCursor" not in listed
    assert (listed["ttlMs"], listed["cacheScope"]) == (0, "public")
    assert got["skill"] == expected
    assert "nextCursor" not in got
    assert (got["ttlMs"], got["cacheScope"]) == (0, "public")
    assert unknown["code"] == -32602
    assert bad_cursor["code"] == -32602
    assert result(in_session)["skills"] == [expected]


def test_directories_list_their_direct_children_and_a_file_is_no_directory(base_url: str) -> None:
    with httpx.Client(base_url=base_url) as http:
        root = result(post_stateless(http, "resources/directory/read", {"uri": "skill://notes-workflow"}))
        references = result(
            post_stateless(http, "resources/directory/read", {"uri": "skill://notes-workflow/references"})
        )
        a_file = error(post_stateless(http, "resources/directory/read", {"uri": SKILL}))
        nothing = error(post_stateless(http, "resources/directory/read", {"uri": "skill://elsewhere"}))
        no_uri = error(post_stateless(http, "resources/directory/read", {}))
    assert [(child["uri"], child["mimeType"]) for child in root["resources"]] == [
        (SKILL, "text/markdown"),
        ("skill://notes-workflow/references", "inode/directory"),
    ]
    # SKILL.md is named and described by its front matter.
    assert (root["resources"][0]["name"], root["resources"][0]["description"]) == (
        "notes-workflow",
        "Keep the notes service tidy - find a note, change it, tag it and delete it with the notes tools.",
    )
    assert [(child["uri"], child["name"]) for child in references["resources"]] == [(TAGS, "tags.md")]
    assert a_file["code"] == nothing["code"] == no_uri["code"] == -32602


@pytest.mark.parametrize(
    "uri",
    [
        "skill://notes-workflow/../../etc/passwd",
        "skill://notes-workflow/references/../SKILL.md/../../../etc/passwd",
        "skill://notes-workflow/%2e%2e/%2e%2e/etc/passwd",
        "skill://notes-workflow/..%2f..%2fetc%2fpasswd",
        "skill:///etc/passwd",
        "/etc/passwd",
        "file:///etc/passwd",
        "skill://notes-workflow//SKILL.md",
    ],
)
def test_a_uri_that_leaves_the_folder_names_nothing(base_url: str, uri: str) -> None:
    with httpx.Client(base_url=base_url) as http:
        read = post_stateless(http, "resources/read", {"uri": uri}, headers={"mcp-name": uri})
        got = error(post_stateless(http, "skills/get", {"uri": uri}))
        folder = error(post_stateless(http, "resources/directory/read", {"uri": uri}))
        rest = http.get("/mcp/skills/" + uri.removeprefix("skill://"))
    assert read.status_code in (400, 404)
    assert error(read)["code"] in (-32002, -32602)
    assert got["code"] == folder["code"] == -32602
    assert b"root:" not in rest.content
    assert rest.status_code == 404


def test_skills_list_pages_and_every_page_is_whole_skills(tmp_path: Path) -> None:
    for name in ("alpha", "beta", "gamma"):
        write_skill(tmp_path, name, files=2)
    with serve(skills_app(tmp_path, limits=Limits(page_size=2))) as url, httpx.Client(base_url=url) as http:
        first = result(post_stateless(http, "skills/list"))
        second = result(post_stateless(http, "skills/list", {"cursor": first["nextCursor"]}))
        past_the_end = base64.urlsafe_b64encode(b"skills:7").decode()
        refused = [
            error(post_stateless(http, "skills/list", {"cursor": cursor}))
            for cursor in (first["nextCursor"] + "x", past_the_end, "skills:1", 2)
        ]
    assert [skill["frontmatter"]["name"] for skill in first["skills"]] == ["alpha", "beta"]
    assert [skill["frontmatter"]["name"] for skill in second["skills"]] == ["gamma"]
    assert "nextCursor" not in second
    assert all(len(skill["resources"]) == 3 for skill in (*first["skills"], *second["skills"]))
    assert [failure["code"] for failure in refused] == [-32602] * 4


# -- the folder, checked when the endpoint is built ----------------------------------------------


def write_skill(folder: Path, name: str, files: int = 0, front_name: str | None = None) -> Path:
    skill = folder / name
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(f"---\nname: {front_name or name}\ndescription: A test skill.\n---\nBody.\n")
    for index in range(files):
        (skill / f"file-{index}.txt").write_text(str(index))
    return skill


def test_a_symbolic_link_in_a_skill_is_refused(tmp_path: Path) -> None:
    skill = write_skill(tmp_path, "linked")
    (skill / "passwd").symlink_to("/etc/passwd")
    with pytest.raises(ValueError, match="symbolic link"):
        skills_app(tmp_path)


def test_a_linked_skill_folder_is_refused(tmp_path: Path) -> None:
    outside = write_skill(tmp_path / "outside", "elsewhere")
    (tmp_path / "skills").mkdir()
    (tmp_path / "skills" / "elsewhere").symlink_to(outside)
    with pytest.raises(ValueError, match="symbolic link"):
        skills_app(tmp_path / "skills")


def test_a_skill_of_more_than_512_files_is_refused(tmp_path: Path) -> None:
    write_skill(tmp_path, "many", files=511)  # with SKILL.md: the limit exactly
    assert skills_app(tmp_path) is not None
    (tmp_path / "many" / "one-more.txt").write_text("513")
    with pytest.raises(ValueError, match="more than 512 files"):
        skills_app(tmp_path)


def test_a_skill_of_more_than_16_mib_is_refused(tmp_path: Path) -> None:
    skill = write_skill(tmp_path, "large")
    (skill / "big.bin").write_bytes(b"\0" * (16 * 1024 * 1024))
    with pytest.raises(ValueError, match="larger than 16777216 bytes"):
        skills_app(Skills(tmp_path, max_total_bytes=64 * 1024 * 1024))


def test_the_folder_is_bounded_in_skills_and_bytes(tmp_path: Path) -> None:
    write_skill(tmp_path, "first", files=3)
    write_skill(tmp_path, "second")
    with pytest.raises(ValueError, match=r"more than 1 skills \(Skills.max_skills\)"):
        skills_app(Skills(tmp_path, max_skills=1))
    with pytest.raises(ValueError, match=r"Skills.max_total_bytes"):
        skills_app(Skills(tmp_path, max_total_bytes=64))


def test_a_skill_named_otherwise_than_its_folder_is_refused(tmp_path: Path) -> None:
    write_skill(tmp_path, "refunds", front_name="chargebacks")
    with pytest.raises(ValueError, match="must be its folder's name"):
        skills_app(tmp_path)


@pytest.mark.parametrize("name", ["Refunds", "-refunds", "re--funds", "a" * 65])
def test_a_skill_name_breaking_the_naming_rules_is_refused(tmp_path: Path, name: str) -> None:
    write_skill(tmp_path, name)
    with pytest.raises(ValueError, match="lowercase letters"):
        skills_app(tmp_path)


def test_front_matter_json_cannot_carry_is_refused(tmp_path: Path) -> None:
    skill = tmp_path / "dated"
    skill.mkdir()
    (skill / "SKILL.md").write_text("---\nname: dated\ndescription: x\nreleased: 2026-09-13\n---\n")
    with pytest.raises(ValueError, match="quote dates"):
        skills_app(tmp_path)


# -- a guarded folder ---------------------------------------------------------------------------


def test_a_guarded_folder_answers_only_callers_its_dependencies_let_in(guarded_url: str) -> None:
    key = {"x-api-key": KEY}
    with httpx.Client(base_url=guarded_url) as http:
        hidden = result(post_stateless(http, "skills/list"))
        refused_get = error(post_stateless(http, "skills/get", {"uri": SKILL}))
        refused_read = error(post_stateless(http, "resources/read", {"uri": SKILL}, headers={"mcp-name": SKILL}))
        refused_folder = error(post_stateless(http, "resources/directory/read", {"uri": "skill://notes-workflow"}))
        refused_rest = http.get("/mcp/skills/notes-workflow/SKILL.md")
        listed = result(post_stateless(http, "skills/list", headers=key))
        read = result(post_stateless(http, "resources/read", {"uri": SKILL}, headers={"mcp-name": SKILL, **key}))
        rest = http.get("/mcp/skills/notes-workflow/SKILL.md", headers=key)
    assert hidden["skills"] == []
    for refused in (refused_get, refused_read, refused_folder):
        assert refused["code"] == -32602
        assert refused["data"] == {"status": 401}
        assert "the skills need an API key" in refused["message"]
    assert refused_rest.status_code == 401
    # What depends on who asks is no one else's to cache.
    assert listed["cacheScope"] == "private"
    assert [skill["uri"] for skill in listed["skills"]] == [SKILL]
    assert read["contents"][0]["text"].startswith("---\nname: notes-workflow")
    assert rest.text == read["contents"][0]["text"]


def test_the_endpoint_s_own_auth_guards_the_skills_too(tmp_path: Path) -> None:
    def principal(request: Request) -> str:
        if request.headers.get("authorization") != "Bearer good":
            raise HTTPException(401, "a bearer token is needed")
        return "someone"

    write_skill(tmp_path, "guarded")
    app = skills_app(Skills(tmp_path, dependencies=[Depends(require_key)]), auth=principal)
    both = {"authorization": "Bearer good", "x-api-key": KEY}
    with serve(app) as url, httpx.Client(base_url=url) as http:
        listed = result(post_stateless(http, "skills/list", headers=both))
        no_key = result(post_stateless(http, "skills/list", headers={"authorization": "Bearer good"}))
        rest_without_token = http.get("/mcp/skills/guarded/SKILL.md", headers={"x-api-key": KEY})
    assert [skill["uri"] for skill in listed["skills"]] == ["skill://guarded/SKILL.md"]
    assert no_key["skills"] == []
    assert rest_without_token.status_code == 401


async def test_the_sdk_client_reads_a_guarded_skill_with_its_key(guarded_url: str, mode: str) -> None:
    with anyio.fail_after(WAIT_S):
        async with mcp_client(guarded_url, {"x-api-key": KEY}, mode=mode) as client:
            [manifest] = (await client.read_resource(SKILL)).contents
        async with mcp_client(guarded_url, mode=mode) as client:
            with pytest.raises(MCPError) as refused:
                await client.read_resource(SKILL)
    assert isinstance(manifest, types.TextResourceContents)
    assert refused.value.error.code == -32602


def test_options_are_checked_when_made() -> None:
    with pytest.raises(ValueError, match=r"Skills\.max_skills"):
        Skills("skills", max_skills=0)
    with pytest.raises(ValueError, match="skills must be"):
        skills_app(42)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="is not a directory"):
        skills_app("/nonexistent/skills")
    assert HEADERS


def test_a_caller_the_guard_refuses_cannot_tell_which_skill_files_exist(guarded_url: str, mode: str) -> None:
    """A refused read of a file that exists and of one that does not are the same refusal."""
    with httpx.Client(base_url=guarded_url) as http:
        if mode == "auto":
            refused = [
                error(post_stateless(http, "resources/read", {"uri": uri}, headers={"mcp-name": uri}))
                for uri in (SKILL, "skill://secret-skill/SKILL.md", TAGS + "x")
            ]
            missing = error(
                post_stateless(
                    http, "resources/read", {"uri": TAGS + "x"}, headers={"mcp-name": TAGS + "x", "x-api-key": KEY}
                )
            )
        else:
            session = open_session(http, accept="application/json")
            refused = [
                error(http.post("/mcp", json=rpc("resources/read", {"uri": uri}), headers=session))
                for uri in (SKILL, "skill://secret-skill/SKILL.md", TAGS + "x")
            ]
            keyed = open_session(http, accept="application/json", headers={"x-api-key": KEY})
            missing = error(http.post("/mcp", json=rpc("resources/read", {"uri": TAGS + "x"}), headers=keyed))
    assert refused[0] == refused[1] == refused[2]
    assert refused[0]["data"] == {"status": 401}
    # A caller the guard lets in is told the file is not there.
    assert missing["code"] in (-32002, -32602)
    assert missing["data"] == {"uri": TAGS + "x"}


def test_a_caller_the_guard_refuses_cannot_count_the_skills_with_cursors(tmp_path: Path) -> None:
    for name in ("alpha", "beta", "gamma"):
        write_skill(tmp_path, name)
    app = skills_app(Skills(tmp_path, dependencies=[Depends(require_key)]), limits=Limits(page_size=1))
    cursors = [base64.urlsafe_b64encode(f"skills:{index}".encode()).decode() for index in (1, 2, 3, 7)]
    with serve(app) as url, httpx.Client(base_url=url) as http:
        refused = [post_stateless(http, "skills/list", {"cursor": cursor}) for cursor in cursors]
        keyed = [
            post_stateless(http, "skills/list", {"cursor": cursor}, headers={"x-api-key": KEY}) for cursor in cursors
        ]
    assert [result(answer)["skills"] for answer in refused] == [[]] * 4
    # A caller the guard lets in still has a cursor past the end refused.
    assert [answer.status_code for answer in keyed] == [200, 200, 400, 400]


def billion_laughs() -> str:
    lines = ['l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"l{level}: &l{level} [{', '.join([f'*l{level - 1}'] * 9)}]" for level in range(1, 10)]
    return "\n".join(lines)


@pytest.mark.parametrize(
    ("front_matter", "rule"),
    [
        (billion_laughs(), "aliases"),
        ("nested: " + "[" * 5000 + "]" * 5000, "nested more than 32 deep"),
        ("nested: " + "{a: " * 40 + "1" + "}" * 40, "nested more than 32 deep"),
    ],
    ids=["billion-laughs", "deep-lists", "deep-mappings"],
)
def test_hostile_front_matter_stops_the_app_at_once_naming_the_file(
    tmp_path: Path, front_matter: str, rule: str
) -> None:
    """YAML aliases expand when the front matter becomes JSON (a billion laughs held the
    process for its memory), and deep nesting overflowed Python's stack: both refused."""
    skill = tmp_path / "hostile"
    skill.mkdir()
    (skill / "SKILL.md").write_text(f"---\nname: hostile\ndescription: x\n{front_matter}\n---\nBody.\n")
    with pytest.raises(ValueError, match=f"SKILL.md.*{rule}"):
        skills_app(tmp_path)


def test_front_matter_nested_as_deep_as_the_bound_is_served(tmp_path: Path) -> None:
    skill = tmp_path / "nested"
    skill.mkdir()
    nested = "{a: " * 31 + "1" + "}" * 31  # inside the front matter's own mapping: 32 deep
    (skill / "SKILL.md").write_text(f"---\nname: nested\ndescription: x\nmetadata: {nested}\n---\n")
    assert skills_app(tmp_path) is not None


def test_a_skill_file_over_rest_is_never_a_page_of_the_app_and_a_guarded_one_is_not_shared(tmp_path: Path) -> None:
    skill = write_skill(tmp_path, "pages")
    (skill / "demo.html").write_text("<script>alert(document.cookie)</script>")
    with serve(skills_app(tmp_path)) as url, httpx.Client(base_url=url) as http:
        page = http.get("/mcp/skills/pages/demo.html")
    guarded = skills_app(Skills(tmp_path, dependencies=[Depends(require_key)]))
    with serve(guarded) as url, httpx.Client(base_url=url) as http:
        kept = http.get("/mcp/skills/pages/SKILL.md", headers={"x-api-key": KEY})
    assert page.status_code == kept.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert page.headers["x-content-type-options"] == "nosniff"
    assert page.headers["content-security-policy"].startswith("sandbox")
    assert "cache-control" not in page.headers
    assert kept.headers["cache-control"] == "private"


def test_files_are_hashed_once_when_read_not_on_every_list(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Hashing is the folder's size in CPU, on the event loop: a 32 MiB folder hashed on each
    `skills/list` let one anonymous client hold every other request."""
    write_skill(tmp_path, "hashed", files=3)
    app = skills_app(tmp_path)
    hashed: list[bytes] = []
    real_sha256 = hashlib.sha256

    def counting_sha256(data: bytes = b"") -> Any:
        hashed.append(data)
        return real_sha256(data)

    monkeypatch.setattr(hashlib, "sha256", counting_sha256)
    with serve(app) as url, httpx.Client(base_url=url) as http:
        listed = [result(post_stateless(http, "skills/list")) for _ in range(3)]
        got = result(post_stateless(http, "skills/get", {"uri": "skill://hashed/SKILL.md"}))
    assert hashed == []
    assert listed[0]["skills"][0]["resources"] == got["skill"]["resources"]
    assert listed[0]["skills"][0]["resources"][1] == {
        "uri": "skill://hashed/file-0.txt",
        "digest": "sha256:" + real_sha256(b"0").hexdigest(),
        "size": 1,
    }


def test_reads_of_skill_files_over_rest_count_against_the_endpoints_rate_limit() -> None:
    """A file may be 16 MiB: its REST reads are held to the endpoint's budget, and the guard's
    own request, made for an MCP request already counted, is not counted again."""
    app = skills_app(Skills(EXAMPLE_SKILLS, dependencies=[Depends(require_key)]), limits=Limits(rate_limit="3/minute"))
    key = {"x-api-key": KEY}
    with serve(app) as url, httpx.Client(base_url=url) as http:
        read = result(post_stateless(http, "resources/read", {"uri": SKILL}, headers={"mcp-name": SKILL, **key}))
        files = [http.get("/mcp/skills/notes-workflow/SKILL.md", headers=key) for _ in range(3)]
    assert read["contents"][0]["uri"] == SKILL
    assert [answer.status_code for answer in files] == [200, 200, 429]
    assert int(files[2].headers["retry-after"]) >= 1


def test_a_skill_of_more_than_512_folders_or_folders_32_deep_is_refused(tmp_path: Path) -> None:
    """A directory read lists a folder whole, and the folder is walked down: both bounded."""
    wide = write_skill(tmp_path / "wide", "wide")
    for index in range(512):
        (wide / f"folder-{index}").mkdir()
    assert skills_app(tmp_path / "wide") is not None
    (wide / "one-more").mkdir()
    with pytest.raises(ValueError, match="more than 512 folders"):
        skills_app(tmp_path / "wide")
    deep = write_skill(tmp_path / "deep", "deep")
    (deep / "/".join(["d"] * 32)).mkdir(parents=True)
    assert skills_app(tmp_path / "deep") is not None
    (deep / "/".join(["d"] * 33)).mkdir()
    with pytest.raises(ValueError, match="nested more than 32 deep"):
        skills_app(tmp_path / "deep")


def _read_request(port: int, uri: str) -> bytes:
    body = json.dumps(stateless_request("resources/read", {"uri": uri})).encode()
    headers = {
        **stateless_headers("resources/read", uri),
        "host": f"127.0.0.1:{port}",
        "content-length": str(len(body)),
    }
    head = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
    return f"POST /mcp HTTP/1.1\r\n{head}\r\n".encode() + body


def test_answers_a_caller_does_not_read_stay_counted_and_its_next_large_read_is_refused_while_others_are_served(
    tmp_path: Path,
) -> None:
    skill = write_skill(tmp_path, "big")
    (skill / "data.bin").write_bytes(os.urandom(8 * 1024 * 1024))  # about 11 MB as base64 in an answer
    uri = "skill://big/data.bin"
    limits = Limits(max_answer_bytes_per_caller=24 * 1024 * 1024)
    stuck: list[socket.socket] = []
    with serve(skills_app(tmp_path, limits=limits), send_buffer_bytes=64 * 1024) as url:
        port = int(url.rsplit(":", 1)[1])
        try:
            # Two reads whose answers the client never reads: a small window keeps them in the server.
            for _ in range(2):
                reader = socket.socket()
                reader.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
                reader.connect(("127.0.0.1", port))
                reader.sendall(_read_request(port, uri))
                stuck.append(reader)
            refused: dict[str, Any] = {}
            with httpx.Client(base_url=url, timeout=WAIT_S) as http:
                deadline = time.monotonic() + WAIT_S
                while time.monotonic() < deadline:  # until both stuck answers are being written
                    answer = post_stateless(http, "resources/read", {"uri": uri}, headers={"mcp-name": uri})
                    if answer.status_code == 429:
                        refused = answer.json()
                        break
                assert refused, "a third large read of the same caller was never refused"
                assert "Limits.max_answer_bytes_per_caller" in refused["error"]["message"]
                # Another caller is served meanwhile.
                elsewhere = httpx.Client(
                    base_url=url, timeout=WAIT_S, transport=httpx.HTTPTransport(local_address="127.0.0.2")
                )
                with elsewhere:
                    other = post_stateless(elsewhere, "resources/read", {"uri": uri}, headers={"mcp-name": uri})
                assert other.status_code == 200
                assert len(base64.b64decode(other.json()["result"]["contents"][0]["blob"])) == 8 * 1024 * 1024
        finally:
            for reader in stuck:
                reader.close()
        # Once the stuck answers are dropped, their bytes are given back: the caller is served again.
        with httpx.Client(base_url=url, timeout=WAIT_S) as http:
            deadline = time.monotonic() + WAIT_S
            status = 0
            while time.monotonic() < deadline and status != 200:
                status = post_stateless(http, "resources/read", {"uri": uri}, headers={"mcp-name": uri}).status_code
        assert status == 200
