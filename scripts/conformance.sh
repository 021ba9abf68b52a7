#!/usr/bin/env bash
# Runs the official MCP conformance suite (server scenarios) against example_app.conformance:app
# on 127.0.0.1. Installs Node 22 (from the npm package node@22, when the machine's Node is older)
# and the suite into .tools/, which git ignores. Usage: scripts/conformance.sh [extra suite args]
set -euo pipefail
cd "$(dirname "$0")/.."

SUITE_VERSION=0.1.16
TOOLS=.tools
PYTHON=.venv/bin/python
SUITE_DIR="$TOOLS/conformance-$SUITE_VERSION"
SUITE_JS="$SUITE_DIR/node_modules/@modelcontextprotocol/conformance/dist/index.js"

node_major() { node --version 2>/dev/null | sed -E 's/^v([0-9]+).*/\1/' || true; }
if [ "$(node_major)" = "" ] || [ "$(node_major)" -lt 22 ]; then
  if [ ! -x "$TOOLS/node22/node_modules/.bin/node" ]; then
    npm install --prefix "$TOOLS/node22" --no-audit --no-fund --silent node@22
  fi
  export PATH="$PWD/$TOOLS/node22/node_modules/.bin:$PATH"
fi
if [ ! -f "$SUITE_JS" ]; then
  npm install --prefix "$SUITE_DIR" --no-audit --no-fund --silent "@modelcontextprotocol/conformance@$SUITE_VERSION"
fi

port=$("$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$PYTHON" -m uvicorn example_app.conformance:app --host 127.0.0.1 --port "$port" --log-level warning &
server=$!
trap 'kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true' EXIT
"$PYTHON" - "$port" <<'PY'
import socket, sys, time
deadline = time.monotonic() + 20
while True:
    try:
        socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=1).close()
        break
    except OSError:
        if time.monotonic() > deadline:
            sys.exit("the conformance app did not start listening")
        time.sleep(0.1)
PY
node "$SUITE_JS" server --url "http://127.0.0.1:$port/mcp" \
  --expected-failures conformance/expected-failures.yml "$@"
