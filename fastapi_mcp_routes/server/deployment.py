"""Where the endpoint's state lives, and what that lets it promise across processes.

Three setups (docs/deployment.md):
- one process: a random secret and the memory store; everything works;
- several processes sharing a secret, each with its own memory: whatever a sealed value carries
  works anywhere (sessions, the stateless revision, requestState); what needs shared state (a
  client's answer that reached another process, a cancellation, a resume, the single use of a
  token another process issued) is refused at once, with a sentence naming `store=`, and one
  WARNING per kind of refusal in the process's log;
- several processes sharing a secret and a store (Redis): everything works.
"""

from __future__ import annotations

import logging
from typing import Final

from fastapi_mcp_routes.server.sealing.secret import Secret
from fastapi_mcp_routes.store.base import Store

logger = logging.getLogger("fastapi_mcp_routes")

STORE_HINT: Final = "mcp_routes(store=RedisStore.from_url(...))"


class Deployment:
    """The secret and the store every part that keeps state shares."""

    def __init__(self, secret: Secret, store: Store) -> None:
        self.secret = secret
        self.store = store
        self._warned: set[str] = set()

    @property
    def state_per_process(self) -> bool:
        """Processes share a secret, so several may serve the endpoint, but not a store."""
        return self.secret.shared and not self.store.shared

    def needs_store(self, what: str) -> str:
        """The sentence saying that `what` needs a store every process shares; logged once
        per process as a WARNING."""
        sentence = (
            f"{what} needs a store every process shares ({STORE_HINT}); this endpoint keeps its state "
            "in each process's memory, and several processes share its secret"
        )
        if what not in self._warned:
            self._warned.add(what)
            logger.warning("%s", sentence)
        return sentence

    def refusal(self, what: str) -> str:
        """`needs_store` as a sentence of its own, for a refusal that says more after it."""
        clause = self.needs_store(what)
        return f"{clause[:1].upper()}{clause[1:]}."

    def describe(self) -> str:
        where = f"{self.store!r}, shared by every process" if self.store.shared else "this process's memory"
        line = f"state in {where}; sealed with {self.secret.describe()}"
        if self.state_per_process:
            line += (
                f"; without {STORE_HINT}, what needs shared state (questions to the client in a session, "
                "a token or a resume in another process) is refused"
            )
        return line
