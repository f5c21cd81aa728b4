// Provenance in the host's page (docs/spec/PROTOCOL.md §18): the blame gutter ("Who wrote this"),
// "Revert this change" / "Restore this section" on history entries, and the Policies panel
// (every rule, what it approved, the kill switch). A panel (app.js): `init` once; document.js
// calls `render` after each document render, history.js `historyRow` for each history entry.
// Same rules as every panel (page.js): every text is a text node, never HTML.
import * as kit from "./page.js";

export const panel = {
  name: "blame",
  // Drawn with the document (document.js calls `render`) and in each history row.
  resources: ["document"],
  init: () => attach({ api: kit.api, el: kit.el, clear: kit.clear, nameOf: kit.nameOf, state: kit.state }),
  render: () => render(),
  historyRow: (row, change) => historyRow(row, change),
};

// Distinct hues, each dark enough for white text (WCAG AA on the gutter's name).
const PALETTE = ["#1f5fa8", "#a3262b", "#1f7a3a", "#6b3fa0", "#8a4b12", "#a02f7a", "#2d6a73",
  "#5c5c1f", "#474747", "#b23a00"];
let ctx = null; // { api, el, clear, nameOf, reload, state }
let showing = false;
let blamed = null; // the last answer, and the version it is of
let policyAnswer = null;

function $(id) { return document.getElementById(id); }

function attach(context) {
  ctx = context;
  const { el } = ctx;
  const toggle = el("button", { type: "button", id: "blame-toggle", class: "blame-toggle", "aria-pressed": "false",
    "aria-controls": "blame", onclick: () => { showing = !showing; toggle.setAttribute("aria-pressed", String(showing)); render(); } },
    "Who wrote this");
  $("doc-heading").after(toggle);
  $("document").before(el("div", { id: "blame", class: "blame", hidden: true },
    el("ul", { id: "blame-legend", class: "blame-legend", "aria-label": "Authors" }),
    el("ol", { id: "blame-lines", class: "blame-lines", "aria-label": "Lines and who last changed them" })));
  const panel = el("section", { class: "panel", id: "policies-panel", "aria-labelledby": "policies-heading" },
    el("h2", { id: "policies-heading" }, "Policies"),
    el("p", { class: "muted" }, "Auto-approve rules: a matching small change is approved by the room."),
    el("button", { type: "button", id: "policies-kill", onclick: () => pauseAll(true) }, "Pause all policies"),
    el("button", { type: "button", id: "policies-resume", onclick: () => pauseAll(false) }, "Resume all"),
    el("ul", { id: "policies", class: "rows" }),
    el("p", { id: "policies-error", class: "error", role: "alert", hidden: true }));
  document.querySelector(".panels").append(panel);
}

// ---------------------------------------------------------------- the gutter

async function render() {
  if (!ctx) return;
  loadPolicies();
  const holder = $("blame"), article = $("document");
  holder.hidden = !showing;
  article.hidden = showing;
  if (!showing) return;
  const version = ctx.state.doc ? ctx.state.doc.version : 0;
  if (!blamed || blamed.version !== version) {
    try { blamed = await ctx.api("GET", "/blame", { region: "workspace" }); }
    catch (error) { blamed = null; $("blame-lines").textContent = `Could not read who wrote what: ${message(error)}`; return; }
  }
  drawBlame(blamed);
}

function authorKey(line) { return `${line.kind}:${line.participant_id || ""}`; }

function authorLabel(line) {
  if (line.kind === "host_editor") return `${line.name} (own saves)`;
  return line.kind === "agent" ? `${line.name} (agent)` : line.name;
}

function drawBlame(answer) {
  const { el, clear } = ctx;
  const colours = new Map();
  const counts = new Map();
  for (const line of answer.lines) {
    const key = authorKey(line);
    if (!colours.has(key)) colours.set(key, PALETTE[colours.size % PALETTE.length]);
    counts.set(key, (counts.get(key) || 0) + 1);
  }
  const legend = $("blame-legend"), list = $("blame-lines");
  clear(legend); clear(list);
  const seen = new Set();
  for (const line of answer.lines) {
    const key = authorKey(line);
    if (seen.has(key)) continue;
    seen.add(key);
    const swatch = el("span", { class: "swatch", "aria-hidden": "true" });
    swatch.style.backgroundColor = colours.get(key);
    const count = counts.get(key);
    legend.append(el("li", { "data-author": key }, swatch, `${authorLabel(line)} · ${count} ${count === 1 ? "line" : "lines"}`));
  }
  let previous = null;
  for (const line of answer.lines) {
    const key = authorKey(line);
    // A thin rule in the author's colour (the legend says whose); the name and version show
    // on hover (the row's title) and are read out where the author changes.
    const gutter = el("span", { class: "who", "aria-hidden": "true" });
    gutter.style.backgroundColor = colours.get(key);
    const named = (key + line.version) !== previous;
    previous = key + line.version;
    const row = el("li", { class: "blame-line" + (line.amended_by ? " amended" : "") + (named ? " first" : ""),
      "data-author": key, "data-version": line.version, title: describe(line) }, gutter,
      named ? el("span", { class: "who-name" }, `${line.name} v${line.version}: `) : null,
      el("code", { class: "text" }, line.text || " "));
    if (line.amended_by) row.append(el("span", { class: "amended-mark" }, `amended by ${ctx.nameOf(line.amended_by)}`));
    list.append(row);
  }
}

function describe(line) {
  const how = line.kind === "host_editor" ? "saved in the host's editor" : line.proposal_id ? `proposal ${line.proposal_id}` : "written directly";
  return `line ${line.line}: ${line.name}, version ${line.version}, ${how}`;
}

// ---------------------------------------------------------------- history entries

// The history list is rebuilt on every new version: an entry's last answer is kept here so
// the rebuilt row still says what happened.
const results = new Map();

function historyRow(row, change) {
  if (!ctx || change.version <= 1) return;
  const { el } = ctx;
  const note = el("span", { class: "history-result", role: "status", "data-version": change.version },
    results.get(change.version) || "");
  row.append(el("button", { type: "button", class: "history-revert", "aria-label": `Revert this change (version ${change.version})`,
    onclick: () => act(note, "/revert", { version: change.version }, "reverted") }, "Revert this change"));
  if (change.region && change.region !== "workspace") {
    row.append(el("button", { type: "button", class: "history-restore",
      "aria-label": `Restore this section (${change.region} as at version ${change.version})`,
      onclick: () => act(note, "/restore", { region: change.region, version: change.version }, "restored") },
    "Restore this section"));
  }
  row.append(note);
}

async function act(note, path, params, done) {
  const say = (text) => {
    results.set(params.version, text);
    // the row may have been rebuilt meanwhile: write to the one on the page
    const shown = document.querySelector(`.history-result[data-version="${params.version}"]`) || note;
    shown.textContent = text;
  };
  say("…");
  try {
    const answer = await ctx.api("POST", path, params);
    say(`${done}: version ${answer.version}`);
  } catch (error) {
    const body = error.body || {};
    say(body.error === "stale_version"
      ? "Later changes touched the same lines: nothing was changed. Edit the text instead."
      : `Not done: ${message(error)}`);
  }
}

function message(error) { return (error.body && error.body.message) || error.message || String(error); }

// ---------------------------------------------------------------- policies

async function loadPolicies() {
  try { policyAnswer = await ctx.api("GET", "/policies"); }
  catch (error) { $("policies-error").hidden = false; $("policies-error").textContent = message(error); return; }
  $("policies-error").hidden = true;
  drawPolicies(policyAnswer.policies);
}

function drawPolicies(policies) {
  const { el, clear } = ctx;
  const list = $("policies");
  clear(list);
  if (!policies.length) list.append(el("li", { class: "muted" }, "No policies: every proposal waits for you. Add one with `ce policy add`."));
  for (const p of policies) {
    const who = p.participant_id ? ctx.nameOf(p.participant_id)
      : p.label ? `invitation label ${p.label}` : `names matching ${p.name_pattern} (never: names are not trusted)`;
    const state = p.active ? "active" : p.paused ? "paused" : "expired";
    const until = p.expires_at ? ` until ${p.expires_at.slice(0, 16).replace("T", " ")}` : "";
    const row = el("li", { "data-policy": p.policy_id, class: "policy " + state },
      el("strong", {}, state), ` ${who} · regions ${p.region_pattern} · at most ${p.max_changed_lines} changed lines${until} · approved ${p.approved_count} `,
      el("button", { type: "button", "aria-label": `${p.paused ? "Resume" : "Pause"} (policy ${p.policy_id})`,
        onclick: () => pauseOne(p.policy_id, !p.paused) }, p.paused ? "Resume" : "Pause"),
      el("button", { type: "button", "aria-label": `Remove (policy ${p.policy_id})`, onclick: () => removeOne(p.policy_id) }, "Remove"));
    if (p.approved.length) {
      const approved = el("ul", { class: "approved", "aria-label": `Proposals policy ${p.policy_id} approved` });
      for (const a of p.approved) approved.append(el("li", { "data-proposal": a.proposal_id }, `${a.summary} · ${ctx.nameOf(a.participant_id)} · ${a.region.split("/").pop()} · ${a.status}`));
      row.append(approved);
    }
    list.append(row);
  }
  $("policies-kill").disabled = !policies.some((p) => !p.paused);
  $("policies-resume").disabled = !policies.some((p) => p.paused);
}

async function policyCall(path, params) {
  try { await ctx.api("POST", path, params); } catch (error) {
    $("policies-error").hidden = false; $("policies-error").textContent = message(error);
  }
  await loadPolicies();
}
function pauseAll(paused) { return policyCall("/policy/pause", { all: true, paused }); }
function pauseOne(id, paused) { return policyCall("/policy/pause", { policy_id: id, paused }); }
function removeOne(id) { return policyCall("/policy/remove", { policy_id: id }); }
