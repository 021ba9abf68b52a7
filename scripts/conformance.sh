#!/usr/bin/env bash
# Runs the official MCP conformance suite (server scenarios) against example_app.conformance:app
# on 127.0.0.1, three ways: 0.1.16 (the session era), and the 0.2.0-alpha line with
# --requirements 2026-07-28 (the stateless revision) and --requirements 2025-11-25. Each run has
# its own expected-failures file under conformance/. The skills extension's scenarios, in no
# requirement set yet, run by name in both eras besides (run_suites). Installs Node 22 (the npm package node@22,
# when the machine's Node is older) and the suites into .tools/, which git ignores, through
# scripts/node_package.sh.
#
# Three passes of the three runs, on both uvicorn stacks (headers reach the app differently: h11
# strips the whitespace around a value, httptools does not): against one process on httptools +
# uvloop (uvicorn[standard], as production runs it), then, on h11 + asyncio, through nginx
# configured by docs/nginx.conf (the file users copy, with this run's ports; each request to the
# next process) over two single-worker processes that share a generated secret
# (FASTAPI_MCP_ROUTES_SECRET) and a Redis server of this run's own (FASTAPI_MCP_ROUTES_REDIS_URL,
# no persistence), as replicas behind a load balancer. nginx comes from Debian (`make nginx`
# installs it). The third pass is the second on httptools + uvloop with a Redis Cluster of three
# primaries of this run's own (tests/support/cluster.py) as the store. Every process started
# here is stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."

STABLE=0.1.16
ALPHA=0.2.0-alpha.12
PYTHON=.venv/bin/python
START_S=20  # how long a process may take to listen

# The suites, and Node 22 where the machine's is older, installed on first use (one helper
# installs every npm tool the tests use): two lines each, the Node to run it with and its script.
stable=$(scripts/node_package.sh @modelcontextprotocol/conformance "$STABLE" dist/index.js)
alpha=$(scripts/node_package.sh @modelcontextprotocol/conformance "$ALPHA" dist/index.js)
node=${stable%%$'\n'*}
stable_js=${stable#*$'\n'}
alpha_js=${alpha#*$'\n'}

started=()  # every process started here, stopped on exit
scratch=$(mktemp -d)
stop_all() {  # the last started first: nginx and the processes have ended before their Redis stops
  local index
  for ((index = ${#started[@]} - 1; index >= 0; index--)); do
    kill "${started[index]}" 2>/dev/null || true
    wait "${started[index]}" 2>/dev/null || true
  done
  rm -rf "$scratch"
}
trap stop_all EXIT

free_port() { "$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
wait_for() {  # PORT PID WHAT: until something listens on 127.0.0.1:PORT; fails once PID exits
  local tries=$((START_S * 10))
  while ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; do
    if ! kill -0 "$2" 2>/dev/null; then
      echo "$3 exited before it listened on port $1" >&2
      return 1
    fi
    tries=$((tries - 1))
    if [ "$tries" -le 0 ]; then
      echo "$3 did not listen on port $1 within $START_S s" >&2
      return 1
    fi
    sleep 0.1
  done
}
serve() {  # PORT HTTP LOOP: serves the fixtures with one worker, in the background, with this environment
  "$PYTHON" -m uvicorn example_app.conformance:app --host 127.0.0.1 --port "$1" --log-level warning \
    --timeout-graceful-shutdown 2 --http "$2" --loop "$3" &
  started+=($!)
  wait_for "$1" $! "the conformance app on port $1"
}
run_suites() {  # URL LABEL: the three runs against one endpoint
  echo "== conformance $STABLE (session era)$2"
  "$node" "$stable_js" server --url "$1" --expected-failures conformance/expected-failures.yml
  for revision in 2026-07-28 2025-11-25; do
    echo "== conformance $ALPHA --requirements $revision$2"
    "$node" "$alpha_js" server --url "$1" --requirements "$revision" \
      --expected-failures "conformance/expected-failures-$revision.yml" | tee "$scratch/run.log"
    # The extension scenarios (tasks-*) are run but not scored, so the suite's exit code ignores
    # them; their checks are in its total, which must hold no failure either.
    if ! grep -Eq '^Total: [0-9]+ passed, 0 failed' "$scratch/run.log"; then
      echo "conformance $ALPHA --requirements $revision$2: some check failed (see Total above)" >&2
      return 1
    fi
  done
  # The skills extension's scenarios (SEP-2640) are in no revision's requirement set yet, so
  # --requirements never runs them: each runs by name, at the newest revision and, forced (the
  # suite puts extensions on no revision's timeline), in the session era of 2025-11-25.
  local scenario era
  for scenario in sep-2640-skills-enumeration sep-2640-skills-manifest sep-2640-skills-directory; do
    for era in "" "--spec-version 2025-11-25 --force"; do
      echo "== conformance $ALPHA $scenario ${era:-(2026-07-28)}$2"
      # shellcheck disable=SC2086 # $era is two options or none
      "$node" "$alpha_js" server --url "$1" --scenario "$scenario" $era | tee "$scratch/run.log"
      if ! grep -Eq 'Passed: ([1-9][0-9]*)/\1, 0 failed' "$scratch/run.log"; then
        echo "conformance $ALPHA $scenario ${era:-(2026-07-28)}$2: some check failed or was skipped" >&2
        return 1
      fi
    done
  done
}

behind_nginx() {  # HTTP LOOP LABEL: the three runs through nginx over two processes of this environment
  local replicas=() port balancer_port directory
  for _ in 1 2; do
    port=$(free_port)
    serve "$port" "$1" "$2"
    replicas+=("http://127.0.0.1:$port")
  done
  balancer_port=$(free_port)
  directory=$(mktemp -d "$scratch/nginx-XXXX")
  # nginx in this process's place (exec), its files in the scratch folder, until stopped on exit.
  "$PYTHON" -m tests.support.nginx --port "$balancer_port" --directory "$directory" "${replicas[@]}" &
  started+=($!)
  wait_for "$balancer_port" $! "nginx"
  run_suites "http://127.0.0.1:$balancer_port/mcp" "$3"
}

# -- one process
port=$(free_port)
serve "$port" httptools uvloop
run_suites "http://127.0.0.1:$port/mcp" " (httptools + uvloop)"

# -- two processes sharing a secret and a Redis server, behind nginx
redis=$(command -v redis-server || true)
for candidate in /usr/bin/redis-server /usr/sbin/redis-server; do
  if [ -z "$redis" ] && [ -x "$candidate" ]; then redis=$candidate; fi
done
if [ -z "$redis" ]; then
  echo "The pass over several processes needs redis-server, found neither on PATH nor in /usr/bin or" \
    "/usr/sbin: install it (apt install redis-server)." >&2
  exit 1
fi
redis_port=$(free_port)
"$redis" --bind 127.0.0.1 --port "$redis_port" --save "" --appendonly no --dir "$scratch" \
  --loglevel warning &
started+=($!)
wait_for "$redis_port" $! "redis-server"

FASTAPI_MCP_ROUTES_SECRET=$("$PYTHON" -c 'import secrets; print(secrets.token_urlsafe(48))')
FASTAPI_MCP_ROUTES_REDIS_URL="redis://127.0.0.1:$redis_port/0"
export FASTAPI_MCP_ROUTES_SECRET FASTAPI_MCP_ROUTES_REDIS_URL
behind_nginx h11 asyncio " through nginx over two processes (h11 + asyncio)"

# -- the same, on a Redis Cluster of three primaries (tests/support/cluster.py, stopped on exit)
"$PYTHON" -m tests.support.cluster >"$scratch/cluster.url" &
started+=($!)
cluster_pid=$!
for _ in $(seq $((START_S * 10))); do
  [ -s "$scratch/cluster.url" ] || ! kill -0 "$cluster_pid" 2>/dev/null && break
  sleep 0.1
done
FASTAPI_MCP_ROUTES_REDIS_URL=$(head -n 1 "$scratch/cluster.url")
if [ -z "$FASTAPI_MCP_ROUTES_REDIS_URL" ]; then
  echo "the Redis Cluster did not start (tests/support/cluster.py)" >&2
  exit 1
fi
behind_nginx httptools uvloop " through nginx over two processes on a Redis Cluster"
