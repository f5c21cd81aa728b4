// A host's save that undid someone's change (docs/spec/PROTOCOL.md §16, wave 4): "Your save
// undid NAME's change (vN)" above the document, with Re-apply (a new version that merges the
// change back) and Keep mine. Nothing happens until the host clicks. A panel (app.js): `init`
// once, `load` after each event on the document (a new version may be such a save). Same rules
// as every panel (page.js): every text is a text node, never HTML.
import * as kit from "./page.js";

export const panel = {
  name: "undoes",
  resources: ["document"], // each new version may be a save that undid someone's change
  init: () => attach({ api: kit.api, el: kit.el, clear: kit.clear, nameOf: kit.nameOf }),
  load: () => refresh(),
};

let ctx = null; // { api, el, clear, nameOf }
const outcome = new Map(); // save version -> what the last click said

function attach(context) {
  ctx = context;
  document.getElementById("document").before(ctx.el("div", { id: "undoes", class: "undoes", hidden: true,
    "aria-label": "Saves that undid someone's change" }));
}

async function refresh() {
  if (!ctx) return;
  let answer;
  try { answer = await ctx.api("GET", "/undone"); } catch (_) { return; }
  const holder = document.getElementById("undoes");
  ctx.clear(holder);
  const open = answer.saves.filter((save) => save.settled === null || outcome.has(save.version));
  for (const save of open) holder.append(row(save));
  holder.hidden = open.length === 0;
}

function row(save) {
  const { el, nameOf } = ctx;
  const whose = save.undoes.map((u) => `${nameOf(u.participant_id)}'s change (v${u.version})`).join(" and ");
  const say = el("span", { class: "undoes-result", role: "status" }, outcome.get(save.version) || "");
  const item = el("div", { class: "undoes-item", "data-version": save.version },
    el("strong", {}, `Your save (v${save.version}) undid ${whose}.`), " ");
  if (save.settled === null) {
    item.append(
      el("button", { type: "button", class: "undoes-reapply", "aria-label": `Re-apply what version ${save.version} undid`,
        onclick: () => choose(save.version, false, say) }, "Re-apply"),
      el("button", { type: "button", class: "undoes-keep", "aria-label": `Keep version ${save.version} as saved`,
        onclick: () => choose(save.version, true, say) }, "Keep mine"));
  }
  item.append(say);
  return item;
}

async function choose(version, keep, say) {
  for (const button of document.querySelectorAll(`.undoes-item[data-version="${version}"] button`)) button.disabled = true;
  try {
    const answer = await ctx.api("POST", "/reapply", { version, keep });
    outcome.set(version, keep ? "Kept as you saved it." : `Re-applied as version ${answer.new_version}.`);
  } catch (error) {
    const body = error.body || {};
    outcome.set(version, `Not re-applied: ${body.message || error.message}`);
    for (const button of document.querySelectorAll(`.undoes-item[data-version="${version}"] button`)) button.disabled = false;
    say.textContent = outcome.get(version);
    outcome.delete(version);
    return;
  }
  await refresh();
}
