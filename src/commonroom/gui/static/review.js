// The review queue and the open review (spec PAGE.md 1-8): the queue in three groups, the
// proposal's diff in four views, decisions held UNDO_MS with an Undo toast, the keys.
//
// Never approve blind, never decide by accident: a decision is made only on a proposal whose
// text is on screen (diff, or the whole section as it would read); shortcuts act only with
// focus on the page, the queue or the review heading, never in a link, field or other button;
// a reject needs a comment and a second step; every decision waits UNDO_MS with an Undo toast
// before it is sent.
import { $, API, OWNER_HEADER, UNDO_MS, agoEl, api, clear, countdown, credential, el, nameOf, page, plural,
  shortRegion, showNotice, state, words } from "./page.js";
import { renderDiff, renderMarkdown, renderUnified } from "./markdown.js";
import { renderDocument } from "./document.js";
import { panel as threads } from "./threads.js";

export const panel = {
  name: "review",
  resources: ["proposals"],
  // The snapshot has every open proposal; the list (for the decided ones) is read again only
  // after an event that may decide or end one: a new proposal costs no more than its snapshot.
  onEvent(type, data) {
    let event = null;
    try { event = JSON.parse(data); } catch (_) { event = null; }
    const p = event && event.payload;
    if (type === "proposal.revised" && p) revisedWhileHeld(event);
    if (type !== "proposal.created") return false;
    if (p && p.proposal_id && !findProposal(p.proposal_id) && state.room) showArrived(event);
    return true;
  },
  load: loadList,
  loadsWithRoom: true,
  render: () => { mergeProposals(); renderQueue(); return state.selected ? refreshReview() : null; },
  init: wireReview,
};

let listed = null;

async function loadList() {
  listed = await api("GET", "/proposals", { limit: 200 });
}

// The newest 200 (the list's maximum), and every open one (the snapshot has them all),
// so a long decided history never hides a proposal still to review.
function mergeProposals() {
  if (!listed) return;
  const open = new Map((state.room.proposals || []).map((p) => [p.proposal_id, p]));
  const known = new Set(listed.proposals.map((p) => p.proposal_id));
  const newer = [...open.values()].filter((p) => !known.has(p.proposal_id)).reverse(); // newest first
  state.proposals = [...newer, ...listed.proposals.map((p) => open.get(p.proposal_id) || p)]
    .sort((a, b) => (a.created_at < b.created_at ? 1 : a.created_at > b.created_at ? -1 : 0));
}

// A new proposal's row goes into the queue from its event at once; the re-read that
// follows replaces it with the room's record (the event has every field a row shows).
function showArrived(event) {
  const p = event.payload;
  state.proposals.unshift({ proposal_id: p.proposal_id, participant_id: p.participant_id, region: p.region,
    base_version: p.base_version, summary: p.summary, status: "pending", created_at: event.created_at,
    updated_at: event.created_at, stale: false, amended: false });
  renderQueue();
}


// The listed proposal carries the engine's `stale` for open ones; an open review's detail is fresher.
function isStale(p) {
  if (words.overtaken.has(p.status)) return true;
  const d = state.details.get(p.proposal_id);
  return !!(p.stale || (words.open.has(p.status) && d && d.status === p.status && d.stale));
}

// Undecided: pending and not waiting out an undo window (that one is decided, for now).
export function isUndecided(p) { return p.status === "pending" && !state.held.has(p.proposal_id); }
function undecided() { return state.proposals.filter(isUndecided); }

// The queue in three groups: pending (the badge counts these), approved and waiting for its
// author's commit, and decided (collapsed to one line each).
const GROUPS = [
  ["pending", "To review", (p) => p.status === "pending"],
  ["approved", "Approved, awaiting commit", (p) => p.status === "approved"],
  ["decided", "Decided", (p) => !words.open.has(p.status)],
];

// The badge and the progress line: numbers, so they change at once even while the list waits.
function renderCounts() {
  const pending = undecided().length, total = state.proposals.length;
  $("queue-count").textContent = String(pending);
  $("queue-count").setAttribute("aria-label", `${plural(pending, "proposal")} to review`);
  $("queue-progress").textContent = total ? `${total - pending} of ${total} decided` : "";
}

export function renderQueue() {
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

export function findProposal(id) { return state.proposals.find((p) => p.proposal_id === id); }

export async function openReview(id, options) {
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
  const stale = detail.stale || words.overtaken.has(detail.status);
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
  threads.review(detail, current);
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
  page.refresh();
}

function showRevised(text) { const n = $("review-revised"); n.textContent = text; n.hidden = !text; }

// A revision that arrives while a decision waits out its undo window cancels that
// decision (it was made on the text before): nothing is sent, the new diff is shown.
function revisedWhileHeld(event) {
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


// In the room: present or away, with a revoke button for agents. Who left: a collapsed

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

