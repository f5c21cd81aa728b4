// Markdown to DOM for the host's page: markdown-it tokens become nodes built here (never
// innerHTML), links only to safe schemes and never to this computer; the rendered diff
// (word-level inside the new text's own markdown) and the unified diff.
import { el } from "./page.js";

const SAFE_SCHEMES = ["http:", "https:", "mailto:"];
const md = window.markdownit({ html: false, linkify: false, typographer: false });

const TAGS = new Set(["p", "h1", "h2", "h3", "h4", "h5", "h6", "ul", "ol", "li", "blockquote",
  "table", "thead", "tbody", "tr", "th", "td", "strong", "em", "s", "code", "pre", "hr", "br", "a"]);

// A link to this computer could reach another local server (or this room's own API)
// from the owner's browser: loopback addresses, `localhost` and its subdomains, 0.0.0.0.
// The URL parser has already turned 2130706433, 0x7f.1 and [::ffff:127.0.0.1] into their
// canonical forms.
function localHost(hostname) {
  const host = hostname.toLowerCase().replace(/\.$/, "");
  if (host === "localhost" || host.endsWith(".localhost") || host === "0.0.0.0") return true;
  if (/^127\.\d+\.\d+\.\d+$/.test(host)) return true;
  return host.startsWith("[") && (host === "[::1]" || host === "[::]" || /^\[::ffff:(7f[0-9a-f]{2}:|127\.)/.test(host));
}

// `{href}` for a link to follow, `{refused: url}` for one shown as text, null for nothing.
function linkTarget(href) {
  if (!href) return null;
  if (href.startsWith("#")) return { href };
  try {
    const url = new URL(href, "http://relative.invalid/");
    if (url.origin === "http://relative.invalid") return null; // relative paths lead nowhere here
    if (!SAFE_SCHEMES.includes(url.protocol)) return null;
    if (url.hostname && localHost(url.hostname)) return { refused: url.href };
    return { href: url.href };
  } catch (_) { return null; }
}

function linkNode(href) {
  const target = linkTarget(href);
  if (target && target.href) {
    return el("a", { href: target.href, rel: "noopener noreferrer", target: target.href.startsWith("#") ? null : "_blank" });
  }
  if (target && target.refused) {
    // Text, never a link: what it says, then (when it is closed) where it points.
    const node = el("span", { class: "link-refused", title: "Links to this computer are shown as text, not links" });
    node.dataset.refusedHref = target.refused;
    return node;
  }
  return el("span");
}

// A refused link ends with where it points, as plain text: "text ‹http://127.0.0.1:…›".
function closeNode(node) {
  const href = node && node.dataset ? node.dataset.refusedHref : null;
  if (!href) return;
  const said = node.textContent.trim();
  if (said === href || `${said}/` === href) return; // an autolink already shows its address
  node.append(el("span", { class: "muted" }, ` \u2039${href}\u203a`));
}

// Render a markdown-it token list into `parent`. `text(content)` turns one
// piece of text into nodes (plain text, or a word diff); pieces come in the
// order `pieces()` lists them.
export function renderTokens(tokens, parent, text, headingHook) {
  const stack = [parent];
  const top = () => stack[stack.length - 1];
  for (const token of tokens) {
    if (token.hidden && token.nesting !== 0) continue; // tight lists hide their paragraphs
    if (token.nesting === 1) {
      const tag = TAGS.has(token.tag) ? token.tag : "div";
      let node;
      if (tag === "a") {
        node = linkNode(token.attrGet("href"));
      } else {
        node = el(tag);
        const start = token.attrGet("start");
        if (tag === "ol" && start && /^\d+$/.test(start)) node.setAttribute("start", start);
      }
      if (/^h[1-6]$/.test(tag) && headingHook) headingHook(node, token);
      top().append(node);
      stack.push(node);
    } else if (token.nesting === -1) {
      if (stack.length > 1) closeNode(stack.pop());
    } else if (token.type === "inline") {
      renderInline(token.children || [], top(), text);
    } else if (token.type === "fence" || token.type === "code_block") {
      const code = el("code");
      code.append(...text(token.content));
      top().append(el("pre", {}, code));
    } else if (token.type === "hr") {
      top().append(el("hr"));
    } else if (token.content) {
      top().append(...text(token.content)); // anything else: as text, never as markup
    }
  }
}

function renderInline(children, parent, text) {
  const stack = [parent];
  const top = () => stack[stack.length - 1];
  for (const token of children) {
    if (token.nesting === 1) {
      let node;
      if (token.tag === "a") node = linkNode(token.attrGet("href"));
      else node = el(TAGS.has(token.tag) ? token.tag : "span");
      top().append(node); stack.push(node);
    } else if (token.nesting === -1) {
      if (stack.length > 1) closeNode(stack.pop());
    } else if (token.type === "code_inline") {
      const code = el("code"); code.append(...text(token.content)); top().append(code);
    } else if (token.type === "softbreak") {
      top().append(...text("\n"));
    } else if (token.type === "hardbreak") {
      top().append(...text("\n")); top().append(el("br"));
    } else if (token.type === "image") {
      // No remote fetches from the document: an image shows as its alt text.
      top().append(el("span", { class: "muted" }, "[image: ", ...text(token.content || ""), "]"));
    } else {
      top().append(...text(token.content || ""));
    }
  }
}

// The text pieces of a token list, in render order (see renderTokens).
function pieces(tokens) {
  const out = [];
  for (const token of tokens) {
    if (token.type === "inline") {
      for (const child of token.children || []) {
        if (child.type === "softbreak" || child.type === "hardbreak") out.push("\n");
        else if (child.nesting === 0) out.push(child.content || "");
      }
      out.push(null); // block boundary
    } else if (token.type === "fence" || token.type === "code_block") {
      out.push(token.content); out.push(null);
    } else if (token.nesting === 0 && token.type !== "hr" && token.content) {
      out.push(token.content);
    }
  }
  return out;
}

const plainText = (content) => [document.createTextNode(content)];

export function renderMarkdown(src, parent, headingHook) {
  renderTokens(md.parse(src || "", {}), parent, plainText, headingHook);
}

// Top-level blocks of a markdown text: [{tokens, src, type}].
function blocksOf(src) {
  const tokens = md.parse(src || "", {});
  const lines = (src || "").split("\n");
  const blocks = [];
  let group = [], depth = 0, map = null;
  for (const token of tokens) {
    if (group.length === 0) map = token.map;
    group.push(token);
    depth += token.nesting;
    if (depth === 0) {
      const text = map ? lines.slice(map[0], map[1]).join("\n") : group.map((t) => t.content).join("");
      blocks.push({ tokens: group, src: text, type: group[0].type + ":" + group[0].tag });
      group = [];
    }
  }
  return blocks;
}

// A word-level diff of two markdown texts, rendered inside the new text's markdown.
export function renderDiff(oldSrc, newSrc, parent) {
  const before = blocksOf(oldSrc), after = blocksOf(newSrc);
  const parts = Diff.diffArrays(before.map((b) => b.src), after.map((b) => b.src));
  let i = 0, j = 0, changed = 0;
  // What the rendered text does not show: where links point (definitions, destinations).
  changed += markDefinitions(oldSrc, newSrc, parent);
  for (let k = 0; k < parts.length; k++) {
    const part = parts[k];
    if (!part.added && !part.removed) {
      for (let n = 0; n < part.count; n++) {
        const box = el("div", { class: "blk-same" });
        renderTokens(after[j].tokens, box, plainText);
        parent.append(box); i++; j++;
      }
      continue;
    }
    let removed = [], added = [];
    if (part.removed) {
      removed = before.slice(i, i + part.count); i += part.count;
      const next = parts[k + 1];
      if (next && next.added) { added = after.slice(j, j + next.count); j += next.count; k++; }
    } else {
      added = after.slice(j, j + part.count); j += part.count;
    }
    changed++;
    const pairs = Math.min(removed.length, added.length);
    for (let n = 0; n < Math.max(removed.length, added.length); n++) {
      const old = removed[n], neu = added[n];
      if (n < pairs && old.type === neu.type && similar(old, neu)) {
        const box = el("div", { class: "blk-changed" });
        renderWordDiff(old, neu, box);
        const pointed = markTargets(old, neu, box);
        if (!pointed && joinPieces(pieces(old.tokens)).text === joinPieces(pieces(neu.tokens)).text) {
          box.append(el("p", { class: "outside-change", role: "note" }, "Its source changed, not its rendered text (spacing, escapes or markup that renders the same): see the Unified view."));
        }
        parent.append(box);
      } else {
        if (old) { const box = el("div", { class: "blk-del", "aria-label": "removed" }); renderTokens(old.tokens, box, plainText); parent.append(box); }
        if (neu) { const box = el("div", { class: "blk-ins", "aria-label": "added" }); renderTokens(neu.tokens, box, plainText); parent.append(box); }
      }
    }
  }
  if (changed === 0 && (oldSrc || "") !== (newSrc || "")) {
    // Never "No change" for a text that changes: say where the change is.
    parent.append(el("p", { class: "outside-change", role: "note" }, "This changes only what the rendered text does not show (spacing, escapes, comments or markup that renders the same): see the Unified view."));
  } else if (changed === 0) parent.append(el("p", { class: "muted no-change" }, "No change: the two texts are the same."));
}

// Link reference definitions ([label]: destination) render as nothing, yet decide where
// every [label] link in the document points: each one added, removed or changed is shown.
function definitionsOf(src) {
  const env = {};
  md.parse(src || "", env);
  return env.references || {};
}
function markDefinitions(oldSrc, newSrc, parent) {
  const was = definitionsOf(oldSrc), now = definitionsOf(newSrc);
  let marked = 0;
  for (const label of new Set([...Object.keys(was), ...Object.keys(now)])) {
    const a = was[label], b = now[label];
    if (a && b && a.href === b.href && (a.title || "") === (b.title || "")) continue;
    const what = !a ? `added: [${label}] → ${b.href}` : !b ? `removed: [${label}] (was ${a.href})` : `changed: [${label}] ${a.href} → ${b.href}`;
    parent.append(el("p", { class: "link-change", role: "note" }, `Link definition ${what}. It decides where every [${label}] link points, in any section.`));
    marked++;
  }
  return marked;
}

// Link destinations and images inside a changed block: their text may read the same.
function targetsOf(tokens) {
  const out = [];
  for (const token of tokens) {
    for (const child of token.children || []) {
      if (child.type === "link_open") out.push(`link → ${child.attrGet("href")}`);
      if (child.type === "image") out.push(`image ${child.attrGet("src")}`);
    }
  }
  return out;
}
function markTargets(oldBlock, newBlock, box) {
  const was = targetsOf(oldBlock.tokens), now = targetsOf(newBlock.tokens);
  const gone = was.filter((t) => !now.includes(t)), come = now.filter((t) => !was.includes(t));
  if (!gone.length && !come.length) return false;
  const note = el("p", { class: "link-change", role: "note" }, "Where it points changed: ");
  for (const t of gone) note.append(el("del", {}, t), " ");
  for (const t of come) note.append(el("ins", {}, t), " ");
  box.append(note);
  return true;
}

// A word diff with semantic cleanup (diff-match-patch): each word (or space run, or
// punctuation mark) becomes one character — the library's line-mode trick applied to
// words — so a rewritten phrase reads as one deletion then one insertion, not word by word.
const dmp = new window.diff_match_patch();
dmp.Diff_Timeout = 1;
const WORD = /\s+|[\p{L}\p{N}_]+|[^\s\p{L}\p{N}_]/gu;
function wordParts(a, b) {
  const codes = new Map(), words = [];
  const encode = (text) => {
    let out = "";
    for (const word of text.match(WORD) || []) {
      let code = codes.get(word);
      if (code === undefined) {
        code = words.length + 1;
        if (code >= 0xd800) code += 0x800; // past the surrogates: one code unit per word
        codes.set(word, code); words[code] = word;
      }
      out += String.fromCharCode(code);
    }
    return out;
  };
  const left = encode(a), right = encode(b);
  if (words.length > 0xf000) return [{ value: a, removed: true }, { value: b, added: true }];
  const diffs = dmp.diff_main(left, right, false);
  dmp.diff_cleanupSemantic(diffs);
  return diffs.map(([op, text]) => ({
    value: text.split("").map((c) => words[c.charCodeAt(0)]).join(""), added: op === 1, removed: op === -1,
  }));
}

// Word-level marks help only when the two blocks share most of their words; a rewrite
// reads better as the old block struck and the new one whole.
function similar(oldBlock, newBlock) {
  const a = joinPieces(pieces(oldBlock.tokens)).text, b = joinPieces(pieces(newBlock.tokens)).text;
  let same = 0;
  for (const part of wordParts(a, b)) if (!part.added && !part.removed) same += part.value.trim().length;
  return same >= 0.4 * Math.max(a.replace(/\s+/g, "").length, b.replace(/\s+/g, "").length, 1);
}

function joinPieces(list) {
  // Offsets of each piece in the joined plain text; block boundaries become "\n".
  let text = "", spans = [];
  for (const piece of list) {
    if (piece === null) { text += "\n"; continue; }
    spans.push([text.length, text.length + piece.length]);
    text += piece;
  }
  return { text, spans };
}

function renderWordDiff(oldBlock, newBlock, parent) {
  const oldPlain = joinPieces(pieces(oldBlock.tokens)).text;
  const { text: newPlain, spans } = joinPieces(pieces(newBlock.tokens));
  // Ranges over the new text: same / ins, and deletions anchored at a new offset.
  const ranges = [], deletions = [];
  let at = 0;
  for (const part of wordParts(oldPlain, newPlain)) {
    const blank = !part.value.trim(); // a line break that became a space is not a change to show
    if (part.removed) { if (!blank) deletions.push({ at, value: part.value, done: false }); }
    else { ranges.push({ from: at, to: at + part.value.length, ins: !!part.added && !blank }); at += part.value.length; }
  }
  let index = 0;
  const text = (content) => {
    const span = spans[index++] || [newPlain.length, newPlain.length];
    const out = [];
    const emitDeletions = (pos, last) => {
      for (const d of deletions) {
        if (!d.done && (d.at === pos || (last && d.at > pos && d.at <= span[1]))) {
          d.done = true; out.push(el("del", {}, d.value));
        }
      }
    };
    for (const r of ranges) {
      const from = Math.max(r.from, span[0]), to = Math.min(r.to, span[1]);
      if (from >= to) continue;
      emitDeletions(from, false);
      const piece = newPlain.slice(from, to);
      out.push(r.ins ? el("ins", {}, piece) : document.createTextNode(piece));
    }
    emitDeletions(span[1], true);
    if (out.length === 0 && content) out.push(document.createTextNode(content));
    return out;
  };
  renderTokens(newBlock.tokens, parent, text);
  const left = deletions.filter((d) => !d.done);
  if (left.length) parent.append(el("p", {}, ...left.map((d) => el("del", {}, d.value))));
}

export function renderUnified(diff, parent) {
  const pre = el("pre", { class: "diff", "aria-label": "Unified diff" });
  const lines = (diff || "").split("\n");
  for (const line of lines) {
    if (line === "" ) continue;
    const kind = line.startsWith("@@") ? "hunk" : line.startsWith("+") && !line.startsWith("+++") ? "add"
      : line.startsWith("-") && !line.startsWith("---") ? "rem" : null;
    pre.append(el("span", { class: kind }, line + "\n"));
  }
  if (!pre.firstChild) pre.append(el("span", { class: "no-change" }, "No change"));
  parent.append(pre);
}
