"""The command-line tool, `fastapi-mcp-routes` (the `cli` extra): what an app's MCP endpoint
serves (`list`), whether it would start (`check`), one tool call through the endpoint in process
(`call`), and the snippet that connects a client to a running endpoint (`config`).

One module per concept: `app.py` wires the commands; `loading.py` imports the app and
`endpoints.py` finds its endpoint; `inventory.py` and `tables.py` are what `list` shows;
`checking.py` is `check`; `arguments.py`, `asgi.py`, `calling.py`, `questions.py` and
`results.py` make up `call`; `clients.py` is `config`; `progress.py` is the line shown while an
app is discovered.
"""
