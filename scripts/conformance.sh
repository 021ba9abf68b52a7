#!/usr/bin/env bash
# Runs the official MCP conformance suite (server scenarios) against example_app.conformance:app
# on 127.0.0.1, three ways: 0.1.16 (the session era), and the 0.2.0-alpha line with
# --requirements 2026-07-28 (the stateless revision) and --requirements 2025-11-25. Each run has
# its own expected-failures file under conformance/. Installs Node 22 (the npm package node@22,
# when the machine's Node is older) and the suites into .tools/, which git ignores.
set -euo pipefail
cd "$(dirname "$0")/.."

STABLE=0.1.16
ALPHA=0.2.0-alpha.12
TOOLS=.tools
PYTHON=.venv/bin/python

node_major() { node --version 2>/dev/null | sed -E 's/^v([0-9]+).*/\1/' || true; }
if [ "$(node_major)" = "" ] || [ "$(node_major)" -lt 22 ]; then
  if [ ! -x "$TOOLS/node22/node_modules/.bin/node" ]; then
    npm install --prefix "$TOOLS/node22" --no-audit --no-fund --silent node@22
  fi
  export PATH="$PWD/$TOOLS/node22/node_modules/.bin:$PATH"
fi
suite() {  # prints the entry point of one suite version, installing it on first use
  local dir="$TOOLS/conformance-$1"
  local js="$dir/node_modules/@modelcontextprotocol/conformance/dist/index.js"
  if [ ! -f "$js" ]; then
    npm install --prefix "$dir" --no-audit --no-fund --silent "@modelcontextprotocol/conformance@$1" >&2
  fi
  echo "$js"
}
stable_js=$(suite "$STABLE")
alpha_js=$(suite "$ALPHA")

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
url="http://127.0.0.1:$port/mcp"
echo "== conformance $STABLE (session era)"
node "$stable_js" server --url "$url" --expected-failures conformance/expected-failures.yml
for revision in 2026-07-28 2025-11-25; do
  echo "== conformance $ALPHA --requirements $revision"
  node "$alpha_js" server --url "$url" --requirements "$revision" \
    --expected-failures "conformance/expected-failures-$revision.yml"
done
