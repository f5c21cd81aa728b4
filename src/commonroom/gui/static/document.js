// The document panel (spec PAGE.md 9): the header, the document rendered with each section's
// lease holder and countdown, the host's editing hold, and its proposals to review; the outline.
import { $, agoEl, api, clear, el, nameOf, plural, state, tickCountdowns } from "./page.js";
import { renderMarkdown } from "./markdown.js";
import { isUndecided, openReview } from "./review.js";
import { panel as blame } from "./blame.js";

export const panel = {
  name: "document",
  // Everything the snapshot holds that the header and the badges show.
  resources: ["status", "document", "proposals", "leases", "participants"],
  load: loadDocument,
  loadsAfterRoom: true,
  render: () => { renderHeader(); renderDocument(); },
};

// The text, its outline and its recent history, read again only when the version moved.
async function loadDocument() {
  const version = state.room.status.version;
  if (version === state.lastVersion && state.doc) return;
  const [doc, regions, changes] = await Promise.all([
    api("GET", "/read", {}), api("GET", "/regions"),
    api("GET", "/changes_since", { version: Math.max(0, version - 50), limit: 200 }),
  ]);
  state.doc = doc; state.regions = regions.regions; state.lastVersion = doc.version;
  state.changes = changes.changes;
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

export function renderDocument() {
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
    node.dataset.region = region.region; // threads.js anchors its quotes by it
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
  blame.render();
}
