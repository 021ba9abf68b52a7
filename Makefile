# `make run` serves the example app; `make test` runs every check, the wire and SDK tests on the
# oldest supported versions too (`make oldest`). Both install what they need.
PYTHON ?= python3
# The port `make run` serves the example on; the example's RFC 9728 metadata and its demo
# tokens' issuer and audience follow it (NOTES_PORT), so give `make token` the same PORT.
PORT ?= 8000
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run token test lint typecheck imports docs docs-serve docs-screenshots redis-server redis-sentinel nginx chromium conformance unit oldest bench bench-peers bench-workers bench-capacity bench-writes bench-jwt soak dist clean

# Silent, and its one line on stderr: `TOKEN=$(make token)` captures only the token, even when
# this first installs the project.
$(STAMP): pyproject.toml
	@echo "installing the project, its test tools and its docs tools into $(VENV) (pip install -e '.[test,docs]')" >&2
	@$(PYTHON) -m venv $(VENV)
	@$(BIN)/pip install --quiet --upgrade pip >&2
	@$(BIN)/pip install --quiet -e '.[test,docs]' >&2
	@touch $(STAMP)

# uvicorn's own logging, plus the library's logger at INFO (the audit line of each tool call):
# example_app/logging.json.
run: $(STAMP)
	NOTES_PORT=$(PORT) $(BIN)/uvicorn example_app.main:app --host 127.0.0.1 --port $(PORT) --log-config example_app/logging.json

# A bearer token the example accepts (scope notes:stats), from its demo issuer key. Only the
# token is printed (no echo of the command), so `TOKEN=$(make token)` works as it reads.
token: $(STAMP)
	@NOTES_PORT=$(PORT) $(BIN)/python -m example_app.auth

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy --strict

# The layers' import direction (pyproject.toml, [tool.importlinter]).
imports: $(STAMP)
	$(BIN)/lint-imports

# The documentation site (mkdocs.yml, docs/) into site/, strictly: a broken link, anchor or API
# reference fails it. Its Python blocks are run and type-checked by tests/test_docs.py.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

# The site at http://127.0.0.1:8001, rebuilt as its pages change.
docs-serve: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve --dev-addr 127.0.0.1:8001

# docs/images/site-home.png and site-guide.png, the README's pictures of the site: the built site
# in headless Chromium (the system's, as the explorer's tests use).
docs-screenshots: docs chromium
	$(BIN)/python scripts/docs_screenshots.py

# The official MCP conformance suite against example_app.conformance:app (installs Node 22 and
# the suite into .tools/ on first use).
conformance: $(STAMP)
	scripts/conformance.sh

# The MCP Inspector CLI tests (tests/test_inspector_cli.py) install the Inspector, and Node 22
# where the machine's is older, into .tools/ on first use (scripts/node_package.sh).
unit: $(STAMP)
	$(BIN)/pytest -q -n 3 --dist loadgroup

# The oldest supported versions (docs/support.md), pinned in tests/oldest.txt, in a virtualenv of
# their own under .tools/oldest/ (remade when the pins change); .venv holds the newest. They run
# the tests that speak to a real server with the official MCP SDK, or as raw HTTP, and those of
# what leans on a floor: FastAPI's validation and middleware, PyJWT, redis-py, valkey-py and
# limits (on a redis-server and a Redis Cluster of their own); and the check that the pins are
# pyproject.toml's floors (tests/test_supported_versions.py).
OLDEST := .tools/oldest
OLDEST_PINS := tests/oldest.txt
OLDEST_TESTS := tests/test_wire_sdk.py tests/test_stateless_sdk.py tests/test_streaming_sdk.py \
	tests/test_resources_sdk.py tests/test_tasks_sdk.py tests/test_step_up_sdk.py \
	tests/test_transport_errors.py tests/test_streaming_edges.py tests/test_confirm.py \
	tests/test_confirm_validation.py tests/test_middleware.py tests/test_jwt.py \
	tests/test_shared_store.py tests/test_store_redis.py tests/test_store_cluster.py \
	tests/test_rate_limit.py tests/test_rate_limit_redis.py tests/test_supported_versions.py
# What the column is about, printed before the run.
OLDEST_SHOWN := fastapi|starlette|pydantic|pydantic[-_]core|anyio|limits|pyjwt|redis|valkey|mcp

$(OLDEST)/pyvenv.cfg: $(OLDEST_PINS)
	rm -rf $(OLDEST)
	$(PYTHON) -m venv $(OLDEST)

$(OLDEST)/.installed: $(OLDEST)/pyvenv.cfg pyproject.toml
	@echo "installing the oldest supported versions into $(OLDEST) ($(OLDEST_PINS))"
	@$(OLDEST)/bin/pip install --quiet --upgrade pip
	@$(OLDEST)/bin/pip install --quiet -r $(OLDEST_PINS) -e . || \
		{ echo "could not install $(OLDEST_PINS) with the project into $(OLDEST): the oldest versions no longer resolve (see pip's message above)"; exit 1; }
	@touch $@

oldest: $(OLDEST)/.installed redis-server
	@for name in $(OLDEST_TESTS); do [ -f $$name ] || \
		{ echo "OLDEST_TESTS names $$name, which does not exist: name the file it became"; exit 1; }; done
	@echo "the oldest supported versions ($(OLDEST)):"
	@$(OLDEST)/bin/pip list --format=freeze | grep -iE '^($(OLDEST_SHOWN))=='
	$(OLDEST)/bin/python -m pytest -q -n 2 $(OLDEST_TESTS)

# The Redis tests start a redis-server of their own (tests/support/redis.py, `redis_server`): install
# Debian's when the machine has none and no FASTAPI_MCP_ROUTES_TEST_REDIS_URL names one to use.
redis-server:
	@{ command -v redis-server && command -v redis-cli; } >/dev/null || [ -n "$${FASTAPI_MCP_ROUTES_TEST_REDIS_URL:-}" ] || \
		{ apt-get update -qq && apt-get install -y -qq redis-server redis-tools >/dev/null; } || \
		{ echo "the tests need redis-server and redis-cli: apt install redis-server redis-tools, or set FASTAPI_MCP_ROUTES_TEST_REDIS_URL"; exit 1; }

# The balancer in front of several processes, in the tests and the conformance run's second pass,
# is nginx configured by docs/nginx.conf (tests/support/nginx.py): install Debian's when the
# machine has none (it may be in /usr/sbin, off a user's PATH).
nginx:
	@command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || \
		{ apt-get update -qq && apt-get install -y -qq nginx >/dev/null; } || \
		{ echo "the tests need nginx: apt install nginx"; exit 1; }

# The Sentinel tests (tests/support/sentinel.py) start a primary, its replica and three sentinels of
# their own on free ports: install Debian's redis-sentinel when the machine has none (its package
# may start a system sentinel on 26379, which the tests never use).
redis-sentinel: redis-server
	@command -v redis-sentinel >/dev/null || [ -x /usr/bin/redis-sentinel ] || \
		{ apt-get update -qq && apt-get install -y -qq redis-sentinel >/dev/null; } || \
		{ echo "the tests need redis-sentinel: apt install redis-sentinel"; exit 1; }

# The explorer's page is tested in a headless Chromium (tests/test_explorer_browser.py), the
# system's, driven by Playwright, which downloads no browser: install Debian's when the machine
# has none and no FASTAPI_MCP_ROUTES_CHROMIUM names one to use.
chromium:
	@command -v chromium >/dev/null || [ -n "$${FASTAPI_MCP_ROUTES_CHROMIUM:-}" ] || \
		{ apt-get update -qq && apt-get install -y -qq chromium >/dev/null; } || \
		{ echo "the tests need Chromium: apt install chromium, or set FASTAPI_MCP_ROUTES_CHROMIUM"; exit 1; }

# pytest runs last so its summary closes the output. The conformance runs go first and alone:
# beside pytest's workers a loaded machine delays a process's news of a session ended in another
# long enough for the suite's session-lifecycle check to catch it (see docs/deployment.md:
# a DELETE reaches the other processes through the store's publish/subscribe). Then the oldest
# supported versions' run (`oldest`, under a minute), then the whole suite on the newest.
test: lint typecheck imports docs redis-server redis-sentinel nginx chromium conformance oldest unit

# Tool call vs REST under uvicorn's two stacks, h11 + asyncio and httptools + uvloop (the
# `bench` extra installs uvicorn[standard] for the latter).
bench: $(STAMP)
	$(BIN)/pip install --quiet -e '.[bench]'
	$(BIN)/python benchmarks/tool_call_vs_rest.py

# This library against fastapi-mcp and FastMCP (installs each peer into .tools/bench/ first).
# Draws benchmarks/peers.png too (matplotlib, the `bench` extra).
bench-peers: $(STAMP)
	$(BIN)/pip install --quiet -e '.[bench]'
	$(BIN)/python benchmarks/peers.py

# One process, two workers sharing a secret, and two workers sharing a secret and Redis, side by
# side (starts a redis-server of its own, installing Debian's when the machine has none).
bench-workers: $(STAMP) redis-server
	$(BIN)/python benchmarks/workers.py

# What the endpoint's state costs one Redis: memory per session, token, task and kept stream
# event, commands per request, and what one primary serves (a redis-server of its own).
bench-capacity: $(STAMP) redis-server
	$(BIN)/python benchmarks/capacity.py

# REST with and without the library, nobody subscribed (ResourceWrites installed), side by side;
# and resources/read against REST GET of the same route.
bench-writes: $(STAMP)
	$(BIN)/python benchmarks/rest_writes.py

# An authenticated call, REST and tool call, with the PyJWT JWTBearer and the python-jose one it
# replaced, side by side (installs python-jose into .tools/bench/jose/ first, never into .venv).
bench-jwt: $(STAMP)
	$(BIN)/python benchmarks/jwt_auth.py

# The security review's attacks against the default bounds, each on a fresh server: what the
# server holds, what the attacker gets, what a legitimate client sees meanwhile.
soak: $(STAMP)
	$(BIN)/python benchmarks/soak.py

# The sdist and the wheel a release uploads, built as an installer would (`python -m build`: the
# wheel from the sdist, in a fresh build environment), into dist/; then checked as the package
# index reads them: metadata and the long description that renders on the project's page.
# Built from the working tree, so a file there that git does not track refuses the release
# (scripts/release_files.py) rather than ship in it; dist/ is removed then.
dist: $(STAMP)
	rm -rf dist
	$(BIN)/python -m build --outdir dist .
	@$(BIN)/python scripts/release_files.py dist || { rm -rf dist; exit 1; }
	$(BIN)/twine check --strict dist/*

clean:
	rm -rf $(VENV)
