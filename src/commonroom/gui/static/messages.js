// Room text (PROTOCOL §10.1): only appends (rows keyed by seq, the last seen kept), reads
// `/messages?after=seq` paging up to `latest_seq`; a row addressed to the host is marked; the
// host sends with `/message`, ticking recipients (none ticked: unaddressed). Hidden while the
// route answers 404 (an older room).
import { $, api, el, isHost, nameOf, showNotice, state } from "./page.js";
import { handoffsRead, known as handoffs } from "./handoffs.js";

export const panel = {
  name: "messages",
  // A row's label names its handoff: read after the handoffs when both changed.
  resources: ["messages", "handoffs"],
  init: wireMessages,
  load: async () => { await handoffsRead().catch(() => {}); return loadMessages(); },
};

const rooms = { shown: true, messageSeq: 0, loadingMessages: null, messagesAgain: false };

// One read at a time; a read asked for meanwhile runs right after (events come in bursts).
async function loadMessages() {
  if (!rooms.shown) return;
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
      if (error.status === 404) { rooms.shown = false; $("messages-panel").hidden = true; }
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
    const h = handoffs.get(m.handoff_id);
    head.append(" ", el("span", { class: "thread" }, `in handoff: ${h ? h.summary : m.handoff_id}`));
  }
  const row = el("li", { class: classes.filter(Boolean).join(" "), "data-message": m.message_id, "data-seq": m.seq,
    "data-handoff": m.handoff_id || null }, head, el("div", { class: "message-text" }, m.text));
  // Keep a reader at the bottom following along; a reader scrolled up stays where they are.
  const atBottom = list.scrollHeight - list.scrollTop - list.clientHeight < 8;
  list.append(row);
  if (atBottom) list.scrollTop = list.scrollHeight;
}

export function renderRecipients() {
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
