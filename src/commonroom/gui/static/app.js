// The host's page (docs/spec/PROTOCOL.md §11; spec PAGE.md): the login, the event stream,
// the layout and the routing of events to the panels. Plain JS modules, no build step.
//
// Each panel is a module (docs/architecture.md "Adding a panel") exporting
// `panel = {name, resources, init?, load?, render?, onEvent?}`:
// - `resources`: the resources (the event catalogue's, from /protocol) whose events concern it;
// - `init()` once after the vocabulary is read; `load()` reads its own data again, after an
//   event touching its resources (and on every full re-read: start, reconnect, resync);
// - `render()` draws from the room snapshot, after each re-read of it (may return a promise);
// - `onEvent(type, data)` sees each such event first and answers true when it took care of it
//   itself (then it is not loaded again for it).
// One burst of events (15 ms) re-reads the room snapshot once, loads the panels the burst
// concerned, and renders every panel. No polling loop; the only timer redraws countdowns.
//
// The login is never a cookie (a cookie for 127.0.0.1 goes to every port of it): the one-time
// link's token comes in the URL fragment, is exchanged once for a credential kept in
// sessionStorage (this origin, port included) and sent as a header; the EventSource gets a
// single-use ticket (http/owner.py).
"use strict"; // a module is strict anyway; said for whoever reads this file on its own

import { $, API, ApiError, LOGIN_KEY, api, credential, page, setLive, showNotice, state, tickCountdowns,
  words } from "./page.js";
import { panel as review } from "./review.js";
import { panel as documentPanel } from "./document.js";
import { panel as historyPanel } from "./history.js";
import { panel as people } from "./people.js";
import { panel as undoes } from "./undoes.js";
import { panel as invitations } from "./invitations.js";
import { panel as handoffs } from "./handoffs.js";
import { panel as messages } from "./messages.js";
import { panel as tasks } from "./tasks.js";
import { panel as threads } from "./threads.js";
import { panel as permissions } from "./permissions.js";
import { panel as blame } from "./blame.js";

// In drawing order: the queue first (it is what the host waits for), then what draws on the
// document after document.js (threads' margins); handoffs before room text (its labels).
const PANELS = [review, documentPanel, historyPanel, people, blame, undoes, invitations, handoffs, messages, tasks,
  threads, permissions];
const dirty = new Set(PANELS); // the panels to load at the next re-read: all of them at first

// The panels an event concerns: those whose resources meet the event's (the event catalogue).
function panelsOf(type) {
  const touched = words.resourcesOf.get(type) || [];
  return PANELS.filter((p) => p.resources.some((r) => touched.includes(r)));
}

// ------------------------------------------------------------------ login

// The one-time link's token (in the fragment, never sent anywhere) for this tab's login.
async function logIn() {
  const token = new URLSearchParams(location.hash.slice(1)).get("token");
  if (token) {
    history.replaceState(null, "", location.pathname); // the spent token leaves the address bar
    const response = await fetch("/owner/login", {
      method: "POST", credentials: "omit", cache: "no-store",
      headers: { "Content-Type": "application/json" }, body: JSON.stringify({ token }),
    });
    let body = null;
    try { body = await response.json(); } catch (_) { body = null; }
    if (!response.ok || !body || !body.credential) {
      showLogin("This link was already used or has expired",
        "Each owner link opens the page once and lasts 10 minutes, so that a copied or logged link is worth nothing.");
      return false;
    }
    sessionStorage.setItem(LOGIN_KEY, body.credential);
  }
  if (!credential()) {
    showLogin("Open your owner link", "This tab is not logged in to the room.");
    return false;
  }
  return true;
}

function showLogin(title, text) {
  $("login-title").textContent = title;
  $("login-text").textContent = text;
  document.body.classList.add("login");
  $("login").hidden = false;
  document.body.dataset.login = "needed";
}

// ------------------------------------------------------------------ loading

// One re-read: the room snapshot (with the panels that load beside it), the panels that need
// it first, then every panel's render and, at the same time, the other loads the burst asked for.
async function loadRoom() {
  const due = PANELS.filter((p) => dirty.has(p) && p.load);
  dirty.clear();
  const [room] = await Promise.all([api("GET", "/room"), ...due.filter((p) => p.loadsWithRoom).map((p) => p.load())]);
  state.room = room;
  state.latestEvent = Math.max(state.latestEvent, room.latest_event_id || 0);
  state.names = new Map(room.participants.map((p) => [p.participant_id, p]));
  for (const p of due) if (p.loadsAfterRoom) await p.load();
  const drawn = PANELS.map((p) => p.render && p.render());
  const loads = due.filter((p) => !p.loadsWithRoom && !p.loadsAfterRoom).map((p) => p.load().catch(() => {}));
  await Promise.all([...drawn, ...loads]);
}

// Mark the panels an event concerns (none: every panel) and re-read once per burst.
function scheduleRefresh(panels) {
  for (const p of panels || PANELS) dirty.add(p);
  if (state.refreshTimer || !dirty.size) return;
  // Events come in bursts (a commit is several, written together): one re-read per burst.
  state.refreshTimer = setTimeout(async () => {
    state.refreshTimer = null;
    try { await loadRoom(); } catch (error) { if (!(error instanceof ApiError)) setLive("bad", "reconnecting…"); }
  }, 15);
}

page.refresh = () => scheduleRefresh();
page.loadRoom = (...panels) => { for (const p of panels) dirty.add(p); return loadRoom(); };

// ------------------------------------------------------------------ live

// Each event goes to the panels its resources concern; a panel's `onEvent` may take it itself.
function route(type, data) {
  const due = panelsOf(type).filter((p) => !(p.onEvent && p.onEvent(type, data)));
  if (due.length) scheduleRefresh(due);
}

// The live view: a single-use ticket (an EventSource cannot send the login header), then
// the stream from the last event seen. When it drops (the room restarted, the network),
// the page reconnects by itself with a fresh ticket: the login outlives a restart.
async function connect() {
  if (state.loggedOut) return;
  let ticket;
  try {
    ticket = (await api("POST", "/owner/stream-ticket")).ticket;
  } catch (error) {
    if (!state.loggedOut) reconnectLater(); // the room is not back yet
    return;
  }
  const query = new URLSearchParams({ since_event_id: String(state.latestEvent), ticket });
  const source = new EventSource(`${API}/observe?${query}`);
  state.source = source;
  source.onopen = () => { state.retry = 0; setLive("ok", "live"); };
  source.onmessage = () => scheduleRefresh();
  for (const type of words.events) {
    if (type === "workspace.stopped") continue; // its own listener, below
    source.addEventListener(type, (event) => {
      const id = Number(event.lastEventId);
      if (id) state.latestEvent = Math.max(state.latestEvent, id);
      route(type, event.data);
    });
  }
  source.addEventListener("resync", () => scheduleRefresh());
  source.addEventListener("workspace.stopped", () => setLive("bad", "room stopped"));
  source.onerror = () => {
    // The browser's own retry would present the spent ticket again: reconnect ourselves.
    source.close();
    if (source !== state.source) return;
    state.source = null;
    reconnectLater();
  };
}

function reconnectLater() {
  if (state.loggedOut || state.reconnecting) return;
  state.reconnecting = true;
  setLive("bad", "reconnecting…");
  state.retry = Math.min(state.retry + 1, 4);
  setTimeout(async () => {
    state.reconnecting = false;
    for (const p of PANELS) dirty.add(p); // back after a gap: read everything
    try { await loadRoom(); } catch (error) {
      if (!state.loggedOut) reconnectLater(); // still down (or not answering yet)
      return;
    }
    connect(); // back, same login: a fresh stream from the latest event seen
  }, 250 * 2 ** state.retry); // 0.5 s, 1 s, 2 s, then every 4 s
}

// ------------------------------------------------------------------ start

async function loadVocabulary() {
  const { vocabulary, events } = await api("GET", "/owner/api/protocol");
  words.vocabulary = vocabulary;
  words.events = vocabulary.events;
  words.resourcesOf = new Map(events.map((e) => [e.type, e.resources]));
  words.open = new Set(vocabulary.open_statuses.proposal);
  words.overtaken = new Set(vocabulary.overtaken_statuses.proposal);
  words.capabilities = vocabulary.capabilities;
  words.agentCapabilities = vocabulary.default_agent_capabilities;
}

async function start() {
  if (!(await logIn())) return;
  try { await loadVocabulary(); } catch (error) { if (!state.loggedOut) showNotice(`Could not load the room: ${error.message}`); return; }
  for (const p of PANELS) if (p.init) await p.init();
  setInterval(tickCountdowns, 1000); // the countdowns only; data comes from events
  try { await loadRoom(); } catch (error) { if (!state.loggedOut) showNotice(`Could not load the room: ${error.message}`); return; }
  connect();
  document.body.dataset.ready = "true";
}

start();
