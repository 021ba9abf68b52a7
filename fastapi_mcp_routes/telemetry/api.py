"""`opentelemetry-api`, when the `otel` extra installed it: `INSTALLED` says which. Without
it the names are `None`, and nothing reads them (every caller asks `INSTALLED` first)."""

from __future__ import annotations

from typing import Any, Final

INSTALLED: bool
baggage: Any
metrics: Any
metrics_internal: Any
otel_context: Any
propagate: Any
trace: Any
# The API's stand-in until the app sets a meter provider: it has no public name to ask by.
ProxyMeterProvider: Any

try:
    from opentelemetry import baggage, metrics, propagate, trace
    from opentelemetry import context as otel_context
    from opentelemetry.metrics import _internal as metrics_internal
    from opentelemetry.metrics._internal import _ProxyMeterProvider as ProxyMeterProvider
except ImportError:
    INSTALLED = False
    baggage = metrics = otel_context = propagate = trace = metrics_internal = ProxyMeterProvider = None
else:
    INSTALLED = True

# The API's getters read the environment on every call until a provider is set; its globals say
# the same at a fraction of the cost, where this version of the API has them.
_GLOBALS: Final = INSTALLED and hasattr(trace, "_TRACER_PROVIDER") and hasattr(metrics_internal, "_METER_PROVIDER")


def nothing_set() -> bool:
    """Whether the app has set neither a global tracer provider nor a global meter provider."""
    if _GLOBALS:
        return trace._TRACER_PROVIDER is None and metrics_internal._METER_PROVIDER is None
    return isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider) and isinstance(
        metrics.get_meter_provider(), ProxyMeterProvider
    )


def load_from_environment() -> None:
    """Set the providers `OTEL_PYTHON_TRACER_PROVIDER` and `OTEL_PYTHON_METER_PROVIDER` name, as
    the API's getters do on first use."""
    if INSTALLED:
        trace.get_tracer_provider()
        metrics.get_meter_provider()
