"""The Lua scripts `RedisStore` runs, and the keys they run on.

Each method of the `Store` is one script, atomic in Redis, kept as a file in `lua/` (its KEYS
and ARGV named at its top) and read once, when this module is imported. A script is its file
after the shared parts it uses: `prelude.lua` (the clock, numbers, renewals), `admit.lua` (the
eviction policy's one routine) and its family's routines (`sessions.lua`, `tokens.lua`,
`tasks.lua`). `ARGV[1]` is the time in milliseconds, or `''` for Redis's own clock (`TIME`).

Every key a script names comes in `KEYS`, so a Redis Cluster routes the call to the node that
holds them. A multi-key script must find all its keys in one slot, so each record family lives
under one hash tag: `{sessions}` (with every session's stream log), `{tokens}`, `{tasks}`,
`{slots}`, `{topics}` (the publish/subscribe logs and channels). A key that a script finds
inside, rather than being handed (another session's log when room is made, an owner's set
named in a record), is built from the family's first key and so carries the same tag, in the
same slot. A claim is one key, with no tag. The cost: each
family of one store is served by one Cluster node. The prefix comes first, so a store's keys
are `<prefix>*`; it must not hold a brace, which would change the tag.

The layout, under the prefix (`P`):

    P{sessions}                 hash   seq, bytes (all replay bytes), life; per session id:
                                       o:<id> owner (hex), b:<id> replay bytes, k:<id> kept streams
    P{sessions}:lru             zset   id -> trust band + seq of its last use
    P{sessions}:expiry          zset   id -> the time it is idle past its time (ms)
    P{sessions}:finished        zset   "<n>:<id>" -> trust band + seq of the stream's completion
    P{sessions}:owner:<hex>     zset   id -> seq of its opening
    P{sessions}:session:<id>    hash   r (the record, JSON), lt (trust of its streams), next;
                                       per stream n: s<n> state, b<n> bytes, c<n> events, e<n>.<i>
    P{tokens}                   hash   seq, life; o:<key> owner (hex)
    P{tokens}:order             zset   key -> trust band + seq of its keeping
    P{tokens}:expiry            zset   key -> its end (ms)
    P{tokens}:owner:<hex>       zset   key -> seq of its keeping
    P{tokens}:token:<key>       string its value
    P{tasks}                    hash   seq, life, n<trust> tasks kept of that trust; o:<id> owner
                                       (hex), t:<id> its holder's trust
    P{tasks}:expiry             zset   id -> its end (ms)
    P{tasks}:ended              zset   id -> trust band + seq of its ending (finished tasks only)
    P{tasks}:results            zset   id -> trust band + seq of its ending (finished tasks whose
                                       result is kept); in `P{tasks}`: w<trust> bytes kept of
                                       that trust, w:<id> a result's bytes, wo:<hex> an owner's
    P{tasks}:results:<hex>      zset   id -> seq of its ending, an owner's kept results
    P{tasks}:owner:<hex>        zset   id -> seq of its making
    P{tasks}:task:<id>          string the record (JSON)
    Pclaim:<name>               hash   h holder, d end (ms)
    P{once}                     zset   name -> its end (ms), names claimed once (`claim_once`)
    P{once}:owner:<hex>         zset   name -> its end (ms), the names of one owner among them
    P{slots}:<pool>             zset   holder -> end (ms)
    P{topics}:log:<topic>       list   a topic's last messages, kept a minute for a listener
                                       whose pub/sub connection dropped (store/redis/pubsub.py);
                                       its channel is P{topics}:<topic>

A score of "trust band + seq" orders records by trust first, then age: the head of the set is
the oldest of the lowest trust, what a bound pushes out first. A record's own key expires with
it (`PEXPIRE`), so Redis forgets a session, its event log and a token on its own. The
bookkeeping of a family (the hash and sets without a per-record name) is renewed together by
every script that writes it, for as long as the longest-lived record may live (`life`), so its
keys expire together once nothing renews them, and never before a record they count.

A stream's state `s<n>` is 0 running, +1 once complete, +2 once overflowed (its events dropped).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from importlib.resources import files
from typing import Final


def _read(name: str) -> str:
    return files(__package__).joinpath("lua", f"{name}.lua").read_text(encoding="utf-8")


def _script(name: str, *parts: str) -> str:
    return "\n".join(_read(part) for part in ("prelude", *parts, name))


_SESSIONS: Final = ("admit", "sessions")
_TOKENS: Final = ("admit", "tokens")
_TASKS: Final = ("admit", "tasks")

OPEN_SESSION: Final = _script("open_session", *_SESSIONS)
FIND_SESSION: Final = _script("find_session", "sessions")
SAVE_SESSION: Final = _script("save_session", "sessions")
CLOSE_SESSION: Final = _script("close_session", "sessions")
START_STREAM: Final = _script("start_stream", "sessions")
APPEND_EVENT: Final = _script("append_event", *_SESSIONS)
COMPLETE_STREAM: Final = _script("complete_stream", "sessions")
READ_STREAM: Final = _script("read_stream", "sessions")
FORGET_STREAM: Final = _script("forget_stream", "sessions")
CLAIM: Final = _script("claim")
RELEASE: Final = _script("release")
CLAIM_ONCE: Final = _script("claim_once")
TAKE_SLOTS: Final = _script("take_slots")
FREE_SLOTS: Final = _script("free_slots")
HOLDS_SLOT: Final = _script("holds_slot")
PUT_TOKEN: Final = _script("put_token", *_TOKENS)
ADOPT_TOKEN: Final = _script("adopt_token", *_TOKENS)
USE_TOKEN: Final = _script("use_token", "tokens")
REVOKE_TOKEN: Final = _script("revoke_token", "tokens")
PUT_TASK: Final = _script("put_task", *_TASKS)
END_TASK: Final = _script("end_task", *_TASKS)
FIND_TASK: Final = _script("find_task", "tasks")
SAVE_TASK: Final = _script("save_task", "tasks")
RUNNING_TASKS: Final = _script("running_tasks", "tasks")
# Publish/subscribe's own (store/redis/pubsub.py): no shared part, no time in ARGV.
PUBLISH: Final = _read("publish")
REDIS_TIME: Final = _read("time")


@dataclass(frozen=True, slots=True)
class Keys:
    """The keys of one store, as its scripts take them in `KEYS`: each family's own keys first
    (`sessions`, `tokens`, `tasks`), then the record's; see the layout above."""

    prefix: str
    sessions: tuple[str, str, str, str]
    tokens: tuple[str, str, str]
    tasks: tuple[str, str, str, str]

    @classmethod
    def under(cls, prefix: str) -> Keys:
        """The keys under `prefix`, which must hold no brace (it would change the hash tags)."""
        if not prefix:
            raise ValueError("RedisStore's prefix must not be empty: every key of the store is put under it")
        if "{" in prefix or "}" in prefix:
            raise ValueError(
                f"RedisStore's prefix must not contain '{{' or '}}' (a Redis Cluster hash tag), got {prefix!r}"
            )
        sessions, tokens, tasks = f"{prefix}{{sessions}}", f"{prefix}{{tokens}}", f"{prefix}{{tasks}}"
        return cls(
            prefix,
            (sessions, f"{sessions}:lru", f"{sessions}:expiry", f"{sessions}:finished"),
            (tokens, f"{tokens}:order", f"{tokens}:expiry"),
            (tasks, f"{tasks}:expiry", f"{tasks}:ended", f"{tasks}:results"),
        )

    def session(self, session_id: str) -> list[str]:
        """The sessions family and the session's key (which holds its stream log)."""
        return [*self.sessions, f"{self.sessions[0]}:session:{session_id}"]

    def new_session(self, session_id: str, owner: str) -> list[str]:
        """`session`, and the set of its owner's (`owner` in hex) sessions."""
        return [*self.session(session_id), f"{self.sessions[0]}:owner:{owner}"]

    def token(self, key: str) -> list[str]:
        """The tokens family and the token's key."""
        return [*self.tokens, f"{self.tokens[0]}:token:{key}"]

    def new_token(self, key: str, owner: str) -> list[str]:
        """`token`, and the set of its owner's (`owner` in hex) tokens."""
        return [*self.token(key), f"{self.tokens[0]}:owner:{owner}"]

    def task(self, task_id: str) -> list[str]:
        """The tasks family and the task's key."""
        return [*self.tasks, f"{self.tasks[0]}:task:{task_id}"]

    def new_task(self, task_id: str, owner: str) -> list[str]:
        """`task`, and the set of its owner's (`owner` in hex) tasks."""
        return [*self.task(task_id), f"{self.tasks[0]}:owner:{owner}"]

    def ended_task(self, task_id: str, owner: str) -> list[str]:
        """`task`, and the set of its owner's (`owner` in hex) kept results."""
        return [*self.task(task_id), f"{self.tasks[0]}:results:{owner}"]

    def running_tasks(self, owner: str | None) -> list[str]:
        """The tasks family, and the set of `owner`'s tasks when one is named."""
        if owner is None:
            return [*self.tasks]
        return [*self.tasks, f"{self.tasks[0]}:owner:{owner}"]

    def claim(self, name: str) -> str:
        """A claim's key: one key, so it needs no hash tag."""
        return f"{self.prefix}claim:{name}"

    def once(self, owner: str | None = None) -> list[str]:
        """The set of names claimed once, under a hash tag of its own, and the set of `owner`'s
        among them when one is named."""
        once = f"{self.prefix}{{once}}"
        if owner is None:
            return [once]
        # Hashed: any string names an owner, and a key stays short and brace-free.
        return [once, f"{once}:owner:{hashlib.sha256(owner.encode()).hexdigest()[:32]}"]

    def slots(self, pools: Iterable[str]) -> list[str]:
        """The pools' keys: one hash tag, so a script takes a slot in several at once."""
        return [f"{self.prefix}{{slots}}:{pool}" for pool in pools]
