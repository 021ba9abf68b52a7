"""`opentelemetry-api`, when the `otel` extra installed it: `INSTALLED` says which. Without
it the names are `None`, and nothing reads them (every caller asks `INSTALLED` first)."""

from __future__ import annotations

from typing import Any

INSTALLED: bool
baggage: Any
metrics: Any
otel_context: Any
propagate: Any
trace: Any
# The API's stand-in until the app sets a meter provider: it has no public name to ask by.
ProxyMeterProvider: Any

try:
    from opentelemetry import baggage, metrics, propagate, trace
    from opentelemetry import context as otel_context
    from opentelemetry.metrics._internal import _ProxyMeterProvider as ProxyMeterProvider
except ImportError:
    INSTALLED = False
    baggage = metrics = otel_context = propagate = trace = ProxyMeterProvider = None
else:
    INSTALLED = True
