// The MCP explorer: what this server's MCP endpoint shows the person viewing the page, and a
// form to call each tool as an agent's client would.
//
// The page speaks the stateless revision (2026-07-28) to the endpoint, with the browser's
// cookies and the credentials entered under "Authorize", so it sees exactly what a client with
// those credentials sees: every list, call and question goes through the endpoint and its
// guards. What the lists do not carry (the route behind each tool, the server's options)
// comes from the explorer's own JSON, which applies the same visibility.
//
// Nothing here builds HTML from text: everything the server says is put in the page as text
// nodes or attribute values, so a description cannot inject markup.
"use strict";

const PROTOCOL_VERSION = "2026-07-28";
const CLIENT_INFO = { name: "fastapi-mcp-routes explorer", version: "1" };
// The page can put a question to its user (a form), so it declares elicitation in form mode,
// and nothing it cannot do (sampling, roots): a route that needs those is told so.
const CAPABILITIES = { elicitation: { form: {} } };
// Every log message a route sends is shown, from debug up.
const LOG_LEVEL = "debug";
const META_VERSION = "io.modelcontextprotocol/protocolVersion";
const META_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities";
const META_CLIENT_INFO = "io.modelcontextprotocol/clientInfo";
const META_LOG_LEVEL = "io.modelcontextprotocol/logLevel";
// The question the server asks before a tool that changes data runs, and where it puts the plan.
const CONFIRM_KEY = "fastapi-mcp-routes/confirm";
const PLAN_META = "fastapi-mcp-routes/plan";
// The argument a client without elicitation confirms with; this page is asked instead.
const TOKEN_ARGUMENT = "confirmationToken";
const STORAGE_KEY = "fastapi-mcp-routes.explorer.credentials";
// A header value that is not plain ASCII travels base64-encoded between these (2026-07-28).
const BASE64_START = "=?base64?";
const BASE64_END = "?=";
// Questions a call may ask in a row before the page stops retrying: a route that asks forever
// should not keep the page busy forever.
const MAX_ROUNDS = 16;
const HTTP_METHODS = ["get", "put", "post", "delete", "options", "head", "patch", "trace"];

const page = {
  endpoint: "",
  aboutUrl: "",
  docsUrl: "",
  openapiUrl: "",
  credentials: {},
  nextId: 1,
  openapi: null,
};

// -- small DOM helpers ------------------------------------------------------------------------

// An element with properties (className, hidden, ...), attributes ("data-*", "aria-*", for,
// href) and children (nodes, or strings that become text nodes).
function el(tag, props, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("data-") || key.startsWith("aria-") || key === "for" || key === "href" || key === "role") {
      node.setAttribute(key, String(value));
    } else {
      node[key] = value;
    }
  }
  append(node, children);
  return node;
}

function append(node, children) {
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function byId(id) {
  return document.getElementById(id);
}

function pretty(value) {
  return JSON.stringify(value, null, 2);
}

// A collapsible block of JSON (schemas, structured results, plans).
function jsonBlock(title, value, open) {
  return el("details", { className: "json", open: Boolean(open) }, el("summary", {}, title), el("pre", {}, pretty(value)));
}

// -- credentials ------------------------------------------------------------------------------

function loadCredentials() {
  try {
    const stored = JSON.parse(sessionStorage.getItem(STORAGE_KEY) || "{}");
    return stored && typeof stored === "object" ? stored : {};
  } catch {
    return {};
  }
}

function saveCredentials(headers) {
  page.credentials = headers;
  if (Object.keys(headers).length) sessionStorage.setItem(STORAGE_KEY, JSON.stringify(headers));
  else sessionStorage.removeItem(STORAGE_KEY);
}

// The header schemes the app documents (OpenAPI securitySchemes), as fields of the dialog:
// API keys sent in a header, and bearer tokens. The endpoint's own `auth=` takes a bearer token
// whatever the document says, so a bearer field is always there.
function credentialSchemes() {
  const schemes = (page.openapi && page.openapi.components && page.openapi.components.securitySchemes) || {};
  const fields = [];
  let bearer = null;
  for (const [name, scheme] of Object.entries(schemes)) {
    if (scheme.type === "apiKey" && scheme.in === "header") {
      fields.push({ label: `${name} (${scheme.name})`, header: scheme.name.toLowerCase(), prefix: "", description: scheme.description });
    } else if (["http", "oauth2", "openIdConnect"].includes(scheme.type) && (scheme.type !== "http" || /^bearer$/i.test(scheme.scheme))) {
      bearer = bearer || { label: `${name} (Authorization: Bearer)`, header: "authorization", prefix: "Bearer ", description: scheme.description };
    }
  }
  fields.push(bearer || { label: "Bearer token (Authorization)", header: "authorization", prefix: "Bearer ", description: "" });
  const seen = new Set();
  return fields.filter((field) => !seen.has(field.header) && seen.add(field.header));
}

function openAuthorize() {
  const holder = byId("credential-fields");
  holder.replaceChildren();
  const known = new Set();
  for (const scheme of credentialSchemes()) {
    known.add(scheme.header);
    const current = page.credentials[scheme.header] || "";
    const value = scheme.prefix && current.startsWith(scheme.prefix) ? current.slice(scheme.prefix.length) : current;
    const id = `credential-${scheme.header}`;
    holder.append(
      el(
        "div",
        { className: "field" },
        el("label", { for: id }, scheme.label),
        el("input", { id, value, autocomplete: "off", "data-header": scheme.header, "data-prefix": scheme.prefix }),
        scheme.description ? el("small", { className: "hint" }, scheme.description) : null,
      ),
    );
  }
  const other = Object.keys(page.credentials).find((name) => !known.has(name));
  byId("custom-name").value = other || "";
  byId("custom-value").value = other ? page.credentials[other] : "";
  byId("authorize-dialog").showModal();
}

function readAuthorize() {
  const headers = {};
  for (const input of byId("credential-fields").querySelectorAll("input[data-header]")) {
    const prefix = input.dataset.prefix;
    // A token pasted with its "Bearer " is taken as the token.
    let value = input.value.trim();
    if (prefix && value.toLowerCase().startsWith(prefix.toLowerCase())) value = value.slice(prefix.length).trim();
    if (value) headers[input.dataset.header] = prefix + value;
  }
  const name = byId("custom-name").value.trim().toLowerCase();
  const value = byId("custom-value").value.trim();
  if (name && value) headers[name] = value;
  return headers;
}

function onAuthorize(event) {
  event.preventDefault();
  const action = event.submitter ? event.submitter.value : "close";
  byId("authorize-dialog").close();
  if (action === "save") saveCredentials(readAuthorize());
  else if (action === "clear") saveCredentials({});
  else return;
  refresh();
}

function describeCaller() {
  const names = Object.keys(page.credentials);
  return names.length ? `Sending ${names.join(", ")}` : "No credentials entered (cookies only)";
}

// -- talking to the endpoint ------------------------------------------------------------------

// A header value as the 2026-07-28 revision carries it: plain ASCII as it is, anything else
// base64-encoded between markers.
function headerValue(text) {
  if (/^[\x21-\x7e]([\x20-\x7e]*[\x21-\x7e])?$/.test(text)) return text;
  const bytes = new TextEncoder().encode(text);
  let binary = "";
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return BASE64_START + btoa(binary) + BASE64_END;
}

// The tool arguments a tool mirrors in Mcp-Param-* headers ("x-mcp-header" in its schema).
function paramHeaders(tool, args) {
  const headers = {};
  const properties = (tool && tool.inputSchema && tool.inputSchema.properties) || {};
  for (const [name, schema] of Object.entries(properties)) {
    if (schema && schema["x-mcp-header"] && args[name] !== undefined && args[name] !== null) {
      headers[`Mcp-Param-${schema["x-mcp-header"]}`] = headerValue(String(args[name]));
    }
  }
  return headers;
}

function requestMeta(extra) {
  return {
    [META_VERSION]: PROTOCOL_VERSION,
    [META_CAPABILITIES]: CAPABILITIES,
    [META_CLIENT_INFO]: CLIENT_INFO,
    [META_LOG_LEVEL]: LOG_LEVEL,
    ...extra,
  };
}

// One 2026-07-28 request: the routing headers must repeat the method and the name the body
// carries, or the server refuses it. `onNote` receives each notification that comes first
// (progress, log messages). Resolves to {status, message, text}: the HTTP status, the JSON-RPC
// answer when there is one, and the body otherwise.
async function rpc(method, params, options) {
  const { name, onNote, meta, headers: extraHeaders } = options || {};
  const id = page.nextId++;
  const headers = {
    "Content-Type": "application/json",
    Accept: "application/json, text/event-stream",
    "MCP-Protocol-Version": PROTOCOL_VERSION,
    "Mcp-Method": method,
    ...page.credentials,
    ...(extraHeaders || {}),
  };
  if (name !== undefined) headers["Mcp-Name"] = headerValue(name);
  const body = { jsonrpc: "2.0", id, method, params: { ...params, _meta: requestMeta(meta) } };
  const response = await fetch(page.endpoint, { method: "POST", headers, body: JSON.stringify(body), credentials: "same-origin" });
  const type = response.headers.get("content-type") || "";
  if (type.startsWith("text/event-stream")) {
    const message = await readEvents(response, id, onNote || (() => {}));
    return { status: response.status, message, text: "" };
  }
  const text = await response.text();
  try {
    return { status: response.status, message: JSON.parse(text), text };
  } catch {
    return { status: response.status, message: null, text };
  }
}

// Read an SSE answer as it arrives (fetch + ReadableStream): notifications are handed to
// `onNote` at once, so progress shows while the route runs; resolves to the answer to `id`.
async function readEvents(response, id, onNote) {
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  let answer = null;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value.replace(/\r\n?/g, "\n");
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const message = eventMessage(buffer.slice(0, end));
      buffer = buffer.slice(end + 2);
      if (message === null) continue;
      if (message.id === id && ("result" in message || "error" in message)) answer = message;
      else if (message.method) onNote(message);
    }
  }
  return answer;
}

// The JSON-RPC message of one SSE event; null for comments (keep-alives) and priming events.
function eventMessage(event) {
  const data = event
    .split("\n")
    .filter((line) => line.startsWith("data:"))
    .map((line) => line.slice(5).replace(/^ /, ""))
    .join("\n");
  if (!data) return null;
  try {
    return JSON.parse(data);
  } catch {
    return null;
  }
}

// The result of a request, or an Error that says what went wrong (HTTP status, JSON-RPC error).
function resultOf(answer) {
  const message = answer.message;
  if (message && message.result) return message.result;
  const error = message && message.error;
  const problem = new Error(error ? `${error.message} (${error.code})` : `HTTP ${answer.status}: ${answer.text.slice(0, 300)}`);
  problem.status = answer.status;
  throw problem;
}

// Every entry of a list, following nextCursor.
async function listAll(method, key) {
  const entries = [];
  let cursor;
  for (let page_ = 0; page_ < 100; page_++) {
    const result = resultOf(await rpc(method, cursor === undefined ? {} : { cursor }));
    entries.push(...(result[key] || []));
    cursor = result.nextCursor;
    if (!cursor) break;
  }
  return entries;
}

async function fetchJson(url, withCredentials) {
  const response = await fetch(url, {
    headers: { Accept: "application/json", ...(withCredentials ? page.credentials : {}) },
    credentials: "same-origin",
  });
  const text = await response.text();
  if (!response.ok) {
    let detail = text.slice(0, 300);
    try {
      const parsed = JSON.parse(text);
      detail = (parsed.error && parsed.error.message) || parsed.detail || detail;
    } catch {
      // not JSON: the text itself says it
    }
    const problem = new Error(`HTTP ${response.status}: ${typeof detail === "string" ? detail : JSON.stringify(detail)}`);
    problem.status = response.status;
    throw problem;
  }
  return JSON.parse(text);
}

// -- loading ----------------------------------------------------------------------------------

function settle(promise) {
  return promise.then(
    (value) => ({ ok: true, value }),
    (error) => ({ ok: false, error }),
  );
}

// Load everything the page shows for the current credentials, and show it.
async function refresh() {
  setStatus("Loading…");
  byId("caller").textContent = describeCaller();
  if (page.openapiUrl && !page.openapi) {
    const openapi = await settle(fetchJson(page.openapiUrl, false));
    page.openapi = openapi.ok ? openapi.value : null;
  }
  const [about, discover, tools, resources, templates, prompts] = await Promise.all([
    settle(fetchJson(page.aboutUrl, true)),
    settle(rpc("server/discover", {}).then(resultOf)),
    settle(listAll("tools/list", "tools")),
    settle(listAll("resources/list", "resources")),
    settle(listAll("resources/templates/list", "resourceTemplates")),
    settle(listAll("prompts/list", "prompts")),
  ]);
  const failed = [about, discover, tools].find((outcome) => !outcome.ok);
  const aboutValue = about.ok ? about.value : null;
  renderServer(aboutValue, discover.ok ? discover.value : null);
  const routes = routeIndex(aboutValue);
  renderTools(tools.ok ? tools.value : [], routes);
  renderResources(resources.ok ? resources.value : [], routes);
  renderTemplates(templates.ok ? templates.value : [], routes);
  renderPrompts(prompts.ok ? prompts.value : [], routes);
  renderOtherRoutes(routes);
  applyFilter();
  if (failed) {
    const hint = failed.error.status === 401 || failed.error.status === 403 ? " Enter credentials under Authorize." : "";
    setStatus(`The endpoint refused this page: ${failed.error.message}.${hint}`, true);
  } else {
    setStatus("");
  }
}

function setStatus(text, problem) {
  const status = byId("status");
  status.textContent = text;
  status.hidden = !text;
  status.classList.toggle("problem", Boolean(problem));
}

// What the explorer's JSON says about each tool, resource, template and prompt's route.
function routeIndex(about) {
  // By name (or URI), and what each route serves ("GET /notes" -> "tool").
  const index = { tools: new Map(), resources: new Map(), templates: new Map(), prompts: new Map(), completions: new Map(), mcp: new Map(), hidden: new Map() };
  if (!about) return index;
  // What the lists hide from these credentials, by route ("POST /notes" -> [entry, ...]).
  for (const entry of about.hidden || []) {
    const key = `${entry.route.method} ${entry.route.path}`;
    index.hidden.set(key, [...(index.hidden.get(key) || []), entry]);
  }
  const note = (map, key, entry, kind) => {
    map.set(key, entry);
    if (entry.route) index.mcp.set(`${entry.route.method} ${entry.route.path}`, kind);
  };
  for (const entry of about.tools) note(index.tools, entry.name, entry, "tool");
  for (const entry of about.resources) note(index.resources, entry.uri, entry, "resource");
  for (const entry of about.resourceTemplates) note(index.templates, entry.uriTemplate, entry, "resource template");
  for (const entry of about.prompts) note(index.prompts, entry.name, entry, "prompt");
  for (const entry of about.completions) note(index.completions, `${entry.ref.name} ${entry.argument}`, entry, "completion");
  return index;
}

// -- the server -------------------------------------------------------------------------------

function renderServer(about, discover) {
  const server = (about && about.server) || {};
  if (server.name) {
    byId("server-name").textContent = server.name;
    document.title = `${server.name} - MCP explorer`;
  }
  byId("server-version").textContent = server.version ? `v${server.version}` : "";
  byId("server-instructions").textContent = server.instructions || (discover && discover.instructions) || "";
  const docs = byId("docs-link");
  docs.hidden = !page.docsUrl;
  if (page.docsUrl) docs.setAttribute("href", page.docsUrl);
  const list = byId("options-list");
  list.replaceChildren();
  const facts = serverFacts(about, discover);
  for (const [term, value] of facts) list.append(el("dt", {}, term), el("dd", {}, value));
  byId("options").hidden = facts.length === 0;
}

// The server's options a reader needs, as (term, text) pairs.
function serverFacts(about, discover) {
  const facts = [["Endpoint", `POST ${page.endpoint}`]];
  if (discover) {
    const offered = Object.keys(discover.capabilities || {}).filter((name) => name !== "extensions");
    const extensions = Object.keys((discover.capabilities || {}).extensions || {});
    facts.push(["Capabilities", [...offered, ...extensions].join(", ")]);
  }
  if (!about) return facts;
  facts.push(["Protocol revisions", about.protocolVersions.join(", ")]);
  const sessions = about.sessions;
  facts.push([
    "Sessions",
    sessions
      ? `on for 2025 clients (idle ${seconds(sessions.idleSeconds)}, at most ${sessions.maxPerCaller} per caller); none in 2026-07-28`
      : "off: every request stands alone",
  ]);
  const auth = about.auth;
  const guarded = auth.endpoint ? `every request needs ${auth.endpoint}` : "no endpoint-wide auth; each route's own guards apply";
  facts.push(["Auth", guarded + (auth.protectedResourceMetadata ? "; OAuth metadata served (RFC 9728)" : "")]);
  facts.push([
    "Lists",
    auth.listVisibleOnly ? "show each caller only what it may use (calls still run every guard)" : "show every tool to every caller",
  ]);
  const confirmation = about.confirmation;
  facts.push([
    "Changes",
    confirmation.mutations ? `tools that change data run once confirmed (tokens last ${seconds(confirmation.ttlSeconds)})` : "run at once, unconfirmed",
  ]);
  const limits = about.limits;
  const rate = limits.rateLimit ? `, ${limits.rateLimit} per caller` : "";
  facts.push(["Limits", `body ${bytes(limits.maxBodyBytes)}, route response ${bytes(limits.maxResponseBytes)}, ${limits.pageSize} tools a page${rate}`]);
  return facts;
}

function seconds(value) {
  return value >= 60 && value % 60 === 0 ? `${value / 60} min` : `${value} s`;
}

function bytes(value) {
  return value >= 1048576 ? `${Math.round(value / 104857.6) / 10} MiB` : `${Math.round(value / 102.4) / 10} kB`;
}

// -- tools ------------------------------------------------------------------------------------

function renderTools(tools, routes) {
  const holder = byId("tools");
  holder.replaceChildren(...tools.map((tool) => toolCard(tool, routes.tools.get(tool.name))));
  byId("tools-count").textContent = String(tools.length);
  byId("tools-section").hidden = false;
  if (!tools.length) holder.append(el("p", { className: "hint" }, "No tools are listed for these credentials."));
}

function toolCard(tool, about) {
  const annotations = tool.annotations || {};
  const route = about && about.route;
  const card = el(
    "details",
    { className: "card tool", "data-name": tool.name, "data-search": searchText(tool.name, tool.title, tool.description, route && route.path) },
    el(
      "summary",
      {},
      el("span", { className: "mark tool-mark" }, "tool"),
      el("code", { className: "name" }, tool.name),
      tool.title ? el("span", { className: "title" }, tool.title) : null,
      route ? el("span", { className: `method method-${route.method.toLowerCase()}` }, route.method) : null,
      route ? el("code", { className: "path" }, route.path) : null,
      badges(annotations, about),
    ),
  );
  append(card, [el("p", { className: "description" }, tool.description || ""), route ? routeLine(route) : null]);
  // The schemas and the form are built when the card is first opened: they are most of a
  // tool's elements, so a page of thousands of tools stays light until one is looked at.
  return onFirstOpen(card, () => [
    jsonBlock("Input schema", tool.inputSchema),
    tool.outputSchema ? jsonBlock("Output schema", tool.outputSchema) : null,
    Object.keys(annotations).length ? jsonBlock("Annotations", annotations) : null,
    tryIt(tool, about),
  ]);
}

// Append what `build` returns to a card (a <details>) the first time it is opened.
function onFirstOpen(card, build) {
  let built = false;
  card.addEventListener("toggle", () => {
    if (card.open && !built) {
      built = true;
      append(card, [build()]);
    }
  });
  return card;
}

function badges(annotations, about) {
  const holder = el("span", { className: "badges" });
  if (annotations.readOnlyHint) holder.append(el("span", { className: "badge read-only" }, "read-only"));
  if (annotations.destructiveHint) holder.append(el("span", { className: "badge destructive" }, "destructive"));
  if (about && about.confirm) holder.append(el("span", { className: "badge confirm" }, "confirmation required"));
  if (annotations.idempotentHint) holder.append(el("span", { className: "badge" }, "idempotent"));
  if (annotations.openWorldHint) holder.append(el("span", { className: "badge" }, "open world"));
  if (about && about.stream) holder.append(el("span", { className: "badge" }, "samples a stream"));
  if (about && about.task && about.task !== "never") holder.append(el("span", { className: "badge" }, `task: ${about.task}`));
  return holder;
}

function routeLine(route) {
  return el(
    "p",
    { className: "route" },
    "Runs ",
    el("code", {}, `${route.method} ${route.path}`),
    route.docs ? [" · ", el("a", { href: route.docs, className: "docs", target: "_blank", rel: "noopener" }, "open in /docs")] : null,
  );
}

function searchText(...parts) {
  return parts.filter(Boolean).join(" ").toLowerCase();
}

// -- Try it -----------------------------------------------------------------------------------

// The form of one tool: fields from its input schema (or raw JSON), a Call button, and where
// the call's progress, log messages, questions and result appear.
function tryIt(tool, about) {
  const schema = withoutToken(tool.inputSchema || { type: "object" });
  const form = objectForm(schema, schema);
  const raw = el("textarea", { className: "raw", rows: 6, spellcheck: false, "aria-label": "Arguments as JSON" });
  raw.value = "{}";
  const mode = el(
    "select",
    { className: "mode", "aria-label": "Edit arguments as" },
    el("option", { value: "form" }, "Form"),
    el("option", { value: "json" }, "JSON"),
  );
  const formHolder = el("div", { className: "form" }, form.node);
  const rawHolder = el("div", { className: "form", hidden: true }, raw);
  mode.addEventListener("change", () => switchMode(mode.value, form, raw, formHolder, rawHolder));
  const output = el("div", { className: "output", "aria-live": "polite" });
  const call = el("button", { type: "button", className: "button call" }, "Call");
  call.addEventListener("click", () => {
    let args;
    try {
      args = mode.value === "json" ? parseArguments(raw.value) : form.read();
    } catch (problem) {
      output.replaceChildren(el("p", { className: "error" }, problem.message));
      return;
    }
    runCall(tool, args, output, call);
  });
  return el(
    "div",
    { className: "try" },
    el("h3", {}, "Try it ", mode),
    formHolder,
    rawHolder,
    el("div", { className: "buttons" }, call),
    output,
  );
}

function switchMode(mode, form, raw, formHolder, rawHolder) {
  if (mode === "json") {
    try {
      raw.value = pretty(form.read());
    } catch {
      // an incomplete form: the JSON editor keeps what it had
    }
  }
  formHolder.hidden = mode === "json";
  rawHolder.hidden = mode !== "json";
}

function parseArguments(text) {
  const value = JSON.parse(text || "{}");
  if (!value || typeof value !== "object" || Array.isArray(value)) throw new Error("The arguments must be a JSON object.");
  return value;
}

// The page confirms through its user, so the token argument (for clients that cannot ask) is
// left out of the form.
function withoutToken(schema) {
  if (!schema.properties || !(TOKEN_ARGUMENT in schema.properties)) return schema;
  const properties = { ...schema.properties };
  delete properties[TOKEN_ARGUMENT];
  return { ...schema, properties };
}

// Follow a local "$ref" (#/$defs/..., #/definitions/...) within the tool's own schema; each
// reference followed is added to `followed` when given.
function resolve(schema, root, followed) {
  let current = schema;
  for (let depth = 0; current && current.$ref && depth < 32; depth++) {
    const path = current.$ref.startsWith("#/") ? current.$ref.slice(2).split("/") : null;
    if (!path) return current;
    let target = root;
    for (const part of path) target = target && target[part.replace(/~1/g, "/").replace(/~0/g, "~")];
    if (!target) return current;
    if (followed) followed.push(current.$ref);
    const { $ref, ...rest } = current;
    current = { ...target, ...rest };
  }
  return current || {};
}

// A schema that may also be null (`anyOf: [X, {type: null}]`, `type: [X, "null"]`): X, nullable.
// The references followed to reach X are added to `followed`.
function unwrapNullable(schema, root, followed) {
  const resolved = resolve(schema, root, followed);
  const options = resolved.anyOf || resolved.oneOf;
  if (Array.isArray(options)) {
    const others = options.filter((option) => resolve(option, root).type !== "null");
    if (others.length === 1 && others.length < options.length) {
      const { anyOf, oneOf, ...rest } = resolved;
      return { schema: { ...resolve(others[0], root, followed), ...rest }, nullable: true };
    }
  }
  if (Array.isArray(resolved.type)) {
    const types = resolved.type.filter((type) => type !== "null");
    if (types.length === 1) return { schema: { ...resolved, type: types[0] }, nullable: types.length < resolved.type.length };
  }
  return { schema: resolved, nullable: false };
}

// The form of an object schema: {node, read()} where read() returns the object the fields hold
// (optional fields left empty are left out) or throws an Error naming the field. `path` names
// the object within the arguments ("body[0]"), and so its fields' inputs ("body[0].title").
// `within` holds the references ("#/$defs/Node") of the models this form sits inside.
function objectForm(schema, root, label, path, within = new Set()) {
  const required = new Set(schema.required || []);
  const properties = schema.properties || {};
  const fields = Object.entries(properties).map(([name, property]) => ({
    name,
    field: fieldFor(property, root, name, required.has(name), path ? `${path}.${name}` : name, within),
  }));
  const node = el("fieldset", { className: label ? "object" : "object root-object" }, label ? el("legend", {}, label) : null);
  if (!fields.length) node.append(el("p", { className: "hint" }, "No arguments."));
  for (const { field } of fields) node.append(field.node);
  const read = () => {
    const value = {};
    for (const { name, field } of fields) {
      const item = field.read();
      if (item !== undefined) value[name] = item;
    }
    return value;
  };
  return { node, read };
}

// One field for a property schema; a JSON editor where a form cannot say it (unions, maps).
// `name` is what the label shows, `path` where the value goes in the arguments. A model met
// again inside itself (a tree, a linked list) is a JSON editor from there: its form would
// never end.
function fieldFor(property, root, name, required, path, within) {
  const followed = [];
  const { schema, nullable } = unwrapNullable(property, root, followed);
  const optional = !required || nullable;
  const label = labelFor(name, schema, required, path);
  if (followed.some((reference) => within.has(reference))) return jsonField(schema, label, optional);
  const inside = new Set([...within, ...followed]);
  if (Array.isArray(schema.enum)) return enumField(schema, label, optional);
  if (schema.type === "object" && schema.properties && !schema.additionalProperties) {
    return nestedObject(schema, root, path, optional, inside);
  }
  if (schema.type === "array" && schema.items) return arrayField(schema, root, path, optional, inside);
  if (schema.type === "boolean") return booleanField(schema, label, optional);
  if (schema.type === "integer" || schema.type === "number") return numberField(schema, label, optional);
  if (schema.type === "string") return textField(schema, label, optional);
  return jsonField(schema, label, optional);
}

function labelFor(name, schema, required, path) {
  const text = el("span", { className: "label-text" }, el("code", {}, name), required ? el("span", { className: "required" }, " *") : null);
  const hint = schema.description ? el("small", { className: "hint" }, schema.description) : null;
  return { text, hint, name: path };
}

function wrapField(label, input) {
  return el("label", { className: "field" }, label.text, input, label.hint);
}

function missing(label) {
  return new Error(`${label.name} is required.`);
}

function placeholderOf(schema) {
  if (schema.default !== undefined) return `default: ${JSON.stringify(schema.default)}`;
  if (Array.isArray(schema.examples) && schema.examples.length) return `e.g. ${schema.examples[0]}`;
  if (schema.format) return schema.format;
  return "";
}

function textField(schema, label, optional) {
  // A long text gets room to write in.
  const long = typeof schema.maxLength === "number" && schema.maxLength > 200;
  const input = long ? el("textarea", { rows: 3 }) : el("input", { type: "text" });
  input.placeholder = placeholderOf(schema);
  input.name = label.name;
  return {
    node: wrapField(label, input),
    read: () => {
      if (input.value === "") {
        if (optional) return undefined;
        throw missing(label);
      }
      return input.value;
    },
  };
}

function numberField(schema, label, optional) {
  const input = el("input", { type: "number", step: schema.type === "integer" ? "1" : "any", name: label.name });
  input.placeholder = placeholderOf(schema);
  if (schema.minimum !== undefined) input.min = String(schema.minimum);
  if (schema.maximum !== undefined) input.max = String(schema.maximum);
  return {
    node: wrapField(label, input),
    read: () => {
      if (input.value === "") {
        if (optional) return undefined;
        throw missing(label);
      }
      const value = Number(input.value);
      if (!Number.isFinite(value) || (schema.type === "integer" && !Number.isInteger(value))) {
        throw new Error(`${label.name} must be ${schema.type === "integer" ? "an integer" : "a number"}.`);
      }
      return value;
    },
  };
}

function booleanField(schema, label, optional) {
  // Optional: unset, true or false; required: a checkbox.
  if (optional) {
    const select = el("select", { name: label.name }, el("option", { value: "" }, placeholderOf(schema) || "(unset)"), el("option", { value: "true" }, "true"), el("option", { value: "false" }, "false"));
    return { node: wrapField(label, select), read: () => (select.value === "" ? undefined : select.value === "true") };
  }
  const box = el("input", { type: "checkbox", name: label.name, checked: schema.default === true });
  return { node: wrapField(label, box), read: () => box.checked };
}

function enumField(schema, label, optional) {
  const select = el("select", { name: label.name });
  if (optional) select.append(el("option", { value: "" }, placeholderOf(schema) || "(unset)"));
  schema.enum.forEach((choice, index) => select.append(el("option", { value: String(index) }, JSON.stringify(choice))));
  return {
    node: wrapField(label, select),
    read: () => (select.value === "" ? undefined : schema.enum[Number(select.value)]),
  };
}

function nestedObject(schema, root, path, optional, within) {
  const inner = objectForm(schema, root, path, path, within);
  if (schema.description) inner.node.append(el("small", { className: "hint" }, schema.description));
  return {
    node: inner.node,
    read: () => {
      const value = inner.read();
      return optional && !Object.keys(value).length ? undefined : value;
    },
  };
}

// A list of item fields with Add and Remove buttons.
function arrayField(schema, root, name, optional, within) {
  const items = [];
  const list = el("div", { className: "items" });
  const add = el("button", { type: "button", className: "button small add-item" }, `Add ${name} item`);
  const node = el("fieldset", { className: "array" }, el("legend", {}, name), schema.description ? el("small", { className: "hint" }, schema.description) : null, list, add);
  add.addEventListener("click", () => {
    const path = `${name}[${items.length}]`;
    const field = fieldFor(schema.items, root, path, true, path, within);
    const remove = el("button", { type: "button", className: "button small secondary" }, "Remove");
    const row = el("div", { className: "item" }, field.node, remove);
    const entry = { field, row };
    items.push(entry);
    remove.addEventListener("click", () => {
      items.splice(items.indexOf(entry), 1);
      row.remove();
    });
    list.append(row);
  });
  return {
    node,
    read: () => (optional && !items.length ? undefined : items.map((entry) => entry.field.read())),
  };
}

function jsonField(schema, label, optional) {
  const area = el("textarea", { rows: 3, name: label.name, spellcheck: false, className: "raw" });
  area.placeholder = placeholderOf(schema) || "JSON";
  return {
    node: wrapField(label, area),
    read: () => {
      if (area.value.trim() === "") {
        if (optional) return undefined;
        throw missing(label);
      }
      try {
        return JSON.parse(area.value);
      } catch {
        throw new Error(`${label.name} must be JSON.`);
      }
    },
  };
}

// -- a call -----------------------------------------------------------------------------------

// Call the tool; answer its questions through the user (the confirmation of a change, a
// route's own form), retrying with the answers and the sealed requestState, until it ends.
async function runCall(tool, args, output, button) {
  button.disabled = true;
  const view = callView(output);
  const progressToken = `explorer-${page.nextId}-${Date.now()}`;
  let params = { name: tool.name, arguments: args };
  try {
    for (let round = 0; round < MAX_ROUNDS; round++) {
      const answer = await rpc("tools/call", params, {
        name: tool.name,
        meta: { progressToken },
        headers: paramHeaders(tool, args),
        onNote: (note) => view.note(note),
      });
      const result = resultOf(answer);
      if (result.resultType !== "input_required") {
        view.result(result);
        return;
      }
      const responses = await askUser(result.inputRequests || {}, view);
      params = { name: tool.name, arguments: args, inputResponses: responses, requestState: result.requestState };
    }
    view.problem(`The tool asked more than ${MAX_ROUNDS} questions in a row; the page stopped answering.`);
  } catch (problem) {
    view.problem(problem.message);
  } finally {
    button.disabled = false;
  }
}

// Where one call shows itself: progress, log messages, questions, then its result.
function callView(output) {
  const progress = el("div", { className: "progress", hidden: true }, el("progress", {}), el("span", { className: "progress-text" }));
  const logs = el("ol", { className: "logs", hidden: true });
  const questions = el("div", { className: "questions" });
  const result = el("div", { className: "result" });
  // In the order things happen: questions before the route runs, then its progress and logs.
  output.replaceChildren(el("p", { className: "running" }, "Calling…"), questions, progress, logs, result);
  const running = output.firstChild;
  return {
    note(message) {
      if (message.method === "notifications/progress") showProgress(progress, message.params || {});
      else if (message.method === "notifications/message") showLog(logs, message.params || {});
    },
    ask(node) {
      questions.append(node);
    },
    result(value) {
      running.remove();
      result.replaceChildren(renderResult(value));
    },
    problem(text) {
      running.remove();
      result.replaceChildren(el("p", { className: "error" }, text));
    },
  };
}

function showProgress(holder, params) {
  holder.hidden = false;
  const bar = holder.querySelector("progress");
  if (typeof params.total === "number" && params.total > 0) {
    bar.max = params.total;
    bar.value = params.progress;
  } else {
    bar.removeAttribute("value");
  }
  const of = typeof params.total === "number" ? ` of ${params.total}` : "";
  holder.querySelector(".progress-text").textContent = `${params.progress}${of}${params.message ? ` · ${params.message}` : ""}`;
}

function showLog(logs, params) {
  logs.hidden = false;
  const data = typeof params.data === "string" ? params.data : JSON.stringify(params.data);
  logs.append(el("li", { className: `log log-${params.level}` }, el("span", { className: "level" }, params.level), params.logger ? el("span", { className: "logger" }, params.logger) : null, el("code", {}, data)));
}

// Put each question of an input_required result to the user; resolves to the answers by key.
async function askUser(requests, view) {
  const answers = {};
  for (const [key, request] of Object.entries(requests)) {
    if (request.method !== "elicitation/create") {
      // Not declared by the page, so not asked by a conforming server: answer that it cannot.
      answers[key] = { action: "decline" };
      continue;
    }
    const params = request.params || {};
    answers[key] = await (key === CONFIRM_KEY ? confirmation(params, view) : elicitation(params, view));
  }
  return answers;
}

// The confirmation of a change: the plan (method, path, every argument) and Confirm / Cancel.
function confirmation(params, view) {
  const plan = (params._meta || {})[PLAN_META];
  const confirm = el("button", { type: "button", className: "button confirm-yes" }, "Confirm");
  const cancel = el("button", { type: "button", className: "button secondary confirm-no" }, "Cancel");
  const box = el(
    "div",
    { className: "question confirmation", role: "alertdialog" },
    el("p", { className: "question-message" }, params.message || "Run this call?"),
    plan ? el("p", { className: "plan-route" }, el("code", {}, `${plan.method} ${plan.path}`)) : null,
    plan ? el("pre", { className: "plan" }, pretty(plan.arguments)) : null,
    el("div", { className: "buttons" }, confirm, cancel),
  );
  view.ask(box);
  return new Promise((resolve) => {
    const answer = (action, text) => {
      confirm.disabled = true;
      cancel.disabled = true;
      box.classList.add("answered");
      box.append(el("p", { className: "answer" }, text));
      resolve({ action, content: action === "accept" ? {} : undefined });
    };
    confirm.addEventListener("click", () => answer("accept", "Confirmed."));
    cancel.addEventListener("click", () => answer("cancel", "Cancelled."));
  });
}

// A question a route asks of its own: a form from its (flat) requested schema.
function elicitation(params, view) {
  const schema = params.requestedSchema || { type: "object", properties: {} };
  const form = objectForm(schema, schema);
  const send = el("button", { type: "button", className: "button" }, "Send");
  const decline = el("button", { type: "button", className: "button secondary" }, "Decline");
  const problem = el("p", { className: "error", hidden: true });
  const box = el("div", { className: "question elicitation" }, el("p", { className: "question-message" }, params.message || ""), form.node, problem, el("div", { className: "buttons" }, send, decline));
  view.ask(box);
  return new Promise((resolve) => {
    const done = (answer) => {
      send.disabled = true;
      decline.disabled = true;
      box.classList.add("answered");
      resolve(answer);
    };
    send.addEventListener("click", () => {
      try {
        done({ action: "accept", content: form.read() });
      } catch (error) {
        problem.textContent = error.message;
        problem.hidden = false;
      }
    });
    decline.addEventListener("click", () => done({ action: "decline" }));
  });
}

// -- results ----------------------------------------------------------------------------------

function renderResult(result) {
  const holder = el("div", { className: result.isError ? "call-result is-error" : "call-result" });
  holder.append(el("p", { className: "result-kind" }, result.isError ? "Error result" : "Result"));
  for (const block of result.content || []) holder.append(contentBlock(block));
  if (result.structuredContent !== undefined) holder.append(jsonBlock("Structured content", result.structuredContent, true));
  return holder;
}

// One content block: text, an image shown, audio playable, a resource or a link to one.
function contentBlock(block) {
  switch (block.type) {
    case "text":
      return el("pre", { className: "text-block" }, block.text);
    case "image":
      return el("img", { className: "image-block", src: `data:${block.mimeType};base64,${block.data}`, alt: "an image the tool returned" });
    case "audio":
      return el("audio", { className: "audio-block", controls: true, src: `data:${block.mimeType};base64,${block.data}` });
    case "resource_link":
      return el("p", { className: "link-block" }, "Resource link: ", el("code", {}, block.uri), block.name ? ` (${block.name})` : "");
    case "resource":
      return resourceBlock(block.resource || {});
    default:
      return jsonBlock(`${block.type} block`, block, true);
  }
}

function resourceBlock(resource) {
  const head = el("p", { className: "resource-uri" }, el("code", {}, resource.uri || ""), resource.mimeType ? ` · ${resource.mimeType}` : "");
  if (typeof resource.text === "string") return el("div", { className: "resource-block" }, head, el("pre", {}, resource.text));
  if (typeof resource.blob === "string" && /^image\//.test(resource.mimeType || "")) {
    return el("div", { className: "resource-block" }, head, el("img", { className: "image-block", src: `data:${resource.mimeType};base64,${resource.blob}`, alt: resource.uri || "" }));
  }
  if (typeof resource.blob === "string" && /^audio\//.test(resource.mimeType || "")) {
    return el("div", { className: "resource-block" }, head, el("audio", { controls: true, src: `data:${resource.mimeType};base64,${resource.blob}` }));
  }
  return el("div", { className: "resource-block" }, head, el("p", { className: "hint" }, `${(resource.blob || "").length} base64 characters`));
}

// -- resources, templates, prompts ------------------------------------------------------------

function renderResources(resources, routes) {
  renderSection("resources", resources, (resource) => {
    const about = routes.resources.get(resource.uri);
    return featureCard("resource", resource.uri, resource.name, resource.description, about, () => readForm(resource.uri, false));
  });
}

function renderTemplates(templates, routes) {
  renderSection("templates", templates, (template) => {
    const about = routes.templates.get(template.uriTemplate);
    return featureCard("resource template", template.uriTemplate, template.name, template.description, about, () => readForm(template.uriTemplate, true));
  });
}

function renderPrompts(prompts, routes) {
  renderSection("prompts", prompts, (prompt) => {
    const about = routes.prompts.get(prompt.name);
    return featureCard("prompt", prompt.name, prompt.title, prompt.description, about, () => promptForm(prompt));
  });
}

function renderSection(key, entries, card) {
  byId(`${key}-section`).hidden = entries.length === 0;
  byId(`${key}-count`).textContent = String(entries.length);
  byId(key).replaceChildren(...entries.map(card));
}

function featureCard(kind, key, title, description, about, body) {
  const route = about && about.route;
  const card = el(
    "details",
    { className: "card feature", "data-search": searchText(key, title, description, route && route.path) },
    el(
      "summary",
      {},
      el("span", { className: "mark tool-mark" }, kind),
      el("code", { className: "name" }, key),
      title && title !== key ? el("span", { className: "title" }, title) : null,
      route ? el("span", { className: `method method-${route.method.toLowerCase()}` }, route.method) : null,
      route ? el("code", { className: "path" }, route.path) : null,
    ),
    el("p", { className: "description" }, description || ""),
    route ? routeLine(route) : null,
  );
  return onFirstOpen(card, body);
}

function readForm(uri, template) {
  const input = el("input", { type: "text", value: uri, className: "uri", "aria-label": "Resource URI" });
  const output = el("div", { className: "output" });
  const read = el("button", { type: "button", className: "button" }, "Read");
  read.addEventListener("click", async () => {
    output.replaceChildren(el("p", { className: "running" }, "Reading…"));
    try {
      const result = resultOf(await rpc("resources/read", { uri: input.value }, { name: input.value }));
      output.replaceChildren(...(result.contents || []).map(resourceBlock));
    } catch (problem) {
      output.replaceChildren(el("p", { className: "error" }, problem.message));
    }
  });
  return el("div", { className: "try" }, template ? el("p", { className: "hint" }, "Fill in the template's variables, then read.") : null, el("div", { className: "buttons" }, template ? input : null, read), output);
}

function promptForm(prompt) {
  const inputs = (prompt.arguments || []).map((argument) => ({
    argument,
    input: el("input", { type: "text", name: argument.name }),
  }));
  const output = el("div", { className: "output" });
  const get = el("button", { type: "button", className: "button" }, "Get");
  get.addEventListener("click", async () => {
    const args = {};
    for (const { argument, input } of inputs) if (input.value !== "") args[argument.name] = input.value;
    output.replaceChildren(el("p", { className: "running" }, "Rendering…"));
    try {
      const result = resultOf(await rpc("prompts/get", { name: prompt.name, arguments: args }, { name: prompt.name }));
      output.replaceChildren(...(result.messages || []).map((message) => el("div", { className: "message" }, el("p", { className: "role" }, message.role), contentBlock(message.content || {}))));
    } catch (problem) {
      output.replaceChildren(el("p", { className: "error" }, problem.message));
    }
  });
  const fields = inputs.map(({ argument, input }) =>
    el("label", { className: "field" }, el("span", { className: "label-text" }, el("code", {}, argument.name), argument.required ? " *" : ""), input, argument.description ? el("small", { className: "hint" }, argument.description) : null),
  );
  return el("div", { className: "try" }, el("fieldset", { className: "object root-object" }, fields), el("div", { className: "buttons" }, get), output);
}

// -- the app's other routes -------------------------------------------------------------------

// The OpenAPI document's operations that are not tools, resources or prompts for this caller:
// completions marked as such, those the lists hide from these credentials as what they are and
// what they need, the others as REST only.
function renderOtherRoutes(routes) {
  const paths = (page.openapi && page.openapi.paths) || {};
  const cards = [];
  for (const [path, item] of Object.entries(paths)) {
    for (const method of HTTP_METHODS) {
      const operation = item[method];
      const key = `${method.toUpperCase()} ${path}`;
      const kind = routes.mcp.get(key);
      if (!operation || (kind && kind !== "completion")) continue;
      cards.push(otherRoute(method.toUpperCase(), path, operation, kind, routes.hidden.get(key) || []));
    }
  }
  byId("routes-section").hidden = cards.length === 0;
  byId("routes-count").textContent = String(cards.length);
  byId("routes").replaceChildren(...cards);
}

function otherRoute(method, path, operation, kind, hidden) {
  const tag = (operation.tags && operation.tags[0]) || "default";
  const docs = page.docsUrl && operation.operationId ? `${page.docsUrl}#/${encodeURIComponent(tag)}/${encodeURIComponent(operation.operationId)}` : null;
  const marks = hidden.length
    ? hidden.map((entry) => el("span", { className: "mark hidden-mark" }, entry.kind))
    : [kind ? el("span", { className: "mark tool-mark" }, kind) : el("span", { className: "mark rest-mark" }, "REST only")];
  const why = hidden.length ? el("p", { className: "needs" }, needsText(hidden[0].needs)) : null;
  return el(
    "div",
    { className: "card route-only", "data-search": searchText(path, operation.summary, operation.description, why && why.textContent) },
    ...marks,
    el("span", { className: `method method-${method.toLowerCase()}` }, method),
    el("code", { className: "path" }, path),
    operation.summary ? el("span", { className: "title" }, operation.summary) : null,
    docs ? el("a", { href: docs, className: "docs", target: "_blank", rel: "noopener" }, "/docs") : null,
    why,
  );
}

// Why the lists hide a route's tool (resource, prompt) from these credentials, in one sentence.
function needsText(needs) {
  const schemes = needs.schemes.length ? ` (${needs.schemes.join(" or ")})` : "";
  const scopes = needs.scopes.length ? `, with the scope${needs.scopes.length > 1 ? "s" : ""} ${needs.scopes.join(" ")}` : "";
  if (needs.visibleRule) {
    return `Hidden from these credentials by its visible rule${needs.credentials ? `; needs credentials${schemes}${scopes}` : ""}. Enter others under Authorize.`;
  }
  return `Needs credentials${schemes}${scopes}: enter them under Authorize.`;
}

// -- filter -----------------------------------------------------------------------------------

function applyFilter() {
  const words = byId("filter").value.toLowerCase().split(/\s+/).filter(Boolean);
  for (const card of document.querySelectorAll(".card")) {
    const text = card.dataset.search || "";
    card.hidden = !words.every((word) => text.includes(word));
  }
}

// -- start ------------------------------------------------------------------------------------

function start() {
  // The page is served at {endpoint}/explorer, behind any prefix or root path: the endpoint is
  // its own address without "/explorer".
  const base = location.pathname.replace(/\/explorer\/?$/, "");
  page.endpoint = base || "/";
  page.aboutUrl = `${base}/explorer/about`;
  page.docsUrl = document.body.dataset.docs || "";
  page.openapiUrl = document.body.dataset.openapi || "";
  page.credentials = loadCredentials();
  byId("authorize").addEventListener("click", openAuthorize);
  byId("authorize-form").addEventListener("submit", onAuthorize);
  byId("filter").addEventListener("input", applyFilter);
  refresh();
}

document.addEventListener("DOMContentLoaded", start);
