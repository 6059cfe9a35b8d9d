// The roncho console: what memory holds, through the REST API any client
// uses, with the key the user gives (kept in this tab's sessionStorage).
//
// Everything memory holds is written into the page as text (textContent,
// text nodes, attribute values): never as markup. Links are built only from
// "#/" and encoded ids.

const KEY_STORAGE = "roncho-console-key";
const PAGE_SIZE = 50;
const SVG = "http://www.w3.org/2000/svg";

let key = sessionStorage.getItem(KEY_STORAGE) || "";
const main = document.getElementById("main");
const statusLine = document.getElementById("status");

// ---------------------------------------------------------------- helpers

/** An element with attributes (`on*` are listeners) and children (text or nodes). */
function h(tag, attributes = {}, ...children) {
  const element = document.createElement(tag);
  return fill(element, attributes, children);
}

/** An SVG element, as `h`. */
function s(tag, attributes = {}, ...children) {
  return fill(document.createElementNS(SVG, tag), attributes, children);
}

function fill(element, attributes, children) {
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on")) element.addEventListener(name.slice(2), value);
    else if (name === "class") element.setAttribute("class", value);
    else element.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    element.append(child instanceof Node ? child : String(child));
  }
  return element;
}

/** A link inside the console: "#/" and the encoded parts. */
function link(parts, ...children) {
  const href = "#/" + parts.map((part) => encodeURIComponent(part)).join("/");
  return h("a", { href }, ...children);
}

/** `text` cut at a word to at most `length` characters, with an ellipsis when cut. */
function short(text, length) {
  if (text.length <= length) return text;
  const cut = text.slice(0, length);
  const space = cut.lastIndexOf(" ");
  return `${space > length / 2 ? cut.slice(0, space) : cut}…`;
}

function when(text) {
  if (!text) return "";
  const date = new Date(text);
  return Number.isNaN(date.getTime()) ? String(text) : date.toLocaleString();
}

function say(text) {
  statusLine.textContent = text;
}

/** The claims of the key in use (read to choose where to start; the server verifies it). */
function claims() {
  try {
    const payload = key.split(".")[1].replace(/-/g, "+").replace(/_/g, "/");
    return JSON.parse(atob(payload + "===".slice((payload.length + 3) % 4)));
  } catch {
    return {};
  }
}

class ApiError extends Error {
  constructor(status, detail) {
    super(`${status}: ${detail}`);
    this.status = status;
    this.detail = detail;
  }
}

/** Calls the REST API: JSON in and out, with the key when there is one. */
async function api(method, path, body, timeoutMs = 30_000) {
  const headers = { accept: "application/json" };
  if (body !== undefined) headers["content-type"] = "application/json";
  if (key) headers.authorization = `Bearer ${key}`;
  const response = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    credentials: "omit",
    cache: "no-store",
    signal: AbortSignal.timeout(timeoutMs),
  });
  const text = await response.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = text;
  }
  if (!response.ok) {
    const detail = data && typeof data === "object" && "detail" in data ? JSON.stringify(data.detail) : String(text);
    // 401 is also how the API refuses a key what it does not reach: the
    // form is for a missing or unaccepted key only.
    if (response.status === 401 && !String(detail).includes("permission denied")) showKeyForm();
    throw new ApiError(response.status, detail.replace(/^"|"$/g, ""));
  }
  return { data, headers: response.headers, status: response.status };
}

/**
 * An id as one segment of an API path. "." and ".." would be read as
 * path steps (a browser resolves them, encoded or not), so they, and an
 * empty id, name nothing.
 */
function seg(id) {
  if (id === "" || id === "." || id === "..") throw new Error(`\`${id}\` is not an id the console can address`);
  return encodeURIComponent(id);
}

function w(workspace) {
  return `/v3/workspaces/${seg(workspace)}`;
}

function page(number, size = PAGE_SIZE, reverse = false) {
  return `?page=${number}&size=${size}${reverse ? "&reverse=true" : ""}`;
}

/** A page number from the address: a whole number from 1, else 1. */
function pageNumber(query, name = "page") {
  const number = Number.parseInt(query.get(name) || "1", 10);
  return Number.isFinite(number) && number >= 1 ? number : 1;
}

function errorBox(error) {
  return h("div", { class: "error", role: "alert" }, error instanceof ApiError ? `The server answered ${error.message}` : String(error));
}

/** Waits for a call a section needs: its reply, or the error to show in its place. */
async function settle(promise) {
  try {
    return await promise;
  } catch (error) {
    return { error };
  }
}

/** A section's content, or why this key cannot see it. */
function shown(reply, render) {
  return reply.error ? errorBox(reply.error) : render(reply.data);
}

function table(headings, rows) {
  return h(
    "table",
    {},
    h("thead", {}, h("tr", {}, headings.map((heading) => h("th", { scope: "col" }, heading)))),
    h("tbody", {}, rows.map((cells) => h("tr", {}, cells.map((cell) => h("td", {}, cell))))),
  );
}

/**
 * Links to the pages before and after `number` of `pages`, at `route` with
 * the query parameter `name` (other parameters of `query` kept).
 */
function pager(route, number, pages, { name = "page", query = new URLSearchParams(), before = "Previous page", after = "Next page" } = {}) {
  if (!pages || pages <= 1) return null;
  const to = (n) => {
    const kept = new URLSearchParams(query);
    kept.set(name, String(n));
    return `#${route}?${kept}`;
  };
  return h(
    "div",
    { class: "pager" },
    number > 1 ? h("a", { href: to(number - 1) }, before) : null,
    h("span", { class: "muted" }, `page ${number} of ${pages}`),
    number < pages ? h("a", { href: to(number + 1) }, after) : null,
  );
}

// ---------------------------------------------------------------- the key

function showKeyForm() {
  document.getElementById("key-form").hidden = false;
}

document.getElementById("key-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const input = document.getElementById("key");
  key = input.value.trim();
  input.value = "";
  if (key) sessionStorage.setItem(KEY_STORAGE, key);
  document.getElementById("key-form").hidden = true;
  document.getElementById("forget-key").hidden = !key;
  route();
});

document.getElementById("forget-key").addEventListener("click", () => {
  key = "";
  sessionStorage.removeItem(KEY_STORAGE);
  document.getElementById("forget-key").hidden = true;
  showKeyForm();
  route();
});

// ---------------------------------------------------------------- pages

async function workspacesPage(query) {
  const number = Number(query.get("page") || 1);
  const opener = h(
    "form",
    { class: "inline", onsubmit: (event) => {
      event.preventDefault();
      const id = event.target.elements.workspace.value.trim();
      if (id) location.hash = `#/w/${encodeURIComponent(id)}`;
    } },
    h("label", { for: "open-workspace" }, "Workspace id"),
    h("input", { id: "open-workspace", name: "workspace", type: "text", autocomplete: "off" }),
    h("button", { type: "submit" }, "Open"),
  );
  const own = claims();
  if (own.w) {
    // A key's own start: its session, its peer, or its workspace.
    const where = own.s ? `/s/${encodeURIComponent(own.s)}` : own.p ? `/p/${encodeURIComponent(own.p)}` : "";
    location.hash = `#/w/${encodeURIComponent(own.w)}${where}`;
    return [];
  }
  try {
    const { data } = await api("POST", `/v3/workspaces/list${page(number)}`, {});
    return [
      h("h1", {}, "Workspaces"),
      opener,
      table(
        ["Workspace", "Created"],
        data.items.map((item) => [link(["w", item.id], item.id), when(item.created_at)]),
      ),
      pager("/", number, data.pages, { query }),
    ];
  } catch (error) {
    return [h("h1", {}, "Workspaces"), opener, errorBox(error)];
  }
}

async function workspacePage(workspace, query) {
  const [peerPage, sessionPage] = [pageNumber(query, "peers"), pageNumber(query, "sessions")];
  const [peers, sessions] = await Promise.all([
    api("POST", `${w(workspace)}/peers/list${page(peerPage, 100)}`, {}),
    api("POST", `${w(workspace)}/sessions/list${page(sessionPage, 100)}`, {}),
  ]);
  const here = `/w/${encodeURIComponent(workspace)}`;
  return [
    h("h1", {}, `Workspace ${workspace}`),
    searchForm(workspace, ""),
    h(
      "p",
      {},
      link(["w", workspace, "queue"], "Queue and derivation"),
      " · ",
      link(["w", workspace, "chat"], "Chat with a peer"),
    ),
    h("h2", {}, `Peers (${peers.data.total})`),
    pager(here, peerPage, peers.data.pages, { name: "peers", query }),
    table(
      ["Peer", "Created"],
      peers.data.items.map((peer) => [link(["w", workspace, "p", peer.id], peer.id), when(peer.created_at)]),
    ),
    h("h2", {}, `Sessions (${sessions.data.total})`),
    pager(here, sessionPage, sessions.data.pages, { name: "sessions", query }),
    table(
      ["Session", "Active", "Created"],
      sessions.data.items.map((session) => [
        link(["w", workspace, "s", session.id], session.id),
        session.is_active ? "yes" : "no",
        when(session.created_at),
      ]),
    ),
  ];
}

function searchForm(workspace, query) {
  return h(
    "form",
    { class: "inline", role: "search", onsubmit: (event) => {
      event.preventDefault();
      const text = event.target.elements.q.value.trim();
      if (text) location.hash = `#/w/${encodeURIComponent(workspace)}/search?q=${encodeURIComponent(text)}`;
    } },
    h("label", { for: "search" }, "Search messages"),
    h("input", { id: "search", name: "q", type: "search", value: query }),
    h("button", { type: "submit" }, "Search"),
  );
}

function messageRows(workspace, messages) {
  return messages.map((message) => [
    link(["w", workspace, "s", message.session_id, "m", message.id], when(message.created_at)),
    link(["w", workspace, "p", message.peer_id], message.peer_id),
    h("div", { class: "content" }, message.content),
  ]);
}

async function searchPage(workspace, query) {
  const text = (query.get("q") || "").trim();
  if (!text) return [h("h1", {}, `Search in ${workspace}`), searchForm(workspace, ""), h("p", { class: "muted" }, "Type what to search for.")];
  const { data } = await api("POST", `${w(workspace)}/search`, { query: text, limit: 20 });
  return [
    h("h1", {}, `Search in ${workspace}`),
    searchForm(workspace, text),
    h("p", { class: "muted" }, `${data.length} messages`),
    table(["When", "Peer", "Message"], messageRows(workspace, data)),
  ];
}

/** What was learned in a session, placed at the messages it came from. */
function timeline(workspace, messages, conclusions, total = conclusions.length) {
  if (!messages.length) return null;
  const width = 900;
  const step = Math.max(4, Math.min(40, (width - 40) / messages.length));
  const peers = [...new Set(messages.map((message) => message.peer_id))];
  const place = new Map(messages.map((message, index) => [message.id, index]));
  const x = (index) => 20 + index * step;
  const rowOf = (peer) => 20 + peers.indexOf(peer) * 18;
  const learned = conclusions
    .map((conclusion) => ({ conclusion, at: Math.max(-1, ...conclusion.source_ids.map((id) => place.get(id) ?? -1)) }))
    .filter((entry) => entry.at >= 0);
  const top = 30 + peers.length * 18;
  const height = top + 20 + Math.min(learned.length, 12) * 14;
  return s(
    "svg",
    { viewBox: `0 0 ${Math.max(width, x(messages.length) + 20)} ${height}`, role: "group", "aria-label": total > conclusions.length
      ? `Timeline of ${messages.length} messages and the first ${learned.length} of ${total} conclusions learned from them`
      : `Timeline of ${messages.length} messages and ${learned.length} conclusions learned from them` },
    peers.map((peer) => s("text", { x: 0, y: rowOf(peer) - 6 }, peer)),
    messages.map((message, index) =>
      // Not tab stops: the same messages are listed below, one link each.
      s("a", { href: `#/w/${encodeURIComponent(workspace)}/s/${encodeURIComponent(message.session_id)}/m/${encodeURIComponent(message.id)}`, "aria-label": `Message ${index + 1} by ${message.peer_id}`, tabindex: "-1" },
        s("circle", { cx: x(index), cy: rowOf(message.peer_id), r: 4, fill: "#1f5fae" }, s("title", {}, `${message.peer_id}: ${message.content.slice(0, 120)}`)))),
    learned.slice(0, 12).map((entry, row) =>
      s("a", { href: `#/w/${encodeURIComponent(workspace)}/c/${encodeURIComponent(entry.conclusion.id)}`, tabindex: "-1" },
        s("line", { x1: x(entry.at), y1: top - 10, x2: x(entry.at), y2: top + row * 14, stroke: "#1d7a3a" }),
        s("text", { x: x(entry.at) + 4, y: top + row * 14 + 4 }, short(entry.conclusion.content, 80)))),
  );
}

async function sessionPage(workspace, session, query) {
  // Page 1 holds the newest messages; each page is shown oldest first.
  const number = pageNumber(query);
  const learnedPage = pageNumber(query, "learned");
  const [messages, conclusions] = await Promise.all([
    api("POST", `${w(workspace)}/sessions/${seg(session)}/messages/list${page(number, 100, true)}`, {}),
    settle(api("POST", `${w(workspace)}/conclusions/list${page(learnedPage, 50)}`, { filters: { session_id: session } })),
  ]);
  const shownMessages = [...messages.data.items].reverse();
  // What was learned from this page's messages, for the timeline.
  const placed = shownMessages.length
    ? await settle(api("POST", `${w(workspace)}/conclusions/list${page(1, 100)}`, {
      filters: { session_id: session, source_ids: { in: shownMessages.map((message) => message.id) } },
    }))
    : { data: { items: [] } };
  const here = `/w/${encodeURIComponent(workspace)}/s/${encodeURIComponent(session)}`;
  return [
    h("h1", {}, `Session ${session}`),
    h("h2", {}, "Timeline"),
    timeline(workspace, shownMessages, placed.error ? [] : placed.data.items, placed.error ? 0 : placed.data.total),
    h("h2", {}, `Messages (${messages.data.total})`),
    pager(here, number, messages.data.pages, { query, before: "Later messages", after: "Earlier messages" }),
    table(["When", "Peer", "Message"], messageRows(workspace, shownMessages)),
    h("h2", {}, "Learned in this session"),
    shown(conclusions, (data) => [
      h("p", { class: "muted" }, `${data.total} conclusions, newest first`),
      pager(here, learnedPage, data.pages, { name: "learned", query }),
      conclusionTable(workspace, data.items),
    ]),
    eraseButton("Erase this session", `${w(workspace)}/sessions/${seg(session)}`, workspace),
  ];
}

function conclusionTable(workspace, conclusions) {
  return table(
    ["Conclusion", "Observer → observed", "Level", "Confirmed", "When"],
    conclusions.map((conclusion) => [
      link(["w", workspace, "c", conclusion.id], conclusion.content),
      `${conclusion.observer_id} → ${conclusion.observed_id}`,
      conclusion.level,
      `${conclusion.times_derived}×`,
      when(conclusion.created_at),
    ]),
  );
}

async function messagePage(workspace, session, message) {
  const [found, learned] = await Promise.all([
    api("GET", `${w(workspace)}/sessions/${seg(session)}/messages/${seg(message)}`),
    settle(api("POST", `${w(workspace)}/conclusions/list${page(1, 100)}`, { filters: { source_ids: { contains: message } } })),
  ]);
  const item = found.data;
  return [
    h("h1", {}, "Message"),
    h("p", {}, link(["w", workspace, "p", item.peer_id], item.peer_id), " in ", link(["w", workspace, "s", session], session), ", ", when(item.created_at)),
    h("blockquote", { class: "content" }, item.content),
    h("h2", {}, "Learned from it"),
    shown(learned, (data) => [h("p", { class: "muted" }, `${data.total} conclusions`), conclusionTable(workspace, data.items)]),
    eraseButton("Erase this message", `${w(workspace)}/sessions/${seg(session)}/messages/${seg(message)}`, workspace),
  ];
}

/** The premises and sources of a conclusion, and what was derived from it. */
function graph(workspace, conclusion, sources, derived) {
  const rows = Math.max(sources.length, derived.length, 1);
  const height = 40 + rows * 40;
  const middle = height / 2;
  const node = (x, y, label, href, color) =>
    s("a", { href }, s("title", {}, label), s("rect", { x, y: y - 14, width: 250, height: 28, rx: 6, fill: "#ffffff", stroke: color }), s("text", { x: x + 8, y: y + 4 }, short(label, 40)));
  return s(
    "svg",
    { viewBox: `0 0 900 ${height}`, role: "group", "aria-label": `${sources.length} sources and premises, ${derived.length} conclusions derived from it` },
    sources.map((source, index) => {
      const y = 30 + index * 40;
      return [s("line", { x1: 270, y1: y, x2: 325, y2: middle, stroke: "#5b6572" }), node(20, y, source.label, source.href, source.kind === "message" ? "#1f5fae" : "#1d7a3a")];
    }),
    node(325, middle, conclusion.content, `#/w/${encodeURIComponent(workspace)}/c/${encodeURIComponent(conclusion.id)}`, "#1d232b"),
    derived.map((item, index) => {
      const y = 30 + index * 40;
      return [s("line", { x1: 575, y1: middle, x2: 630, y2: y, stroke: "#5b6572" }), node(630, y, item.content, `#/w/${encodeURIComponent(workspace)}/c/${encodeURIComponent(item.id)}`, "#1d7a3a")];
    }),
  );
}

async function conclusionPage(workspace, id) {
  const [found, derived] = await Promise.all([
    api("GET", `${w(workspace)}/conclusions/${seg(id)}`),
    api("POST", `${w(workspace)}/conclusions/list${page(1, 50)}`, { filters: { source_ids: { contains: id } } }),
  ]);
  const conclusion = found.data;
  const explicit = conclusion.level === "explicit";
  // An explicit conclusion's sources are messages (of its session, where it
  // names one); any other's are the conclusions it was derived from. What
  // cannot be read is said as it is: not found, or the server's answer.
  const unread = (source, kind, why) => ({ kind, id: source, label: `${source} (${why})`, content: `${source}: ${why}`, href: "#" });
  const sources = await Promise.all(
    conclusion.source_ids.map(async (source) => {
      if (explicit && !conclusion.session_id) return unread(source, "message", "a message; its session is not recorded, so it is not shown here");
      try {
        if (explicit) {
          const { data } = await api("GET", `${w(workspace)}/sessions/${seg(conclusion.session_id)}/messages/${seg(source)}`);
          return { kind: "message", id: source, label: `${data.peer_id}: ${data.content}`, content: data.content, peer: data.peer_id, when: data.created_at, href: `#/w/${encodeURIComponent(workspace)}/s/${encodeURIComponent(data.session_id)}/m/${encodeURIComponent(source)}` };
        }
        const { data } = await api("GET", `${w(workspace)}/conclusions/${seg(source)}`);
        return { kind: "conclusion", id: source, label: data.content, content: data.content, when: data.created_at, href: `#/w/${encodeURIComponent(workspace)}/c/${encodeURIComponent(source)}` };
      } catch (error) {
        const missing = error instanceof ApiError && error.status === 404;
        const why = missing
          ? explicit ? `not in session ${conclusion.session_id}: erased, or said in another session` : "not found: deleted or erased"
          : `could not be read: ${error.message}`;
        return unread(source, explicit ? "message" : "conclusion", why);
      }
    }),
  );
  return [
    h("h1", {}, "Why this is believed"),
    h("blockquote", { class: "content" }, conclusion.content),
    table(
      ["Observer", "About", "Level", "Confirmed", "Learned", "Session"],
      [[
        link(["w", workspace, "p", conclusion.observer_id], conclusion.observer_id),
        link(["w", workspace, "p", conclusion.observed_id], conclusion.observed_id),
        conclusion.level,
        `${conclusion.times_derived}×`,
        when(conclusion.created_at),
        conclusion.session_id ? link(["w", workspace, "s", conclusion.session_id], conclusion.session_id) : "—",
      ]],
    ),
    h("h2", {}, explicit ? `Learned from ${sources.length} messages` : `Derived from ${sources.length} premises`),
    graph(workspace, conclusion, sources, derived.data.items),
    table(
      ["Source", "Kind", "When"],
      sources.map((source) => [h("a", { href: source.href }, source.content), source.kind, when(source.when)]),
    ),
    h("h2", {}, `Derived from this (${derived.data.total})`),
    conclusionTable(workspace, derived.data.items),
    eraseButton("Delete this conclusion", `${w(workspace)}/conclusions/${seg(id)}`, workspace),
  ];
}

async function peerPage(workspace, peer, query) {
  const observer = query.get("observer") || peer;
  const aboutPage = pageNumber(query, "about");
  const [card, representation, about, peers] = await Promise.all([
    settle(api("GET", `${w(workspace)}/peers/${seg(observer)}/card${observer === peer ? "" : `?target=${seg(peer)}`}`)),
    settle(api("POST", `${w(workspace)}/peers/${seg(observer)}/representation`, observer === peer ? {} : { target: peer })),
    settle(api("POST", `${w(workspace)}/conclusions/list${page(aboutPage, 50)}`, { filters: { observed_id: peer } })),
    api("POST", `${w(workspace)}/peers/list${page(1, 100)}`, {}).catch(() => ({ data: { items: [{ id: peer }] } })),
  ]);
  const chooser = h(
    "form",
    { class: "inline", onsubmit: (event) => {
      event.preventDefault();
      const chosen = event.target.elements.observer.value.trim();
      location.hash = `#/w/${encodeURIComponent(workspace)}/p/${encodeURIComponent(peer)}?observer=${encodeURIComponent(chosen)}`;
    } },
    peerField("observer", "observer", "As seen by ", peers.data.items, observer, true),
    h("button", { type: "submit" }, "Show"),
  );
  return [
    h("h1", {}, `Peer ${peer}`),
    h("p", {}, link(["w", workspace, "chat", peer], `Chat with ${peer}'s memory`)),
    chooser,
    h("h2", {}, `Peer card (kept by ${observer})`),
    shown(card, (data) => {
      const lines = (data && data.peer_card) || [];
      return lines.length ? h("ul", {}, lines.map((line) => h("li", {}, line))) : h("p", { class: "muted" }, "No card yet.");
    }),
    h("h2", {}, `Representation (as ${observer} sees ${peer})`),
    shown(representation, (data) => h("div", { class: "content" }, (data && data.representation) || "Nothing learned yet.")),
    h("h2", {}, `Conclusions about ${peer}`),
    shown(about, (data) => [
      h("p", { class: "muted" }, `${data.total} conclusions, newest first`),
      pager(`/w/${encodeURIComponent(workspace)}/p/${encodeURIComponent(peer)}`, aboutPage, data.pages, { name: "about", query }),
      conclusionTable(workspace, data.items),
    ]),
    eraseButton(`Erase peer ${peer}`, `${w(workspace)}/peers/${seg(peer)}`, workspace),
  ];
}

/** A chart of one series over the last hour: bars, labelled at both ends and at its peak. */
function chart(label, samples, value, unit) {
  const values = samples.map(value);
  const peak = Math.max(1, ...values.filter((v) => v !== null && v !== undefined));
  const width = 600;
  const height = 120;
  const step = width / Math.max(1, samples.length);
  const shown = values.filter((v) => v !== null && v !== undefined);
  const summary = shown.length ? `${label}: peak ${peak} ${unit}, now ${values[values.length - 1] ?? 0} ${unit}` : `${label}: nothing in the last hour`;
  return h(
    "figure",
    {},
    s(
      "svg",
      { viewBox: `0 0 ${width + 60} ${height + 30}`, role: "img", "aria-label": summary },
      s("title", {}, summary),
      values.map((v, index) => {
        if (v === null || v === undefined || v === 0) return null;
        const barHeight = Math.max(1, (v / peak) * height);
        return s("rect", { x: 50 + index * step, y: 10 + height - barHeight, width: Math.max(1, step - 1), height: barHeight, fill: "#1f5fae" });
      }),
      s("line", { x1: 50, y1: 10 + height, x2: 50 + width, y2: 10 + height, stroke: "#5b6572" }),
      s("text", { x: 0, y: 16 }, `${peak} ${unit}`),
      s("text", { x: 0, y: 10 + height }, "0"),
      s("text", { x: 50, y: height + 26 }, "an hour ago"),
      s("text", { x: width, y: height + 26 }, "now"),
    ),
    h("figcaption", {}, summary),
  );
}

async function queuePage(workspace) {
  const { data } = await api("GET", `${w(workspace)}/queue/status?history=true`);
  const card = (label, value, kind) => h("div", { class: "card" }, h("div", { class: `number ${kind || ""}` }, String(value)), h("div", { class: "muted" }, label));
  const derivation = data.derivation || {};
  const history = data.history || [];
  const retried = h("div", { "aria-live": "polite" });
  const retry = h("button", { type: "button", disabled: !data.failed_work_units, onclick: async () => {
    retry.disabled = true;
    try {
      const reply = await api("POST", `${w(workspace)}/queue/retry`, {});
      retried.replaceChildren(h("p", { class: "good" }, `${reply.data.retried} work units run again.`));
    } catch (error) {
      retried.replaceChildren(errorBox(error));
      retry.disabled = false;
    }
  } }, "Run dead work again");
  return [
    h("h1", {}, `Queue of ${workspace}`),
    h(
      "div",
      { class: "cards" },
      card("pending work units", data.pending_work_units),
      card("in progress", data.in_progress_work_units),
      card("completed", data.completed_work_units, "good"),
      card("failed (dead)", data.failed_work_units, data.failed_work_units ? "bad" : ""),
      card("dreams waiting", data.dreams_waiting),
      card("dreams ready", data.dreams_ready),
    ),
    h(
      "p",
      { class: "muted" },
      `Observations: ${derivation.observations || "extractive (no LLM configured)"}; summaries: ${derivation.summaries || "extractive (no LLM configured)"}.`,
    ),
    data.degraded_reason ? h("div", { class: "error", role: "alert" }, `Derivation is degraded: ${data.degraded_reason}`) : null,
    h("h2", {}, "The last hour"),
    chart("Work waiting", history, (sample) => sample.waiting_work_units, "units"),
    chart("Time from message to derived (median per minute)", history, (sample) => sample.latency_p50_ms, "ms"),
    h("h2", {}, `Dead work (${data.failed_work_units})`),
    data.failures.length
      ? table(["Work unit", "Attempts", "Why it failed"], data.failures.map((task) => [task.work_unit_key, String(task.attempts), h("span", { class: "content" }, task.error)]))
      : h("p", { class: "muted" }, "None."),
    retry,
    retried,
    h("h2", {}, "Postponed by an outage"),
    data.postponed.length
      ? table(["Work unit", "Postponed", "Why", "Tried again"], data.postponed.map((task) => [task.work_unit_key, `${task.deferrals}×`, task.reason, when(task.ready_at)]))
      : h("p", { class: "muted" }, "None."),
    h("h2", {}, "Derivation"),
    table(["Measure", "Value"], Object.entries(derivation).map(([name, value]) => [name, value === null ? "extractive (no model)" : String(value)])),
  ];
}

/** A text field for a peer's id, offering the workspace's first peers (any id may be typed). */
function peerField(id, name, label, peers, value, required) {
  return h(
    "p",
    {},
    h("label", { for: id }, label),
    h("input", { id, name, type: "text", list: `${id}-peers`, value: value || "", required, autocomplete: "off", spellcheck: "false" }),
    h("datalist", { id: `${id}-peers` }, peers.map((item) => h("option", { value: item.id }))),
  );
}

let asking = 0;

async function chatPage(workspace, peer) {
  const peers = await api("POST", `${w(workspace)}/peers/list${page(1, 100)}`, {}).catch(() => ({ data: { items: [] } }));
  const answer = h("div", { "aria-live": "polite" });
  const form = h(
    "form",
    { onsubmit: async (event) => {
      event.preventDefault();
      const fields = event.target.elements;
      const body = { query: fields.query.value, include_evidence: true };
      if (fields.target.value.trim()) body.target = fields.target.value.trim();
      // Only the latest question's answer is shown.
      const mine = (asking += 1);
      answer.replaceChildren(h("p", { class: "muted" }, "Asking…"));
      let shownAnswer;
      try {
        const { data } = await api("POST", `${w(workspace)}/peers/${seg(fields.peer.value.trim())}/chat`, body, 180_000);
        shownAnswer = evidenceView(workspace, data);
      } catch (error) {
        shownAnswer = [errorBox(error)];
      }
      if (mine === asking) answer.replaceChildren(...shownAnswer);
    } },
    peerField("chat-peer", "peer", "Whose memory ", peers.data.items, peer, true),
    peerField("chat-target", "target", "About (empty: the peer itself) ", peers.data.items, "", false),
    h("p", {}, h("label", { for: "chat-query" }, "Question"), h("textarea", { id: "chat-query", name: "query", required: true })),
    h("button", { type: "submit" }, "Ask"),
  );
  return [h("h1", {}, "Chat"), form, answer];
}

function evidenceView(workspace, data) {
  const evidence = data.evidence || { conclusions: [], messages: [], tool_calls: [] };
  return [
    h("h2", {}, "Answer"),
    h("div", { class: "content", id: "answer" }, data.content || ""),
    h("h2", {}, `Evidence: ${evidence.conclusions.length} conclusions, ${evidence.messages.length} messages`),
    table(
      ["Conclusion", "Level"],
      evidence.conclusions.map((conclusion) => [link(["w", workspace, "c", conclusion.id], conclusion.content), conclusion.level]),
    ),
    table(
      ["Message", "Peer", "Session"],
      evidence.messages.map((message) => [
        link(["w", workspace, "s", message.session_id, "m", message.id], message.id),
        message.peer_id,
        message.session_id,
      ]),
    ),
    evidence.tool_calls.length ? h("p", { class: "muted" }, "Tools used: ", evidence.tool_calls.map((call) => call.tool_name).join(", ")) : null,
    evidence.reasoning_trace_id ? h("p", {}, link(["w", workspace, "trace", evidence.reasoning_trace_id], "How the answer was reached")) : null,
  ];
}

async function tracePage(workspace, id) {
  const { data } = await api("GET", `${w(workspace)}/traces/${seg(id)}`);
  return [h("h1", {}, "Reasoning trace"), h("pre", { class: "content" }, JSON.stringify(data, null, 2))];
}

/** A button that erases with `DELETE path`, then shows the receipt until it is complete. */
function eraseButton(label, path, workspace) {
  const shown = h("div", { "aria-live": "polite" });
  const button = h("button", { type: "button", class: "danger", onclick: async () => {
    if (!window.confirm(`${label}? This cannot be undone.`)) return;
    button.disabled = true;
    let reply;
    try {
      reply = await api("DELETE", path);
    } catch (error) {
      // Refused: nothing was erased, so it may be asked again.
      shown.replaceChildren(errorBox(error));
      button.disabled = false;
      button.focus();
      return;
    }
    // Accepted: the erasure runs whatever the page does from here, so the
    // button stays off and the receipt is what the page shows.
    const receipt = reply.headers.get("x-roncho-erasure-receipt") || (reply.data && reply.data.id);
    if (!receipt) {
      showReceipt(shown, h("strong", {}, "Deleted."), h("p", {}, "This page still shows what was here; reload it to see it gone."));
      return;
    }
    await followReceipt(workspace, receipt, shown);
  } }, label);
  return h("div", {}, h("h2", {}, "Erase"), button, shown);
}

/** Shows a receipt and moves the keyboard's focus to it. */
function showReceipt(shown, ...children) {
  const box = h("div", { class: "receipt", id: "receipt", tabindex: "-1" }, ...children);
  shown.replaceChildren(box);
  box.focus();
}

async function followReceipt(workspace, id, shown) {
  const deadline = Date.now() + 120_000;
  for (;;) {
    let data;
    try {
      ({ data } = await api("GET", `${w(workspace)}/erasures/${seg(id)}`));
    } catch (error) {
      showReceipt(shown, h("strong", {}, "Erasure accepted"), h("p", {}, `Receipt ${id}. It could not be followed from here (${error.message}); GET /v3/workspaces/…/erasures/${id} says how far it is.`));
      return;
    }
    const counts = Object.entries(data.counts || {}).filter(([, count]) => count).map(([name, count]) => `${count} ${name.replace(/_/g, " ")}`);
    const complete = data.state === "complete";
    const stopped = !complete && Date.now() > deadline;
    showReceipt(
      shown,
      h("strong", {}, `Erasure ${data.state}`),
      h("p", {}, counts.length ? `Removed: ${counts.join(", ")}` : "Removed nothing else."),
      h("p", { class: "muted" }, `Receipt ${data.id}`, data.finished_at ? `, finished ${when(data.finished_at)}` : ""),
      complete ? h("p", {}, "This page still shows what was here; reload it to see it gone.") : null,
      stopped ? h("p", {}, "Still running after two minutes: the console stopped following it; the receipt says when it completes.") : null,
    );
    if (complete || stopped) return;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

// ---------------------------------------------------------------- routing

function crumbs(parts) {
  const trail = [h("a", { href: "#/" }, "workspaces")];
  if (parts[0] === "w" && parts[1]) trail.push(" / ", link(["w", parts[1]], parts[1]));
  if (parts[2] === "s" && parts[3]) trail.push(" / ", link(["w", parts[1], "s", parts[3]], `session ${parts[3]}`));
  if (parts[2] === "p" && parts[3]) trail.push(" / ", link(["w", parts[1], "p", parts[3]], `peer ${parts[3]}`));
  document.getElementById("crumbs").replaceChildren(...trail);
}

async function render(parts, query) {
  const [kind, workspace, what, id, sub, subId] = parts;
  if (kind !== "w" || !workspace) return workspacesPage(query);
  if (!what) return workspacePage(workspace, query);
  if (what === "search") return searchPage(workspace, query);
  if (what === "s" && id && sub === "m" && subId) return messagePage(workspace, id, subId);
  if (what === "s" && id) return sessionPage(workspace, id, query);
  if (what === "p" && id) return peerPage(workspace, id, query);
  if (what === "c" && id) return conclusionPage(workspace, id);
  if (what === "queue") return queuePage(workspace);
  if (what === "chat") return chatPage(workspace, id);
  if (what === "trace" && id) return tracePage(workspace, id);
  return [h("h1", {}, "Not found"), h("p", {}, "No such page in the console.")];
}

let rendering = 0;

async function route() {
  const address = location.hash;
  const hash = address.replace(/^#\/?/, "");
  const [path, search] = hash.split("?");
  const query = new URLSearchParams(search || "");
  const mine = (rendering += 1);
  // Nothing of the page before stays under the new address while this one loads.
  main.replaceChildren(h("p", { class: "muted" }, "Loading…"));
  crumbs([]);
  document.title = "Loading… · roncho";
  say("Loading…");
  const started = performance.now();
  let content;
  try {
    const parts = path.split("/").filter(Boolean).map((part) => decodeURIComponent(part));
    crumbs(parts);
    content = await render(parts, query);
  } catch (error) {
    content = [h("h1", {}, "Could not load this page"), errorBox(error)];
  }
  if (mine !== rendering) return;
  main.replaceChildren(...[content].flat(Infinity).filter(Boolean));
  const heading = main.querySelector("h1");
  if (heading) document.title = `${heading.textContent} · roncho`;
  main.focus({ preventScroll: true });
  say(`Loaded in ${Math.round(performance.now() - started)} ms`);
  document.body.dataset.loaded = String(mine);
  // Which address the page shows (tests wait for the one they asked for).
  document.body.dataset.rendered = address;
}

// The skip link moves the focus; it is no address of the console.
document.querySelector(".skip").addEventListener("click", (event) => {
  event.preventDefault();
  main.focus();
});
document.getElementById("forget-key").hidden = !key;
window.addEventListener("hashchange", route);
route();
