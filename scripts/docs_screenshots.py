"""Take docs/images/site-home.png and docs/images/site-guide.png, the README's pictures of the
documentation site: the site `make docs` built into site/, served on 127.0.0.1, in headless
Chromium (the system's, as in the tests).

    make docs-screenshots
"""

from __future__ import annotations

import functools
import http.server
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.browser import chromium  # noqa: E402

SITE = ROOT / "site"
IMAGES = ROOT / "docs" / "images"
# The page a reader lands on, and a guide a FastAPI user reads second.
PAGES = {"site-home.png": "", "site-guide.png": "guides/authorization/"}


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def main() -> None:
    if not (SITE / "index.html").is_file():
        raise SystemExit("site/ has no built site: run `make docs` first")
    handler = functools.partial(Quiet, directory=str(SITE))
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        base = f"http://127.0.0.1:{server.server_address[1]}/"
        try:
            with chromium() as browser:
                context = browser.new_context(viewport={"width": 1280, "height": 800}, device_scale_factor=1)
                page = context.new_page()
                errors: list[str] = []
                page.on("pageerror", lambda error: errors.append(str(error)))
                for name, path in PAGES.items():
                    page.goto(base + path, wait_until="networkidle")
                    page.screenshot(path=str(IMAGES / name))
                    print(f"wrote {(IMAGES / name).relative_to(ROOT)}")
                context.close()
                if errors:
                    raise SystemExit(f"the site's pages logged errors: {errors}")
        finally:
            server.shutdown()


if __name__ == "__main__":
    main()
