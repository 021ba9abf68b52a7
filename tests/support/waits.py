"""How long the tests wait for what they cannot be told of at once: a server to listen, a peer
to answer, a condition another thread or process brings about."""

from __future__ import annotations

START_TIMEOUT_S = 10.0
WAIT_S = 20.0  # the bound on every wait for a server or a peer
# The keep-alive interval of a test that only needs a keep-alive to arrive: wide enough that a
# busy machine sends each one in time; and how long a route keeps quiet to leave room for one.
KEEP_ALIVE_S = 0.5
QUIET_S = 3 * KEEP_ALIVE_S
