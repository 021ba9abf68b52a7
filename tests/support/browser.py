"""The explorer in a real headless Chromium (the system's, driven by Playwright), as a person
uses it."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from playwright.sync_api import Browser, Locator, Page, sync_playwright

from tests.support.machine import ROOT
from tests.support.waits import WAIT_S

CHROMIUM_VARIABLE = "FASTAPI_MCP_ROUTES_CHROMIUM"
# Where the browser tests leave their screenshots (git-ignored): what the page looked like.
ARTIFACTS = ROOT / ".artifacts" / "explorer"


def chromium_path() -> str | None:
    """The Chromium the browser tests drive: the executable `FASTAPI_MCP_ROUTES_CHROMIUM` names,
    else Debian's `chromium` on PATH. Never a browser Playwright downloads."""
    named = os.environ.get(CHROMIUM_VARIABLE)
    found = named or shutil.which("chromium") or shutil.which("chromium-browser")
    return found if found and os.access(found, os.X_OK) else None


def chromium_missing() -> str | None:
    """Why there is no Chromium to drive here, and how to get one; `None` when there is."""
    if chromium_path() is not None:
        return None
    return (
        "The explorer's browser tests need Chromium: install Debian's (apt-get install chromium; "
        f"`make test` does), or set {CHROMIUM_VARIABLE} to a Chromium executable."
    )


@contextmanager
def chromium() -> Iterator[Browser]:
    """Headless Chromium, launched from the system's executable, closed at the end."""
    executable = chromium_path()
    if executable is None:
        raise RuntimeError(chromium_missing())
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, timeout=WAIT_S * 1000)
        try:
            yield browser
        finally:
            browser.close()


class ExplorerPage:
    """The explorer open in a browser tab, as a person uses it: what it lists, the Authorize
    dialog, a tool's form; and every console error and uncaught exception of the page."""

    def __init__(self, page: Page, url: str) -> None:
        self.page = page
        self.url = url
        self.errors: list[str] = []
        page.set_default_timeout(WAIT_S * 1000)
        page.on("console", lambda message: self._console(message.type, message.text))
        page.on("pageerror", lambda error: self.errors.append(f"uncaught: {error}"))

    def _console(self, kind: str, text: str) -> None:
        if kind == "error":
            self.errors.append(text)

    def open(self) -> None:
        """Load the page and wait until it has shown what the endpoint lists."""
        self.page.goto(f"{self.url}/mcp/explorer")
        self.loaded()

    def loaded(self) -> None:
        # The status line empties once everything is loaded and shown.
        self.page.locator("#status").wait_for(state="hidden")

    def tool_names(self) -> list[str]:
        names: list[str] = self.page.eval_on_selector_all("#tools .card", "cards => cards.map(c => c.dataset.name)")
        return names

    def authorize(self, **fields: str) -> None:
        """Enter credentials under Authorize (`x_api_key="..."` fills the x-api-key field,
        `authorization` the bearer token) and wait for the page to show what they see."""
        self.page.click("#authorize")
        for name, value in fields.items():
            self.page.fill(f"#credential-{name.replace('_', '-')}", value)
        self.page.click("#authorize-save")
        self.page.locator("#caller").filter(has_text="Sending").wait_for()
        self.loaded()

    def tool(self, name: str) -> Locator:
        """A tool's card, opened, with its form (built when the card is first opened)."""
        card = self.page.locator(f"#tools .card[data-name='{name}']")
        if card.get_attribute("open") is None:
            card.locator(":scope > summary").click()
        card.locator(":scope > .try").wait_for()
        return card

    def screenshot(self, name: str) -> Path:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        path = ARTIFACTS / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=True)
        return path
