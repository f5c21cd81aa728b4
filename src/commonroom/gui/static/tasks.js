// Task surfaces on the host's page (docs/spec/PROTOCOL.md §20): a task's live view and its
// generated app, one card per task. A panel (app.js): `init` once, `load` when the page reads
// the whole room again (start, reconnect, resync), and `onEvent` for each event on its
// resources: one of `task_surfaces` re-reads its task's card, a handoff's move re-reads them
// all (a task may have ended); room text never does.
//
// Rules this file keeps:
// - A live view is data: every node is built here with createElement and textContent,
//   never from agent HTML; a local action (increment, set, typing in an Input) changes this
//   page's copy of `data` only and sends nothing.
// - An app runs in `<iframe sandbox="allow-scripts" srcdoc>`: an opaque origin (no cookies,
//   no storage, no way into this page), a meta CSP allowing no network; this page's own CSP
//   (inherited by srcdoc) refuses it any navigation. Its inline code carries the nonce of
//   this page's answer, the only way an inline script runs here.
// - The bridge (`window.commonroom` in the frame) is postMessage only: a message counts
//   when its `source` is that app's own frame and its shape is exactly one of the bridge's;
//   the task is always the frame's own, never a name in the message. A reply counts only
//   for a request this page gave that frame.
// - App requests come on one line per page (`GET /owner/app-host`, an EventSource with a
//   single-use ticket); the page says which apps it runs (`/owner/app-host/apps`) and
//   answers (`/owner/app-host/reply`). Closing a card stops its app and its hosting.
import * as kit from "./page.js";

let live = null; // what `init` answers: { refresh, onEvent }

export const panel = {
  name: "tasks",
  // Its own events (task_surfaces) re-read one card; a handoff's move re-reads them all (a task
  // may have ended); neither needs the rest of the page read again.
  resources: ["task_surfaces", "handoffs"],
  init: async () => { live = await init({ api: kit.api, el: kit.el, clear: kit.clear, nameOf: kit.nameOf, ago: kit.ago }); },
  load: () => live.refresh(), // a full re-read only (start, reconnect, resync): onEvent takes the others
  onEvent: (type, data) => live.onEvent(type, data),
};
const CHANNEL = "commonroom-app";
const FRAME_CSP = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'";
const NONCE = (document.querySelector('meta[name="commonroom-frame-nonce"]') || {}).content || "";
const BRIDGE_CALLS = 4; // getState/setState calls of one app in flight at once
const FROM_APP = {
  getState: ["channel", "kind", "id"],
  setState: ["channel", "kind", "id", "revision", "state"],
  ready: ["channel", "kind"],
  reply: ["channel", "kind", "request_id", "reply", "error"],
};

// The bridge, as the frame runs it before the app's own script. It holds nothing of the page.
const BRIDGE = `(() => {
  "use strict";
  const CHANNEL = ${JSON.stringify(CHANNEL)};
  const pending = new Map();
  let next = 0;
  let handler = null;
  const send = (message) => parent.postMessage(Object.assign({ channel: CHANNEL }, message), "*");
  const call = (kind, body) => new Promise((resolve, reject) => {
    next += 1; pending.set(next, { resolve, reject }); send(Object.assign({ kind, id: next }, body));
  });
  const answer = (request_id, reply, error) => send(error === undefined
    ? { kind: "reply", request_id, reply: reply === undefined ? null : reply }
    : { kind: "reply", request_id, error: String(error) });
  window.addEventListener("message", (event) => {
    if (event.source !== parent) return;
    const m = event.data;
    if (!m || m.channel !== CHANNEL) return;
    if (m.kind === "result" && pending.has(m.id)) {
      const p = pending.get(m.id); pending.delete(m.id);
      if (m.error) p.reject(new Error(m.error)); else p.resolve(m.value);
    } else if (m.kind === "request") {
      if (!handler) { answer(m.request_id, undefined, "the app takes no requests (no onRequest handler)"); return; }
      Promise.resolve().then(() => handler(m.payload)).then(
        (reply) => answer(m.request_id, reply),
        (error) => answer(m.request_id, undefined, (error && error.message) || error || "the handler failed"));
    }
  });
  Object.defineProperty(window, "commonroom", { value: Object.freeze({
    getState: () => call("getState", {}),
    setState: (revision, state) => call("setState", { revision, state }),
    onRequest: (fn) => { handler = typeof fn === "function" ? fn : null; send({ kind: "ready" }); },
  }) });
})();`;

// Text inside one raw-text element of the srcdoc: nothing in it may end that element early.
function rawText(text, tag) {
  return String(text).replace(new RegExp(`</(${tag})`, "gi"), "<\\/$1").replace(/<!--/g, "<\\!--");
}

function srcdoc(bundle) {
  const nonce = NONCE.replace(/[^A-Za-z0-9_-]/g, "");
  return "<!doctype html><html><head><meta charset=\"utf-8\">"
    + `<meta http-equiv="Content-Security-Policy" content="${FRAME_CSP}">`
    + `<style nonce="${nonce}">${rawText(bundle.css || "", "style")}</style>`
    + `<script nonce="${nonce}">${rawText(BRIDGE, "script")}</script>`
    + `</head><body>${bundle.html || ""}`
    + `<script nonce="${nonce}">${rawText(bundle.js || "", "script")}</script></body></html>`;
}

async function init({ api, el, clear, nameOf, ago }) {
  // The events that change task surfaces only: the event catalogue's, by their resource.
  const own = new Set(kit.words.events.filter((type) => (kit.words.resourcesOf.get(type) || []).includes("task_surfaces")));

  const section = el("section", { class: "panel task-surfaces", id: "tasks-panel", "aria-labelledby": "tasks-heading", hidden: true },
    el("h2", { id: "tasks-heading", text: "Task surfaces" }),
    el("ul", { id: "task-cards", class: "rows" }));
  const panels = document.querySelector(".panels");
  panels.insertBefore(section, panels.firstChild);
  const list = section.querySelector("#task-cards");
  const cards = new Map(); // task_id -> card
  const line = { source: null, hostId: null, retry: 0, timer: null, hosting: "" };
  let reading = null;

  // ------------------------------------------------------------------ reading

  async function refresh(taskId) {
    // One read at a time; a burst of events during a read reads once more after it.
    if (reading) { reading.again = true; return reading.done; }
    reading = { again: false };
    reading.done = (async () => {
      try {
        do {
          reading.again = false;
          let answer;
          try { answer = await api("GET", "/task/surfaces", taskId ? { task_id: taskId } : {}); }
          catch (_) { return; }
          apply(answer.surfaces || [], taskId);
          taskId = null; // a read again reads every task
        } while (reading.again);
      } finally { reading = null; }
    })();
    return reading.done;
  }

  function apply(surfaces, onlyTask) {
    const seen = new Set();
    for (const s of surfaces) { seen.add(s.task_id); render(s); }
    if (!onlyTask) {
      for (const [taskId, card] of cards) if (!seen.has(taskId)) { removeCard(card); cards.delete(taskId); }
    } else if (!seen.has(onlyTask) && cards.has(onlyTask)) {
      removeCard(cards.get(onlyTask)); cards.delete(onlyTask);
    }
    section.hidden = cards.size === 0;
    declareHosting();
  }

  // One of our events: that task's card is read again. A handoff's move may end a task: every
  // card is read again. Either way nothing else of this panel need be read (true).
  function onEvent(type, data) {
    // app.js routes here only the events whose resources are this panel's: the others move a handoff.
    if (!own.has(type)) { refresh(null); return true; }
    let taskId = null;
    try { taskId = JSON.parse(data).payload.task_id; } catch (_) { taskId = null; }
    refresh(typeof taskId === "string" ? taskId : null);
    return true;
  }

  // ------------------------------------------------------------------ cards

  function render(s) {
    let card = cards.get(s.task_id);
    if (!card) {
      card = { taskId: s.task_id, closed: null, view: null, app: null };
      card.node = el("li", { class: "task-card", "data-task": s.task_id });
      card.head = el("div", { class: "task-head" });
      card.body = el("div", { class: "task-body" });
      card.node.append(card.head, card.body);
      list.append(card.node);
      cards.set(s.task_id, card);
    }
    card.surfaces = s;
    const viewRev = s.live_view ? s.live_view.revision : 0;
    const appRev = s.app ? s.app.revision : 0;
    // A closed card opens again when something newer is published.
    if (card.closed && (viewRev > card.closed.view || appRev > card.closed.app)) card.closed = null;
    renderHead(card);
    card.node.classList.toggle("closed", !!card.closed);
    card.node.classList.toggle("ended", !s.open);
    card.body.hidden = !!card.closed;
    if (card.closed) { dropView(card); dropApp(card); return; }
    if (!s.live_view) dropView(card);
    else if (!card.view || card.view.revision !== viewRev || card.view.surfaceId !== s.live_view.surface_id) renderView(card, s.live_view);
    if (!s.app) dropApp(card);
    else if (!card.app || card.app.revision !== appRev) renderApp(card, s.app);
  }

  function renderHead(card) {
    const s = card.surfaces;
    const latest = [s.live_view, s.app].filter(Boolean)
      .sort((a, b) => (a.published_at < b.published_at ? 1 : -1))[0];
    const who = latest ? `${nameOf(latest.participant_id)}, ${ago(latest.published_at)}` : "";
    // Drawn again only when it says something else: a focused Close stays focused.
    const key = JSON.stringify([s.summary, who, s.open, !!card.closed]);
    if (key === card.headKey) return;
    card.headKey = key;
    clear(card.head);
    card.head.append(
      el("h3", { class: "task-title", text: s.summary }),
      el("p", { class: "task-by muted", text: `published by ${who}${s.open ? "" : " · the task ended; shown until it is removed"}` }),
    );
    if (latest) card.head.querySelector(".task-by").title = latest.published_at;
    const button = card.closed
      ? el("button", { type: "button", class: "task-close", text: "Show", "aria-label": `Show the surfaces of ${s.summary}`,
        onclick: () => { card.closed = null; card.view = null; card.app = null; render(card.surfaces); declareHosting(); } })
      : el("button", { type: "button", class: "task-close", text: "Close", "aria-label": `Close the surfaces of ${s.summary}`,
        onclick: () => { close(card); } });
    card.head.append(button);
  }

  function close(card) {
    const s = card.surfaces;
    card.closed = { view: s.live_view ? s.live_view.revision : 0, app: s.app ? s.app.revision : 0 };
    render(s);
    declareHosting();
  }

  function removeCard(card) { dropView(card); dropApp(card); card.node.remove(); }

  // ------------------------------------------------------------------ live views

  function dropView(card) {
    if (card.view) { card.view.node.remove(); card.view = null; }
  }

  function renderView(card, view) {
    // The page's copy of `data`: local actions change it, nothing is sent.
    const data = Object.assign(Object.create(null), view.data);
    const bound = []; // [path, update()] for every node showing data[path]
    const show = () => { for (const [, update] of bound) update(); };
    const node = el("div", { class: "live-view", "data-surface": view.surface_id, "data-revision": String(view.revision) });
    node.append(build(view.root, data, bound, show));
    const old = card.view;
    if (old) old.node.replaceWith(node); else card.body.prepend(node);
    card.view = { revision: view.revision, surfaceId: view.surface_id, node, data };
  }

  // A data value as text: what a Value shows ("—" for nothing) and an Input holds ("").
  function asText(value) {
    if (value === null || value === undefined) return "";
    return typeof value === "string" ? value : JSON.stringify(value);
  }
  function shown(value) { return asText(value) || "—"; }

  function build(spec, data, bound, show) {
    switch (spec.type) {
      case "Text":
        return el("p", { class: "lv-text", text: spec.text });
      case "Value": {
        const output = el("output", { class: "lv-number" });
        bound.push([spec.path, () => { output.textContent = shown(data[spec.path]); }]);
        output.textContent = shown(data[spec.path]);
        return el("div", { class: "lv-value" }, spec.label ? el("span", { class: "lv-label", text: `${spec.label}: ` }) : null, output);
      }
      case "Input": {
        const input = el("input", { type: "text", class: "lv-input", "aria-label": spec.label ? null : spec.path });
        input.value = asText(data[spec.path]);
        input.addEventListener("input", () => {
          data[spec.path] = typeof data[spec.path] === "number" && input.value.trim() !== "" && Number.isFinite(Number(input.value))
            ? Number(input.value) : input.value;
          show();
        });
        bound.push([spec.path, () => { if (document.activeElement !== input) input.value = asText(data[spec.path]); }]);
        return el("label", { class: "lv-field" }, spec.label ? el("span", { class: "lv-label", text: spec.label }) : null, input);
      }
      case "Button":
        return el("button", { type: "button", class: "lv-button", text: spec.label, onclick: () => {
          const action = spec.action;
          if (action.type === "increment") data[action.path] = Number(data[action.path]) + (action.amount === undefined ? 1 : Number(action.amount));
          else if (action.type === "set") data[action.path] = action.value;
          show();
        } });
      case "Row":
      case "Column":
      case "Card": {
        const box = el(spec.type === "Card" ? "section" : "div", { class: `lv-${spec.type.toLowerCase()}` });
        if (spec.type === "Card" && spec.title) box.append(el("h4", { class: "lv-title", text: spec.title }));
        for (const child of spec.children || []) box.append(build(child, data, bound, show));
        return box;
      }
      default: // the room refuses any other component; an unknown one shows as nothing
        return el("span", { class: "lv-unknown" });
    }
  }

  // ------------------------------------------------------------------ apps

  function dropApp(card) {
    if (card.app) { card.app.node.remove(); card.app = null; }
  }

  function renderApp(card, app) {
    const frame = el("iframe", { class: "task-app", sandbox: "allow-scripts", referrerpolicy: "no-referrer",
      title: `App: ${app.title}`, "data-revision": String(app.revision) });
    frame.srcdoc = srcdoc(app.bundle);
    const node = el("figure", { class: "task-app-box" },
      el("figcaption", { class: "muted", text: `App: ${app.title} (revision ${app.revision})` }), frame);
    const old = card.app;
    card.app = { revision: app.revision, frame, node, requests: new Set(), loaded: false, calls: 0 };
    frame.addEventListener("load", () => {
      if (!card.app || card.app.frame !== frame) return;
      if (!card.app.loaded) { card.app.loaded = true; declareHosting(); return; }
      // A second load: the app navigated its own frame, which this page's CSP refused, so the
      // frame holds an error page now, not the app. Stopped (not hosted) until the host runs it again.
      stopApp(card);
    });
    if (old) old.node.replaceWith(node); else card.body.append(node);
  }

  function stopApp(card) {
    const app = card.app;
    app.stopped = true;
    app.frame.remove();
    app.node.append(el("p", { class: "task-app-stopped", role: "status" },
      "The app tried to leave its frame and was stopped. ",
      el("button", { type: "button", text: "Run it again", onclick: () => {
        app.node.remove(); card.app = null; render(card.surfaces); } })));
    declareHosting();
  }

  function appOfSource(source) {
    if (!source) return null;
    for (const card of cards.values()) {
      if (card.app && card.app.frame.contentWindow === source) return card;
    }
    return null;
  }

  function exactShape(message) {
    if (!message || typeof message !== "object" || Array.isArray(message)) return false;
    if (message.channel !== CHANNEL || !Object.prototype.hasOwnProperty.call(FROM_APP, message.kind)) return false;
    const allowed = FROM_APP[message.kind];
    return Object.keys(message).every((key) => allowed.includes(key));
  }

  function toApp(card, message) {
    if (card.app) card.app.frame.contentWindow.postMessage(Object.assign({ channel: CHANNEL }, message), "*");
  }

  window.addEventListener("message", async (event) => {
    const card = appOfSource(event.source);
    if (card && card.app.stopped) return;
    if (!card || !exactShape(event.data)) return; // not one of our apps, or not the bridge's shape
    const message = event.data;
    const app = card.app;
    const taskId = card.taskId; // the frame's own task, whatever the message says
    if (message.kind === "getState" || message.kind === "setState") {
      if (!Number.isSafeInteger(message.id)) return;
      // An app that floods the bridge gets "busy", not a flood of room calls.
      if (app.calls >= BRIDGE_CALLS) { toApp(card, { kind: "result", id: message.id, error: "busy" }); return; }
      app.calls += 1;
      try {
        if (message.kind === "getState") {
          const answer = await api("GET", "/task/surfaces", { task_id: taskId });
          const s = (answer.surfaces || [])[0];
          const current = s && s.app_state;
          toApp(card, { kind: "result", id: message.id, value: current ? { revision: current.revision, state: current.state } : null });
        } else {
          if (!Number.isSafeInteger(message.revision) || message.revision < 0) throw new Error("revision must be an integer from 0");
          const set = await api("POST", "/task/app/state", { task_id: taskId, revision: message.revision, state: message.state === undefined ? null : message.state });
          toApp(card, { kind: "result", id: message.id, value: { revision: set.revision } });
        }
      } catch (error) {
        const code = (error && error.body && error.body.error) || (error && error.message) || "failed";
        toApp(card, { kind: "result", id: message.id, error: String(code) });
      } finally { app.calls -= 1; }
    } else if (message.kind === "reply") {
      if (typeof message.request_id !== "string" || !app.requests.has(message.request_id)) return; // not one we gave it
      app.requests.delete(message.request_id);
      const body = { host_id: line.hostId, request_id: message.request_id };
      if (typeof message.error === "string") body.error = message.error.slice(0, 500);
      else body.reply = message.reply === undefined ? null : message.reply;
      api("POST", "/owner/app-host/reply", body).catch(() => {});
    } // `ready`: the handler is there; requests were already routed here since the frame loaded
  });

  // ------------------------------------------------------------------ the app-host line

  function hostedTasks() {
    return [...cards.values()].filter((c) => c.app && c.app.loaded && !c.app.stopped && !c.closed && c.surfaces.open)
      .map((c) => c.taskId);
  }

  function declareHosting() {
    const hosted = hostedTasks();
    if (!hosted.length && !line.source) return;
    if (!line.source) { openLine(); return; }
    if (!line.hostId) return; // declared once the line says who it is
    const key = hosted.join(",");
    if (key === line.hosting) return;
    line.hosting = key;
    api("POST", "/owner/app-host/apps", { host_id: line.hostId, task_ids: hosted }).catch(() => { line.hosting = ""; });
  }

  async function openLine() {
    if (line.source || line.opening) return;
    line.opening = true;
    let ticket;
    try { ticket = (await api("POST", "/owner/stream-ticket")).ticket; }
    catch (_) { line.opening = false; lineLater(); return; }
    line.opening = false;
    const source = new EventSource(`/owner/app-host?${new URLSearchParams({ ticket })}`);
    line.source = source;
    source.addEventListener("host", (event) => {
      try { line.hostId = JSON.parse(event.data).host_id; } catch (_) { return; }
      line.retry = 0; line.hosting = null;
      declareHosting();
    });
    source.addEventListener("app_request", (event) => {
      let request;
      try { request = JSON.parse(event.data); } catch (_) { return; }
      const card = cards.get(request.task_id);
      if (!card || !card.app || card.closed) {
        api("POST", "/owner/app-host/reply", { host_id: line.hostId, request_id: request.request_id,
          error: "the app is not open on this page" }).catch(() => {});
        return;
      }
      card.app.requests.add(request.request_id);
      toApp(card, { kind: "request", request_id: request.request_id, payload: request.payload });
    });
    source.onerror = () => {
      source.close();
      if (line.source !== source) return;
      line.source = null; line.hostId = null; line.hosting = "";
      lineLater();
    };
  }

  function lineLater() {
    if (line.timer) return;
    line.retry = Math.min(line.retry + 1, 4);
    line.timer = setTimeout(() => { line.timer = null; if (hostedTasks().length) openLine(); }, 250 * 2 ** line.retry);
  }

  // A closing tab hosts nothing from now on: its requests fail at once, not after 15 s.
  window.addEventListener("pagehide", () => {
    if (!line.hostId) return;
    try {
      const credential = sessionStorage.getItem("commonroom.owner") || "";
      fetch("/owner/app-host/apps", { method: "POST", keepalive: true, credentials: "omit",
        headers: { "Content-Type": "application/json", "X-Commonroom-Owner": credential },
        body: JSON.stringify({ host_id: line.hostId, task_ids: [] }) });
    } catch (_) { /* the line's end says the same */ }
    if (line.source) line.source.close();
  });

  return { refresh: () => refresh(null), onEvent };
}
