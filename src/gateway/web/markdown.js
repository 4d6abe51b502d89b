// Markdown for model text (CommonMark essentials and GFM tables, task
// lists, strikethrough and autolinks), built as DOM nodes with
// createElement and textContent only. Nothing in the text is ever parsed
// as HTML: raw HTML shows as text, links go only to http(s) and mailto
// URLs, images are never loaded (they become links), and no attribute's
// name or style comes from the text. Nesting is bounded so hostile input
// cannot exhaust the stack, and each step is linear so it cannot hang.
//
// Replies stream: `renderMarkdown(element, text)` is called with the whole
// text so far on every delta. It reparses only from the last finished
// block and keeps the DOM nodes of leading blocks whose source did not
// change, so a selection or a focused copy button there survives.

import { highlightInto, languageOf } from "./highlight.js";

/** How deeply block quotes and lists may nest; deeper markers are text. */
export const MAX_BLOCK_DEPTH = 16;
/** How deeply emphasis and links may nest; deeper delimiters are text. */
export const MAX_INLINE_DEPTH = 16;

const SAFE_SCHEMES = new Set(["http:", "https:", "mailto:"]);
const COPIED_FOR_MS = 2000;

const rendered = new WeakMap();

/**
 * Renders `text` as markdown into `element`, replacing what an earlier
 * call put there but reusing the nodes of unchanged leading blocks.
 */
export function renderMarkdown(element, text) {
  text = String(text ?? "");
  if (text.includes("\r")) text = text.replace(/\r\n?/g, "\n");
  if (text.includes("\0")) text = text.replace(/\0/g, "\uFFFD");
  element.classList.add("md");
  let state = rendered.get(element);
  const count = state ? state.blocks.length : 0;
  if (!state || element.childNodes.length !== count
      || (count && element.lastChild !== state.blocks[count - 1].node)) {
    // First call, or someone else changed the element: start afresh.
    element.replaceChildren();
    state = { text: "", blocks: [] };
    rendered.set(element, state);
  }
  if (text === state.text) return;
  const blocks = state.blocks;
  // Appending text can change only the last two blocks (the last line may
  // have been cut short); everything before them is final.
  const keep = blocks.length >= 2 && text.startsWith(state.text) ? blocks.length - 2 : 0;
  const from = keep ? blocks[keep].offset : 0;
  const parsed = topLevelBlocks(text.slice(from), from);
  // Reuse every leading node whose source is unchanged.
  let same = 0;
  while (same < parsed.length && keep + same < blocks.length && blocks[keep + same].src === parsed[same].src) {
    parsed[same].node = blocks[keep + same].node;
    same++;
  }
  for (let i = blocks.length - 1; i >= keep + same; i--) blocks[i].node.remove();
  blocks.length = keep;
  for (let i = 0; i < parsed.length; i++) {
    if (i >= same) {
      parsed[i].node = renderBlock(parsed[i].block);
      element.append(parsed[i].node);
    }
    blocks.push(parsed[i]);
  }
  state.text = text;
}

/** A fresh element holding `text` rendered as markdown. */
export function markdownFragment(text) {
  const div = document.createElement("div");
  renderMarkdown(div, text);
  return div;
}

// ---- blocks ------------------------------------------------------------

function topLevelBlocks(text, base) {
  const lines = text.split("\n");
  const offsets = [];
  let at = base;
  for (const line of lines) {
    offsets.push(at);
    at += line.length + 1;
  }
  return parseBlocks(lines, 0).map((block) => ({
    block,
    offset: offsets[block.start],
    src: lines.slice(block.start, block.end).join("\n"),
    node: null,
  }));
}

// Leading whitespace with tabs expanded to stops of 4.
function indentOf(line) {
  let col = 0;
  for (const ch of line) {
    if (ch === " ") col++;
    else if (ch === "\t") col += 4 - (col % 4);
    else break;
  }
  return col;
}

// `line` with `n` columns of leading indentation removed.
function dedent(line, n) {
  let col = 0;
  let i = 0;
  while (i < line.length && col < n) {
    if (line[i] === " ") col++;
    else if (line[i] === "\t") {
      const w = 4 - (col % 4);
      if (col + w > n) return " ".repeat(col + w - n) + line.slice(i + 1);
      col += w;
    } else break;
    i++;
  }
  return line.slice(i);
}

const isBlank = (line) => /^[ \t]*$/.test(line);
const FENCE = /^ {0,3}(`{3,}|~{3,})(.*)$/;
const ATX = /^ {0,3}(#{1,6})(?:[ \t]+(.*?))??(?:[ \t]+#+)?[ \t]*$/;
const HR = /^ {0,3}(?:(?:\*[ \t]*){3,}|(?:-[ \t]*){3,}|(?:_[ \t]*){3,})$/;
const LIST = /^( {0,3})([-+*]|\d{1,9}[.)])(?:([ \t]+)(.*)|[ \t]*$)/;
const QUOTE = /^ {0,3}> ?/;
const DELIM_ROW = /^ {0,3}\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*$/;

function listMarker(line) {
  const m = LIST.exec(line);
  if (!m) return null;
  const marker = m[2];
  const ordered = /\d/.test(marker[0]);
  const spaces = m[3] ? indentOf(m[3]) : 0;
  const empty = m[4] === undefined || isBlank(m[4]);
  const width = m[1].length + marker.length + (empty || spaces > 4 ? 1 : spaces);
  return {
    ordered,
    char: marker[marker.length - 1],
    start: ordered ? Number.parseInt(marker, 10) : 1,
    width,
    empty,
    first: empty ? "" : (spaces > 4 ? " ".repeat(spaces - 1) : "") + m[4],
  };
}

// Can `line` start a block that ends a paragraph above it?
function interrupts(line, depth) {
  if (FENCE.test(line) && !/^ {0,3}`{3,}.*`/.test(line)) return true;
  if (ATX.test(line) || HR.test(line)) return true;
  if (depth < MAX_BLOCK_DEPTH && QUOTE.test(line)) return true;
  const item = depth < MAX_BLOCK_DEPTH && listMarker(line);
  return !!item && !item.empty && (!item.ordered || item.start === 1);
}

function splitRow(line) {
  let s = line.trim();
  if (s.startsWith("|")) s = s.slice(1);
  if (s.endsWith("|") && !s.endsWith("\\|")) s = s.slice(0, -1);
  const cells = [];
  let cell = "";
  for (let i = 0; i < s.length; i++) {
    if (s[i] === "\\" && s[i + 1] === "|") {
      cell += "|";
      i++;
    } else if (s[i] === "|") {
      cells.push(cell.trim());
      cell = "";
    } else cell += s[i];
  }
  cells.push(cell.trim());
  return cells;
}

function tableStart(lines, i) {
  if (i + 1 >= lines.length || !lines[i].includes("|") || !DELIM_ROW.test(lines[i + 1])) return null;
  if (indentOf(lines[i]) > 3) return null;
  const head = splitRow(lines[i]);
  const delims = splitRow(lines[i + 1]);
  if (head.length !== delims.length) return null;
  const align = delims.map((d) =>
    d.startsWith(":") && d.endsWith(":") ? "center" : d.endsWith(":") ? "right" : d.startsWith(":") ? "left" : "");
  return { head, align };
}

/**
 * Parses `lines` into blocks, each with its `start` and `end` line index.
 * `depth` counts the containers around them (quotes and list items).
 */
function parseBlocks(lines, depth) {
  const blocks = [];
  let i = 0;
  let blankBefore = false;
  while (i < lines.length) {
    const line = lines[i];
    if (isBlank(line)) {
      blankBefore = blocks.length > 0;
      i++;
      continue;
    }
    const start = i;
    const push = (block) => {
      block.start = start;
      block.end = i;
      block.blankBefore = blankBefore;
      blankBefore = false;
      blocks.push(block);
    };
    const indent = indentOf(line);
    let m;
    if (indent >= 4) {
      const body = [];
      while (i < lines.length && (isBlank(lines[i]) || indentOf(lines[i]) >= 4)) body.push(dedent(lines[i++], 4));
      while (body.length && isBlank(body[body.length - 1])) {
        body.pop();
        i--;
      }
      push({ type: "code", lang: "", text: body.join("\n") });
    } else if ((m = FENCE.exec(line)) && !(m[1][0] === "`" && m[2].includes("`"))) {
      const fence = m[1];
      const info = m[2].trim().replace(/\\([!-/:-@[-`{-~])/g, "$1");
      const closing = closingFence(fence);
      const body = [];
      i++;
      while (i < lines.length && !closing.test(lines[i])) body.push(dedent(lines[i++], indent));
      if (i < lines.length) i++;
      push({ type: "code", lang: info.split(/[ \t]/)[0], text: body.join("\n"), fenced: true });
    } else if ((m = ATX.exec(line))) {
      i++;
      push({ type: "heading", level: m[1].length, text: (m[2] || "").trim() });
    } else if (HR.test(line)) {
      i++;
      push({ type: "hr" });
    } else if (depth < MAX_BLOCK_DEPTH && QUOTE.test(line)) {
      const inner = [];
      const fence = fenceTracker();
      while (i < lines.length) {
        const l = lines[i];
        if (QUOTE.test(l)) fence(inner[inner.push(l.replace(QUOTE, "")) - 1]);
        else if (!isBlank(l) && inner.length && !isBlank(inner[inner.length - 1]) && !interrupts(l, depth)
                 && !fence.open() && indentOf(inner[inner.length - 1]) < 4) inner.push(l);
        else break;
        i++;
      }
      push({ type: "quote", children: parseBlocks(inner, depth + 1) });
    } else if (depth < MAX_BLOCK_DEPTH && listMarker(line)) {
      push(parseList(lines, i, depth, (end) => { i = end; }));
    } else if ((m = tableStart(lines, i))) {
      const rows = [];
      i += 2;
      while (i < lines.length && !isBlank(lines[i]) && !interrupts(lines[i], depth)) {
        const cells = splitRow(lines[i++]);
        rows.push(m.head.map((_, c) => cells[c] ?? ""));
      }
      push({ type: "table", head: m.head, align: m.align, rows });
    } else {
      const para = [line.replace(/^[ \t]+/, "")];
      i++;
      let heading = 0;
      while (i < lines.length && !isBlank(lines[i])) {
        const l = lines[i];
        if (/^ {0,3}=+[ \t]*$/.test(l)) { heading = 1; i++; break; }
        // A lone "-" as the last line is, while a reply streams, far more
        // often a list item on its way than a heading's underline.
        const lone = i === lines.length - 1 && /^ {0,3}-[ \t]*$/.test(l);
        if (!lone && /^ {0,3}-+[ \t]*$/.test(l)) { heading = 2; i++; break; }
        if (interrupts(l, depth) || tableStart(lines, i)) break;
        para.push(l.replace(/^[ \t]+/, ""));
        i++;
      }
      const text = para.join("\n").replace(/[ \t]+$/, "");
      push(heading ? { type: "heading", level: heading, text } : { type: "paragraph", text });
    }
  }
  return blocks;
}

function parseList(lines, i, depth, done) {
  const first = listMarker(lines[i]);
  const list = { type: "list", ordered: first.ordered, number: first.start, items: [], loose: false };
  let sawBlankBetween = false;
  while (i < lines.length) {
    const marker = listMarker(lines[i]);
    if (!marker || marker.ordered !== first.ordered || marker.char !== first.char || indentOf(lines[i]) >= 4) break;
    if (list.items.length && sawBlankBetween) list.loose = true;
    const body = [marker.first];
    const fence = fenceTracker();
    fence(marker.first);
    let lastBlank = marker.empty;
    i++;
    while (i < lines.length) {
      const l = lines[i];
      if (isBlank(l)) {
        if (marker.empty && body.length === 1 && body[0] === "") break; // an empty item holds one blank at most
        body.push("");
        lastBlank = true;
      } else if (indentOf(l) >= marker.width) {
        body.push(dedent(l, marker.width));
        fence(body[body.length - 1]);
        lastBlank = false;
      } else if (!lastBlank && !interrupts(l, depth) && !listMarker(l) && !fence.open()) {
        body.push(l); // a lazy continuation line
      } else break;
      i++;
    }
    let trailing = 0;
    while (body.length > 1 && isBlank(body[body.length - 1])) {
      body.pop();
      trailing++;
    }
    const children = parseBlocks(body, depth + 1);
    if (children.some((c, k) => k > 0 && c.blankBefore)) list.loose = true;
    const item = { children, task: null };
    const head = children[0];
    const task = head?.type === "paragraph" && /^\[([ xX])\](?:[ \t]+|$)/.exec(head.text);
    if (task) {
      item.task = task[1] !== " ";
      head.text = head.text.slice(task[0].length);
    }
    list.items.push(item);
    sawBlankBetween = trailing > 0;
  }
  // Trailing blank lines belong after the list, not in it.
  let end = i;
  while (end > 0 && isBlank(lines[end - 1])) end--;
  done(end);
  return list;
}

// Follows the lines of a container to tell whether a fence is open at its
// end (lines after an open fence are code, never lazy paragraph text).
function fenceTracker() {
  let open = null;
  const track = (line) => {
    const m = FENCE.exec(line);
    if (!open && m && !(m[1][0] === "`" && m[2].includes("`"))) open = closingFence(m[1]);
    else if (open && open.test(line)) open = null;
  };
  track.open = () => open !== null;
  return track;
}

function closingFence(fence) {
  return new RegExp(`^ {0,3}${fence[0] === "`" ? "`" : "~"}{${fence.length},}[ \\t]*$`);
}

// ---- rendering blocks --------------------------------------------------

function el(tag, className) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  return node;
}

function renderBlock(block, tight = false) {
  switch (block.type) {
    case "paragraph": {
      if (tight) {
        const span = document.createDocumentFragment();
        renderInline(span, block.text);
        return span;
      }
      const p = el("p");
      renderInline(p, block.text);
      return p;
    }
    case "heading": {
      const h = el(`h${block.level}`);
      renderInline(h, block.text);
      return h;
    }
    case "hr":
      return el("hr");
    case "code":
      return renderCode(block);
    case "quote": {
      const q = el("blockquote");
      for (const child of block.children) q.append(renderBlock(child));
      return q;
    }
    case "list": {
      const list = el(block.ordered ? "ol" : "ul");
      if (block.ordered && block.number !== 1) list.start = block.number;
      for (const item of block.items) {
        const li = el("li");
        if (item.task !== null) {
          li.className = "md-task";
          const box = el("input");
          box.type = "checkbox";
          box.disabled = true;
          box.defaultChecked = item.task;
          li.append(box, document.createTextNode(" "));
        }
        for (const child of item.children) li.append(renderBlock(child, !block.loose));
        list.append(li);
      }
      return list;
    }
    case "table": {
      const wrap = el("div", "md-table");
      const table = el("table");
      const thead = el("thead");
      const row = el("tr");
      block.head.forEach((cell, c) => row.append(renderCell("th", cell, block.align[c])));
      thead.append(row);
      table.append(thead);
      if (block.rows.length) {
        const tbody = el("tbody");
        for (const cells of block.rows) {
          const tr = el("tr");
          cells.forEach((cell, c) => tr.append(renderCell("td", cell, block.align[c])));
          tbody.append(tr);
        }
        table.append(tbody);
      }
      wrap.append(table);
      return wrap;
    }
    default:
      return document.createTextNode("");
  }
}

function renderCell(tag, text, align) {
  const cell = el(tag, align ? `md-align-${align}` : "");
  renderInline(cell, text);
  return cell;
}

function renderCode(block) {
  const label = block.lang.replace(/[^\w+#.-]/g, "").slice(0, 32);
  const language = languageOf(label);
  const wrap = el("div", "md-code");
  wrap.dataset.testid = "code-block";
  const head = el("div", "md-code-head");
  const name = el("span", "md-code-lang");
  name.dataset.testid = "code-language";
  name.textContent = label || "text";
  const copy = el("button", "md-copy");
  copy.type = "button";
  copy.dataset.testid = "copy-code";
  copy.textContent = "Copy";
  copy.setAttribute("aria-label", label ? `Copy ${label} code` : "Copy code");
  const said = el("span", "md-copy-status");
  said.setAttribute("role", "status");
  said.setAttribute("aria-live", "polite");
  let timer = 0;
  copy.addEventListener("click", async () => {
    clearTimeout(timer);
    try {
      await navigator.clipboard.writeText(block.text);
      copy.textContent = "Copied";
      said.textContent = "Copied";
    } catch {
      copy.textContent = "Copy failed";
      said.textContent = "Copy failed";
    }
    timer = setTimeout(() => {
      copy.textContent = "Copy";
      said.textContent = "";
    }, COPIED_FOR_MS);
  });
  head.append(name, copy, said);
  const pre = el("pre");
  const code = el("code");
  if (language) {
    code.dataset.language = language;
    highlightInto(code, block.text, language);
  } else {
    code.textContent = block.text;
  }
  pre.append(code);
  wrap.append(head, pre);
  return wrap;
}

// ---- inlines -----------------------------------------------------------

const PUNCT = /[!-/:-@[-`{-~\p{P}\p{S}]/u;
const SPACE = /\s/u;
const ESCAPABLE = /[!-/:-@[-`{-~]/;
const NAMED = { amp: "&", lt: "<", gt: ">", quot: '"', apos: "'", nbsp: "\u00a0", copy: "©", hellip: "…", mdash: "—", ndash: "–" };
const ENTITY = /&(?:#(\d{1,7})|#[xX]([0-9a-fA-F]{1,6})|([A-Za-z][A-Za-z0-9]{1,31}));/y;

function entityAt(text, i) {
  ENTITY.lastIndex = i;
  const m = ENTITY.exec(text);
  if (!m) return null;
  let value;
  if (m[3]) value = Object.hasOwn(NAMED, m[3]) ? NAMED[m[3]] : null;
  else {
    const code = m[1] ? Number.parseInt(m[1], 10) : Number.parseInt(m[2], 16);
    value = code === 0 || code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff) ? "\uFFFD" : String.fromCodePoint(code);
  }
  return value === null ? null : { value, length: m[0].length };
}

function unescapeText(s) {
  let out = "";
  for (let i = 0; i < s.length; i++) {
    if (s[i] === "\\" && ESCAPABLE.test(s[i + 1] || "")) out += s[++i];
    else if (s[i] === "&") {
      const e = entityAt(s, i);
      if (e) {
        out += e.value;
        i += e.length - 1;
      } else out += "&";
    } else out += s[i];
  }
  return out;
}

/** The URL to link to, or null: only absolute http(s) and mailto URLs. */
export function safeHref(raw) {
  let url;
  try {
    url = new URL(raw);
  } catch {
    return null;
  }
  return SAFE_SCHEMES.has(url.protocol) ? url.href : null;
}

// Inline nodes form a doubly linked list while emphasis is resolved:
// { kind: "text" | "code" | "br" | "soft" | "el", ... , prev, next }.
class Inlines {
  constructor() {
    this.head = null;
    this.tail = null;
  }
  push(node) {
    node.prev = this.tail;
    node.next = null;
    if (this.tail) this.tail.next = node;
    else this.head = node;
    this.tail = node;
    return node;
  }
  remove(node) {
    if (node.prev) node.prev.next = node.next;
    else this.head = node.next;
    if (node.next) node.next.prev = node.prev;
    else this.tail = node.prev;
  }
  // Replaces the nodes strictly between `a` and `b` with `wrapper` holding them.
  wrapBetween(a, b, wrapper) {
    const kids = [];
    let depth = 0;
    for (let n = a.next; n && n !== b; n = n.next) {
      kids.push(n);
      depth = Math.max(depth, n.depth || 0);
    }
    if (depth + 1 > MAX_INLINE_DEPTH) return false;
    wrapper.kids = kids;
    wrapper.depth = depth + 1;
    wrapper.prev = a;
    wrapper.next = b;
    a.next = wrapper;
    b.prev = wrapper;
    return true;
  }
}

function flanking(text, start, end) {
  const before = start > 0 ? text[start - 1] : "\n";
  const after = end < text.length ? text[end] : "\n";
  const sb = SPACE.test(before);
  const sa = SPACE.test(after);
  const pb = PUNCT.test(before);
  const pa = PUNCT.test(after);
  const left = !sa && (!pa || sb || pb);
  const right = !sb && (!pb || sa || pa);
  return { left, right, pb, pa };
}

function backtickRuns(text) {
  const runs = new Map();
  const re = /`+/g;
  for (let m = re.exec(text); m; m = re.exec(text)) {
    const list = runs.get(m[0].length) || [];
    list.push(m.index);
    runs.set(m[0].length, list);
  }
  return runs;
}

const AUTOLINK = /<([A-Za-z][A-Za-z0-9+.-]{1,31}:[^<>\x00-\x20]*)>/y;
const EMAIL = /<([a-zA-Z0-9.!#$%&'*+/=?^_`{|}~-]+@[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)*)>/y;
const BARE = /(?:https?:\/\/|www\.)[^\s<]{0,2048}/iy;
const PLAIN = /[^\\`*_~[\]!<&\nhHwW]+/y;

function parseInline(text) {
  const out = new Inlines();
  let delims = null; // top of the emphasis delimiter stack (linked by prev/next)
  let brackets = null; // top of the bracket stack
  let runs = null;
  const runIndex = new Map();
  let buf = "";
  const flush = () => {
    if (buf) out.push({ kind: "text", text: buf });
    buf = "";
  };
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    if (c === "\\") {
      const n = text[i + 1];
      if (n === "\n") {
        flush();
        out.push({ kind: "br" });
        i += 2;
        while (text[i] === " " || text[i] === "\t") i++;
      } else if (n !== undefined && ESCAPABLE.test(n)) {
        buf += n;
        i += 2;
      } else {
        buf += c;
        i++;
      }
    } else if (c === "`") {
      let n = 1;
      while (text[i + n] === "`") n++;
      runs ||= backtickRuns(text);
      const list = runs.get(n) || [];
      let k = runIndex.get(n) || 0;
      while (k < list.length && list[k] <= i) k++;
      runIndex.set(n, k);
      if (k < list.length) {
        let code = text.slice(i + n, list[k]).replace(/\n/g, " ");
        if (code.length > 1 && code[0] === " " && code[code.length - 1] === " " && code.trim()) code = code.slice(1, -1);
        flush();
        out.push({ kind: "code", text: code });
        i = list[k] + n;
        runIndex.set(n, k + 1);
      } else {
        buf += "`".repeat(n);
        i += n;
      }
    } else if (c === "*" || c === "_" || c === "~") {
      let n = 1;
      while (text[i + n] === c) n++;
      const f = flanking(text, i, i + n);
      let canOpen = f.left;
      let canClose = f.right;
      if (c === "_") {
        canOpen = f.left && (!f.right || f.pb);
        canClose = f.right && (!f.left || f.pa);
      }
      flush();
      const node = out.push({ kind: "text", text: c.repeat(n) });
      if ((canOpen || canClose) && (c !== "~" || n <= 2)) {
        const d = { node, ch: c, n, orig: n, canOpen, canClose, prev: delims, next: null };
        if (delims) delims.next = d;
        delims = d;
      }
      i += n;
    } else if (c === "[" || (c === "!" && text[i + 1] === "[")) {
      flush();
      const image = c === "!";
      const node = out.push({ kind: "text", text: image ? "![" : "[" });
      brackets = { node, image, active: true, delims, prev: brackets };
      i += image ? 2 : 1;
    } else if (c === "]") {
      const opener = brackets;
      const link = opener && opener.active ? linkTail(text, i + 1) : null;
      if (!link) {
        if (opener) brackets = opener.prev;
        buf += "]";
        i++;
        continue;
      }
      flush();
      brackets = opener.prev;
      const closer = out.push({ kind: "text", text: "" });
      delims = processEmphasis(out, opener.delims, delims);
      const href = safeHref(link.dest);
      const wrapper = { kind: "el", tag: href ? "a" : "span", href, image: opener.image, dest: link.dest, title: link.title };
      if (out.wrapBetween(opener.node, closer, wrapper)) {
        out.remove(opener.node);
        out.remove(closer);
        // No links in links; openers below an inactive one are inactive already.
        if (!opener.image) for (let b = brackets; b && b.active; b = b.prev) b.active = false;
        i = link.end;
      } else {
        // Too deep: every opener below encloses this one, so none can link.
        out.remove(closer);
        brackets = null;
        buf += "]";
        i++;
      }
    } else if (c === "<") {
      AUTOLINK.lastIndex = i;
      EMAIL.lastIndex = i;
      let m = AUTOLINK.exec(text);
      let href = m && safeHref(m[1]);
      if (!m && (m = EMAIL.exec(text))) href = safeHref(`mailto:${m[1]}`);
      if (m) {
        flush();
        if (href) out.push({ kind: "el", tag: "a", href, kids: [{ kind: "text", text: m[1] }], depth: 1 });
        else buf += m[0];
        i += m[0].length;
      } else {
        buf += c;
        i++;
      }
    } else if (c === "&") {
      const e = entityAt(text, i);
      buf += e ? e.value : "&";
      i += e ? e.length : 1;
    } else if (c === "\n") {
      const hard = / {2,}$/.test(buf);
      buf = buf.replace(/[ \t]+$/, "");
      flush();
      out.push({ kind: hard ? "br" : "soft" });
      i++;
      while (text[i] === " " || text[i] === "\t") i++;
    } else if ((c === "h" || c === "H" || c === "w" || c === "W") && (i === 0 || /[\s*_~(]/.test(text[i - 1]))) {
      BARE.lastIndex = i;
      const m = BARE.exec(text);
      const url = m && trimAutolink(m[0]);
      const href = url && /[A-Za-z0-9]\.?[A-Za-z0-9-]*/.test(url.replace(/^(?:https?:\/\/|www\.)/i, ""))
        ? safeHref(/^www\./i.test(url) ? `http://${url}` : url) : null;
      if (href) {
        flush();
        out.push({ kind: "el", tag: "a", href, kids: [{ kind: "text", text: url }], depth: 1 });
        i += url.length;
      } else {
        buf += c;
        i++;
      }
    } else {
      PLAIN.lastIndex = i;
      const m = PLAIN.exec(text);
      if (m) {
        buf += m[0];
        i += m[0].length;
      } else {
        buf += c;
        i++;
      }
    }
  }
  flush();
  processEmphasis(out, null, delims);
  return out;
}

// GFM: trailing punctuation, unbalanced closing parentheses and a
// trailing entity are not part of a bare URL. One pass from the end.
function trimAutolink(url) {
  let open = 0;
  let close = 0;
  for (const ch of url) {
    if (ch === "(") open++;
    else if (ch === ")") close++;
  }
  let end = url.length;
  while (end > 0) {
    const ch = url[end - 1];
    if ("?!.,:*_~'\"".includes(ch)) end--;
    else if (ch === ")" && close > open) {
      close--;
      end--;
    } else if (ch === ";") {
      const m = /&[A-Za-z0-9]{1,32};$/.exec(url.slice(Math.max(0, end - 40), end));
      if (!m) break;
      end -= m[0].length;
    } else break;
  }
  return url.slice(0, end);
}

// `(destination "title")` right after a `]`, or null.
function linkTail(text, i) {
  if (text[i] !== "(") return null;
  let j = i + 1;
  const skip = () => {
    while (j < text.length && /[ \t\n]/.test(text[j])) j++;
  };
  skip();
  let dest = "";
  if (text[j] === "<") {
    const end = text.indexOf(">", j);
    const nl = text.indexOf("\n", j);
    if (end < 0 || (nl >= 0 && nl < end) || text.slice(j + 1, end).includes("<")) return null;
    dest = text.slice(j + 1, end);
    j = end + 1;
  } else {
    let depth = 0;
    const start = j;
    while (j < text.length) {
      const ch = text[j];
      if (ch === "\\" && ESCAPABLE.test(text[j + 1] || "")) j += 2;
      else if (ch === "(") {
        if (++depth > 32) return null;
        j++;
      } else if (ch === ")") {
        if (depth === 0) break;
        depth--;
        j++;
      } else if (/[\x00-\x20\x7f]/.test(ch)) break;
      else j++;
    }
    if (depth !== 0) return null;
    dest = text.slice(start, j);
  }
  const beforeTitle = j;
  skip();
  let title = "";
  const q = text[j];
  if ((q === '"' || q === "'" || q === "(") && j > beforeTitle) {
    const close = q === "(" ? ")" : q;
    let k = j + 1;
    while (k < text.length && text[k] !== close) k += text[k] === "\\" ? 2 : 1;
    if (k >= text.length) return null;
    title = unescapeText(text.slice(j + 1, k));
    j = k + 1;
    skip();
  }
  if (text[j] !== ")") return null;
  return { dest: unescapeText(dest), title, end: j + 1 };
}

// CommonMark's "process emphasis" over the delimiters above `bottom`;
// returns the new top of the stack (`bottom`). Linear: `openersBottom`
// remembers where a failed search for each kind of closer stopped.
function processEmphasis(out, bottom, top) {
  let first = top;
  while (first && first.prev !== bottom) first = first.prev;
  if (!top || top === bottom) return bottom;
  const openersBottom = new Map();
  const unlink = (d) => {
    if (d.prev) d.prev.next = d.next;
    if (d.next) d.next.prev = d.prev;
    if (d === top) top = d.prev;
  };
  let closer = first;
  while (closer) {
    if (!closer.canClose) {
      closer = closer.next;
      continue;
    }
    const key = closer.ch === "*" ? `*${closer.canOpen ? 1 : 0}${closer.orig % 3}` : closer.ch + (closer.ch === "~" ? closer.n : "");
    const floor = openersBottom.get(key) ?? bottom;
    let opener = closer.prev;
    let found = null;
    while (opener && opener !== bottom && opener !== floor) {
      if (opener.ch === closer.ch && opener.canOpen) {
        const odd = closer.ch !== "~" && (opener.canClose || closer.canOpen)
          && (opener.orig + closer.orig) % 3 === 0 && !(opener.orig % 3 === 0 && closer.orig % 3 === 0);
        if (closer.ch === "~" ? opener.n === closer.n : !odd) {
          found = opener;
          break;
        }
      }
      opener = opener.prev;
    }
    if (!found) {
      openersBottom.set(key, closer.prev);
      const next = closer.next;
      if (!closer.canOpen) unlink(closer);
      closer = next;
      continue;
    }
    const use = closer.ch === "~" ? closer.n : found.n >= 2 && closer.n >= 2 ? 2 : 1;
    const tag = closer.ch === "~" ? "del" : use === 2 ? "strong" : "em";
    if (!out.wrapBetween(found.node, closer.node, { kind: "el", tag })) {
      // Too deep: these delimiters stay text, and so do all below them,
      // since any pair around this one would be deeper still.
      const next = closer.next;
      for (let d = closer; d && d !== bottom;) {
        const below = d.prev;
        unlink(d);
        d = below;
      }
      closer = next;
      continue;
    }
    found.n -= use;
    closer.n -= use;
    found.node.text = found.node.text.slice(use);
    closer.node.text = closer.node.text.slice(use);
    // Delimiters between the pair can no longer match anything.
    for (let d = found.next; d && d !== closer; d = d.next) unlink(d);
    if (found.n === 0) {
      out.remove(found.node);
      unlink(found);
    }
    if (closer.n === 0) {
      out.remove(closer.node);
      const next = closer.next;
      unlink(closer);
      closer = next;
    }
  }
  // Everything above `bottom` is done with.
  if (bottom) bottom.next = null;
  return bottom;
}

function renderInline(parent, text) {
  const list = parseInline(text);
  const nodes = [];
  for (let n = list.head; n; n = n.next) nodes.push(n);
  appendInlines(parent, nodes);
}

function appendInlines(parent, nodes) {
  let buf = "";
  const flush = () => {
    if (buf) parent.append(document.createTextNode(buf));
    buf = "";
  };
  for (const n of nodes) {
    if (n.kind === "text") buf += n.text;
    else if (n.kind === "soft") buf += "\n";
    else {
      flush();
      parent.append(renderInlineNode(n));
    }
  }
  flush();
}

function renderInlineNode(n) {
  if (n.kind === "br") return el("br");
  if (n.kind === "code") {
    const code = el("code");
    code.textContent = n.text;
    return code;
  }
  if (n.tag === "a") {
    const a = el("a", n.image ? "md-image" : "");
    a.href = n.href;
    a.rel = "noopener noreferrer nofollow";
    a.target = "_blank";
    if (n.title) a.title = n.title;
    if (n.image) {
      a.textContent = plainText(n.kids) || n.href;
      a.setAttribute("aria-label", `Image (not loaded): ${a.textContent}`);
    } else appendInlines(a, n.kids);
    return a;
  }
  if (n.tag === "span") {
    // A link to somewhere pages may not go: its text and where it pointed.
    const span = el("span", "md-link-blocked");
    if (n.image) span.append(document.createTextNode(plainText(n.kids)));
    else appendInlines(span, n.kids);
    span.append(document.createTextNode(` (${n.dest})`));
    return span;
  }
  const e = el(n.tag);
  appendInlines(e, n.kids);
  return e;
}

function plainText(nodes) {
  let s = "";
  for (const n of nodes) {
    if (n.kind === "text" || n.kind === "code") s += n.text;
    else if (n.kind === "soft" || n.kind === "br") s += " ";
    else if (n.kids) s += plainText(n.kids);
  }
  return s;
}
