// What every panel of the host's page shares (docs/architecture.md "The host's page"): the
// page's state, the owner API, DOM and time helpers, the room's vocabulary. No panel keeps a
// copy of any of these; app.js fills `words` from the room's protocol document and sets
// `page.refresh` (a re-read of the room after a burst of events).
//
// Rules every panel keeps:
// - Nothing from the document, a proposal, a name or a message becomes HTML: nodes are
//   built with `el` (text through textContent only), markdown through markdown.js.
// - A panel reads only the owner API (`api`), and only when app.js says its resources
//   changed (`load`), or after a decision of the host's own.

export const FILE = document.querySelector('meta[name="commonroom-file"]').content;
export const OWNER_HEADER = "X-Commonroom-Owner";
export const LOGIN_KEY = "commonroom.owner";
export const API = "/owner/api/workspace";
export const UNDO_MS = 8000; // how long a decision can be taken back before it is sent (mail's "undo send")

// The vocabularies (event types and their resources, statuses, capabilities) come from the
// room's protocol document (GET /owner/api/protocol, app.js `loadVocabulary`), never from a
// list kept here.
export const words = {
  vocabulary: null, // the whole `vocabulary` object, for threads.js
  events: [], // every event type
  resourcesOf: new Map(), // event type -> the resources it changes (the event catalogue)
  open: new Set(), // the proposal statuses that may still land
  overtaken: new Set(), // the proposal statuses that ended because the document moved past them
  capabilities: [],
  agentCapabilities: [],
};

export const state = {
  room: null, names: new Map(), proposals: [], details: new Map(), doc: null, regions: [],
  selected: null, view: "rendered", editing: false, dropped: new Set(), lastVersion: 0, latestEvent: 0,
  changes: [], source: null, refreshTimer: null, retry: 0, loggedOut: false, reconnecting: false,
  held: new Map(), // proposal_id -> a decision waiting out its undo window
  rejecting: false, sectionShows: "proposed",
};

// Set by app.js: `refresh()` re-reads the room and every panel soon (after an action of the
// host's); `loadRoom(...panels)` re-reads the room and those panels now, resolving when done.
export const page = { refresh: () => {}, loadRoom: async () => {} };

// ------------------------------------------------------------------ DOM helpers

export const $ = (id) => document.getElementById(id);

export function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

export function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); }

export function nameOf(pid) {
  if (!pid) return "someone editing the file";
  const p = state.names.get(pid);
  if (!p) return "someone who left";
  return misleading(pid, p) ? `${p.name} (${p.kind} ${pid.slice(0, 7)})` : p.name;
}

// A name that could pass for someone else's is shown with its kind and a short id: not
// plain ASCII, or alike (case, width, punctuation aside) to the host's or another's.
function foldedName(name) { return String(name).normalize("NFKC").toLowerCase().replace(/[^\p{L}\p{N}]/gu, ""); }
function misleading(pid, p) {
  const host = p.capabilities && p.capabilities.includes("*");
  if (!/^[\x20-\x7e]*$/.test(p.name)) return true;
  if (host) return false;
  const folded = foldedName(p.name);
  if (folded === "host") return true;
  for (const [other, q] of state.names) if (other !== pid && foldedName(q.name) === folded) return true;
  return false;
}

export function isHost(participantId) {
  const p = state.names.get(participantId);
  return !!p && (p.capabilities || []).includes("*");
}

export function ago(iso) {
  const seconds = Math.round((Date.now() - Date.parse(iso)) / 1000);
  if (!Number.isFinite(seconds)) return "";
  if (seconds < 60) return `${Math.max(0, seconds)} s ago`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)} min ago`;
  return `${Math.floor(seconds / 3600)} h ago`;
}

// A relative time that stays true: the page's one-second tick rewrites every `[data-ago]`.
export function agoEl(iso) {
  return el("time", { datetime: iso, "data-ago": iso }, ago(iso));
}

export function countdown(iso) {
  const seconds = Math.max(0, Math.round((Date.parse(iso) - Date.now()) / 1000));
  const m = Math.floor(seconds / 60), s = seconds % 60;
  return `${m}:${String(s).padStart(2, "0")}`;
}

// The page's only timer (app.js, every second) and every redraw of a lease: countdowns and
// relative times, rewritten in place.
export function tickCountdowns() {
  for (const badge of document.querySelectorAll("[data-expires]")) {
    // "14:57 left": a countdown, never to be read as a clock time.
    badge.textContent = `${badge.dataset.label} · ${countdown(badge.dataset.expires)} left`;
  }
  for (const time of document.querySelectorAll("[data-ago]")) time.textContent = ago(time.dataset.ago);
}

// A region path's last heading, for display ("Plan/Goals" -> "Goals"); the path is in the title.
export function shortRegion(region) { return region === "workspace" ? "whole document" : region.split("/").pop(); }

export function plural(n, word) { return `${n} ${word}${n === 1 ? "" : "s"}`; }

export function showNotice(text) { const n = $("notice"); n.textContent = text; n.hidden = !text; }
export function setLive(kind, text) { const n = $("live-state"); n.className = "live " + kind; n.textContent = text; }

// ------------------------------------------------------------------ API

export class ApiError extends Error {
  constructor(status, body) {
    super((body && body.message) || `HTTP ${status}`);
    this.status = status; this.body = body || {};
  }
}

export function credential() {
  try { return sessionStorage.getItem(LOGIN_KEY); } catch (_) { return null; }
}

// One owner call: `/owner/...` paths as given, others under the workspace API.
export async function api(method, path, params) {
  let url = path.startsWith("/owner/") ? path : API + path;
  const init = { method, headers: { [OWNER_HEADER]: credential() || "" }, credentials: "omit", cache: "no-store" };
  if (method === "GET" && params) url += "?" + new URLSearchParams(params).toString();
  if (method !== "GET") {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(params || {});
  }
  const response = await fetch(url, init);
  let body = null;
  try { body = await response.json(); } catch (_) { body = null; }
  if (!response.ok) {
    if (response.status === 401) loggedOut();
    throw new ApiError(response.status, body);
  }
  return body;
}

export function loggedOut() {
  if (state.loggedOut) return;
  state.loggedOut = true;
  try { sessionStorage.removeItem(LOGIN_KEY); } catch (_) { /* nothing kept */ }
  if (state.source) state.source.close();
  showNotice(`This page is no longer logged in (its login expired or was ended). Run \`ce open ${FILE}\` for a new link.`);
  setLive("bad", "logged out");
}
