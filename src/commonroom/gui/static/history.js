// The history panel: each recent version (who, what, when) with its diff on request, and
// blame.js's provenance for each row.
import { $, agoEl, api, clear, el, nameOf, state } from "./page.js";
import { renderUnified } from "./markdown.js";
import { panel as blame } from "./blame.js";

export const panel = {
  name: "history",
  resources: ["document"],
  // Redrawn only when document.js read new changes: a Diff button keeps its focus meanwhile.
  render: () => { if (state.changes !== drawn) { drawn = state.changes; renderHistory(); } },
};

let drawn = null;

function renderHistory() {
  const list = $("history");
  clear(list);
  for (const change of [...state.changes].reverse()) {
    const who = change.version === 1 ? "" : ` · ${nameOf(change.participant_id)}`;
    const row = el("li", {}, el("strong", {}, `v${change.version}`), ` ${change.summary}${who} · `, agoEl(change.created_at), " ");
    if (change.version > 1) {
      row.append(el("button", { type: "button", "aria-label": `Diff of version ${change.version}`, onclick: () => showVersionDiff(change.version) }, "Diff"));
    }
    blame.historyRow(row, change);
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
