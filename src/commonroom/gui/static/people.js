// Participants and leases (spec PAGE.md 10): who is in the room (presence, what they may do,
// revoke), who left (collapsed), each active lease with its holder, countdown and Release.
import { $, api, clear, el, nameOf, page, shortRegion, state, tickCountdowns } from "./page.js";
import { renderRecipients } from "./messages.js";
import { panel as permissions } from "./permissions.js";

export const panel = {
  name: "people",
  resources: ["participants", "leases"],
  render: renderPeople,
};

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
    permissions.participantRow(row, p);
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
        box.remove(); page.refresh();
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
    box.remove(); button.hidden = false; page.refresh();
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
