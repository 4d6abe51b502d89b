// Code highlighting for the chat page's fenced code blocks. A small
// regex tokenizer per language that only ever produces text nodes and
// <span class="tok-…"> elements: code (HTML and XML included) is never
// parsed as markup, so highlighting cannot add anything but colour.

const C_NUMBER = String.raw`\b(?:0[xX][0-9a-fA-F_]+|0[bB][01_]+|0[oO][0-7_]+|\d[\d_]*(?:\.\d[\d_]*)?(?:[eE][+-]?\d+)?)[A-Za-z0-9_]*`;
const DQ = String.raw`"(?:[^"\\\n]|\\.)*"?`;
const SQ = String.raw`'(?:[^'\\\n]|\\.)*'?`;
const LINE_SLASH = String.raw`\/\/.*`;
const BLOCK_SLASH = String.raw`\/\*[\s\S]*?(?:\*\/|$(?![\s\S]))`;
const HASH_COMMENT = String.raw`(?:^|(?<=\s))#.*`;
const WORD = String.raw`[A-Za-z_$][\w$]*`;
const PUNCT = String.raw`[{}()\[\];,.:?<>=+\-*/%&|^!~@]+`;

const words = (s) => new Set(s.split(/\s+/).filter(Boolean));

// One language: ordered [class, regex source] rules, and how bare words
// are classed. `null` as a class leaves the match as plain text.
function lang(rules, keywords = "", types = "", options = {}) {
  return { rules, keywords: words(keywords), types: words(types), ...options };
}

const C_LIKE = [["comment", LINE_SLASH], ["comment", BLOCK_SLASH]];

const JS_KEYWORDS = `async await break case catch class const continue debugger default delete do else
  export extends finally for from function if import in instanceof let new of return static super switch
  this throw try typeof var void while with yield true false null undefined as type interface enum
  implements private public protected readonly declare namespace abstract keyof satisfies`;
const JS_TYPES = `string number boolean any unknown never object symbol bigint Array Object String Number
  Boolean Promise Map Set Date Error JSON Math RegExp console window document globalThis`;

const LANGUAGES = {
  rust: lang(
    [
      ...C_LIKE,
      ["meta", String.raw`#!?\[[^\]\n]*\]?`],
      ["string", String.raw`b?r(#*)"[\s\S]*?(?:"\1|$(?![\s\S]))`],
      ["string", `b?${DQ}`],
      ["string", String.raw`b?'(?:[^'\\\n]|\\[^'\n]{1,8})'`],
      ["meta", String.raw`'[A-Za-z_]\w*`],
      ["number", C_NUMBER],
      ["type", String.raw`[A-Za-z_]\w*!`],
      ["word", WORD],
      ["punct", PUNCT],
    ],
    `as async await break const continue crate dyn else enum extern false fn for if impl in let loop match
     mod move mut pub ref return self static struct super trait true type unsafe use where while`,
    `i8 i16 i32 i64 i128 isize u8 u16 u32 u64 u128 usize f32 f64 bool char str Self Some None Ok Err`,
    { capitalTypes: true },
  ),
  javascript: lang(
    [
      ...C_LIKE,
      ["string", String.raw`\`(?:[^\`\\]|\\[\s\S])*\`?`],
      ["string", DQ],
      ["string", SQ],
      ["number", C_NUMBER],
      ["word", WORD],
      ["punct", PUNCT],
    ],
    JS_KEYWORDS,
    JS_TYPES,
    { capitalTypes: true },
  ),
  python: lang(
    [
      ["comment", "#.*"],
      ["string", String.raw`[rRbBuUfF]{0,2}(?:"""[\s\S]*?(?:"""|$(?![\s\S]))|'''[\s\S]*?(?:'''|$(?![\s\S])))`],
      ["string", `[rRbBuUfF]{0,2}(?:${DQ}|${SQ})`],
      ["meta", String.raw`@[\w.]+`],
      ["number", C_NUMBER],
      ["word", WORD],
      ["punct", PUNCT],
    ],
    `and as assert async await break class continue def del elif else except finally for from global if
     import in is lambda nonlocal not or pass raise return try while with yield True False None match case`,
    `int str float bool list dict set tuple bytes object type len range print open super isinstance
     Exception ValueError TypeError KeyError self cls`,
  ),
  bash: lang(
    [
      ["comment", HASH_COMMENT],
      ["string", String.raw`"(?:[^"\\]|\\[\s\S])*"?`],
      ["string", String.raw`'[^']*'?`],
      ["variable", String.raw`\$\{[^}\n]*\}?|\$[A-Za-z_]\w*|\$[@#?$!*0-9-]`],
      ["number", String.raw`\b\d+\b`],
      ["word", String.raw`[A-Za-z_][\w-]*`],
      ["punct", String.raw`[|&;<>()]+`],
    ],
    `if then else elif fi for while until do done case esac function in return export local readonly
     select time exit break continue declare set unset`,
    `echo cd ls cat grep sed awk find mkdir rm cp mv printf read test source eval exec cargo git sudo`,
  ),
  json: lang(
    [
      ["property", String.raw`"(?:[^"\\\n]|\\.)*"(?=\s*:)`],
      ["string", DQ],
      ["number", String.raw`-?\b\d+(?:\.\d+)?(?:[eE][+-]?\d+)?`],
      ["word", WORD],
      ["punct", String.raw`[{}\[\],:]`],
    ],
    "true false null",
  ),
  toml: lang(
    [
      ["comment", "#.*"],
      ["type", String.raw`^[ \t]*\[\[?[^\]\n]*\]?\]?`],
      ["string", String.raw`"""[\s\S]*?(?:"""|$(?![\s\S]))|'''[\s\S]*?(?:'''|$(?![\s\S]))`],
      ["string", `${DQ}|${SQ}`],
      ["property", String.raw`^[ \t]*[\w."'-]+(?=[ \t]*=)`],
      ["number", String.raw`[+-]?\b\d[\d_:.TZ+-]*\b`],
      ["word", WORD],
      ["punct", String.raw`[=\[\]{},]`],
    ],
    "true false inf nan",
  ),
  yaml: lang(
    [
      ["comment", HASH_COMMENT],
      ["meta", String.raw`^(?:---|\.\.\.)(?=\s|$)`],
      ["property", String.raw`(?<=^[ \t]*(?:-[ \t]+)?)[^\s#:'"\-][^:\n#]*?(?=[ \t]*:(?:[ \t]|$))`],
      ["string", `${DQ}|${SQ}`],
      ["meta", String.raw`[&*][\w-]+|![\w!-]+`],
      ["number", String.raw`[+-]?\b\d+(?:\.\d+)?\b`],
      ["word", WORD],
      ["punct", String.raw`[:\-\[\]{},|>]`],
    ],
    "true false null yes no on off True False Null",
  ),
  go: lang(
    [
      ...C_LIKE,
      ["string", "`[^`]*`?"],
      ["string", DQ],
      ["string", String.raw`'(?:[^'\\\n]|\\[^'\n]{1,8})'`],
      ["number", C_NUMBER],
      ["word", WORD],
      ["punct", PUNCT],
    ],
    `break case chan const continue default defer else fallthrough for func go goto if import interface
     map package range return select struct switch type var true false nil iota`,
    `bool byte complex64 complex128 error float32 float64 int int8 int16 int32 int64 rune string uint
     uint8 uint16 uint32 uint64 uintptr any append cap close copy delete len make new panic print println recover`,
  ),
  c: lang(
    [
      ...C_LIKE,
      ["meta", String.raw`^[ \t]*#[ \t]*\w+.*`],
      ["string", String.raw`(?:u8|[uUL])?R"([^(\s]*)\([\s\S]*?(?:\)\1"|$(?![\s\S]))`],
      ["string", `(?:u8|[uUL])?${DQ}`],
      ["string", String.raw`'(?:[^'\\\n]|\\[^'\n]{1,8})'`],
      ["number", C_NUMBER],
      ["word", WORD],
      ["punct", PUNCT],
    ],
    `auto break case catch class const constexpr continue default delete do else enum explicit extern
     false for friend goto if inline mutable namespace new noexcept nullptr operator private protected
     public return sizeof static struct switch template this throw true try typedef typename union using
     virtual volatile while NULL`,
    `void char short int long float double signed unsigned bool size_t ssize_t int8_t int16_t int32_t
     int64_t uint8_t uint16_t uint32_t uint64_t std string vector map unique_ptr shared_ptr FILE`,
  ),
  java: lang(
    [
      ...C_LIKE,
      ["string", String.raw`"""[\s\S]*?(?:"""|$(?![\s\S]))`],
      ["string", DQ],
      ["string", String.raw`'(?:[^'\\\n]|\\[^'\n]{1,8})'`],
      ["meta", String.raw`@\w+`],
      ["number", C_NUMBER],
      ["word", WORD],
      ["punct", PUNCT],
    ],
    `abstract assert break case catch class const continue default do else enum extends final finally
     for goto if implements import instanceof interface native new package private protected public
     record return static strictfp super switch synchronized this throw throws transient try var void
     volatile while yield true false null sealed permits`,
    "boolean byte char short int long float double",
    { capitalTypes: true },
  ),
  diff: lang([
    ["meta", String.raw`^(?:\+\+\+|---)(?: .*|$)`],
    ["meta", String.raw`^(?:diff |index |@@).*`],
    ["inserted", String.raw`^\+.*`],
    ["deleted", String.raw`^-.*`],
  ]),
  html: lang([
    ["comment", String.raw`<!--[\s\S]*?(?:-->|$(?![\s\S]))`],
    ["meta", String.raw`<![A-Za-z][^>]*>?|<\?[\s\S]*?(?:\?>|$(?![\s\S]))|<!\[CDATA\[[\s\S]*?(?:\]\]>|$(?![\s\S]))`],
    ["tag", String.raw`<\/?[A-Za-z][\w:.-]*|\/?>`],
    ["attr", String.raw`[A-Za-z_:][\w:.-]*(?==)`],
    ["string", String.raw`"[^"]*"?|'[^']*'?`],
    ["meta", String.raw`&(?:#\d+|#x[0-9a-fA-F]+|\w+);`],
  ]),
};

const ALIASES = {
  rs: "rust", js: "javascript", jsx: "javascript", mjs: "javascript", cjs: "javascript",
  ts: "javascript", tsx: "javascript", typescript: "javascript", node: "javascript",
  py: "python", python3: "python", sh: "bash", shell: "bash", zsh: "bash", console: "bash",
  shellsession: "bash", jsonc: "json", json5: "json", yml: "yaml", golang: "go", h: "c", cpp: "c",
  "c++": "c", cc: "c", cxx: "c", hpp: "c", patch: "diff", xml: "html", svg: "html", xhtml: "html",
  htm: "html",
};

/** The highlighter's name for a fence's language word, or null if it has none. */
export function languageOf(word) {
  const key = String(word || "").toLowerCase();
  if (Object.hasOwn(LANGUAGES, key)) return key;
  return Object.hasOwn(ALIASES, key) ? ALIASES[key] : null;
}

/** The languages `highlight` knows (canonical names). */
export const HIGHLIGHT_LANGUAGES = Object.freeze(Object.keys(LANGUAGES));

const compiled = new Map();

function compile(name) {
  let entry = compiled.get(name);
  if (!entry) {
    const spec = LANGUAGES[name];
    // Rules are written with their own group numbers (\1 is the rule's
    // first group); in the combined regex they follow earlier rules' groups.
    const groupOf = [];
    const parts = [];
    let group = 1;
    for (const [cls, re] of spec.rules) {
      const inner = new RegExp(`${re}|`).exec("").length - 1;
      groupOf.push([group, cls]);
      parts.push(`(${re.replace(/\\([1-9])/g, (_, n) => `\\${Number(n) + group}`)})`);
      group += 1 + inner;
    }
    entry = { spec, groupOf, regex: new RegExp(parts.join("|"), "gm") };
    compiled.set(name, entry);
  }
  return entry;
}

/**
 * Appends `code` to `parent` as text and `<span class="tok-…">` nodes for
 * language `name` (from `languageOf`). Returns false (and appends nothing)
 * for a language it does not know.
 */
export function highlightInto(parent, code, name) {
  if (!name || !Object.hasOwn(LANGUAGES, name)) return false;
  const { spec, groupOf, regex } = compile(name);
  regex.lastIndex = 0;
  let plain = "";
  let last = 0;
  const flush = () => {
    if (plain) parent.append(document.createTextNode(plain));
    plain = "";
  };
  for (let m = regex.exec(code); m; m = regex.exec(code)) {
    if (m[0] === "") {
      regex.lastIndex++;
      continue;
    }
    plain += code.slice(last, m.index);
    last = m.index + m[0].length;
    let cls = null;
    for (const [g, c] of groupOf) {
      if (m[g] !== undefined) {
        cls = c;
        break;
      }
    }
    if (cls === "word") cls = classifyWord(spec, m[0]);
    if (!cls) {
      plain += m[0];
      continue;
    }
    flush();
    const span = document.createElement("span");
    span.className = `tok-${cls}`;
    span.textContent = m[0];
    parent.append(span);
  }
  plain += code.slice(last);
  flush();
  return true;
}

function classifyWord(spec, word) {
  if (spec.keywords.has(word)) return "keyword";
  if (spec.types.has(word)) return "type";
  if (spec.capitalTypes && /^[A-Z][a-z0-9]\w*$/.test(word)) return "type";
  return null;
}
