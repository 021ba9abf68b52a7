"""What the test modules share, one concern a module (fixtures stay in `conftest.py`; no test
module imports another):

- `waits`: the bounds on every wait;
- `machine`: the project's root, the loopback address, a free port;
- `servers`: the app in process, and a real uvicorn server on a thread;
- `processes`: processes a test starts (uvicorn with workers, any command);
- `redis`: a real Redis, and a link to it a test can cut;
- `nginx`: nginx configured by docs/nginx.conf in front of replicas;
- `stores`: the stores a test runs on;
- `deployments`: what a deployment's processes share, and one process alone;
- `sdk`: the official MCP client;
- `jsonrpc`: JSON-RPC over streamable HTTP, written by hand, and what an answer says;
- `sse`: reading server-sent events;
- `stateless`: requests of the 2026-07-28 revision;
- `runs`: many clients at once across several processes, and their tally;
- `jwt`: bearer tokens from a test issuer;
- `browser`: the explorer in a real Chromium;
- `discovery`: tool discovery with the default credential headers;
- `apps`: the app whose tools stream, and a small notes app;
- `confirmation`: a gated call's pending answer.
"""
