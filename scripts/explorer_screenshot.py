"""Take docs/images/explorer.png, the documentation's picture of the MCP explorer: the example app served on
127.0.0.1, its explorer in headless Chromium (the system's, as in the tests) with the example's
API key entered, and a tool called through its form.

    .venv/bin/python scripts/explorer_screenshot.py
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from example_app.main import app  # noqa: E402
from tests.support.browser import ExplorerPage, chromium  # noqa: E402
from tests.support.servers import serve  # noqa: E402

OUT = ROOT / "docs" / "images" / "explorer.png"


def main() -> None:
    with serve(app) as url, chromium() as browser:
        context = browser.new_context(viewport={"width": 1280, "height": 900}, device_scale_factor=1)
        explorer = ExplorerPage(context.new_page(), url)
        explorer.open()
        explorer.authorize(x_api_key="demo-key")
        card = explorer.tool("get_note")
        card.locator("input[name='note_id']").fill("1")
        card.locator("button.call").click()
        card.locator(".call-result").wait_for()
        card.locator("details.json").last.evaluate("details => details.open = false")
        OUT.parent.mkdir(exist_ok=True)
        explorer.page.screenshot(path=str(OUT), full_page=True)
        context.close()
        if explorer.errors:
            raise SystemExit(f"the page logged errors: {explorer.errors}")
    print(f"wrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
