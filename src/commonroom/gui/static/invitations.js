// Invitations (spec PAGE.md 10): the form (capabilities from the room's vocabulary), the
// invitation shown once with each MCP client's setup, open ones with Revoke, spent ones collapsed.
import { $, api, clear, el, showNotice, words } from "./page.js";

export const panel = {
  name: "invitations",
  resources: ["invitations", "participants"], // a join uses one up
  init: renderInviteForm,
  load: loadInvitations,
};

function renderInviteForm() {
  const caps = $("invite-caps");
  for (const cap of words.capabilities) {
    const box = el("input", { type: "checkbox", value: cap, checked: words.agentCapabilities.includes(cap) });
    caps.append(el("label", {}, box, cap));
  }
  $("invite-unlimited").addEventListener("change", (event) => { $("invite-uses").disabled = event.target.checked; });
  $("invite-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const capabilities = [...caps.querySelectorAll("input:checked")].map((b) => b.value);
    const params = { capabilities, expires_in_minutes: Number($("invite-expires").value) || null,
      max_uses: $("invite-unlimited").checked ? null : Number($("invite-uses").value) || 1 };
    const label = $("invite-label").value.trim();
    if (label) params.label = label;
    let answer;
    try { answer = await api("POST", "/invite", params); }
    catch (error) { showNotice(`Could not create the invitation: ${error.message}`); return; }
    $("invite-uri").textContent = answer.invitation;
    $("invite-result").hidden = false;
    await showMcpSnippets(answer.invitation);
    $("copy-uri").focus();
    loadInvitations().catch(() => {});
  });
  $("invite-client").addEventListener("change", showSnippet);
  for (const [button, source] of [["copy-uri", "invite-uri"], ["copy-mcp", "invite-mcp"]]) {
    $(button).addEventListener("click", async () => {
      const text = $(source).textContent;
      try { await navigator.clipboard.writeText(text); $(button).textContent = "Copied"; }
      catch (_) {
        const range = document.createRange(); range.selectNodeContents($(source));
        const sel = window.getSelection(); sel.removeAllRanges(); sel.addRange(range);
        $(button).textContent = "Selected: press Ctrl+C";
      }
      setTimeout(() => { $(button).textContent = "Copy"; }, 2000);
    });
  }
  $("empty-invite").addEventListener("click", () => { $("invite-create").scrollIntoView(); $("invite-label").focus(); });
}

// Each MCP client's setup for the invitation just made (the room renders them:
// POST /owner/api/mcp/configs); a room without that route gets the bridge line.
const snippets = { list: [], last: null };
async function showMcpSnippets(invitation) {
  let answer = null;
  try { answer = await api("POST", "/owner/api/mcp/configs", { invitation }); } catch (_) { answer = null; }
  snippets.list = answer ? answer.configs : [{ client: "ce mcp", text: `CE_INVITATION='${invitation}' ce mcp`, where: "run it as the MCP client's stdio command (the invitation in its environment, never on its command line)" }];
  $("invite-mcp-url").textContent = answer && answer.mcp_url ? answer.mcp_url : "(not reachable over HTTP here)";
  const select = $("invite-client");
  clear(select);
  for (const snippet of snippets.list) select.append(el("option", { value: snippet.client }, snippet.client));
  if (snippets.last && snippets.list.some((s) => s.client === snippets.last)) select.value = snippets.last;
  showSnippet();
}

function showSnippet() {
  const chosen = snippets.list.find((s) => s.client === $("invite-client").value) || snippets.list[0];
  if (!chosen) return;
  snippets.last = chosen.client;
  $("invite-mcp").textContent = chosen.text;
  $("invite-client-where").textContent = chosen.where + (chosen.secret ? ` · ${chosen.secret}` : "");
}

async function loadInvitations() {
  const answer = await api("GET", "/invitations", { limit: 50 });
  const list = $("invitations"), old = $("invitations-old-list");
  clear(list); clear(old);
  // Active ones stay in view; used, expired and revoked ones collapse into one group.
  const spent = answer.invitations.filter((inv) => inv.state !== "active");
  $("invitations-old-count").textContent = `Used, expired or revoked · ${spent.length}`;
  $("invitations-old").hidden = spent.length === 0;
  if (spent.length === answer.invitations.length) list.append(el("li", { class: "muted empty" }, "No open invitations."));
  for (const inv of answer.invitations) {
    const uses = `${inv.used_count}/${inv.max_uses === null ? "∞" : inv.max_uses}`;
    const row = el("li", {}, el("strong", {}, inv.label || inv.invite_id), ` · ${inv.state} · uses ${uses} · expires ${new Date(inv.expires_at).toLocaleString()}`,
      el("div", { class: "muted" }, inv.capabilities.join(", ")));
    if (inv.state === "active") {
      row.append(el("button", { type: "button", "aria-label": `Revoke invitation ${inv.label || inv.invite_id}`, onclick: async () => {
        try { await api("POST", "/invite/revoke", { invite_id: inv.invite_id }); } catch (error) { showNotice(error.message); }
        loadInvitations().catch(() => {});
      } }, "Revoke"));
    }
    (inv.state === "active" ? list : old).append(row);
  }
}
