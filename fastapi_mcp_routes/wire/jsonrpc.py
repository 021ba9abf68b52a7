"""JSON-RPC 2.0 framing: classify incoming messages, encode responses and errors."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from fastapi_mcp_routes.wire import constants as c
from fastapi_mcp_routes.wire.errors import InvalidParams, InvalidRequest, McpError
from fastapi_mcp_routes.wire.json import RawJSON, dumps

logger = logging.getLogger("fastapi_mcp_routes")

RequestId = str | int
_RESULT_HEAD: Final = b'{"jsonrpc":"2.0","id":'


# Messages are made for every request: not frozen, since a frozen dataclass sets each field
# through object.__setattr__ (`benchmarks/profile_tool_call.py` shows the cost); never changed.
@dataclass(slots=True)
class Request:
    id: RequestId
    method: str
    params: Mapping[str, Any]


@dataclass(slots=True)
class Notification:
    method: str
    params: Mapping[str, Any]


@dataclass(slots=True)
class Reply:
    """A client's response to a server-to-client request."""

    id: RequestId
    payload: Mapping[str, Any]


Message = Request | Notification | Reply


def classify(value: Any) -> Message:
    """Turn one decoded JSON value into a message, or raise `InvalidRequest`."""
    if not isinstance(value, dict) or value.get("jsonrpc") != c.JSONRPC_VERSION:
        raise InvalidRequest("Invalid Request: not a JSON-RPC 2.0 message.")
    method = value.get("method")
    has_id = "id" in value
    if method is None:
        if has_id and is_request_id(value["id"]) and (("result" in value) != ("error" in value)):
            return Reply(value["id"], value)
        raise InvalidRequest("Invalid Request: a message needs a 'method', or an 'id' with 'result' or 'error'.")
    if not isinstance(method, str):
        raise InvalidRequest("Invalid Request: 'method' must be a string.")
    params = value.get("params", {})
    if has_id:
        if not is_request_id(value["id"]):
            raise InvalidRequest("Invalid Request: 'id' must be a string or an integer.")
        if not isinstance(params, dict):
            raise ParamsNotObject(value["id"])
        return Request(value["id"], method, params)
    return Notification(method, params if isinstance(params, dict) else {})


class ParamsNotObject(InvalidParams):
    """Params of a request that are not an object: answered with the request's own id."""

    def __init__(self, request_id: RequestId) -> None:
        super().__init__("Invalid params: 'params' must be an object.")
        self.request_id = request_id


def classify_one(value: Any) -> tuple[Message | McpError, RequestId | None]:
    """A POST's one message and its request id, in one step: the message classified, else the
    `McpError` that refuses it (a `ParamsNotObject` among them, which is answered rather than
    refused, as a batch answers it)."""
    request_id = request_id_of(value)
    try:
        return classify(value), request_id
    except McpError as error:
        return error, request_id


def request_id_of(value: Any) -> RequestId | None:
    """The id of a request that failed classification, when it has a usable one."""
    if isinstance(value, dict) and is_request_id(value.get("id")):
        request_id: RequestId = value["id"]
        return request_id
    return None


def is_request_id(value: Any) -> bool:
    """A JSON-RPC id as MCP allows it: a string or an integer (never a bool, never null)."""
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def encode_result(request_id: RequestId, result: Mapping[str, Any] | RawJSON) -> bytes:
    """A JSON-RPC response; a pre-encoded result is spliced in without re-encoding."""
    if isinstance(result, RawJSON):
        return b"".join((_RESULT_HEAD, dumps(request_id), b',"result":', result.data, b"}"))
    return dumps({"jsonrpc": c.JSONRPC_VERSION, "id": request_id, "result": result})


def encode_error(request_id: RequestId | None, error: McpError) -> bytes:
    """A JSON-RPC error response (id `null` when the request's id could not be read)."""
    return dumps({"jsonrpc": c.JSONRPC_VERSION, "id": request_id, "error": error.to_error()})


def truncate(value: object, limit: int = c.LOG_VALUE_MAX) -> str:
    """An untrusted value, cut short for a log line or an error text."""
    text = str(value)
    return text if len(text) <= limit else text[:limit] + "…"


def some(names: Sequence[object]) -> str:
    """Untrusted names for an error text: the first few, quoted and cut short, and how many
    more there are (an error must not grow with the request that caused it)."""
    shown = ", ".join(repr(truncate(name)) for name in names[: c.ECHOED_NAMES_MAX])
    more = len(names) - c.ECHOED_NAMES_MAX
    return f"{shown} and {more:,} more" if more > 0 else shown
