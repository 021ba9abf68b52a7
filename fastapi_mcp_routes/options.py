"""Option groups for `mcp_routes` (`Sessions`, `Limits`, `Tasks`, `ServerInfo`, `ServerCard`, `Origins`, `Streaming`,
`ToolCalls`, `Telemetry`, `Skills`), in the style of httpx's `Limits`.

Each group is a frozen value checked when it is made, so a wrong setting stops the app at
startup with a sentence that names the option and the value, never at the first request. The
`DEFAULT_*` constants are the groups' field defaults. Elsewhere in the library they are only
keyword defaults of parts a test may build alone (`ToolCallPipeline`, `ToolRegistry`, `invoke`,
`call_app`), to which `mcp_routes` always passes the group's value; the one exception is the
confirmation gate, which captures a guard's refusal under `DEFAULT_MAX_RESPONSE_BYTES`.
Tests and deployments set the numbers through the groups, never by patching a constant.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

# Thirty minutes: long enough for a person to read an answer and come back to the agent.
DEFAULT_SESSION_IDLE_S: Final = 30 * 60.0
# A session lives at most a day however busy, so a sealed id any process accepts has an end.
DEFAULT_SESSION_MAX_LIFE_S: Final = 24 * 3600.0
DEFAULT_MAX_SESSIONS: Final = 10_000
# One caller (one credential, or one anonymous address-less client) can hold this many
# sessions; opening one more closes that caller's own oldest, never anyone else's.
DEFAULT_MAX_SESSIONS_PER_CALLER: Final = 64
DEFAULT_MAX_BODY_BYTES: Final = 4 * 1024 * 1024
# A route's response is held in memory whole; a bigger one is reported as an error result.
DEFAULT_MAX_RESPONSE_BYTES: Final = 16 * 1024 * 1024
# Large enough that clients which never follow `nextCursor` still see every tool.
DEFAULT_PAGE_SIZE: Final = 1000
# Well under the idle timeouts of common proxies (nginx: 60 s).
DEFAULT_KEEP_ALIVE_S: Final = 15.0
DEFAULT_MAX_TOKENS: Final = 10_000
DEFAULT_MAX_TOKENS_PER_CALLER: Final = 64
# Per session (2025-11-25 resumable streams): how many streams are kept, and how many events
# of each, for a client that reconnects with Last-Event-ID.
DEFAULT_MAX_KEPT_STREAMS: Final = 8
DEFAULT_MAX_EVENTS_PER_STREAM: Final = 256
# 2025-03-26 batches: clients send a handful of messages at most; a batch is answered whole,
# so its answer is held whole: as large as one route response may be.
DEFAULT_MAX_BATCH_LENGTH: Final = 100
DEFAULT_MAX_BATCH_ANSWER_BYTES: Final = DEFAULT_MAX_RESPONSE_BYTES
# Bytes of answers being built or written at once (route responses captured for tool calls,
# stream samples, batch answers): two full-size answers per caller, and a total that keeps one
# process to a few hundred MB however many requests arrive at once.
DEFAULT_MAX_ANSWER_BYTES_PER_CALLER: Final = 2 * DEFAULT_MAX_RESPONSE_BYTES
DEFAULT_MAX_ANSWER_BYTES: Final = 256 * 1024 * 1024
# Server-to-client questions (elicitation, sampling, roots) waiting for the client's answer. A
# call that asks is held until answered or timed out (minutes), even after its client hung up.
DEFAULT_MAX_QUESTIONS_PER_SESSION: Final = 8
DEFAULT_MAX_QUESTIONS_PER_CALLER: Final = 32
DEFAULT_MAX_QUESTIONS: Final = 2_000
# Bytes of resumable-stream events kept for Last-Event-ID, per session and in all. A stream
# that does not fit (one answer larger than a session's share, say) cannot be resumed; it is
# still delivered live.
DEFAULT_MAX_REPLAY_BYTES_PER_SESSION: Final = 2 * 1024 * 1024
DEFAULT_MAX_REPLAY_BYTES: Final = 256 * 1024 * 1024
# Far deeper than any argument a model writes for an API, and far from what JSON parsers stop
# at: a confirmation plan echoes an argument five levels down its response, and pydantic-core
# (this server's parser, and the official Python SDK's) reads 200 levels, serde_json 128.
DEFAULT_MAX_ARGUMENT_DEPTH: Final = 64
# Deeper than this, the echo of an argument could not be read back by a client built on
# pydantic-core, nor an argument much deeper be read by this server at all.
MAX_ARGUMENT_DEPTH: Final = 128
# Long-lived streams (a session's GET stream, a resume after Last-Event-ID, a 2026-07-28
# subscriptions/listen): an honest client holds one or two at a time, so sixteen leave room
# for several sessions or agents behind one credential (or one address) without letting one
# caller hold many; the total keeps the server's sockets and memory for everyone else.
DEFAULT_MAX_STREAMS_PER_CALLER: Final = 16
DEFAULT_MAX_STREAMS: Final = 1000
# A session resumes one stream per call its dropped connection cut short; four covers the
# parallel calls of an agent, and leaves most of the caller's streams to its other sessions.
DEFAULT_MAX_RESUMES_PER_SESSION: Final = 4
# Resources one session (resources/subscribe) or one subscriptions/listen stream watches: an
# agent watches the few documents it works on. Sessions and streams are bounded per caller and
# in all, and a URI's length by the body cap, so subscriptions are too.
DEFAULT_MAX_SUBSCRIPTIONS: Final = 64
# A subscribed URI longer than this is refused: a subscriptions/listen stream keeps the URIs it
# names once each (a session keeps digests), so 1,000 streams of 64 such URIs hold at most 64 MiB.
DEFAULT_MAX_URI_CHARS: Final = 1024
# Route calls running at once (tool calls, reads, prompts, completions, tasks' routes), counted
# in each process: an agent runs a handful in parallel (a burst of twenty is seen), so 32 per
# session and 64 per caller are not met by honest use, while a caller hanging up on calls it leaves running is stopped
# long before they hold the process's memory and CPU.
DEFAULT_MAX_CALLS_PER_SESSION: Final = 32
DEFAULT_MAX_CALLS_PER_CALLER: Final = 64
DEFAULT_MAX_CALLS: Final = 1000
# Sync (`def`) routes called as tools, running in threads at once: anyio's thread pool, which
# serves REST's sync routes too, has 40; tool calls take at most 24 of them, eight per caller.
DEFAULT_MAX_THREADS_PER_CALLER: Final = 8
DEFAULT_MAX_THREADS: Final = 24


@dataclass(frozen=True, slots=True)
class Sessions:
    """How session-era sessions live: `mcp_routes(app, sessions=Sessions(idle_s=600))`.

    Args:
        idle_s: a session unused this long is closed; its next request is answered 404.
        max_sessions: live sessions in all; at the cap the least recently used one is closed.
        max_per_caller: live sessions of one caller; its own oldest is closed past it.
        max_life_s: a session ends this long after it opened, however busy; its sealed id
            is refused by every process from then on.
    """

    idle_s: float = DEFAULT_SESSION_IDLE_S
    max_sessions: int = DEFAULT_MAX_SESSIONS
    max_per_caller: int = DEFAULT_MAX_SESSIONS_PER_CALLER
    max_life_s: float = DEFAULT_SESSION_MAX_LIFE_S

    def __post_init__(self) -> None:
        check_seconds("Sessions.idle_s", self.idle_s)
        check_seconds("Sessions.max_life_s", self.max_life_s)
        _check_count("Sessions.max_sessions", self.max_sessions)
        _check_count("Sessions.max_per_caller", self.max_per_caller)


# Tasks (2026-07-28 tasks extension). A call that may be a task and has not answered in this
# time becomes one: quick work is answered directly, without a round of polling.
DEFAULT_TASK_AFTER_S: Final = 0.25
# An hour to come back for a result; a route may ask for longer (`ToolContext.start_task`),
# up to a day.
DEFAULT_TASK_TTL_S: Final = 3600.0
DEFAULT_MAX_TASK_TTL_S: Final = 24 * 3600.0
DEFAULT_TASK_POLL_INTERVAL_S: Final = 1.0
# With a shared store, a running task's lease, renewed every third of it: a task whose process
# died is told apart from a busy one this long after the process stopped.
DEFAULT_TASK_LEASE_S: Final = 10.0
# Tasks kept (running, or finished until their time to live ends), per caller and in all; a
# finished one makes room for a new one, a running one never does.
DEFAULT_MAX_TASKS_PER_CALLER: Final = 16
DEFAULT_MAX_TASKS: Final = 1000
# A finished task's result is kept until its time to live ends (in Redis, with a shared store).
DEFAULT_MAX_TASK_RESULT_BYTES: Final = 1024 * 1024
# Bytes of kept results: a caller's every task may keep the largest result; in all, room for
# eight such callers, of which a flood of anonymous callers holds at most half.
DEFAULT_MAX_RESULT_BYTES_PER_CALLER: Final = DEFAULT_MAX_TASKS_PER_CALLER * DEFAULT_MAX_TASK_RESULT_BYTES
DEFAULT_MAX_KEPT_RESULT_BYTES: Final = 128 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Tasks:
    """How routes run as tasks (2026-07-28 tasks extension, `mcp_tool(task=...)`):
    `mcp_routes(app, tasks=Tasks(ttl_s=600))`.

    Args:
        after_s: a call that may be a task runs this long in its request first; what answers
            (or asks the client something) sooner is answered directly, anything longer becomes
            a task. A route can become a task earlier with `ToolContext.start_task()`.
        ttl_s: how long a task and its result are kept after it starts; the route is cancelled
            when its task's time is up.
        max_ttl_s: the longest time to live a route may ask for (`ToolContext.start_task`).
        poll_interval_s: how often clients are told to poll (`pollIntervalMs`).
        max_per_caller, max_tasks: tasks kept, per caller and in all; past them, finished tasks
            are dropped oldest first (the lowest trust first in all), and when every one still
            runs, an optional task answers directly and a required one is refused.
        max_result_bytes: the largest result a task keeps; a larger one ends the task with an
            `isError` result saying so.
        max_result_bytes_per_caller, max_kept_result_bytes: bytes of finished tasks' results
            kept, per caller and in all; callers without verified credentials may hold three
            quarters of the total, anonymous ones half, callers with credentials all but a
            tenth. A result past one is kept by letting go of finished results: the caller's
            own oldest first, then the oldest of the most crowded trust, never one of a caller
            trusted more, never a running task. A task whose result was let go stays
            `completed`, its result an `isError` result naming the bound; one whose result finds
            no room ends with such a result at once.
        lease_s: with a shared store, the lease the process running a task holds on it in the
            store, renewed every third of this; once it lapses (this long after the process
            died) a `tasks/get` from any process ends the task `failed`. Every process of a
            deployment sets the same.
    """

    after_s: float = DEFAULT_TASK_AFTER_S
    ttl_s: float = DEFAULT_TASK_TTL_S
    max_ttl_s: float = DEFAULT_MAX_TASK_TTL_S
    poll_interval_s: float = DEFAULT_TASK_POLL_INTERVAL_S
    max_per_caller: int = DEFAULT_MAX_TASKS_PER_CALLER
    max_tasks: int = DEFAULT_MAX_TASKS
    max_result_bytes: int = DEFAULT_MAX_TASK_RESULT_BYTES
    max_result_bytes_per_caller: int = DEFAULT_MAX_RESULT_BYTES_PER_CALLER
    max_kept_result_bytes: int = DEFAULT_MAX_KEPT_RESULT_BYTES
    lease_s: float = DEFAULT_TASK_LEASE_S

    def __post_init__(self) -> None:
        for name in ("after_s", "ttl_s", "max_ttl_s", "poll_interval_s", "lease_s"):
            check_seconds(f"Tasks.{name}", getattr(self, name))
        if self.ttl_s > self.max_ttl_s:
            raise ValueError(f"Tasks.ttl_s must not exceed Tasks.max_ttl_s, got {self.ttl_s!r} > {self.max_ttl_s!r}")
        _check_count("Tasks.max_per_caller", self.max_per_caller)
        _check_count("Tasks.max_tasks", self.max_tasks)
        _check_count("Tasks.max_result_bytes", self.max_result_bytes, "bytes")
        _check_count("Tasks.max_result_bytes_per_caller", self.max_result_bytes_per_caller, "bytes")
        _check_count("Tasks.max_kept_result_bytes", self.max_kept_result_bytes, "bytes")
        if self.max_result_bytes > self.max_result_bytes_per_caller:
            raise ValueError(
                "Tasks.max_result_bytes must not exceed Tasks.max_result_bytes_per_caller (a result that large "
                f"could never be kept), got {self.max_result_bytes!r} > {self.max_result_bytes_per_caller!r}"
            )
        if self.max_result_bytes_per_caller > self.max_kept_result_bytes:
            raise ValueError(
                "Tasks.max_result_bytes_per_caller must not exceed Tasks.max_kept_result_bytes, got "
                f"{self.max_result_bytes_per_caller!r} > {self.max_kept_result_bytes!r}"
            )


@dataclass(frozen=True, slots=True)
class Limits:
    """Bounds on what a request, a response or a caller can make the server hold.

    Args:
        max_body_bytes: the largest request body read; a larger one is answered 413.
        max_response_bytes: the largest route response a tool call holds; past it the call
            ends with an `isError` result.
        page_size: tools per `tools/list` page.
        keep_alive_s: a streamed answer quiet this long gets an SSE comment, so proxies keep
            the connection.
        max_tokens, max_tokens_per_caller: unexpired confirmation tokens, in all and per caller.
        max_kept_streams, max_events_per_stream: per session, the resumable streams kept for
            `Last-Event-ID`, and the events kept of each.
        max_batch_length: messages in one 2025-03-26 batch; a longer batch is refused whole.
        max_batch_answer_bytes: once a batch's answers reach this size, its later requests
            are not run and each is answered with an error naming this bound.
        max_answer_bytes_per_caller, max_answer_bytes: bytes of answers this process builds or
            writes at once (route responses a tool call captured, a streaming tool's frames, a
            batch's answers), per caller and in all; callers without verified credentials may
            hold three quarters of the total, anonymous ones half. Past one, a tool call ends
            with an `isError` result naming the bound, and a batch's later requests are not run.
        max_questions_per_session, max_questions_per_caller, max_questions: server-to-client
            questions waiting for an answer, per session, per caller and in all; past one, the
            question is not sent and the route gets `ToolContextError` naming the bound.
        max_replay_bytes_per_session, max_replay_bytes: bytes of resumable-stream events kept,
            per session and in all; finished streams are pushed out first, and a stream that
            still does not fit can no longer be resumed (it is still delivered live).
        max_argument_depth: how deeply objects and arrays may nest in one tool argument; a
            deeper one ends the call with an `isError` result before anything runs (at most 128).
        max_streams_per_caller, max_streams: long-lived streams open at once (GET streams,
            resumes, `subscriptions/listen`), per caller and in all; past them a new one is
            answered 429 (per caller) or 503 (in all), with Retry-After.
        max_resumes_per_session: resumes after `Last-Event-ID` one session holds open at once;
            past it, 429.
        max_subscriptions: resources one session, or one `subscriptions/listen` stream, is
            subscribed to; past it, the subscription is refused (-32602) naming this bound.
        max_uri_chars: the longest resource URI a read or a subscription may name; past it,
            -32602 before the URI is matched against the templates.
        max_calls_per_session, max_calls_per_caller, max_calls: route calls running at once in
            this process (`tools/call`, `resources/read`, `prompts/get`, `completion/complete`,
            and a task's route until it ends), per session, per caller and in all; past one, the
            call is refused before it runs (-32029, HTTP 429 per session or caller, 503 in all,
            with Retry-After). Anonymous callers run at most half of `max_calls`, they and
            callers with checked credentials (`verify_credentials`) three quarters, and callers
            with credentials all but a tenth kept for anonymous callers.
        max_threads_per_caller, max_threads: sync (`def`) routes called over MCP running in
            the thread pool at once, per caller and in all (anonymous callers half, callers
            without a verified principal three quarters); a call past them waits for a thread,
            so REST's sync routes keep the rest of the pool.
            `max_threads` is cut below the thread pool's size when the pool is smaller.
        rate_limit: a budget per caller for the endpoint itself, in slowapi syntax
            ("120/minute"); over it, 429 with Retry-After. Kept in the app's slowapi `Limiter`
            storage when one is installed (`app.state.limiter`), else in the store's Redis when
            `store=` is a `RedisStore`, else in memory. `None`: no budget.
        verify_credentials: how to check, cheaply, credentials that no `auth=` principal
            stands for, so that their callers rank above anonymous ones in every bound. A
            function (or coroutine function) given the request's credential headers (lower-case
            names, without Cookie) that returns the account they belong to (a string), `True`
            for an account of the credentials' own, or `False`/`None`. Callers it accepts are
            counted per account and pushed out only after anonymous ones; any other caller
            counts as anonymous, by its address (it is not refused: the routes' own guards
            decide that). Its answer is kept a minute per credential. `None`: every credential
            without a principal counts as anonymous, since anyone can make one up.
    """

    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES
    page_size: int = DEFAULT_PAGE_SIZE
    keep_alive_s: float = DEFAULT_KEEP_ALIVE_S
    max_tokens: int = DEFAULT_MAX_TOKENS
    max_tokens_per_caller: int = DEFAULT_MAX_TOKENS_PER_CALLER
    max_kept_streams: int = DEFAULT_MAX_KEPT_STREAMS
    max_events_per_stream: int = DEFAULT_MAX_EVENTS_PER_STREAM
    max_batch_length: int = DEFAULT_MAX_BATCH_LENGTH
    max_batch_answer_bytes: int = DEFAULT_MAX_BATCH_ANSWER_BYTES
    max_answer_bytes_per_caller: int = DEFAULT_MAX_ANSWER_BYTES_PER_CALLER
    max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES
    max_questions_per_session: int = DEFAULT_MAX_QUESTIONS_PER_SESSION
    max_questions_per_caller: int = DEFAULT_MAX_QUESTIONS_PER_CALLER
    max_questions: int = DEFAULT_MAX_QUESTIONS
    max_replay_bytes_per_session: int = DEFAULT_MAX_REPLAY_BYTES_PER_SESSION
    max_replay_bytes: int = DEFAULT_MAX_REPLAY_BYTES
    max_argument_depth: int = DEFAULT_MAX_ARGUMENT_DEPTH
    max_streams_per_caller: int = DEFAULT_MAX_STREAMS_PER_CALLER
    max_streams: int = DEFAULT_MAX_STREAMS
    max_resumes_per_session: int = DEFAULT_MAX_RESUMES_PER_SESSION
    max_subscriptions: int = DEFAULT_MAX_SUBSCRIPTIONS
    max_uri_chars: int = DEFAULT_MAX_URI_CHARS
    max_calls_per_session: int = DEFAULT_MAX_CALLS_PER_SESSION
    max_calls_per_caller: int = DEFAULT_MAX_CALLS_PER_CALLER
    max_calls: int = DEFAULT_MAX_CALLS
    max_threads_per_caller: int = DEFAULT_MAX_THREADS_PER_CALLER
    max_threads: int = DEFAULT_MAX_THREADS
    rate_limit: str | None = None
    # Takes the credential headers, returns an account, True, or False/None; may be a coroutine function.
    verify_credentials: Callable[[Mapping[str, str]], Any] | None = None

    def __post_init__(self) -> None:
        if self.verify_credentials is not None and not callable(self.verify_credentials):
            raise ValueError(f"Limits.verify_credentials must be a function or None, got {self.verify_credentials!r}")
        _check_count("Limits.max_body_bytes", self.max_body_bytes, "bytes")
        _check_count("Limits.max_response_bytes", self.max_response_bytes, "bytes")
        _check_count("Limits.page_size", self.page_size)
        check_seconds("Limits.keep_alive_s", self.keep_alive_s)
        for name in (
            "max_tokens",
            "max_tokens_per_caller",
            "max_kept_streams",
            "max_events_per_stream",
            "max_batch_length",
            "max_questions_per_session",
            "max_questions_per_caller",
            "max_questions",
            "max_streams_per_caller",
            "max_streams",
            "max_resumes_per_session",
            "max_subscriptions",
            "max_uri_chars",
            "max_calls_per_session",
            "max_calls_per_caller",
            "max_calls",
            "max_threads_per_caller",
            "max_threads",
        ):
            _check_count(f"Limits.{name}", getattr(self, name))
        for name in (
            "max_batch_answer_bytes",
            "max_answer_bytes_per_caller",
            "max_answer_bytes",
            "max_replay_bytes_per_session",
            "max_replay_bytes",
        ):
            _check_count(f"Limits.{name}", getattr(self, name), "bytes")
        _check_count("Limits.max_argument_depth", self.max_argument_depth, "levels", MAX_ARGUMENT_DEPTH)
        if self.rate_limit is not None:
            _check_rate("Limits.rate_limit", self.rate_limit)


# A Server Card's `name`: reverse-DNS namespace, one slash, server name (SEP-2127's schema).
_CARD_NAME: Final = re.compile(r"[a-zA-Z0-9.-]+/[a-zA-Z0-9._-]+")
_CARD_NAME_LENGTH: Final = (3, 200)
_CARD_TEXT_MOST: Final = 100  # description and title, as the schema bounds them


@dataclass(frozen=True, slots=True)
class ServerCard:
    """A Server Card (SEP-2127, experimental) served at `{path}/server-card` for registries and
    gateways: `ServerInfo(card=ServerCard(name="com.example/notes", description="..."))`. Its
    version, title and protocol versions are the ones `server/discover` reports.

    Args:
        name: the registry name, reverse-DNS with one slash (`com.example/notes`).
        description: what the server does, 1 to 100 characters.
        website_url: the server's home page or documentation.
        url: the endpoint's public URL, for a server behind a proxy; by default the URL the
            card was requested on, with the endpoint's path, which only the caller may cache
            (`Cache-Control: private`): the request's Host names it. With it, the card is public.
    """

    name: str
    description: str
    website_url: str | None = None
    url: str | None = None

    def __post_init__(self) -> None:
        least, most = _CARD_NAME_LENGTH
        if not isinstance(self.name, str) or not least <= len(self.name) <= most or not _CARD_NAME.fullmatch(self.name):
            raise ValueError(
                f"ServerCard.name must be a reverse-DNS name with one slash, such as 'com.example/notes', "
                f"of {least} to {most} characters, got {self.name!r}"
            )
        if not isinstance(self.description, str) or not 1 <= len(self.description) <= _CARD_TEXT_MOST:
            raise ValueError(
                f"ServerCard.description must be 1 to {_CARD_TEXT_MOST} characters, got {self.description!r}"
            )
        for name in ("website_url", "url"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value.startswith(("http://", "https://"))):
                raise ValueError(f"ServerCard.{name} must be an http:// or https:// URL or None, got {value!r}")


@dataclass(frozen=True, slots=True)
class ServerInfo:
    """What the server tells clients about itself in the `initialize` result:
    `mcp_routes(app, server=ServerInfo(name="notes", instructions="..."))`.

    Args:
        name, version: the server's identity; default to the app's title and version.
        instructions: guidance for the model.
        card: a `ServerCard(...)` to serve at `{path}/server-card`; none by default, while
            Server Cards are experimental.
    """

    name: str | None = None
    version: str | None = None
    instructions: str | None = None
    card: ServerCard | None = None

    def __post_init__(self) -> None:
        for name in ("name", "version", "instructions"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise ValueError(f"ServerInfo.{name} must be a string or None, got {value!r}")
        if self.card is not None and not isinstance(self.card, ServerCard):
            raise ValueError(f"ServerInfo.card must be a ServerCard(...) or None, got {self.card!r}")


@dataclass(frozen=True, slots=True)
class Origins:
    """Which browser origins and Host values the endpoint answers (cross-site requests, DNS
    rebinding): `mcp_routes(app, origins=Origins(allowed_hosts=["api.example.com"]))`.

    Args:
        allowed_origins: browser origins allowed besides the server's own; `["*"]` allows all.
        allowed_hosts: Host values a loopback-bound server accepts besides loopback names, for
            a reverse proxy on the same machine.
    """

    allowed_origins: Iterable[str] = ()
    allowed_hosts: Iterable[str] = ()

    def __post_init__(self) -> None:
        # Kept as tuples: an iterator given here is read once, and the value stays comparable.
        object.__setattr__(self, "allowed_origins", strings("Origins.allowed_origins", self.allowed_origins))
        object.__setattr__(self, "allowed_hosts", strings("Origins.allowed_hosts", self.allowed_hosts))


# A streaming route (SSE, JSON Lines) called as a tool is sampled this long by default, at most
# this long, and returns at most this many frames. The default stays under the shortest request
# timeout a client ships with (openai-agents: 5 s), with room for the route to start and the
# answer to arrive.
DEFAULT_SUBSCRIBE_MS: Final = 3000
DEFAULT_MAX_SUBSCRIBE_MS: Final = 30000
DEFAULT_MAX_SUBSCRIBE_FRAMES: Final = 200


@dataclass(frozen=True, slots=True)
class Streaming:
    """How long streams run: the streaming routes a tool call samples, and the endpoint's own
    resumable responses: `mcp_routes(app, streaming=Streaming(max_subscribe_ms=10_000))`.

    Args:
        default_subscribe_ms, max_subscribe_ms, max_subscribe_frames: a streaming route (SSE,
            JSON Lines) called as a tool is sampled for `durationMs` (by default
            `default_subscribe_ms`, at most `max_subscribe_ms`) and returns at most `maxFrames`
            frames (at most `max_subscribe_frames`).
        max_stream_seconds: end a resumable (2025-11-25) POST stream after this many seconds,
            for proxies that cut long responses; the call runs on and the client resumes the
            stream with `Last-Event-ID`. `None` keeps streams open until the answer.
    """

    default_subscribe_ms: int = DEFAULT_SUBSCRIBE_MS
    max_subscribe_ms: int = DEFAULT_MAX_SUBSCRIBE_MS
    max_subscribe_frames: int = DEFAULT_MAX_SUBSCRIBE_FRAMES
    max_stream_seconds: float | None = None

    def __post_init__(self) -> None:
        for name in ("default_subscribe_ms", "max_subscribe_ms", "max_subscribe_frames"):
            _check_count(f"Streaming.{name}", getattr(self, name))
        if self.default_subscribe_ms > self.max_subscribe_ms:
            raise ValueError(
                "Streaming.default_subscribe_ms must not exceed Streaming.max_subscribe_ms, "
                f"got {self.default_subscribe_ms!r} > {self.max_subscribe_ms!r}"
            )
        if self.max_stream_seconds is not None:
            check_seconds("Streaming.max_stream_seconds", self.max_stream_seconds, " or None")


# How long a confirmation token stays usable: long enough for a person to read the plan.
DEFAULT_CONFIRMATION_TTL_S: Final = 300.0


@dataclass(frozen=True, slots=True)
class ToolCalls:
    """What a tool call must pass before its route runs, and who hears of it:
    `mcp_routes(app, tool_calls=ToolCalls(allowed_server_urls=["https://api.example.com/v1"]))`.

    Args:
        require_confirmation_for_mutations: a tool that is not read-only runs only once its
            call is confirmed: by the user where the client can ask (elicitation, or an input
            request in the stateless revision), else by calling again with the
            `confirmationToken` the first call returned. `mcp_tool(confirm=...)` overrides it
            per tool. Turn it off where an approval layer of your own confirms calls.
        confirmation_ttl_s: how long a confirmation token stays usable.
        allowed_server_urls: the server URLs a tool call may pass to a route, as prefixes
            (`"https://api.example.com/v1"` allows `/v1` and `/v1/...`, not `/v10`). A URL
            argument (JSON Schema `format: uri`, as pydantic's `HttpUrl` and `AnyUrl` give) must
            have the same scheme, host and port as an entry and a path under its path; any
            other is refused with an `isError` result before the route runs (and before a
            confirmation is asked for), so a prompt-injected agent cannot make the server
            fetch internal addresses. `None` or empty: every URL argument is refused, and a
            warning at startup names the tools taking URLs. REST calls are not checked.
        allow_arbitrary_urls: accept every URL argument (a warning at startup says so); cannot
            be combined with `allowed_server_urls` or `allowed_server_urls_from_env`.
        allowed_server_urls_from_env: add entries from an environment variable, read when
            `mcp_routes` is called: `True` reads `MCP_ALLOWED_SERVER_URLS`, a string names
            another variable. Entries are separated by commas or whitespace.
        on_tool_call: receives a `ToolCallEvent` per tool call (principal, tool, a digest of
            the arguments, outcome, HTTP status, duration); `None` (the default) is
            `log_tool_call`, an INFO line on the `fastapi_mcp_routes` logger. May be a
            coroutine function.
    """

    require_confirmation_for_mutations: bool = True
    confirmation_ttl_s: float = DEFAULT_CONFIRMATION_TTL_S
    allowed_server_urls: Iterable[str] | None = None
    allow_arbitrary_urls: bool = False
    allowed_server_urls_from_env: bool | str = False
    # Takes a `ToolCallEvent`, not named here: the server, which defines it, reads these options.
    on_tool_call: Callable[[Any], Any] | None = None

    def __post_init__(self) -> None:
        _check_bool("ToolCalls.require_confirmation_for_mutations", self.require_confirmation_for_mutations)
        check_seconds("ToolCalls.confirmation_ttl_s", self.confirmation_ttl_s)
        if isinstance(self.allowed_server_urls, str):
            raise ValueError(
                "ToolCalls.allowed_server_urls must be a list of URLs, "
                f"got the single string {self.allowed_server_urls!r}"
            )
        if self.allowed_server_urls is not None:
            # Kept as a tuple: an iterator given here is read once, and the value stays comparable.
            object.__setattr__(self, "allowed_server_urls", tuple(self.allowed_server_urls))
        _check_bool("ToolCalls.allow_arbitrary_urls", self.allow_arbitrary_urls)
        from_env = self.allowed_server_urls_from_env
        if not isinstance(from_env, bool) and not (isinstance(from_env, str) and from_env):
            raise ValueError(
                "ToolCalls.allowed_server_urls_from_env must be True, False or the name of an "
                f"environment variable, got {from_env!r}"
            )
        if self.on_tool_call is not None and not callable(self.on_tool_call):
            raise ValueError(f"ToolCalls.on_tool_call must be a function or None, got {self.on_tool_call!r}")


# What the endpoint does with OpenTelemetry (the `otel` extra): spans and metrics, only the
# caller's trace context carried to the routes, or nothing.
TelemetryMode = Literal["on", "propagate", "off"]
TELEMETRY_MODES: Final = ("on", "propagate", "off")
# The header a proxy or a client sets to follow one request through its logs.
DEFAULT_CORRELATION_HEADERS: Final = ("x-request-id",)


@dataclass(frozen=True, slots=True)
class Telemetry:
    """What the endpoint reports to OpenTelemetry, when the app configures an SDK:
    `mcp_routes(app, telemetry=Telemetry(record_content=True))`. The library never configures
    an SDK, an exporter or a propagator; without the `otel` extra, or with no SDK set, nothing
    is recorded and nothing is made per call.

    Args:
        mode: `"on"`: a span per MCP request and the MCP metrics, the trace context carried on
            to the route's request; `"propagate"`: no spans and no metrics, only the caller's
            trace context (from `params._meta`, else the HTTP headers) carried on to the route;
            `"off"`: neither.
        record_content: add a tool call's arguments and result to its span
            (`gen_ai.tool.call.arguments`, `gen_ai.tool.call.result`); they may hold personal
            data, so only when the app opts in.
        correlation_headers: request headers passed from the MCP caller to the routes to follow
            a request through logs (`X-Request-Id`); never part of who the caller is.
        tracer_provider, meter_provider: the providers to record with, as OpenTelemetry's
            instrumentations take them; `None` (the default): the global ones the app sets.
    """

    mode: TelemetryMode = "on"
    record_content: bool = False
    correlation_headers: Iterable[str] = DEFAULT_CORRELATION_HEADERS
    # An OpenTelemetry `TracerProvider` and `MeterProvider`, not named here: the API is an extra.
    tracer_provider: Any = None
    meter_provider: Any = None

    def __post_init__(self) -> None:
        if self.mode not in TELEMETRY_MODES:
            raise ValueError(f"Telemetry.mode must be one of {', '.join(TELEMETRY_MODES)}, got {self.mode!r}")
        _check_bool("Telemetry.record_content", self.record_content)
        names = strings("Telemetry.correlation_headers", self.correlation_headers)
        object.__setattr__(self, "correlation_headers", tuple(name.lower() for name in names))


# The skills extension's per-skill limits (SEP-2640): what every conforming host accepts.
SKILL_MAX_FILES: Final = 512
SKILL_MAX_BYTES: Final = 16 * 1024 * 1024
# A directory of skills is read whole at startup and held in memory: bounded in all too.
DEFAULT_MAX_SKILLS: Final = 64
DEFAULT_MAX_SKILLS_BYTES: Final = 32 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Skills:
    """Agent skills served beside the tools (the `io.modelcontextprotocol/skills` extension):
    `mcp_routes(app, skills=Skills("skills"))`.

    Args:
        directory: a folder of skills in the Agent Skills layout: one folder per skill, named
            as its `SKILL.md` front matter names it, with its supporting files. Read once when
            the endpoint is built; symbolic links are refused.
        dependencies: FastAPI dependencies that guard the skills: every MCP request for them
            runs these first, with the caller's credentials, as a resource read runs its
            route's; a caller they refuse sees an empty `skills/list`.
        max_skills: how many skills the folder may hold.
        max_total_bytes: the bytes of every skill file together, held in memory. Each skill is
            also held to the extension's own limits: 512 files and 16 MiB.
    """

    directory: str | os.PathLike[str]
    dependencies: Iterable[Any] = ()
    max_skills: int = DEFAULT_MAX_SKILLS
    max_total_bytes: int = DEFAULT_MAX_SKILLS_BYTES

    def __post_init__(self) -> None:
        if not isinstance(self.directory, (str, os.PathLike)):
            raise ValueError(f"Skills.directory must be a path, got {self.directory!r}")
        if isinstance(self.dependencies, (str, bytes)):
            raise ValueError(f"Skills.dependencies must be a list of Depends(...), got {self.dependencies!r}")
        object.__setattr__(self, "dependencies", tuple(self.dependencies))
        _check_count("Skills.max_skills", self.max_skills, "skills")
        _check_count("Skills.max_total_bytes", self.max_total_bytes, "bytes")


def _check_count(name: str, value: object, unit: str = "", most: int | None = None) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1 or (most is not None and value > most):
        what = f"a positive number of {unit}" if unit else "a positive whole number"
        bound = f", at most {most}" if most is not None else ""
        raise ValueError(f"{name} must be {what}{bound}, got {value!r}")


def check_seconds(name: str, value: object, alternative: str = "") -> None:
    """A duration option: a positive, finite number of seconds (an infinite one would reach
    the wire, which JSON cannot carry, or a timer that never fires)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
        raise ValueError(f"{name} must be a positive, finite number of seconds{alternative}, got {value!r}")


def _check_bool(name: str, value: object) -> None:
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be True or False, got {value!r}")


def _check_rate(name: str, value: object) -> None:
    """A rate in slowapi syntax, read by the `limits` library (imported only when a rate is
    given: it takes tens of milliseconds to import)."""
    if isinstance(value, str):
        from limits import parse

        try:
            parse(value)
        except ValueError:
            pass
        else:
            return
    raise ValueError(f"{name} must be slowapi syntax such as '120/minute', or None, got {value!r}")


def strings(name: str, values: Iterable[str] | None) -> tuple[str, ...]:
    """A list-of-strings option: each a non-empty string; a single string is refused (it would
    be read as its characters)."""
    if values is None:
        return ()
    if isinstance(values, str):
        raise ValueError(f"{name} must be a list of strings, got the single string {values!r}")
    result = tuple(values)
    for value in result:
        if not isinstance(value, str) or not value:
            raise ValueError(f"{name} must hold non-empty strings, got {value!r}")
    return result
