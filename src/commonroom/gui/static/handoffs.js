// Handoffs (PROTOCOL §9): shown only when the room has them; a panel whose route answered
// 404 (an older room) stays hidden until the page reloads. A handoff row is rebuilt only when
// that handoff or its task changed, so nothing moves under the host's cursor. Accept /
// Decline / Done with a note on those addressed to the host.
import { $, api, clear, el, isHost, nameOf, shortRegion } from "./page.js";

export const panel = {
  name: "handoffs",
  resources: ["handoffs"],
  load: loadHandoffs,
};

let shown = true; // false once the route answered 404
export const known = new Map(); // handoff_id -> the handoff, for room text's labels

// The read under way, if any: room text waits for it (its labels name handoffs).
let reading = Promise.resolve();
export function handoffsRead() { return reading; }

function loadHandoffs() {
  reading = readHandoffs();
  return reading;
}

async function readHandoffs() {
  if (!shown) return;
  let answer;
  try { answer = await api("GET", "/handoffs", { limit: 50 }); }
  catch (error) { $("handoffs-panel").hidden = true; if (error.status === 404) shown = false; return; }
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
    known.set(h.handoff_id, h);
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

