"""OpenTelemetry for the endpoint: a span per MCP request, the MCP metrics, and the trace
context carried from the caller through to the route's own request.

Everything here reads `opentelemetry-api` only (the `otel` extra), never an SDK: the app
configures one, as OpenTelemetry asks of libraries. Without the extra (`api.py`), with no SDK
set, or with `Telemetry(mode="off")`, the endpoint asks once per request whether anyone listens
(`recorder.py`) and makes nothing more.
"""
