// The review conversation on the host's page (docs/spec/PROTOCOL.md section 17).
//
// Threads sit in the margin of their section, their quote highlighted in the rendered text; a
// composer opens a thread on the text the host selects (or on a whole section); open blocking
// questions are listed above the review queue, with an answer box each; the review pane gets
// "Request changes", the diff between the last two revisions, the proposal's threads, and
// "Rebase preview" on a stale proposal. A panel (app.js): `init` once, `load` (the threads
// changed since the newest held) after an event on its resources, `render` (margins, blocking
// questions) after each re-read of the room, since document.js draws the document anew;
// review.js calls `review(detail, current)` after the review pane is drawn. It reads and
// writes only the owner API, and builds every text as a DOM text node (never innerHTML). It
// keeps no list of event types or statuses: app.js routes events to it by their resources;
// the statuses it branches on come from `ctx.vocabulary` (/protocol's `vocabulary`).
import * as kit from "./page.js";
import { renderDiff } from "./markdown.js";

export const panel = {
  name: "threads",
  // Its margins are drawn into the document and its review part into the review pane.
  resources: ["threads", "proposals", "document"],
  init: () => init({ api: kit.api, el: kit.el, clear: kit.clear, nameOf: kit.nameOf, shortRegion: kit.shortRegion,
    renderDiff, loadRoom: () => kit.page.loadRoom(panel), vocabulary: kit.words.vocabulary }),
  load: refresh,
  render: draw, // after document.js drew the document again
  review: (detail, current) => review(detail, current), // review.js, after the review pane is drawn
};

const QUOTE_MAX = 500;
let ctx = null;
const mine = { threads: [], byId: new Map(), since: null, revisions: new Map(), rebase: null, reviewing: null };
const SHOWN = 200; // the newest threads the page shows (the list's largest page)

const $ = (id) => document.getElementById(id);
const el = (...args) => ctx.el(...args);

function init(context) {
  ctx = context;
  buildBlockingPanel();
  buildComposer();
  buildReviewParts();
}

// Incremental: the first look reads the newest threads, every later one only those that
// changed since the newest `updated_at` it holds (a room with thousands of comments is not
// read again at each event).
async function refresh() {
  const params = mine.since ? { limit: SHOWN, since: mine.since } : { limit: SHOWN };
  const listed = await ctx.api("GET", "/threads", params);
  for (const thread of listed.threads) {
    mine.byId.set(thread.thread_id, thread);
    if (!mine.since || thread.updated_at > mine.since) mine.since = thread.updated_at;
  }
  const all = [...mine.byId.values()].sort((a, b) => (a.created_at < b.created_at ? 1 : a.created_at > b.created_at ? -1 : 0));
  for (const dropped of all.slice(SHOWN)) mine.byId.delete(dropped.thread_id);
  mine.threads = all.slice(0, SHOWN);
  draw();
}

// The margins, the blocking questions and the review pane's threads, from what was read last.
function draw() {
  if (!ctx) return;
  renderMargins();
  renderBlocking();
  if (mine.reviewing) renderReviewThreads();
}

function errorText(error) {
  return error && error.body && error.body.error ? `${error.body.error}: ${error.body.message}` : String((error && error.message) || error);
}

// ------------------------------------------------------------------ one thread

// In a section's margin a resolved thread is one line (open it to read it, or reopen it),
// and a review comment's reply box waits behind a "Reply" button: the margin stays a margin.
function marginNode(thread) {
  if (thread.status === "resolved") {
    const first = thread.comments[0];
    const gist = first ? `${ctx.nameOf(first.participant_id)}: ${first.body}` : ctx.nameOf(thread.author_id);
    return el("details", { class: "thread-collapsed", "data-thread": thread.thread_id },
      el("summary", { class: "thread-summary" }, `✓ Resolved · ${gist}`), threadNode(thread));
  }
  if (!thread.proposal_id) return threadNode(thread);
  const node = threadNode(thread, { answer: false });
  const open = el("button", { type: "button", class: "thread-open-reply", "aria-expanded": "false" }, "Reply");
  open.addEventListener("click", () => {
    const form = replyForm(thread);
    open.replaceWith(form);
    form.querySelector("textarea").focus();
  });
  node.append(open);
  return node;
}

function threadNode(thread, { answer = true } = {}) {
  const flags = [thread.status, thread.blocking ? "blocking question" : null, thread.proposal_id ? "review comment" : null]
    .filter(Boolean).join(" · ");
  const node = el("div", { class: `thread status-${thread.status}`, "data-thread": thread.thread_id },
    el("p", { class: "thread-head" }, `${ctx.nameOf(thread.author_id)} · ${flags}`));
  if (thread.status === "outdated") node.append(el("p", { class: "thread-note" }, "Outdated: its text is gone from the section. Kept for the record."));
  if (thread.quote) node.append(el("blockquote", { class: "thread-quoted" }, thread.quote));
  const list = el("ol", { class: "thread-comments" });
  for (const comment of thread.comments) {
    list.append(el("li", {}, el("span", { class: "who" }, `${ctx.nameOf(comment.participant_id)}: `), comment.body));
  }
  node.append(list);
  if (answer) node.append(replyForm(thread));
  return node;
}

function replyForm(thread) {
  const label = thread.blocking && thread.status === "open" ? "Answer" : "Reply";
  const box = el("textarea", { rows: "2", "aria-label": `${label} to ${ctx.nameOf(thread.author_id)}` });
  const error = el("p", { class: "error", role: "alert", hidden: "" });
  const send = el("button", { type: "button", class: "thread-send" }, label);
  send.addEventListener("click", async () => {
    const body = box.value.trim();
    if (!body) { box.focus(); return; }
    send.disabled = true;
    try {
      await ctx.api("POST", "/thread/reply", { thread_id: thread.thread_id, body });
      box.value = "";
      await refresh();
    } catch (failure) { error.hidden = false; error.textContent = errorText(failure); } finally { send.disabled = false; }
  });
  const resolve = el("button", { type: "button", class: "thread-resolve" }, thread.status === "resolved" ? "Reopen" : "Resolve");
  resolve.addEventListener("click", async () => {
    try {
      await ctx.api("POST", "/thread/resolve", { thread_id: thread.thread_id, resolved: thread.status !== "resolved" });
      await refresh();
    } catch (failure) { error.hidden = false; error.textContent = errorText(failure); }
  });
  return el("div", { class: "thread-reply" }, box, el("div", { class: "thread-actions" }, send, resolve), error);
}

// ------------------------------------------------------------------ margins and highlights

function sections() {
  // Each heading document.js marked with its region, and the top-level nodes up to the next one.
  const article = $("document");
  const out = [];
  let current = null;
  for (const node of Array.from(article.children)) {
    if (node.dataset && node.dataset.region) {
      current = { region: node.dataset.region, heading: node, nodes: [] };
      out.push(current);
    } else if (current && !node.classList.contains("thread-margin")) current.nodes.push(node);
  }
  return out;
}

function renderMargins() {
  for (const old of document.querySelectorAll("#document .thread-margin")) old.remove();
  for (const section of sections()) {
    const threads = mine.threads.filter((t) => t.region === section.region);
    const margin = el("aside", { class: "thread-margin" + (threads.length ? "" : " quiet"), "aria-label": `Threads on ${ctx.shortRegion(section.region)}` });
    // A section without threads shows only a small "Ask" (select text to quote it instead).
    const ask = el("button", { type: "button", class: "thread-ask", "aria-label": `Ask about ${ctx.shortRegion(section.region)}` },
      threads.length ? `${threads.length} thread${threads.length === 1 ? "" : "s"} · ask` : "Ask");
    ask.addEventListener("click", () => openComposer(section.region, ""));
    margin.append(ask);
    // Open ones first, then outdated and resolved ones (shown, never dropped).
    const order = { open: 0, outdated: 1, resolved: 2 };
    for (const thread of [...threads].sort((a, b) => order[a.status] - order[b.status])) margin.append(marginNode(thread));
    section.heading.after(margin);
    for (const thread of threads) if (thread.quote && thread.status === "open") highlight(section.nodes, thread);
  }
}

// Wrap the rendered text of `thread.quote` in <mark>s. The quote is markdown source; the page
// shows rendered text, so blanks are compared collapsed and inline markup characters dropped.
function highlight(nodes, thread) {
  const chars = []; // [textNode, offset] per kept character
  let flat = "";
  for (const root of nodes) {
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    for (let text = walker.nextNode(); text; text = walker.nextNode()) {
      const value = text.nodeValue;
      for (let i = 0; i < value.length; i++) {
        const blank = /\s/.test(value[i]);
        if (blank && (flat.endsWith(" ") || flat === "")) continue;
        flat += blank ? " " : value[i];
        chars.push([text, i]);
      }
      if (!flat.endsWith(" ") && flat) { flat += " "; chars.push([text, value.length]); }
    }
  }
  const wanted = thread.quote.replace(/[*_`]/g, "").replace(/\s+/g, " ").trim();
  const at = wanted ? flat.indexOf(wanted) : -1;
  if (at < 0) return false;
  // Per text node, the [start, end) it contributes; wrapped last to first so offsets hold.
  const spans = new Map();
  for (let k = at; k < at + wanted.length; k++) {
    const [node, offset] = chars[k];
    const span = spans.get(node) || [offset, offset + 1];
    span[0] = Math.min(span[0], offset); span[1] = Math.min(node.nodeValue.length, Math.max(span[1], offset + 1));
    spans.set(node, span);
  }
  for (const [node, [start, end]] of Array.from(spans.entries()).reverse()) {
    if (end <= start) continue;
    const middle = node.splitText(start);
    middle.splitText(end - start);
    const mark = el("mark", { class: "thread-quote", "data-thread": thread.thread_id, title: `${ctx.nameOf(thread.author_id)}: ${thread.comments[0] ? thread.comments[0].body : ""}` });
    middle.parentNode.insertBefore(mark, middle);
    mark.append(middle);
  }
  return true;
}

// ------------------------------------------------------------------ composer

function buildComposer() {
  const form = el("form", { id: "thread-composer", class: "thread-composer", hidden: "", "aria-label": "Ask about the selected text" },
    el("p", { id: "composer-where", class: "composer-where" }),
    el("blockquote", { id: "composer-quote", class: "thread-quoted", hidden: "" }),
    el("label", { for: "composer-body" }, "Your question or note"),
    el("textarea", { id: "composer-body", rows: "3" }),
    el("label", { class: "composer-blocking" }, el("input", { type: "checkbox", id: "composer-blocking" }), " blocking (the author waits for an answer)"),
    el("div", { class: "thread-actions" },
      el("button", { type: "submit", id: "composer-send", class: "primary" }, "Ask"),
      el("button", { type: "button", id: "composer-cancel" }, "Cancel")),
    el("p", { id: "composer-error", class: "error", role: "alert", hidden: "" }));
  document.body.append(form);
  form.addEventListener("submit", (event) => { event.preventDefault(); sendComposer(); });
  $("composer-cancel").addEventListener("click", closeComposer);
  form.addEventListener("keydown", (event) => { if (event.key === "Escape") { event.stopPropagation(); closeComposer(); } });
  $("document").addEventListener("mouseup", () => setTimeout(offerSelection, 0));
  $("document").addEventListener("keyup", (event) => { if (event.shiftKey) offerSelection(); });
}

function regionOfNode(node) {
  let top = node;
  const article = $("document");
  while (top && top.parentNode !== article) top = top.parentNode;
  for (let n = top; n; n = n.previousElementSibling) if (n.dataset && n.dataset.region) return n.dataset.region;
  return null;
}

function offerSelection() {
  const selection = window.getSelection();
  const text = selection ? selection.toString().trim() : "";
  if (!text || !selection.rangeCount) return;
  const range = selection.getRangeAt(0);
  if (!$("document").contains(range.commonAncestorContainer)) return;
  if (range.commonAncestorContainer.closest && range.commonAncestorContainer.closest(".thread-margin")) return;
  const region = regionOfNode(range.startContainer);
  if (!region || region !== regionOfNode(range.endContainer)) return; // one section at a time
  openComposer(region, text);
}

function openComposer(region, text) {
  mine.composer = { region, selected: text };
  $("composer-where").textContent = `Ask about ${ctx.shortRegion(region)}`;
  $("composer-quote").hidden = !text;
  $("composer-quote").textContent = text;
  $("composer-error").hidden = true;
  $("composer-body").value = "";
  $("composer-blocking").checked = false;
  $("thread-composer").hidden = false;
  $("composer-body").focus();
}

function closeComposer() {
  mine.composer = null;
  $("thread-composer").hidden = true;
}

// The exact span of the region's markdown source that the rendered selection shows.
function sourceQuote(source, selected) {
  if (!selected) return null;
  if (source.includes(selected)) return selected.length <= QUOTE_MAX ? selected : null;
  const words = selected.split(/\s+/).filter(Boolean).map((w) => w.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"));
  if (!words.length) return null;
  const found = source.match(new RegExp(words.join("[\\s*_`]+")));
  return found && found[0].length <= QUOTE_MAX ? found[0] : null;
}

async function sendComposer() {
  const composer = mine.composer;
  const body = $("composer-body").value.trim();
  if (!composer) return;
  if (!body) { $("composer-body").focus(); return; }
  const params = { region: composer.region, body, blocking: $("composer-blocking").checked };
  try {
    const source = (await ctx.api("GET", "/read", { region: composer.region })).content;
    const quote = sourceQuote(source, composer.selected);
    if (quote) params.quote = quote;
    await ctx.api("POST", "/thread", params);
    closeComposer();
    window.getSelection().removeAllRanges();
    await refresh();
  } catch (failure) {
    $("composer-error").hidden = false;
    $("composer-error").textContent = errorText(failure);
  }
}

// ------------------------------------------------------------------ blocking questions

function buildBlockingPanel() {
  const panel = el("section", { id: "blocking-questions", class: "blocking-questions", hidden: "", "aria-labelledby": "blocking-heading" },
    el("h2", { id: "blocking-heading" }, "Questions waiting for you ", el("span", { class: "badge", id: "blocking-count" }, "0")),
    el("div", { id: "blocking-list" }));
  const queue = $("queue");
  queue.insertBefore(panel, queue.firstChild);
}

function renderBlocking() {
  const waiting = mine.threads.filter((t) => t.blocking && t.status === "open")
    .sort((a, b) => a.created_at.localeCompare(b.created_at));
  const list = $("blocking-list");
  // Keep what the host is typing: rebuild only when the set or a thread changed.
  const key = waiting.map((t) => `${t.thread_id}:${t.updated_at}:${t.comments.length}`).join(",");
  if (list.dataset.key === key) return;
  const typing = document.activeElement && list.contains(document.activeElement) ? document.activeElement : null;
  const kept = typing && typing.tagName === "TEXTAREA" ? [typing.closest(".thread").dataset.thread, typing.value] : null;
  list.dataset.key = key;
  ctx.clear(list);
  for (const thread of waiting) {
    const node = threadNode(thread);
    node.insertBefore(el("p", { class: "thread-where" }, `in ${ctx.shortRegion(thread.region)}`), node.children[1]);
    list.append(node);
    if (kept && kept[0] === thread.thread_id) {
      const box = node.querySelector("textarea");
      box.value = kept[1]; box.focus();
    }
  }
  $("blocking-count").textContent = String(waiting.length);
  $("blocking-questions").hidden = waiting.length === 0;
}

// ------------------------------------------------------------------ the review pane

function buildReviewParts() {
  const reject = $("btn-reject");
  const ask = el("button", { type: "button", id: "btn-request-changes", disabled: "" }, "Request changes");
  ask.addEventListener("click", requestChanges);
  reject.after(ask);
  const stale = el("button", { type: "button", id: "btn-rebase-preview", hidden: "" }, "Rebase preview");
  stale.addEventListener("click", previewRebase);
  $("review-stale").after(stale);
  const parts = el("div", { id: "review-conversation", class: "review-conversation" },
    el("section", { id: "rebase-preview", class: "rebase-preview", hidden: "", "aria-label": "Rebase preview" }),
    el("section", { id: "revision-diff", class: "revision-diff", hidden: "", "aria-labelledby": "revision-diff-title" },
      el("h4", { id: "revision-diff-title" }), el("div", { id: "revision-diff-body", class: "markdown" })),
    el("section", { id: "review-threads", class: "review-threads", hidden: "", "aria-label": "Comments on this proposal" }));
  $("review-body").after(parts);
}

function showPaneError(error) {
  const node = $("review-error");
  node.hidden = false;
  node.textContent = errorText(error);
}

async function requestChanges() {
  const detail = mine.reviewing;
  if (!detail || !reviewable(detail)) return;
  const comment = $("review-comment").value.trim();
  if (!comment) {
    showPaneError("Say what to change: write it in the comment box first.");
    $("review-comment").focus();
    return;
  }
  try {
    await ctx.api("POST", "/proposal/review", { proposal_id: detail.proposal_id, decision: "request_changes", comment, revision: detail.revision });
    $("review-comment").value = "";
    $("review-error").hidden = true;
    await ctx.loadRoom();
  } catch (failure) { showPaneError(failure); }
}

async function review(detail, current) {
  const changed = !mine.reviewing || mine.reviewing.proposal_id !== detail.proposal_id;
  mine.reviewing = detail;
  mine.current = current;
  if (changed) { mine.rebase = null; renderRebase(); }
  $("btn-request-changes").disabled = !reviewable(detail);
  const { rebasable_statuses: rebasable, overtaken_statuses: overtaken } = ctx.vocabulary;
  const behind = detail.stale || overtaken.proposal.includes(detail.status);
  $("btn-rebase-preview").hidden = !(rebasable.proposal.includes(detail.status) && behind);
  await renderRevisionDiff(detail);
  renderReviewThreads();
}

async function revisionContent(detail, revision) {
  const key = `${detail.proposal_id}@${revision}`;
  if (!mine.revisions.has(key)) {
    const answer = await ctx.api("GET", "/proposal", { proposal_id: detail.proposal_id, revision });
    mine.revisions.set(key, answer.content);
  }
  return mine.revisions.get(key);
}

async function renderRevisionDiff(detail) {
  const box = $("revision-diff");
  const revisions = detail.revisions || [];
  if (revisions.length < 2 || detail.pruned) { box.hidden = true; return; }
  const last = revisions[revisions.length - 1], before = revisions[revisions.length - 2];
  const key = `${detail.proposal_id}@${last.revision}`;
  if (box.dataset.key === key && !box.hidden) return;
  let previous;
  try { previous = await revisionContent(detail, before.revision); } catch (failure) { showPaneError(failure); return; }
  if (!mine.reviewing || mine.reviewing.proposal_id !== detail.proposal_id) return;
  box.dataset.key = key;
  $("revision-diff-title").textContent = `Revision ${last.revision} of ${revisions.length}${last.rebased ? " (rebased)" : ""}: what changed since revision ${before.revision}`
    + (last.summary !== before.summary ? ` — “${last.summary}”` : "");
  const body = $("revision-diff-body");
  ctx.clear(body);
  ctx.renderDiff(previous, detail.content, body);
  box.hidden = false;
}

function renderReviewThreads() {
  const detail = mine.reviewing;
  const box = $("review-threads");
  if (!detail) { box.hidden = true; return; }
  const threads = mine.threads.filter((t) => t.proposal_id === detail.proposal_id
    || (t.region === detail.region && t.status === "open" && !t.proposal_id));
  const key = threads.map((t) => `${t.thread_id}:${t.updated_at}:${t.status}`).join(",");
  if (box.dataset.key === key && box.dataset.proposal === detail.proposal_id) return;
  if (document.activeElement && box.contains(document.activeElement) && document.activeElement.tagName === "TEXTAREA") return;
  box.dataset.key = key; box.dataset.proposal = detail.proposal_id;
  ctx.clear(box);
  if (!threads.length) { box.hidden = true; return; }
  box.append(el("h4", {}, `Comments (${threads.length})`));
  for (const thread of threads) box.append(threadNode(thread));
  box.hidden = false;
}

async function previewRebase() {
  const detail = mine.reviewing;
  if (!detail) return;
  try {
    mine.rebase = await ctx.api("POST", "/proposal/rebase", { proposal_id: detail.proposal_id });
  } catch (failure) { showPaneError(failure); return; }
  renderRebase();
}

function renderRebase() {
  const box = $("rebase-preview");
  ctx.clear(box);
  const result = mine.rebase, detail = mine.reviewing;
  if (!result || !detail || result.proposal_id !== detail.proposal_id) { box.hidden = true; return; }
  box.hidden = false;
  if (!result.clean) {
    box.append(el("h4", {}, `Rebase onto v${result.base_version}: ${result.conflicts.length} conflict${result.conflicts.length === 1 ? "" : "s"} — nothing changed`));
    result.conflicts.forEach((hunk, index) => {
      const block = el("div", { class: "conflict" }, el("p", { class: "muted" }, `Conflict ${index + 1}`));
      for (const [side, label] of [["base", "base (what the author started from)"], ["ours", "the proposal"], ["theirs", "the current text"]]) {
        block.append(el("p", { class: "conflict-side" }, label), el("pre", { class: `diff conflict-${side}` }, hunk[side]));
      }
      box.append(block);
    });
    const ask = el("button", { type: "button", id: "btn-ask-fresh" }, "Ask the author for a fresh proposal");
    ask.addEventListener("click", () => askAuthor(`This proposal conflicts with v${result.base_version} of ${ctx.shortRegion(detail.region)}: please read the section again and revise it (ce revise ${detail.proposal_id} --file F --base ${result.base_version}).`));
    box.append(ask);
    return;
  }
  box.append(el("h4", {}, `Rebase preview: merges cleanly onto v${result.base_version}. The diff against the current text:`));
  const diff = el("div", { class: "markdown rebase-diff" });
  ctx.renderDiff(mine.current || "", result.content, diff);
  box.append(diff);
  const apply = el("button", { type: "button", id: "btn-rebase-apply", class: "primary" }, "Apply rebase as reviewer");
  apply.addEventListener("click", async () => {
    try {
      await ctx.api("POST", "/proposal/rebase", { proposal_id: detail.proposal_id, apply: true });
      mine.rebase = null;
      await ctx.loadRoom();
    } catch (failure) { showPaneError(failure); }
  });
  const ask = el("button", { type: "button", id: "btn-rebase-ask" }, "Ask the author to apply it");
  ask.addEventListener("click", () => askAuthor(`Please rebase this proposal onto v${result.base_version}: it merges cleanly (ce rebase ${detail.proposal_id} --apply).`));
  box.append(el("div", { class: "thread-actions" }, apply, ask));
}

// Still to be reviewed (pending): `reviewable_statuses` of /protocol's vocabulary.
function reviewable(detail) {
  return ctx.vocabulary.reviewable_statuses.proposal.includes(detail.status);
}

// A note to the author: a request for changes when it is pending, else a thread on the region.
async function askAuthor(text) {
  const detail = mine.reviewing;
  try {
    if (reviewable(detail)) {
      await ctx.api("POST", "/proposal/review", { proposal_id: detail.proposal_id, decision: "request_changes", comment: text, revision: detail.revision });
    } else {
      await ctx.api("POST", "/thread", { region: detail.region, body: `${detail.proposal_id}: ${text}` });
    }
    mine.rebase = null;
    await ctx.loadRoom();
  } catch (failure) { showPaneError(failure); }
}
