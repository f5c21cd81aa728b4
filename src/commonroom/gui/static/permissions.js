// Resident agents on the host's page (docs/spec/PROTOCOL.md section 19).
//
// Each pending permission request of a resident agent (`ce agent`) is a card above the review
// queue: who asks, the tool, its input preview and one button per option, labelled exactly as
// the agent offered it; a click answers with that option's id (`/permission/answer`). A runtime's
// state shows in its participant row ("resident · running · 2 queued", and what its turn is
// doing), with Interrupt while a turn runs and Resume while it is paused. A panel (app.js):
// `init` once, `load` after an event on the participants (the permission and runtime events
// are theirs); people.js calls `participantRow(row, p)` for each participant row. It reads and
// writes only the owner API and builds every text as a DOM text node (never innerHTML).
import * as kit from "./page.js";

export const panel = {
  name: "permissions",
  resources: ["participants"], // the permission and runtime events
  init: () => init({ api: kit.api, el: kit.el, clear: kit.clear, nameOf: kit.nameOf }),
  load: refresh,
  participantRow: (row, participant) => participantRow(row, participant), // people.js, each row
};

let ctx = null;
const $ = (id) => document.getElementById(id);
const el = (...args) => ctx.el(...args);

function init(context) {
  ctx = context;
  const panel = el("section", { id: "permission-requests", class: "permission-requests", hidden: "", "aria-labelledby": "permission-heading" },
    el("h2", { id: "permission-heading" }, "Agents asking for permission ", el("span", { class: "badge", id: "permission-count" }, "0")),
    el("div", { id: "permission-list" }));
  const queue = $("queue");
  queue.insertBefore(panel, queue.firstChild);
}

async function refresh() {
  let answer;
  try { answer = await ctx.api("GET", "/permissions"); } catch (_) { return; } // an older room: no panel
  const pending = answer.permissions || [];
  const list = $("permission-list");
  const shown = new Set();
  for (const request of pending) {
    shown.add(request.permission_id);
    if (!list.querySelector(`[data-permission="${CSS.escape(request.permission_id)}"]`)) list.append(card(request));
  }
  for (const node of [...list.children]) if (!shown.has(node.dataset.permission)) node.remove();
  $("permission-count").textContent = String(pending.length);
  $("permission-requests").hidden = pending.length === 0;
}

function card(request) {
  const node = el("article", { class: "permission-card", "data-permission": request.permission_id, "aria-label": `Permission request from ${ctx.nameOf(request.participant_id)}` },
    el("p", { class: "permission-who" }, `${ctx.nameOf(request.participant_id)} asks: `, el("strong", {}, request.title)),
    request.tool ? el("p", { class: "muted" }, `tool: ${request.tool}`) : null,
    request.input_preview ? el("pre", { class: "permission-preview" }, request.input_preview) : null,
    el("p", { class: "muted permission-expiry" }, `Unanswered, it is refused at ${new Date(request.expires_at).toLocaleTimeString()}`));
  const buttons = el("div", { class: "permission-options" });
  for (const option of request.options) {
    const button = el("button", { type: "button", class: option.kind.startsWith("allow") ? "allow" : "reject", "data-option": option.option_id }, option.name);
    button.addEventListener("click", () => answer(node, request, option, buttons));
    buttons.append(button);
  }
  node.append(buttons, el("p", { class: "error", role: "alert" }));
  return node;
}

async function answer(node, request, option, buttons) {
  for (const button of buttons.querySelectorAll("button")) button.disabled = true;
  try {
    await ctx.api("POST", "/permission/answer", { permission_id: request.permission_id, option_id: option.option_id });
    node.remove();
    const left = $("permission-list").children.length;
    $("permission-count").textContent = String(left);
    $("permission-requests").hidden = left === 0;
  } catch (error) {
    node.querySelector(".error").textContent = error.message || String(error);
    for (const button of buttons.querySelectorAll("button")) button.disabled = false;
  }
}

function runtimeWords(runtime) {
  const words = ["resident", runtime.state];
  if (runtime.queued) words.push(`${runtime.queued} queued`);
  return words.join(" · ");
}

function participantRow(row, participant) {
  const runtime = participant.runtime;
  if (!runtime) return;
  const line = el("div", { class: "runtime", "data-runtime-state": runtime.state }, runtimeWords(runtime));
  if (runtime.note) line.append(el("span", { class: "muted" }, ` — ${runtime.note}`));
  if (runtime.state === "running") {
    const button = el("button", { type: "button", "aria-label": `Interrupt ${participant.name}'s turn` }, "Interrupt");
    button.addEventListener("click", () => control(button, "/runtime/interrupt", { participant_id: participant.participant_id, turn: runtime.turn }));
    line.append(" ", button);
  } else if (runtime.state === "paused") {
    const button = el("button", { type: "button", "aria-label": `Resume ${participant.name}` }, "Resume");
    button.addEventListener("click", () => control(button, "/runtime/resume", { participant_id: participant.participant_id }));
    line.append(" ", button);
  }
  row.append(line);
}

async function control(button, path, body) {
  button.disabled = true;
  try { await ctx.api("POST", path, body); } catch (_) { button.disabled = false; }
}
