// The host's page (docs/spec/PROTOCOL.md §11; spec PAGE.md). Plain JS, no build step.
//
// Rules this file keeps:
// - Nothing from the document, a proposal, a name or a message becomes HTML:
//   markdown is parsed by markdown-it (html: false) into tokens and turned into
//   DOM nodes here, text through textContent only; links only to safe schemes.
// - One EventSource on /owner/api/workspace/observe; events trigger re-reads of
//   the owner API (no polling loop); on `resync` the room snapshot is re-read.
// - Never approve blind, never decide by accident: a decision is made only on a
//   proposal whose text is on screen (diff, or the whole section as it would read);
//   shortcuts act only with focus on the page, the queue or the review heading, never
//   in a link, field or other button; a reject needs a comment and a second step; every
//   decision waits UNDO_MS with an Undo toast before it is sent.
// - The login is never a cookie (a cookie for 127.0.0.1 goes to every port of it):
//   the one-time link's token comes in the URL fragment, is exchanged once for a
//   credential kept in sessionStorage (this origin, port included) and sent as a
//   header; the EventSource gets a single-use ticket (http/owner.py).
// - Links to this computer (loopback, localhost) are shown as text, never as links.
"use strict";

(() => {
  const FILE = document.querySelector('meta[name="commonroom-file"]').content;
  const OWNER_HEADER = "X-Commonroom-Owner";
  const LOGIN_KEY = "commonroom.owner";
  const API = "/owner/api/workspace";
  // The vocabularies (event types, statuses, capabilities) come from the room's protocol
  // document (GET /owner/api/protocol, `loadVocabulary`), never from a list kept here.
  let AGENT_CAPS = [];
  let ALL_CAPS = [];
  let EVENT_TYPES = [];
  const SAFE_SCHEMES = ["http:", "https:", "mailto:"];
  let OPEN = new Set(); // the proposal statuses that may still land
  let OVERTAKEN = new Set(); // the proposal statuses that ended because the document moved past them
  let VOCABULARY = null; // the whole `vocabulary` object, for threads.js
  const UNDO_MS = 8000; // how long a decision can be taken back before it is sent (mail's "undo send")
  const md = window.markdownit({ html: false, linkify: false, typographer: false });

  const $ = (id) => document.getElementById(id);
  let threads = null; // hook: threads (threads.js, the review conversation)
  let tasks = null; // hook: tasks (tasks.js, task surfaces: live views and apps)

  let permissions = null; // hook: permissions (permissions.js, resident agents)
  const state = {
    room: null, names: new Map(), proposals: [], details: new Map(), doc: null, regions: [],
    selected: null, view: "rendered", editing: false, dropped: new Set(), lastVersion: 0, latestEvent: 0,
    changes: [], source: null, refreshTimer: null, retry: 0, loggedOut: false, reconnecting: false,
    held: new Map(), // proposal_id -> a decision waiting out its undo window
    rejecting: false, sectionShows: "proposed",
  };

  // ------------------------------------------------------------------ DOM helpers

  function el(tag, attrs, ...children) {
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

  function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); }

  function nameOf(pid) {
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

  function ago(iso) {
    const seconds = Math.round((Date.now() - Date.parse(iso)) / 1000);
    if (!Number.isFinite(seconds)) return "";
    if (seconds < 60) return `${Math.max(0, seconds)} s ago`;
    if (seconds < 3600) return `${Math.floor(seconds / 60)} min ago`;
    return `${Math.floor(seconds / 3600)} h ago`;
  }

  // A relative time that stays true: the page's one-second tick rewrites every `[data-ago]`.
  function agoEl(iso) {
    return el("time", { datetime: iso, "data-ago": iso }, ago(iso));
  }

  function countdown(iso) {
    const seconds = Math.max(0, Math.round((Date.parse(iso) - Date.now()) / 1000));
    const m = Math.floor(seconds / 60), s = seconds % 60;
    return `${m}:${String(s).padStart(2, "0")}`;
  }

  // A region path's last heading, for display ("Plan/Goals" -> "Goals"); the path is in the title.
  function shortRegion(region) { return region === "workspace" ? "whole document" : region.split("/").pop(); }

  function plural(n, word) { return `${n} ${word}${n === 1 ? "" : "s"}`; }

  // ------------------------------------------------------------------ API

  class ApiError extends Error {
    constructor(status, body) {
      super((body && body.message) || `HTTP ${status}`);
      this.status = status; this.body = body || {};
    }
  }

  function credential() {
    try { return sessionStorage.getItem(LOGIN_KEY); } catch (_) { return null; }
  }

  // One owner call: `/owner/...` paths as given, others under the workspace API.
  async function api(method, path, params) {
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

  function loggedOut() {
    if (state.loggedOut) return;
    state.loggedOut = true;
    try { sessionStorage.removeItem(LOGIN_KEY); } catch (_) { /* nothing kept */ }
    if (state.source) state.source.close();
    showNotice(`This page is no longer logged in (its login expired or was ended). Run \`ce open ${FILE}\` for a new link.`);
    setLive("bad", "logged out");
  }

  function showNotice(text) { const n = $("notice"); n.textContent = text; n.hidden = !text; }
  function setLive(kind, text) { const n = $("live-state"); n.className = "live " + kind; n.textContent = text; }

  // ------------------------------------------------------------------ markdown -> DOM

  const TAGS = new Set(["p", "h1", "h2", "h3", "h4", "h5", "h6", "ul", "ol", "li", "blockquote",
    "table", "thead", "tbody", "tr", "th", "td", "strong", "em", "s", "code", "pre", "hr", "br", "a"]);

  // A link to this computer could reach another local server (or this room's own API)
  // from the owner's browser: loopback addresses, `localhost` and its subdomains, 0.0.0.0.
  // The URL parser has already turned 2130706433, 0x7f.1 and [::ffff:127.0.0.1] into their
  // canonical forms.
  function localHost(hostname) {
    const host = hostname.toLowerCase().replace(/\.$/, "");
    if (host === "localhost" || host.endsWith(".localhost") || host === "0.0.0.0") return true;
    if (/^127\.\d+\.\d+\.\d+$/.test(host)) return true;
    return host.startsWith("[") && (host === "[::1]" || host === "[::]" || /^\[::ffff:(7f[0-9a-f]{2}:|127\.)/.test(host));
  }

  // `{href}` for a link to follow, `{refused: url}` for one shown as text, null for nothing.
  function linkTarget(href) {
    if (!href) return null;
    if (href.startsWith("#")) return { href };
    try {
      const url = new URL(href, "http://relative.invalid/");
      if (url.origin === "http://relative.invalid") return null; // relative paths lead nowhere here
      if (!SAFE_SCHEMES.includes(url.protocol)) return null;
      if (url.hostname && localHost(url.hostname)) return { refused: url.href };
      return { href: url.href };
    } catch (_) { return null; }
  }

  function linkNode(href) {
    const target = linkTarget(href);
    if (target && target.href) {
      return el("a", { href: target.href, rel: "noopener noreferrer", target: target.href.startsWith("#") ? null : "_blank" });
    }
    if (target && target.refused) {
      // Text, never a link: what it says, then (when it is closed) where it points.
      const node = el("span", { class: "link-refused", title: "Links to this computer are shown as text, not links" });
      node.dataset.refusedHref = target.refused;
      return node;
    }
    return el("span");
  }

  // A refused link ends with where it points, as plain text: "text ‹http://127.0.0.1:…›".
  function closeNode(node) {
    const href = node && node.dataset ? node.dataset.refusedHref : null;
    if (!href) return;
    const said = node.textContent.trim();
    if (said === href || `${said}/` === href) return; // an autolink already shows its address
    node.append(el("span", { class: "muted" }, ` \u2039${href}\u203a`));
  }

  // Render a markdown-it token list into `parent`. `text(content)` turns one
  // piece of text into nodes (plain text, or a word diff); pieces come in the
  // order `pieces()` lists them.
  function renderTokens(tokens, parent, text, headingHook) {
    const stack = [parent];
    const top = () => stack[stack.length - 1];
    for (const token of tokens) {
      if (token.hidden && token.nesting !== 0) continue; // tight lists hide their paragraphs
      if (token.nesting === 1) {
        const tag = TAGS.has(token.tag) ? token.tag : "div";
        let node;
        if (tag === "a") {
          node = linkNode(token.attrGet("href"));
        } else {
          node = el(tag);
          const start = token.attrGet("start");
          if (tag === "ol" && start && /^\d+$/.test(start)) node.setAttribute("start", start);
        }
        if (/^h[1-6]$/.test(tag) && headingHook) headingHook(node, token);
        top().append(node);
        stack.push(node);
      } else if (token.nesting === -1) {
        if (stack.length > 1) closeNode(stack.pop());
      } else if (token.type === "inline") {
        renderInline(token.children || [], top(), text);
      } else if (token.type === "fence" || token.type === "code_block") {
        const code = el("code");
        code.append(...text(token.content));
        top().append(el("pre", {}, code));
      } else if (token.type === "hr") {
        top().append(el("hr"));
      } else if (token.content) {
        top().append(...text(token.content)); // anything else: as text, never as markup
      }
    }
  }

  function renderInline(children, parent, text) {
    const stack = [parent];
    const top = () => stack[stack.length - 1];
    for (const token of children) {
      if (token.nesting === 1) {
        let node;
        if (token.tag === "a") node = linkNode(token.attrGet("href"));
        else node = el(TAGS.has(token.tag) ? token.tag : "span");
        top().append(node); stack.push(node);
      } else if (token.nesting === -1) {
        if (stack.length > 1) closeNode(stack.pop());
      } else if (token.type === "code_inline") {
        const code = el("code"); code.append(...text(token.content)); top().append(code);
      } else if (token.type === "softbreak") {
        top().append(...text("\n"));
      } else if (token.type === "hardbreak") {
        top().append(...text("\n")); top().append(el("br"));
      } else if (token.type === "image") {
        // No remote fetches from the document: an image shows as its alt text.
        top().append(el("span", { class: "muted" }, "[image: ", ...text(token.content || ""), "]"));
      } else {
        top().append(...text(token.content || ""));
      }
    }
  }

  // The text pieces of a token list, in render order (see renderTokens).
  function pieces(tokens) {
    const out = [];
    for (const token of tokens) {
      if (token.type === "inline") {
        for (const child of token.children || []) {
          if (child.type === "softbreak" || child.type === "hardbreak") out.push("\n");
          else if (child.nesting === 0) out.push(child.content || "");
        }
        out.push(null); // block boundary
      } else if (token.type === "fence" || token.type === "code_block") {
        out.push(token.content); out.push(null);
      } else if (token.nesting === 0 && token.type !== "hr" && token.content) {
        out.push(token.content);
      }
    }
    return out;
  }

  const plainText = (content) => [document.createTextNode(content)];

  function renderMarkdown(src, parent, headingHook) {
    renderTokens(md.parse(src || "", {}), parent, plainText, headingHook);
  }

  // Top-level blocks of a markdown text: [{tokens, src, type}].
  function blocksOf(src) {
    const tokens = md.parse(src || "", {});
    const lines = (src || "").split("\n");
    const blocks = [];
    let group = [], depth = 0, map = null;
    for (const token of tokens) {
      if (group.length === 0) map = token.map;
      group.push(token);
      depth += token.nesting;
      if (depth === 0) {
        const text = map ? lines.slice(map[0], map[1]).join("\n") : group.map((t) => t.content).join("");
        blocks.push({ tokens: group, src: text, type: group[0].type + ":" + group[0].tag });
        group = [];
      }
    }
    return blocks;
  }

  // A word-level diff of two markdown texts, rendered inside the new text's markdown.
  function renderDiff(oldSrc, newSrc, parent) {
    const before = blocksOf(oldSrc), after = blocksOf(newSrc);
    const parts = Diff.diffArrays(before.map((b) => b.src), after.map((b) => b.src));
    let i = 0, j = 0, changed = 0;
    // What the rendered text does not show: where links point (definitions, destinations).
    changed += markDefinitions(oldSrc, newSrc, parent);
    for (let k = 0; k < parts.length; k++) {
      const part = parts[k];
      if (!part.added && !part.removed) {
        for (let n = 0; n < part.count; n++) {
          const box = el("div", { class: "blk-same" });
          renderTokens(after[j].tokens, box, plainText);
          parent.append(box); i++; j++;
        }
        continue;
      }
      let removed = [], added = [];
      if (part.removed) {
        removed = before.slice(i, i + part.count); i += part.count;
        const next = parts[k + 1];
        if (next && next.added) { added = after.slice(j, j + next.count); j += next.count; k++; }
      } else {
        added = after.slice(j, j + part.count); j += part.count;
      }
      changed++;
      const pairs = Math.min(removed.length, added.length);
      for (let n = 0; n < Math.max(removed.length, added.length); n++) {
        const old = removed[n], neu = added[n];
        if (n < pairs && old.type === neu.type && similar(old, neu)) {
          const box = el("div", { class: "blk-changed" });
          renderWordDiff(old, neu, box);
          const pointed = markTargets(old, neu, box);
          if (!pointed && joinPieces(pieces(old.tokens)).text === joinPieces(pieces(neu.tokens)).text) {
            box.append(el("p", { class: "outside-change", role: "note" }, "Its source changed, not its rendered text (spacing, escapes or markup that renders the same): see the Unified view."));
          }
          parent.append(box);
        } else {
          if (old) { const box = el("div", { class: "blk-del", "aria-label": "removed" }); renderTokens(old.tokens, box, plainText); parent.append(box); }
          if (neu) { const box = el("div", { class: "blk-ins", "aria-label": "added" }); renderTokens(neu.tokens, box, plainText); parent.append(box); }
        }
      }
    }
    if (changed === 0 && (oldSrc || "") !== (newSrc || "")) {
      // Never "No change" for a text that changes: say where the change is.
      parent.append(el("p", { class: "outside-change", role: "note" }, "This changes only what the rendered text does not show (spacing, escapes, comments or markup that renders the same): see the Unified view."));
    } else if (changed === 0) parent.append(el("p", { class: "muted no-change" }, "No change: the two texts are the same."));
  }

  // Link reference definitions ([label]: destination) render as nothing, yet decide where
  // every [label] link in the document points: each one added, removed or changed is shown.
  function definitionsOf(src) {
    const env = {};
    md.parse(src || "", env);
    return env.references || {};
  }
  function markDefinitions(oldSrc, newSrc, parent) {
    const was = definitionsOf(oldSrc), now = definitionsOf(newSrc);
    let marked = 0;
    for (const label of new Set([...Object.keys(was), ...Object.keys(now)])) {
      const a = was[label], b = now[label];
      if (a && b && a.href === b.href && (a.title || "") === (b.title || "")) continue;
      const what = !a ? `added: [${label}] → ${b.href}` : !b ? `removed: [${label}] (was ${a.href})` : `changed: [${label}] ${a.href} → ${b.href}`;
      parent.append(el("p", { class: "link-change", role: "note" }, `Link definition ${what}. It decides where every [${label}] link points, in any section.`));
      marked++;
    }
    return marked;
  }

  // Link destinations and images inside a changed block: their text may read the same.
  function targetsOf(tokens) {
    const out = [];
    for (const token of tokens) {
      for (const child of token.children || []) {
        if (child.type === "link_open") out.push(`link → ${child.attrGet("href")}`);
        if (child.type === "image") out.push(`image ${child.attrGet("src")}`);
      }
    }
    return out;
  }
  function markTargets(oldBlock, newBlock, box) {
    const was = targetsOf(oldBlock.tokens), now = targetsOf(newBlock.tokens);
    const gone = was.filter((t) => !now.includes(t)), come = now.filter((t) => !was.includes(t));
    if (!gone.length && !come.length) return false;
    const note = el("p", { class: "link-change", role: "note" }, "Where it points changed: ");
    for (const t of gone) note.append(el("del", {}, t), " ");
    for (const t of come) note.append(el("ins", {}, t), " ");
    box.append(note);
    return true;
  }

  // A word diff with semantic cleanup (diff-match-patch): each word (or space run, or
  // punctuation mark) becomes one character — the library's line-mode trick applied to
  // words — so a rewritten phrase reads as one deletion then one insertion, not word by word.
  const dmp = new window.diff_match_patch();
  dmp.Diff_Timeout = 1;
  const WORD = /\s+|[\p{L}\p{N}_]+|[^\s\p{L}\p{N}_]/gu;
  function wordParts(a, b) {
    const codes = new Map(), words = [];
    const encode = (text) => {
      let out = "";
      for (const word of text.match(WORD) || []) {
        let code = codes.get(word);
        if (code === undefined) {
          code = words.length + 1;
          if (code >= 0xd800) code += 0x800; // past the surrogates: one code unit per word
          codes.set(word, code); words[code] = word;
        }
        out += String.fromCharCode(code);
      }
      return out;
    };
    const left = encode(a), right = encode(b);
    if (words.length > 0xf000) return [{ value: a, removed: true }, { value: b, added: true }];
    const diffs = dmp.diff_main(left, right, false);
    dmp.diff_cleanupSemantic(diffs);
    return diffs.map(([op, text]) => ({
      value: text.split("").map((c) => words[c.charCodeAt(0)]).join(""), added: op === 1, removed: op === -1,
    }));
  }

  // Word-level marks help only when the two blocks share most of their words; a rewrite
  // reads better as the old block struck and the new one whole.
  function similar(oldBlock, newBlock) {
    const a = joinPieces(pieces(oldBlock.tokens)).text, b = joinPieces(pieces(newBlock.tokens)).text;
    let same = 0;
    for (const part of wordParts(a, b)) if (!part.added && !part.removed) same += part.value.trim().length;
    return same >= 0.4 * Math.max(a.replace(/\s+/g, "").length, b.replace(/\s+/g, "").length, 1);
  }

  function joinPieces(list) {
    // Offsets of each piece in the joined plain text; block boundaries become "\n".
    let text = "", spans = [];
    for (const piece of list) {
      if (piece === null) { text += "\n"; continue; }
      spans.push([text.length, text.length + piece.length]);
      text += piece;
    }
    return { text, spans };
  }

  function renderWordDiff(oldBlock, newBlock, parent) {
    const oldPlain = joinPieces(pieces(oldBlock.tokens)).text;
    const { text: newPlain, spans } = joinPieces(pieces(newBlock.tokens));
    // Ranges over the new text: same / ins, and deletions anchored at a new offset.
    const ranges = [], deletions = [];
    let at = 0;
    for (const part of wordParts(oldPlain, newPlain)) {
      const blank = !part.value.trim(); // a line break that became a space is not a change to show
      if (part.removed) { if (!blank) deletions.push({ at, value: part.value, done: false }); }
      else { ranges.push({ from: at, to: at + part.value.length, ins: !!part.added && !blank }); at += part.value.length; }
    }
    let index = 0;
    const text = (content) => {
      const span = spans[index++] || [newPlain.length, newPlain.length];
      const out = [];
      const emitDeletions = (pos, last) => {
        for (const d of deletions) {
          if (!d.done && (d.at === pos || (last && d.at > pos && d.at <= span[1]))) {
            d.done = true; out.push(el("del", {}, d.value));
          }
        }
      };
      for (const r of ranges) {
        const from = Math.max(r.from, span[0]), to = Math.min(r.to, span[1]);
        if (from >= to) continue;
        emitDeletions(from, false);
        const piece = newPlain.slice(from, to);
        out.push(r.ins ? el("ins", {}, piece) : document.createTextNode(piece));
      }
      emitDeletions(span[1], true);
      if (out.length === 0 && content) out.push(document.createTextNode(content));
      return out;
    };
    renderTokens(newBlock.tokens, parent, text);
    const left = deletions.filter((d) => !d.done);
    if (left.length) parent.append(el("p", {}, ...left.map((d) => el("del", {}, d.value))));
  }

  function renderUnified(diff, parent) {
    const pre = el("pre", { class: "diff", "aria-label": "Unified diff" });
    const lines = (diff || "").split("\n");
    for (const line of lines) {
      if (line === "" ) continue;
      const kind = line.startsWith("@@") ? "hunk" : line.startsWith("+") && !line.startsWith("+++") ? "add"
        : line.startsWith("-") && !line.startsWith("---") ? "rem" : null;
      pre.append(el("span", { class: kind }, line + "\n"));
    }
    if (!pre.firstChild) pre.append(el("span", { class: "no-change" }, "No change"));
    parent.append(pre);
  }

  // ------------------------------------------------------------------ loading

  // What an event makes the page read again besides the room and its proposals (those
  // always): the secondary panels only when their own events say so; everything on a
  // (re)connect or a resync.
  const PANELS_OF = { invitation: "invitations", participant: "invitations", handoff: "panels", task: "panels",
    message: "panels" };
  const dirty = new Set(["invitations", "panels", "list"]);

  async function loadRoom() {
    // The snapshot has every open proposal; the list (for the decided ones) is read again only
    // when a proposal may have been decided or ended: a new proposal costs one request.
    const wantList = dirty.has("list") || !state.listed;
    dirty.delete("list");
    const [room, listed] = await Promise.all([api("GET", "/room"),
      wantList ? api("GET", "/proposals", { limit: 200 }) : Promise.resolve(state.listed)]);
    state.room = room; state.listed = listed;
    state.latestEvent = Math.max(state.latestEvent, room.latest_event_id || 0);
    state.names = new Map(room.participants.map((p) => [p.participant_id, p]));
    // The newest 200 (the list's maximum), and every open one (the snapshot has them all),
    // so a long decided history never hides a proposal still to review.
    const open = new Map((room.proposals || []).map((p) => [p.proposal_id, p]));
    const known = new Set(listed.proposals.map((p) => p.proposal_id));
    const newer = [...open.values()].filter((p) => !known.has(p.proposal_id)).reverse(); // newest first
    state.proposals = [...newer, ...listed.proposals.map((p) => open.get(p.proposal_id) || p)]
      .sort((a, b) => (a.created_at < b.created_at ? 1 : a.created_at > b.created_at ? -1 : 0));
    const version = room.status.version;
    if (version !== state.lastVersion || !state.doc) await loadDocument(version);
    renderQueue(); renderHeader(); renderDocument(); renderPeople(); // the queue first: it is what the host waits for
    const again = new Set(dirty); dirty.clear();
    if (again.has("invitations")) loadInvitations().catch(() => {});
    if (again.has("panels")) loadOptionalPanels();
    // hook: tasks — on a full re-read (start, reconnect, resync); its own and handoff events it reads itself
    if (tasks && again.has("panels") && again.has("invitations")) tasks.refresh();
    if (state.selected) await refreshReview();
    if (threads) await threads.refresh().catch(() => {}); // hook: threads
    if (permissions) await permissions.refresh().catch(() => {}); // hook: permissions
  }

  async function loadDocument(version) {
    const [doc, regions, changes] = await Promise.all([
      api("GET", "/read", {}), api("GET", "/regions"),
      api("GET", "/changes_since", { version: Math.max(0, version - 50), limit: 200 }),
    ]);
    state.doc = doc; state.regions = regions.regions; state.lastVersion = doc.version;
    state.changes = changes.changes;
    renderHistory();
    if (window.commonroomUndoes) window.commonroomUndoes.refresh(); // hook: undoes
  }

  // ------------------------------------------------------------------ header + document

  function renderHeader() {
    const status = state.room.status;
    document.title = `${status.name} — commonroom`;
    $("doc-name").textContent = status.name;
    const last = state.changes[state.changes.length - 1];
    const lastText = !last ? [] : last.version === 1 ? [" · initial version, ", agoEl(last.created_at)]
      : [` · last change by ${nameOf(last.participant_id)}: ${last.summary} (`, agoEl(last.created_at), ")"];
    // The count is the Participants list's "in the room" rows: who left is not counted.
    const inRoom = state.room.participants.filter((p) => !p.left).length;
    const meta = $("doc-meta");
    clear(meta);
    meta.append(`version ${status.version}`, ...lastText,
      ` · ${plural(inRoom, "participant")} · ${plural(status.active_leases, "lease")}`);
  }

  function leasesByRegion() {
    const map = new Map();
    for (const lease of state.room.leases) {
      if (!map.has(lease.region)) map.set(lease.region, []);
      map.get(lease.region).push(lease);
    }
    return map;
  }

  function renderDocument() {
    const article = $("document"), outline = $("outline");
    clear(article); clear(outline);
    const byLine = new Map(state.regions.map((r) => [r.line, r]));
    const leases = leasesByRegion();
    const hostIds = new Set(state.room.participants.filter((p) => (p.capabilities || []).includes("*")).map((p) => p.participant_id));
    let n = 0;
    const badges = [];
    renderMarkdown(state.doc.content, article, (node, token) => {
      const line = token.map ? token.map[0] + 1 : -1;
      const region = byLine.get(line); // the room's own outline decides what is a section
      n++;
      if (!region) return;
      const id = "sec-" + n;
      node.id = id;
      node.dataset.region = region.region; // hook: threads
      outline.append(el("li", {}, el("a", { href: "#" + id }, region.title)));
      for (const lease of leases.get(region.region) || []) {
        const hold = lease.reason === "human_editing" || hostIds.has(lease.participant_id);
        const badge = el("span", { class: "lease" + (hold ? " hold" : ""), "data-expires": lease.expires_at,
          "data-label": hold ? "host editing" : `leased by ${nameOf(lease.participant_id)}` });
        badges.push([node, badge]); // after the heading's own text, which is rendered next
      }
      const here = state.proposals.filter((p) => p.region === region.region);
      const pending = here.filter(isUndecided), approved = here.filter((p) => p.status === "approved");
      if (pending.length) {
        badges.push([node, el("button", { type: "button", class: "doc-proposals", onclick: () => openReview(pending[0].proposal_id) },
          `${plural(pending.length, "proposal")} — review`)]);
      }
      if (approved.length) {
        badges.push([node, el("button", { type: "button", class: "doc-proposals approved", onclick: () => openReview(approved[0].proposal_id) },
          `${approved.length} approved, awaiting commit`)]);
      }
    });
    for (const [node, badge] of badges) node.append(badge);
    tickCountdowns();
    if (window.commonroomBlame) window.commonroomBlame.render(); // hook: blame
  }

  function tickCountdowns() {
    for (const badge of document.querySelectorAll("[data-expires]")) {
      // "14:57 left": a countdown, never to be read as a clock time.
      badge.textContent = `${badge.dataset.label} · ${countdown(badge.dataset.expires)} left`;
    }
    for (const time of document.querySelectorAll("[data-ago]")) time.textContent = ago(time.dataset.ago);
  }

  // ------------------------------------------------------------------ queue

  // The listed proposal carries the engine's `stale` for open ones; an open review's detail is fresher.
  function isStale(p) {
    if (OVERTAKEN.has(p.status)) return true;
    const d = state.details.get(p.proposal_id);
    return !!(p.stale || (OPEN.has(p.status) && d && d.status === p.status && d.stale));
  }

  // Undecided: pending and not waiting out an undo window (that one is decided, for now).
  function isUndecided(p) { return p.status === "pending" && !state.held.has(p.proposal_id); }
  function undecided() { return state.proposals.filter(isUndecided); }

  // The queue in three groups: pending (the badge counts these), approved and waiting for its
  // author's commit, and decided (collapsed to one line each).
  const GROUPS = [
    ["pending", "To review", (p) => p.status === "pending"],
    ["approved", "Approved, awaiting commit", (p) => p.status === "approved"],
    ["decided", "Decided", (p) => !OPEN.has(p.status)],
  ];

  // The badge and the progress line: numbers, so they change at once even while the list waits.
  function renderCounts() {
    const pending = undecided().length, total = state.proposals.length;
    $("queue-count").textContent = String(pending);
    $("queue-count").setAttribute("aria-label", `${plural(pending, "proposal")} to review`);
    $("queue-progress").textContent = total ? `${total - pending} of ${total} decided` : "";
  }

  function renderQueue() {
    const list = $("queue-list");
    renderCounts();
    if (list.matches(":hover") && list.childElementCount) {
      // Nothing moves under the cursor: wait until it leaves the list (at most a few seconds).
      state.queueHeld = state.queueHeld || Date.now();
      if (Date.now() - state.queueHeld < 3000) {
        if (!state.queueWaiting) {
          state.queueWaiting = true;
          const again = () => { state.queueWaiting = false; list.removeEventListener("mouseleave", again); renderQueue(); };
          list.addEventListener("mouseleave", again);
          setTimeout(again, 3000 - (Date.now() - state.queueHeld));
        }
        return;
      }
    }
    state.queueHeld = 0;
    const focused = document.activeElement && list.contains(document.activeElement)
      ? document.activeElement.dataset.proposal : null;
    clear(list);
    const total = state.proposals.length;
    $("queue-empty").hidden = total > 0;
    list.hidden = total === 0;
    for (const [group, title, member] of GROUPS) {
      const rows = state.proposals.filter(member);
      if (!rows.length) continue;
      list.append(el("li", { class: "group-head", "data-group": group }, `${title} · ${rows.length}`));
      for (const p of rows) {
        const held = state.held.get(p.proposal_id);
        const item = el("button", { type: "button", class: "item", "data-proposal": p.proposal_id,
          onclick: () => openReview(p.proposal_id) },
        isStale(p) ? el("span", { class: "stale" }, "STALE") : null,
        el("span", { class: "status" }, held ? `${held.verb}… (undo)` : p.status),
        p.amended ? el("span", { class: "status amended" }, "with edits") : null,
        el("span", { class: "summary" }, p.summary),
        el("span", { class: "sub", title: p.region }, `${shortRegion(p.region)} · base v${p.base_version} · ${nameOf(p.participant_id)} · `, agoEl(p.created_at)));
        list.append(el("li", { class: group === "decided" ? "decided" : "open", "data-group": group }, item));
        if (p.proposal_id === focused) item.focus(); // keyboard focus survives a live update
      }
    }
    markSelected();
  }

  function findProposal(id) { return state.proposals.find((p) => p.proposal_id === id); }

  async function openReview(id, options) {
    const focusTitle = !(options && options.keepFocus);
    const changing = state.selected !== id;
    state.selected = id;
    if (changing) {
      state.editing = false; state.openedAt = null; state.dropped = new Set();
      state.rejecting = false; state.sectionShows = "proposed";
      const p = findProposal(id);
      state.view = p && p.amended ? "amended" : "rendered"; // an amended one opens on what the reviewer changed
      $("review-comment").value = ""; $("edit-text").value = "";
      $("review-error").hidden = true; $("reject-hint").hidden = true;
      $("review-revised").hidden = true;
    }
    $("review").hidden = false;
    markSelected();
    await refreshReview();
    if (changing && focusTitle) $("review-title").focus();
  }

  // Selection changes only a class: the list itself does not move.
  function markSelected() {
    for (const button of document.querySelectorAll("#queue-list button.item")) {
      const selected = button.dataset.proposal === state.selected;
      button.parentElement.classList.toggle("selected", selected);
      if (selected) button.setAttribute("aria-current", "true"); else button.removeAttribute("aria-current");
    }
  }

  function queueItem(id) {
    return [...document.querySelectorAll("#queue-list button.item")].find((b) => b.dataset.proposal === id) || null;
  }

  function closeReview() {
    state.selected = null; state.editing = false; state.rejecting = false;
    $("review").hidden = true; markSelected();
    const first = document.querySelector("#queue-list button");
    (first || $("queue")).focus();
  }

  async function refreshReview() {
    const id = state.selected;
    const proposal = findProposal(id);
    if (!proposal) { closeReview(); return; }
    let detail, current;
    try {
      detail = await api("GET", "/proposal", { proposal_id: id });
      state.details.set(id, detail);
      // A committed proposal shows what it changed: the section as it was just before its
      // commit (against the current text it would read "No change").
      const before = detail.status === "committed" && detail.committed_version > 1
        ? { region: proposal.region, version: detail.committed_version - 1 } : { region: proposal.region };
      current = await api("GET", "/read", before).then((r) => r.content, () => "");
    } catch (error) { showReviewError(error); return; }
    if (state.selected !== id) return;
    const base = state.openedAt;
    state.openedAt = state.openedAt || detail.current_version;
    const previous = state.detail && state.detail.proposal_id === id ? state.detail : null;
    const sameText = previous && previous.content === detail.content && state.current === current;
    if (previous && !sameText) state.dropped = new Set(); // new hunks: old choices do not carry over
    // The review binds to the revision shown: a new one while it was open is said, not slipped in.
    if (previous && previous.revision !== detail.revision) {
      showRevised(`${nameOf(detail.participant_id)} revised this proposal (now revision ${detail.revision}) while it was open: the diff below is the new one.`);
    }
    // Re-draw the diff only when what it shows changed: focus and scroll stay put otherwise.
    const redraw = !sameText || previous.status !== detail.status || previous.stale !== detail.stale;
    state.detail = detail; state.current = current;
    $("review-title").textContent = proposal.summary;
    $("review-title").setAttribute("tabindex", "-1");
    const provenance = $("review-provenance");
    clear(provenance);
    provenance.append(`${nameOf(detail.participant_id)} (${(state.names.get(detail.participant_id) || {}).kind || "?"}) · ${shortRegion(detail.region)} · base v${detail.base_version} · `,
      agoEl(detail.created_at), ` · ${detail.status}` + leaseText(detail.region));
    const stale = detail.stale || OVERTAKEN.has(detail.status);
    $("review-stale").hidden = !stale;
    $("review-stale").textContent = stale ? `STALE: ${shortRegion(detail.region)} changed since v${detail.base_version} (now v${detail.current_version}) — this would no longer apply. Ask the author for a fresh proposal.` : "";
    const moved = base && base !== detail.current_version;
    $("review-moved").hidden = !moved;
    $("review-moved").textContent = moved ? `The document moved to v${detail.current_version} while this was open; the diff below is against the new text.` : "";
    const notes = [];
    if (detail.amended) notes.push(`Approved with edits by ${nameOf(detail.reviewer_id)}: "Amendment" shows them against the author's text.`);
    if (detail.review_comment) notes.push(`${nameOf(detail.reviewer_id)} commented: ${detail.review_comment}`);
    for (const warning of detail.warnings || []) notes.push(`Beyond this section: ${warning}.`);
    $("review-amended").hidden = notes.length === 0;
    $("review-amended").textContent = notes.join(" ");
    $("view-amended").hidden = !detail.amended;
    if (!detail.amended && state.view === "amended") state.view = "rendered";
    if (state.editing && !$("edit-text").value) $("edit-text").value = detail.content;
    if (redraw) renderReviewBody(); else updateButtons();
    if (threads) threads.review(detail, current); // hook: threads
  }

  function leaseText(region) {
    const lease = (state.room.leases || []).find((l) => l.region === region);
    return lease ? ` · lease ${nameOf(lease.participant_id)}, ${countdown(lease.expires_at)} left` : "";
  }

  function renderReviewBody() {
    const body = $("review-body"), detail = state.detail;
    clear(body);
    for (const button of document.querySelectorAll(".toolbar button")) {
      button.setAttribute("aria-pressed", String(button.dataset.view === state.view));
    }
    const proposed = proposedText();
    if (state.view === "rendered") renderDiff(state.current, proposed, body);
    else if (state.view === "unified" && state.editing) renderUnified(localUnified(state.current, proposed), body);
    else if (state.view === "unified") renderHunks(body);
    else if (state.view === "amended") renderDiff(detail.proposed_content || "", detail.content, body);
    else renderSection(body, proposed);
    $("review-edit").hidden = !state.editing;
    updateButtons();
  }

  // The whole section as it would read after the change, or (toggled) as it reads now.
  function renderSection(body, proposed) {
    const showsCurrent = state.sectionShows === "current";
    const toggle = el("button", { type: "button", id: "section-toggle", "aria-pressed": String(showsCurrent),
      onclick: () => { state.sectionShows = showsCurrent ? "proposed" : "current"; renderReviewBody(); $("section-toggle").focus(); } },
    showsCurrent ? "Show the proposed text" : "Show the current text");
    body.append(el("p", { class: "section-note" },
      showsCurrent ? "The section as it reads now. " : "The section as it would read after this change. ", toggle));
    const box = el("div", { class: "section-text", "data-shows": showsCurrent ? "current" : "proposed" });
    renderMarkdown(showsCurrent ? state.current : proposed, box);
    body.append(box);
  }

  // What approving would land: the reviewer's edit, else the proposal less the hunks not kept.
  function proposedText() {
    if (state.editing) return $("edit-text").value;
    if (!state.dropped.size) return state.detail.content;
    const patch = proposalPatch();
    return Diff.applyPatch(state.current, { ...patch, hunks: patch.hunks.filter((_, i) => !state.dropped.has(i)) });
  }

  function proposalPatch() {
    return Diff.structuredPatch("current", "proposed", state.current, state.detail.content, "", "", { context: 3 });
  }

  // The unified diff, hunk by hunk, each with "keep" (unchecked hunks are left out of what lands).
  function renderHunks(parent) {
    const patch = proposalPatch();
    if (!patch.hunks.length) { parent.append(el("p", { class: "muted no-change" }, "No change")); return; }
    patch.hunks.forEach((hunk, index) => {
      const box = el("input", { type: "checkbox", checked: !state.dropped.has(index) });
      box.addEventListener("change", () => {
        if (box.checked) state.dropped.delete(index); else state.dropped.add(index);
        renderReviewBody();
      });
      const header = `@@ -${hunk.oldStart},${hunk.oldLines} +${hunk.newStart},${hunk.newLines} @@`;
      const pre = el("pre", { class: "diff" + (state.dropped.has(index) ? " dropped" : "") },
        el("span", { class: "hunk" }, header + "\n"));
      for (const line of hunk.lines) {
        const kind = line.startsWith("+") ? "add" : line.startsWith("-") ? "rem" : null;
        pre.append(el("span", { class: kind }, line + "\n"));
      }
      parent.append(el("div", { class: "hunk-box" }, el("label", { class: "keep" }, box, ` Keep change ${index + 1} of ${patch.hunks.length}`), pre));
    });
  }

  function localUnified(before, after) {
    return Diff.createPatch(state.detail.region, before, after, "current", "your edit").split("\n").slice(2).join("\n");
  }

  function canDecide() {
    const d = state.detail;
    return !!(d && state.selected && d.proposal_id === state.selected && d.status === "pending"
      && !state.held.has(state.selected));
  }

  function updateButtons() {
    const d = state.detail;
    const decidable = canDecide();
    const stale = d && (d.stale || d.status === "superseded");
    // Every view shows the proposed text (a diff, or the section as it would read), so each may approve.
    $("btn-approve").disabled = !(decidable && !stale);
    $("btn-approve").title = stale ? "Stale: it would no longer apply" : "";
    $("btn-reject").disabled = !decidable;
    $("btn-edit").disabled = !(decidable && !stale);
    $("btn-approve").firstChild.textContent = state.editing ? "Approve your edit "
      : state.dropped.size ? "Approve kept changes " : "Approve ";
  }

  function showReviewError(error) {
    const node = $("review-error");
    node.hidden = false;
    node.textContent = error.body && error.body.error ? `${error.body.error}: ${error.body.message}` : String(error.message || error);
  }

  // `r`: the comment box, focused; the reject itself is a second step (Ctrl/⌘+Enter there, or Reject).
  function startReject() {
    if (!canDecide()) return;
    state.rejecting = true;
    $("reject-hint").hidden = false;
    $("review-comment").focus();
  }

  // A decision is held for UNDO_MS with an Undo toast, then sent; focus moves to the next
  // undecided proposal in the queue (never into a field), so the next key reviews that one.
  function decide(decision) {
    if (!canDecide()) return;
    if (decision === "approve" && $("btn-approve").disabled) return;
    const comment = $("review-comment").value.trim();
    if (decision === "reject" && !comment) {
      state.rejecting = true;
      $("reject-hint").hidden = false;
      showReviewError({ message: "A reject needs a comment: say what the author should change, then press Ctrl+Enter or Reject." });
      $("review-comment").focus();
      return;
    }
    // The decision names the revision on screen: the room decides nothing when it moved on.
    if (!state.detail || state.detail.proposal_id !== state.selected) return;
    const params = { proposal_id: state.selected, decision, revision: state.detail.revision };
    if (comment) params.comment = comment;
    if (decision === "approve" && (state.editing || state.dropped.size)) {
      const text = proposedText();
      if (text !== state.detail.content) params.content = text; // recorded as an amendment
    }
    $("review-error").hidden = true; $("reject-hint").hidden = true;
    const id = state.selected, proposal = findProposal(id);
    const verb = decision === "approve" ? (params.content ? "approving with your edits" : "approving") : "rejecting";
    const held = { params, verb, summary: proposal ? proposal.summary : id, editing: state.editing,
      editText: $("edit-text").value, timer: null, toast: null };
    held.timer = setTimeout(() => send(id), UNDO_MS);
    held.toast = toast(held, id);
    state.held.set(id, held);
    state.rejecting = false;
    const next = undecided().find((p) => p.proposal_id !== id);
    renderQueue(); renderDocument();
    if (next) {
      openReview(next.proposal_id, { keepFocus: true });
      const item = queueItem(next.proposal_id);
      (item || $("queue")).focus();
    } else {
      closeReview();
    }
  }

  function toast(held, id) {
    const undo = el("button", { type: "button", class: "undo", "data-undo": id, onclick: () => undoDecision(id) }, "Undo");
    const node = el("div", { class: "toast", role: "status", "data-proposal": id },
      `${held.verb[0].toUpperCase()}${held.verb.slice(1)} “${held.summary}” — sent in ${UNDO_MS / 1000} s. `, undo);
    $("toasts").append(node);
    return node;
  }

  async function send(id) {
    const held = state.held.get(id);
    if (!held) return;
    state.held.delete(id);
    held.toast.remove();
    try { await api("POST", "/proposal/review", held.params); }
    catch (error) {
      const body = error.body || {};
      if (body.error === "proposal_conflict" && body.details && body.details.reason === "revised") {
        await reopenRevised(id, held, body.details.current_revision);
      } else {
        showNotice(`Could not ${held.params.decision} “${held.summary}”: ${error.message}`);
      }
    }
    scheduleRefresh();
  }

  function showRevised(text) { const n = $("review-revised"); n.textContent = text; n.hidden = !text; }

  // A revision that arrives while a decision waits out its undo window cancels that
  // decision (it was made on the text before): nothing is sent, the new diff is shown.
  function revisedWhileHeld(data) {
    let event;
    try { event = JSON.parse(data); } catch (_) { return; }
    const p = event && event.payload;
    const held = p && state.held.get(p.proposal_id);
    if (!held || held.params.revision === p.revision) return;
    clearTimeout(held.timer);
    state.held.delete(p.proposal_id);
    held.toast.remove();
    renderQueue(); renderDocument();
    reopenRevised(p.proposal_id, held, p.revision);
  }

  async function reopenRevised(id, held, revision) {
    const what = held.params.decision === "approve" ? "approval" : "decision";
    const text = `“${held.summary}” was revised (now revision ${revision}) while your ${what} waited: nothing was sent. Here is the new diff; decide again.`;
    showNotice(text);
    await openReview(id, { keepFocus: true });
    showRevised(text);
    $("review-comment").value = held.params.comment || "";
    const item = queueItem(id);
    (item || $("review-title")).focus();
  }

  // Undo: nothing was sent; the proposal is open again as it was (comment and edit kept).
  async function undoDecision(id) {
    const held = state.held.get(id);
    if (!held) return;
    clearTimeout(held.timer);
    state.held.delete(id);
    held.toast.remove();
    renderQueue(); renderDocument();
    await openReview(id, { keepFocus: true });
    $("review-comment").value = held.params.comment || "";
    if (held.editing) { $("edit-text").value = held.editText; state.editing = true; renderReviewBody(); }
    const item = queueItem(id);
    (item || $("review-title")).focus();
  }

  // A tab closed inside an undo window still sends what the host decided.
  window.addEventListener("pagehide", () => {
    for (const [id, held] of state.held) {
      clearTimeout(held.timer);
      state.held.delete(id);
      fetch(API + "/proposal/review", { method: "POST", keepalive: true, credentials: "omit",
        headers: { [OWNER_HEADER]: credential() || "", "Content-Type": "application/json" },
        body: JSON.stringify(held.params) }).catch(() => {});
    }
  });

  function startEdit() {
    if ($("btn-edit").disabled) return;
    $("edit-text").value = proposedText();
    state.editing = true;
    renderReviewBody();
    $("edit-text").focus();
  }

  function move(step) {
    const list = undecided();
    if (!list.length) return;
    let index = list.findIndex((p) => p.proposal_id === state.selected);
    index = index < 0 ? (step > 0 ? 0 : list.length - 1) : (index + step + list.length) % list.length;
    openReview(list[index].proposal_id);
  }

  // ------------------------------------------------------------------ people, invitations, history

  // In the room: present or away, with a revoke button for agents. Who left: a collapsed
  // group, no button (their sessions are over), never a recipient; not in the header's count.
  function renderPeople() {
    const list = $("people");
    if (list.querySelector(".confirm")) return; // an open confirmation is not swept away by an update
    clear(list);
    const inRoom = state.room.participants.filter((p) => !p.left);
    const left = state.room.participants.filter((p) => p.left);
    for (const p of inRoom) {
      const host = (p.capabilities || []).includes("*");
      const caps = host ? "host (every capability)" : (p.capabilities || []).join(", ");
      const row = el("li", { "data-participant": p.participant_id },
        el("span", { class: p.present ? "present" : "away" }, p.name),
        ` · ${p.kind} · ${p.present ? "present" : "away"}`,
        el("div", { class: "muted" }, `can: ${caps}`),
        p.advertised && p.advertised.length ? el("div", { class: "muted" }, `advertises: ${p.advertised.join(", ")}`) : null);
      if (permissions) permissions.participantRow(row, p); // hook: permissions
      if (!host) {
        const button = el("button", { type: "button", "aria-label": `Revoke sessions of ${p.name}`, "data-participant": p.participant_id }, "Revoke sessions");
        button.addEventListener("click", () => confirmRevoke(row, button, p));
        row.append(" ", button);
      }
      list.append(row);
    }
    $("people-count").textContent = `· ${inRoom.length} in the room`;
    const group = $("people-left");
    const wasOpen = group.open;
    clear($("people-left-list"));
    for (const p of left) {
      $("people-left-list").append(el("li", { "data-participant": p.participant_id },
        el("span", { class: "left-mark" }, p.name), ` · ${p.kind} · left`));
    }
    $("people-left-count").textContent = `Left · ${left.length}`;
    group.hidden = left.length === 0;
    group.open = wasOpen;
    renderRecipients();
    renderLeases();
  }

  // Active leases, each with its holder and countdown; a wide one (most of the document) is
  // marked, and the host may release any of them (asking first).
  function renderLeases() {
    const list = $("leases");
    if (list.querySelector(".confirm")) return;
    clear(list);
    const leases = state.room.leases || [];
    if (!leases.length) list.append(el("li", { class: "muted empty" }, "No leases."));
    for (const lease of leases) {
      const hold = lease.reason === "human_editing";
      const row = el("li", { "data-lease": lease.lease_id },
        lease.wide ? el("span", { class: "stale wide" }, "WIDE") : null,
        el("strong", { title: lease.region }, shortRegion(lease.region)),
        ` · ${hold ? "your edit's hold" : nameOf(lease.participant_id)} · `,
        el("span", { "data-expires": lease.expires_at, "data-label": "lease" }));
      const button = el("button", { type: "button", "aria-label": `Release the lease on ${shortRegion(lease.region)}` }, "Release");
      button.addEventListener("click", () => {
        button.hidden = true;
        const box = el("span", { class: "confirm", role: "group", "aria-label": "Confirm release" },
          `Release ${shortRegion(lease.region)} now?`);
        const yes = el("button", { type: "button" }, "Yes, release");
        const no = el("button", { type: "button" }, "Cancel");
        yes.addEventListener("click", async () => {
          try { await api("POST", "/release", { lease_id: lease.lease_id }); }
          catch (error) { box.textContent = `Could not release: ${error.message}`; return; }
          box.remove(); scheduleRefresh();
        });
        no.addEventListener("click", () => { box.remove(); button.hidden = false; button.focus(); });
        box.append(yes, no); row.append(box); no.focus();
      });
      row.append(" ", button);
      list.append(row);
    }
    tickCountdowns();
  }

  function confirmRevoke(row, button, participant) {
    button.hidden = true;
    const box = el("span", { class: "confirm", role: "group", "aria-label": "Confirm revocation" },
      `End every session of ${participant.name}?`);
    const yes = el("button", { type: "button" }, "Yes, revoke");
    const no = el("button", { type: "button" }, "Cancel");
    yes.addEventListener("click", async () => {
      try { await api("POST", "/session/revoke", { participant_id: participant.participant_id }); }
      catch (error) { box.textContent = `Could not revoke: ${error.message}`; return; }
      box.remove(); button.hidden = false; scheduleRefresh();
    });
    no.addEventListener("click", () => {
      box.remove(); button.hidden = false; renderPeople();
      const again = [...$("people").querySelectorAll("button")].find((b) => b.dataset.participant === participant.participant_id);
      (again || button).focus();
    });
    box.append(yes, no);
    row.append(box);
    no.focus();
  }

  function renderInviteForm() {
    const caps = $("invite-caps");
    for (const cap of ALL_CAPS) {
      const box = el("input", { type: "checkbox", value: cap, checked: AGENT_CAPS.includes(cap) });
      caps.append(el("label", {}, box, cap));
    }
    $("invite-unlimited").addEventListener("change", (event) => { $("invite-uses").disabled = event.target.checked; });
    $("invite-form").addEventListener("submit", async (event) => {
      event.preventDefault();
      const capabilities = [...caps.querySelectorAll("input:checked")].map((b) => b.value);
      const params = { capabilities, expires_in_minutes: Number($("invite-expires").value) || null,
        max_uses: $("invite-unlimited").checked ? null : Number($("invite-uses").value) || 1 };
      const label = $("invite-label").value.trim();
      if (label) params.label = label;
      let answer;
      try { answer = await api("POST", "/invite", params); }
      catch (error) { showNotice(`Could not create the invitation: ${error.message}`); return; }
      $("invite-uri").textContent = answer.invitation;
      $("invite-result").hidden = false;
      await showMcpSnippets(answer.invitation);
      $("copy-uri").focus();
      loadInvitations().catch(() => {});
    });
    $("invite-client").addEventListener("change", showSnippet);
    for (const [button, source] of [["copy-uri", "invite-uri"], ["copy-mcp", "invite-mcp"]]) {
      $(button).addEventListener("click", async () => {
        const text = $(source).textContent;
        try { await navigator.clipboard.writeText(text); $(button).textContent = "Copied"; }
        catch (_) {
          const range = document.createRange(); range.selectNodeContents($(source));
          const sel = window.getSelection(); sel.removeAllRanges(); sel.addRange(range);
          $(button).textContent = "Selected: press Ctrl+C";
        }
        setTimeout(() => { $(button).textContent = "Copy"; }, 2000);
      });
    }
    $("empty-invite").addEventListener("click", () => { $("invite-create").scrollIntoView(); $("invite-label").focus(); });
  }

  // Each MCP client's setup for the invitation just made (the room renders them:
  // POST /owner/api/mcp/configs); a room without that route gets the bridge line.
  const snippets = { list: [], last: null };
  async function showMcpSnippets(invitation) {
    let answer = null;
    try { answer = await api("POST", "/owner/api/mcp/configs", { invitation }); } catch (_) { answer = null; }
    snippets.list = answer ? answer.configs : [{ client: "ce mcp", text: `CE_INVITATION='${invitation}' ce mcp`, where: "run it as the MCP client's stdio command (the invitation in its environment, never on its command line)" }];
    $("invite-mcp-url").textContent = answer && answer.mcp_url ? answer.mcp_url : "(not reachable over HTTP here)";
    const select = $("invite-client");
    clear(select);
    for (const snippet of snippets.list) select.append(el("option", { value: snippet.client }, snippet.client));
    if (snippets.last && snippets.list.some((s) => s.client === snippets.last)) select.value = snippets.last;
    showSnippet();
  }

  function showSnippet() {
    const chosen = snippets.list.find((s) => s.client === $("invite-client").value) || snippets.list[0];
    if (!chosen) return;
    snippets.last = chosen.client;
    $("invite-mcp").textContent = chosen.text;
    $("invite-client-where").textContent = chosen.where + (chosen.secret ? ` · ${chosen.secret}` : "");
  }

  async function loadInvitations() {
    const answer = await api("GET", "/invitations", { limit: 50 });
    const list = $("invitations"), old = $("invitations-old-list");
    clear(list); clear(old);
    // Active ones stay in view; used, expired and revoked ones collapse into one group.
    const spent = answer.invitations.filter((inv) => inv.state !== "active");
    $("invitations-old-count").textContent = `Used, expired or revoked · ${spent.length}`;
    $("invitations-old").hidden = spent.length === 0;
    if (spent.length === answer.invitations.length) list.append(el("li", { class: "muted empty" }, "No open invitations."));
    for (const inv of answer.invitations) {
      const uses = `${inv.used_count}/${inv.max_uses === null ? "∞" : inv.max_uses}`;
      const row = el("li", {}, el("strong", {}, inv.label || inv.invite_id), ` · ${inv.state} · uses ${uses} · expires ${new Date(inv.expires_at).toLocaleString()}`,
        el("div", { class: "muted" }, inv.capabilities.join(", ")));
      if (inv.state === "active") {
        row.append(el("button", { type: "button", "aria-label": `Revoke invitation ${inv.label || inv.invite_id}`, onclick: async () => {
          try { await api("POST", "/invite/revoke", { invite_id: inv.invite_id }); } catch (error) { showNotice(error.message); }
          loadInvitations().catch(() => {});
        } }, "Revoke"));
      }
      (inv.state === "active" ? list : old).append(row);
    }
  }

  function renderHistory() {
    const list = $("history");
    clear(list);
    for (const change of [...state.changes].reverse()) {
      const who = change.version === 1 ? "" : ` · ${nameOf(change.participant_id)}`;
      const row = el("li", {}, el("strong", {}, `v${change.version}`), ` ${change.summary}${who} · `, agoEl(change.created_at), " ");
      if (change.version > 1) {
        row.append(el("button", { type: "button", "aria-label": `Diff of version ${change.version}`, onclick: () => showVersionDiff(change.version) }, "Diff"));
      }
      if (window.commonroomBlame) window.commonroomBlame.historyRow(row, change); // hook: blame
      list.append(row);
    }
  }

  async function showVersionDiff(version) {
    const pre = $("history-diff");
    let answer;
    try { answer = await api("GET", "/diff", { base_version: version - 1, to_version: version }); }
    catch (error) { pre.hidden = false; pre.textContent = error.message; return; }
    const holder = el("div");
    renderUnified(answer.diff, holder);
    clear(pre);
    pre.append(...holder.firstChild.childNodes);
    pre.hidden = false;
    pre.setAttribute("aria-label", `Diff of version ${version} against version ${version - 1}`);
  }

  // Handoffs and room text (PROTOCOL §9, §10.1): shown only when the room has them.
  // A panel whose route answered 404 (an older room) stays hidden until the page reloads.
  // Room text only ever appends (rows are keyed by seq); a handoff row is rebuilt only when
  // that handoff or its task changed, so nothing moves under the host's cursor.
  const optional = { handoffs: true, messages: true };
  const rooms = { messageSeq: 0, handoffs: new Map(), loadingMessages: null };

  function isHost(participantId) {
    const p = state.names.get(participantId);
    return !!p && (p.capabilities || []).includes("*");
  }

  async function loadOptionalPanels() {
    await loadHandoffs(); // first: a thread's label names its handoff
    await loadMessages();
  }

  async function loadHandoffs() {
    if (!optional.handoffs) return;
    let answer;
    try { answer = await api("GET", "/handoffs", { limit: 50 }); }
    catch (error) { $("handoffs-panel").hidden = true; if (error.status === 404) optional.handoffs = false; return; }
    const handoffs = answer.handoffs || [];
    const tasks = new Map();
    await Promise.all(handoffs.filter((h) => h.task_id).map(async (h) => {
      try { tasks.set(h.handoff_id, await api("GET", "/task", { task_id: h.task_id })); } catch (_) { /* shown without */ }
    }));
    const list = $("handoffs");
    const empty = list.querySelector(".empty");
    if (handoffs.length && empty) empty.remove();
    if (!handoffs.length && !list.firstChild) list.append(el("li", { class: "muted empty" }, "No handoffs yet."));
    let previous = null;
    for (const h of handoffs) {
      const task = tasks.get(h.handoff_id) || null;
      const key = JSON.stringify([h.status, h.updated_at, h.result_summary, h.reason,
        task && [task.status, task.status_message, task.updated_at], nameOf(h.from_participant_id), nameOf(h.to_participant_id)]);
      rooms.handoffs.set(h.handoff_id, h);
      let row = list.querySelector(`li[data-handoff="${CSS.escape(h.handoff_id)}"]`);
      if (!row) {
        row = el("li", { "data-handoff": h.handoff_id });
        if (previous && previous.nextSibling) list.insertBefore(row, previous.nextSibling);
        else if (previous) list.append(row); else list.prepend(row);
      }
      if (row.dataset.key !== key) { clear(row); row.append(...handoffRow(h, task)); row.dataset.key = key; }
      previous = row;
    }
    $("handoffs-panel").hidden = false;
  }

  function handoffRow(h, task) {
    const parts = [
      el("span", { class: `status handoff-status ${h.status}`, "data-status": h.status }, h.status), " ",
      el("strong", { class: "summary" }, h.summary),
      el("div", { class: "muted", title: h.region || null },
        `${nameOf(h.from_participant_id)} → ${nameOf(h.to_participant_id)}${h.region ? " · " + shortRegion(h.region) : ""}`),
    ];
    if (h.details) parts.push(el("div", { class: "details" }, h.details));
    if (task) {
      parts.push(el("div", { class: "task", "data-task-status": task.status },
        "task: ", el("span", { class: "task-status" }, task.status.replace("_", " ")),
        task.status_message ? ` · ${task.status_message}` : ""));
    }
    if (h.result_summary) parts.push(el("div", { class: "result" }, `result: ${h.result_summary}`));
    if (h.reason) parts.push(el("div", { class: "muted" }, `reason: ${h.reason}`));
    if (isHost(h.to_participant_id)) parts.push(...handoffActions(h));
    return parts;
  }

  // A handoff asked of the host: Accept / Decline while requested, Done once accepted, each
  // with an optional note for the one who asked (a Done without one says "done").
  function handoffActions(h) {
    const actions = h.status === "requested" ? [["accept", "Accept"], ["decline", "Decline"]]
      : h.status === "accepted" ? [["done", "Done"]] : [];
    if (!actions.length) return [];
    const note = el("input", { type: "text", class: "handoff-note", maxlength: "500",
      "aria-label": `Note for ${nameOf(h.from_participant_id)} (optional)`, placeholder: "note (optional)" });
    const error = el("span", { class: "error", role: "alert" });
    const buttons = actions.map(([action, label]) => el("button", { type: "button", "data-action": action,
      "aria-label": `${label} the handoff “${h.summary}”`, onclick: async () => {
        const text = note.value.trim();
        const [path, params] = action === "done"
          ? ["/handoff/result", { handoff_id: h.handoff_id, status: "completed", summary: text || "done" }]
          : ["/handoff/respond", { handoff_id: h.handoff_id, decision: action, summary: text || null }];
        try { await api("POST", path, params); error.textContent = ""; }
        catch (failure) { error.textContent = `Could not ${label.toLowerCase()}: ${failure.message}`; return; }
        loadHandoffs();
      } }, label));
    return [el("div", { class: "handoff-actions", role: "group", "aria-label": "Answer this handoff" }, note, ...buttons, error)];
  }

  // One read at a time; a read asked for meanwhile runs right after (events come in bursts).
  async function loadMessages() {
    if (!optional.messages) return;
    if (rooms.loadingMessages) { rooms.messagesAgain = true; return rooms.loadingMessages; }
    rooms.loadingMessages = (async () => {
      try {
        do {
          rooms.messagesAgain = false;
          for (;;) {
            const answer = await api("GET", "/messages", { after: rooms.messageSeq, limit: 200 });
            for (const m of answer.messages || []) appendMessage(m);
            if (!(answer.messages || []).length || rooms.messageSeq >= (answer.latest_seq || 0)) break;
          }
        } while (rooms.messagesAgain);
        const list = $("messages");
        if (!list.firstChild) list.append(el("li", { class: "muted empty" }, "No room text yet."));
        $("messages-panel").hidden = false;
      } catch (error) {
        if (error.status === 404) { optional.messages = false; $("messages-panel").hidden = true; }
      } finally { rooms.loadingMessages = null; }
    })();
    return rooms.loadingMessages;
  }

  function appendMessage(m) {
    if (m.seq <= rooms.messageSeq) return;
    rooms.messageSeq = m.seq;
    const list = $("messages");
    const empty = list.querySelector(".empty");
    if (empty) empty.remove();
    const to = m.to || [];
    const toHost = to.some(isHost);
    const classes = ["message", to.length ? "addressed" : null, toHost ? "to-you" : null, m.handoff_id ? "in-handoff" : null];
    const head = el("div", { class: "message-head" }, el("strong", { class: "author" }, nameOf(m.participant_id)),
      isHost(m.participant_id) ? " (you)" : "");
    if (to.length) {
      head.append(" ", el("span", { class: "addressee" }, `→ ${to.map((id) => isHost(id) ? "you" : nameOf(id)).join(", ")}`));
    }
    if (m.handoff_id) {
      const h = rooms.handoffs.get(m.handoff_id);
      head.append(" ", el("span", { class: "thread" }, `in handoff: ${h ? h.summary : m.handoff_id}`));
    }
    const row = el("li", { class: classes.filter(Boolean).join(" "), "data-message": m.message_id, "data-seq": m.seq,
      "data-handoff": m.handoff_id || null }, head, el("div", { class: "message-text" }, m.text));
    // Keep a reader at the bottom following along; a reader scrolled up stays where they are.
    const atBottom = list.scrollHeight - list.scrollTop - list.clientHeight < 8;
    list.append(row);
    if (atBottom) list.scrollTop = list.scrollHeight;
  }

  function renderRecipients() {
    const box = $("message-to");
    const agents = state.room.participants.filter((p) => !p.left && !(p.capabilities || []).includes("*"));
    const key = JSON.stringify(agents.map((p) => [p.participant_id, p.name]));
    if (box.dataset.key === key) return; // unchanged: ticked boxes stay as the host left them
    const ticked = new Set([...box.querySelectorAll("input:checked")].map((i) => i.value));
    for (const old of box.querySelectorAll("label")) old.remove();
    for (const p of agents) {
      box.append(el("label", {}, el("input", { type: "checkbox", value: p.participant_id, checked: ticked.has(p.participant_id) }), p.name));
    }
    box.dataset.key = key;
  }

  function wireMessages() {
    $("message-form").addEventListener("submit", async (event) => {
      event.preventDefault();
      const text = $("message-text").value.trim();
      if (!text) return;
      const params = { text };
      const to = [...$("message-to").querySelectorAll("input:checked")].map((i) => i.value);
      if (to.length) params.to = to;
      try { await api("POST", "/message", params); $("message-text").value = ""; }
      catch (error) { showNotice(`Could not send: ${error.message}`); }
      loadMessages();
    });
  }

  // ------------------------------------------------------------------ live

  // A new proposal's row goes into the queue from its event at once; the re-read that
  // follows replaces it with the room's record (the event has every field a row shows).
  function showArrived(data) {
    let event;
    try { event = JSON.parse(data); } catch (_) { return; }
    const p = event && event.payload;
    if (!p || !p.proposal_id || findProposal(p.proposal_id) || !state.room) return;
    state.proposals.unshift({ proposal_id: p.proposal_id, participant_id: p.participant_id, region: p.region,
      base_version: p.base_version, summary: p.summary, status: "pending", created_at: event.created_at,
      updated_at: event.created_at, stale: false, amended: false });
    renderQueue();
  }

  // `type`: the event's type (its panels are read again too); none: everything.
  function scheduleRefresh(type) {
    if (!type) { dirty.add("invitations"); dirty.add("panels"); dirty.add("list"); }
    else if (PANELS_OF[type.split(".")[0]]) dirty.add(PANELS_OF[type.split(".")[0]]);
    if (type && type.startsWith("proposal.") && type !== "proposal.created") dirty.add("list");
    if (state.refreshTimer) return;
    // Events come in bursts (a commit is several, written together): one re-read per burst.
    state.refreshTimer = setTimeout(async () => {
      state.refreshTimer = null;
      try { await loadRoom(); } catch (error) { if (!(error instanceof ApiError)) setLive("bad", "reconnecting…"); }
    }, 15);
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
    for (const type of EVENT_TYPES) {
      if (type === "workspace.stopped") continue; // its own listener, below
      source.addEventListener(type, (event) => {
        const id = Number(event.lastEventId);
        if (id) state.latestEvent = Math.max(state.latestEvent, id);
        if (type === "proposal.created") showArrived(event.data);
        if (type === "proposal.revised") revisedWhileHeld(event.data);
        if (tasks && tasks.onEvent(type, event.data)) return; // hook: tasks (its events change its cards only)
        scheduleRefresh(type);
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
      dirty.add("invitations"); dirty.add("panels"); dirty.add("list"); // back after a gap: read everything
      try { await loadRoom(); } catch (error) {
        if (!state.loggedOut) reconnectLater(); // still down (or not answering yet)
        return;
      }
      connect(); // back, same login: a fresh stream from the latest event seen
    }, 250 * 2 ** state.retry); // 0.5 s, 1 s, 2 s, then every 4 s
  }

  // ------------------------------------------------------------------ keys

  // Where a shortcut may act: the page itself, the queue (its items included) and the review's
  // heading. Never in a link, a field or another button: there Enter follows the link, types or
  // presses, as it does everywhere else.
  function shortcutPlace(target) {
    if (!target || target === document.body || target === document.documentElement) return true;
    if (target.id === "queue" || target.id === "review-title") return true;
    return !!(target.matches && target.matches("#queue-list button.item"));
  }

  document.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey) && event.target.id === "review-comment") {
      // The reject's explicit second step (after `r`, or with the Reject button).
      event.preventDefault();
      if (state.rejecting) decide("reject");
      return;
    }
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    if (event.key === "Escape") {
      if (state.editing) { state.editing = false; renderReviewBody(); $("btn-edit").focus(); }
      else if (state.rejecting) { state.rejecting = false; $("reject-hint").hidden = true; $("review-title").focus(); }
      else if (state.selected) closeReview();
      return;
    }
    if (!shortcutPlace(event.target)) return;
    // On a queue item other than the one under review, a decision key opens it instead:
    // nothing is decided that is not on screen.
    const item = event.target.matches && event.target.matches("#queue-list button.item") ? event.target.dataset.proposal : null;
    const elsewhere = item && item !== state.selected;
    switch (event.key) {
      case "j": move(1); break;
      case "k": move(-1); break;
      case "a": if (elsewhere) openReview(item, { keepFocus: true }); else decide("approve"); break;
      case "r": if (elsewhere) openReview(item, { keepFocus: true }); else startReject(); break;
      case "e": if (elsewhere) openReview(item, { keepFocus: true }); else startEdit(); break;
      default: return;
    }
    event.preventDefault();
  });

  function wireReview() {
    $("btn-approve").addEventListener("click", () => decide("approve"));
    $("btn-reject").addEventListener("click", () => decide("reject"));
    $("btn-edit").addEventListener("click", startEdit);
    $("btn-close").addEventListener("click", closeReview);
    $("edit-text").addEventListener("input", () => {
      if (state.editTimer) clearTimeout(state.editTimer);
      state.editTimer = setTimeout(renderReviewBody, 250);
    });
    for (const button of document.querySelectorAll(".toolbar button")) {
      button.addEventListener("click", () => { state.view = button.dataset.view; renderReviewBody(); });
    }
    $("review-comment").addEventListener("input", () => {
      if ($("review-comment").value.trim()) $("review-error").hidden = true;
    });
  }

  // ------------------------------------------------------------------ start

  async function loadVocabulary() {
    const { vocabulary } = await api("GET", "/owner/api/protocol");
    VOCABULARY = vocabulary;
    EVENT_TYPES = vocabulary.events;
    OPEN = new Set(vocabulary.open_statuses.proposal);
    OVERTAKEN = new Set(vocabulary.overtaken_statuses.proposal);
    ALL_CAPS = vocabulary.capabilities;
    AGENT_CAPS = vocabulary.default_agent_capabilities;
  }

  async function start() {
    if (!(await logIn())) return;
    try { await loadVocabulary(); } catch (error) { if (!state.loggedOut) showNotice(`Could not load the room: ${error.message}`); return; }
    renderInviteForm(); wireReview(); wireMessages();
    if (window.commonroomBlame) window.commonroomBlame.attach({ api, el, clear, nameOf, state }); // hook: blame
    if (window.commonroomUndoes) window.commonroomUndoes.attach({ api, el, clear, nameOf }); // hook: undoes
    if (window.CommonroomThreads) { // hook: threads
      threads = window.CommonroomThreads.init({ api, el, clear, nameOf, shortRegion, renderDiff, loadRoom,
        vocabulary: VOCABULARY });
    }
    if (window.CommonroomTasks) tasks = await window.CommonroomTasks.init({ api, el, clear, nameOf, ago }); // hook: tasks

    if (window.CommonroomPermissions) permissions = window.CommonroomPermissions.init({ api, el, clear, nameOf }); // hook: permissions
    setInterval(tickCountdowns, 1000); // the countdowns only; data comes from events
    try { await loadRoom(); } catch (error) { if (!state.loggedOut) showNotice(`Could not load the room: ${error.message}`); return; }
    connect();
    document.body.dataset.ready = "true";
  }

  start();
})();
