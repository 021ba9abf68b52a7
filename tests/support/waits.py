"""How long the tests wait for what they cannot be told of at once: a server to listen, a peer
to answer, a condition another thread or process brings about."""

from __future__ import annotations

START_TIMEOUT_S = 10.0
WAIT_S = 20.0  # the bound on every wait for a server or a peer
