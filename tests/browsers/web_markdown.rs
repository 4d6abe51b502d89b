//! The web page's markdown renderer and code highlighter
//! (src/gateway/web/{markdown,highlight}.js) in a real browser (Debian's
//! headless Chromium, tests/support/browser.rs): the page is served by a
//! real gateway, and each test imports `/markdown.js` into it and compares
//! whole rendered structures. Hostile model text must render inert, deep or
//! pathological input must stay bounded in time and depth, and streaming
//! re-renders must keep the DOM nodes of finished blocks.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use support::acp_client::Sandbox;
use support::browser::Browser;
use support::gateway::Gateway;
use support::mock_model::{MockModel, Reply};
use support::sse::anthropic_deltas;

struct Page {
    browser: Browser,
    _gateway: Gateway,
    _mock: MockModel,
    _sandbox: Sandbox,
}

/// A gateway and a browser on its page (not signed in: the module is all
/// these tests need).
async fn page() -> Page {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let gateway = Gateway::start(&sandbox, &mock).await;
    let browser = Browser::start(1100, 900).await;
    browser
        .client
        .goto(&format!("http://{}/", gateway.addr))
        .await
        .unwrap();
    Page {
        browser,
        _gateway: gateway,
        _mock: mock,
        _sandbox: sandbox,
    }
}

/// Runs `body` (an async function body that may `return` a value) in the
/// page with `m` = the markdown module, `h` = the highlighter module and
/// `render(text)` = a fresh container, attached to the document, holding
/// `text` rendered. `arg` is available as `arg`.
async fn run(browser: &Browser, body: &str, arg: Value) -> Value {
    let script = format!(
        "const done = arguments[arguments.length - 1]; const arg = arguments[0];
         (async () => {{
           const m = await import('/markdown.js');
           const h = await import('/highlight.js');
           const render = (text) => {{
             const d = document.createElement('div');
             document.body.append(d);
             m.renderMarkdown(d, text);
             return d;
           }};
           {body}
         }})().then(done, (e) => done({{ error: String(e && e.stack || e) }}));"
    );
    let value = browser
        .client
        .execute_async(&script, vec![arg])
        .await
        .unwrap();
    if let Some(error) = value.get("error") {
        panic!("the page's script failed: {error}");
    }
    value
}

/// The markup of a code block: `label` shown, `lang` the highlighter's
/// language (None: not highlighted), `code` the inner markup of <code>.
fn code_block(label: &str, lang: Option<&str>, code: &str) -> String {
    let aria = if label == "text" {
        "Copy code".to_string()
    } else {
        format!("Copy {label} code")
    };
    let data = lang
        .map(|l| format!(" data-language=\"{l}\""))
        .unwrap_or_default();
    format!(
        "<div class=\"md-code\" data-testid=\"code-block\"><div class=\"md-code-head\">\
         <span class=\"md-code-lang\" data-testid=\"code-language\">{label}</span>\
         <button class=\"md-copy\" type=\"button\" data-testid=\"copy-code\" aria-label=\"{aria}\">Copy</button>\
         <span class=\"md-copy-status\" role=\"status\" aria-live=\"polite\"></span></div>\
         <pre><code{data}>{code}</code></pre></div>"
    )
}

const A: &str = "rel=\"noopener noreferrer nofollow\" target=\"_blank\"";

fn link(href: &str, text: &str) -> String {
    format!("<a href=\"{href}\" {A}>{text}</a>")
}

#[tokio::test]
async fn every_construct_renders_to_the_expected_structure() {
    let page = page().await;
    let cases: Vec<(&str, String)> = vec![
        // Headings, paragraphs, soft and hard breaks.
        ("# One\n## Two ##\n###### Six", "<h1>One</h1><h2>Two</h2><h6>Six</h6>".into()),
        ("Title\n=====\n\nSub\n---", "<h1>Title</h1><h2>Sub</h2>".into()),
        ("#no space", "<p>#no space</p>".into()),
        // Mid-stream, "text\n-" is a list on its way, not a heading.
        ("Steps:\n-", "<p>Steps:\n-</p>".into()),
        ("one\ntwo\n\nthree", "<p>one\ntwo</p><p>three</p>".into()),
        ("hard  \nbreak\\\nagain", "<p>hard<br>break<br>again</p>".into()),
        // Emphasis, strong, strikethrough, inline code.
        (
            "*em* _em_ **strong** __strong__ ***both*** ~~del~~",
            "<p><em>em</em> <em>em</em> <strong>strong</strong> <strong>strong</strong> \
             <em><strong>both</strong></em> <del>del</del></p>"
                .into(),
        ),
        ("snake_case_word and 2*3*4", "<p>snake_case_word and 2<em>3</em>4</p>".into()),
        (
            "`code` ``a ` b`` `` `x` ``",
            "<p><code>code</code> <code>a ` b</code> <code>`x`</code></p>".into(),
        ),
        ("`<b>` stays", "<p><code>&lt;b&gt;</code> stays</p>".into()),
        ("**unclosed and `unclosed", "<p>**unclosed and `unclosed</p>".into()),
        // Backslash escapes and entities.
        (
            "\\*not em\\* \\# \\[x\\] \\\\ &amp; &lt;b&gt; &#65; &#x42; &bogus;",
            "<p>*not em* # [x] \\ &amp; &lt;b&gt; A B &amp;bogus;</p>".into(),
        ),
        // Links and autolinks.
        (
            "[site](https://example.com/a?b=1 \"T\") [mail](mailto:a@b.c) [plain](http://x.y)",
            format!(
                "<p><a href=\"https://example.com/a?b=1\" {A} title=\"T\">site</a> {} {}</p>",
                link("mailto:a@b.c", "mail"),
                link("http://x.y/", "plain")
            ),
        ),
        (
            "<https://a.b/c> <me@example.com> see https://x.y/p. or www.z.org!",
            format!(
                "<p>{} {} see {}. or {}!</p>",
                link("https://a.b/c", "https://a.b/c"),
                link("mailto:me@example.com", "me@example.com"),
                link("https://x.y/p", "https://x.y/p"),
                link("http://www.z.org/", "www.z.org")
            ),
        ),
        (
            "[**bold** link](https://e.com)",
            format!(
                "<p><a href=\"https://e.com/\" {A}><strong>bold</strong> link</a></p>"
            ),
        ),
        (
            "[rel](docs/x.md) [n]",
            "<p><span class=\"md-link-blocked\">rel (docs/x.md)</span> [n]</p>".into(),
        ),
        // Images are links labelled with their alt text, never loaded.
        (
            "![a cat](https://img.example/cat.png)",
            format!(
                "<p><a class=\"md-image\" href=\"https://img.example/cat.png\" {A} \
                 aria-label=\"Image (not loaded): a cat\">a cat</a></p>"
            ),
        ),
        // Raw HTML is text.
        (
            "<div>hi</div>\n\na <b>b</b>",
            "<p>&lt;div&gt;hi&lt;/div&gt;</p><p>a &lt;b&gt;b&lt;/b&gt;</p>".into(),
        ),
        // Thematic breaks.
        ("a\n\n***\n- - -\n___", "<p>a</p><hr><hr><hr>".into()),
        // Block quotes, nested, with lazy continuation.
        (
            "> quote\nlazy\n> > nested\n\n> # h",
            "<blockquote><p>quote\nlazy</p><blockquote><p>nested</p></blockquote></blockquote>\
             <blockquote><h1>h</h1></blockquote>"
                .into(),
        ),
        // Lists: tight, loose, nested, ordered with a start, tasks.
        (
            "- a\n- b\n  - c\n    1. d",
            "<ul><li>a</li><li>b<ul><li>c<ol><li>d</li></ol></li></ul></li></ul>".into(),
        ),
        (
            "1. one\n\n2. two\n\n   more",
            "<ol><li><p>one</p></li><li><p>two</p><p>more</p></li></ol>".into(),
        ),
        ("3) three\n4) four", "<ol start=\"3\"><li>three</li><li>four</li></ol>".into()),
        (
            "- [ ] todo\n- [x] done",
            "<ul><li class=\"md-task\"><input type=\"checkbox\" disabled=\"\"> todo</li>\
             <li class=\"md-task\"><input type=\"checkbox\" disabled=\"\" checked=\"\"> done</li></ul>"
                .into(),
        ),
        ("* a\n+ b", "<ul><li>a</li></ul><ul><li>b</li></ul>".into()),
        // Tables with alignment, escaped pipes, inline content.
        (
            "| a | b | c | d |\n|---|:--|:-:|--:|\n| *1* | `x\\|y` | 3 |\n| 4 | 5 | 6 | 7 | 8 |",
            "<div class=\"md-table\"><table><thead><tr><th>a</th><th class=\"md-align-left\">b</th>\
             <th class=\"md-align-center\">c</th><th class=\"md-align-right\">d</th></tr></thead>\
             <tbody><tr><td><em>1</em></td><td class=\"md-align-left\"><code>x|y</code></td>\
             <td class=\"md-align-center\">3</td><td class=\"md-align-right\"></td></tr>\
             <tr><td>4</td><td class=\"md-align-left\">5</td><td class=\"md-align-center\">6</td>\
             <td class=\"md-align-right\">7</td></tr></tbody></table></div>"
                .into(),
        ),
        ("| a | b |\n|---|", "<p>| a | b |\n|---|</p>".into()),
        // Code: fenced (``` and ~~~, info string), indented, unclosed.
        (
            "```\nplain <b>\n```",
            code_block("text", None, "plain &lt;b&gt;"),
        ),
        (
            "~~~python title=x\nx = 1\n~~~",
            code_block(
                "python",
                Some("python"),
                "x <span class=\"tok-punct\">=</span> <span class=\"tok-number\">1</span>",
            ),
        ),
        (
            "````md\n```\ninner\n```\n````",
            code_block("md", None, "```\ninner\n```"),
        ),
        ("    indented\n      more", code_block("text", None, "indented\n  more")),
        (
            "text\n```js\nlet s = \"so far",
            format!(
                "<p>text</p>{}",
                code_block(
                    "js",
                    Some("javascript"),
                    "<span class=\"tok-keyword\">let</span> s <span class=\"tok-punct\">=</span> \
                     <span class=\"tok-string\">\"so far</span>"
                )
            ),
        ),
        (
            "- item\n  ```sh\n  echo hi\n  ```",
            format!(
                "<ul><li>item{}</li></ul>",
                code_block(
                    "sh",
                    Some("bash"),
                    "<span class=\"tok-type\">echo</span> hi"
                )
            ),
        ),
    ];
    let inputs: Vec<&str> = cases.iter().map(|(i, _)| *i).collect();
    let actual = run(
        &page.browser,
        "return arg.map((text) => render(text).innerHTML);",
        json!(inputs),
    )
    .await;
    let actual: Vec<(&str, String)> = inputs
        .iter()
        .zip(actual.as_array().unwrap())
        .map(|(i, a)| (*i, a.as_str().unwrap().to_string()))
        .collect();
    let expected: Vec<(&str, String)> = cases.iter().map(|(i, e)| (*i, e.clone())).collect();
    assert_eq!(actual, expected);
}

/// Checks, in the page, that nothing under `root` can run or load anything.
const INERT: &str = "const inert = (root) => {
  const bad = [];
  for (const e of root.querySelectorAll('*')) {
    for (const a of e.attributes) {
      if (/^on/i.test(a.name) || a.name === 'style' || a.name === 'src' || a.name === 'srcdoc') bad.push(`${e.tagName} ${a.name}`);
    }
  }
  for (const e of root.querySelectorAll('script, iframe, img, svg, object, embed, style, link, meta, form, video, audio, math, base')) bad.push(e.tagName);
  for (const a of root.querySelectorAll('[href]')) {
    if (a.tagName !== 'A' || !/^(https?:|mailto:)/.test(a.getAttribute('href'))) bad.push(`href ${a.getAttribute('href')}`);
  }
  return bad;
};";

#[tokio::test]
async fn hostile_model_text_renders_inert_and_runs_nothing() {
    let page = page().await;
    let payloads = [
        "<script>window.__pwned1 = 1</script>",
        "<img src=x onerror=\"window.__pwned2 = 1\">",
        "[x](javascript:window.__pwned3=1)",
        "[x](JaVaScRiPt:window.__pwned4=1)",
        "[x](java&#09;script:window.__pwned5=1) [y](&#106;avascript:window.__pwned5=1)",
        "[x]( javascript:window.__pwned6=1 ) [y](<java\u{1}script:window.__pwned6=1>)",
        "[x](data:text/html,<script>window.__pwned7=1</script>) [y](vbscript:msgbox)",
        "<a href=\"javascript:window.__pwned8=1\">click</a>",
        "![x](http://127.0.0.1:9/pixel?__pwned9)",
        "<svg onload=\"window.__pwned10=1\"><circle/></svg>",
        "<iframe src=\"javascript:parent.__pwned11=1\"></iframe>",
        "<javascript:window.__pwned12=1> <data:text/html,x>",
        "```html\n<script>window.__pwned13=1</script><img src=x onerror=window.__pwned13=1>\n```",
        "<style>body{display:none}</style><object data=x></object><embed src=x>",
        "| <img src=x onerror=window.__pwned15=1> |\n|---|\n| <script>window.__pwned15=1</script> |",
        "- [x](javascript:window.__pwned16=1)\n> ![y](javascript:window.__pwned16=1)",
    ];
    let result = run(
        &page.browser,
        &format!(
            "{INERT}
             const out = [];
             for (const text of arg) {{
               const d = render(text);
               out.push({{ bad: inert(d), shown: d.textContent.trim().length > 0 }});
             }}
             // An <img src=x> of the test's own errors after any a payload
             // could have made; once it has, their handlers would have run.
             await new Promise((resolve) => {{
               const probe = document.createElement('img');
               probe.addEventListener('error', resolve);
               probe.src = '/__probe_' + Math.random();
               document.body.append(probe);
             }});
             await new Promise((resolve) => requestAnimationFrame(() => setTimeout(resolve)));
             const flags = Object.keys(window).filter((k) => k.startsWith('__pwned'));
             return {{ out, flags, links: [...document.querySelectorAll('a[href]')].map((a) => a.href) }};"
        ),
        json!(payloads),
    )
    .await;
    let clean: Vec<Value> = payloads
        .iter()
        .map(|_| json!({"bad": [], "shown": true}))
        .collect();
    assert_eq!(result["out"], json!(clean), "{result:#}");
    assert_eq!(result["flags"], json!([]));
    // The one safe link among them is the image's, as a link.
    assert_eq!(
        result["links"],
        json!(["http://127.0.0.1:9/pixel?__pwned9"])
    );

    // And the javascript: variants are text, shown with where they pointed.
    let shown = run(
        &page.browser,
        "return arg.map((t) => render(t).innerHTML);",
        json!(["[x](JaVaScRiPt:alert(1))", "<img src=x onerror=alert(1)>"]),
    )
    .await;
    assert_eq!(
        shown,
        json!([
            "<p><span class=\"md-link-blocked\">x (JaVaScRiPt:alert(1))</span></p>",
            "<p>&lt;img src=x onerror=alert(1)&gt;</p>"
        ])
    );
}

#[tokio::test]
async fn deep_nesting_and_pathological_input_stay_bounded() {
    let page = page().await;
    let result = run(
        &page.browser,
        "const depth = (root) => {
           let max = 0;
           const walk = (e, d) => { max = Math.max(max, d); for (const c of e.children) walk(c, d + 1); };
           walk(root, 0);
           return max;
         };
         const cases = {
           emphasis: '*a**'.repeat(25000),
           strong_runs: '**a '.repeat(12500) + 'b**'.repeat(12500),
           stars: '*'.repeat(100000) + 'a',
           underscores: 'a_'.repeat(50000),
           brackets: '['.repeat(50000) + 'a' + '](https://x)'.repeat(5000),
           images: '!['.repeat(30000) + 'a' + '](https://x)'.repeat(5000),
           backticks: '`a``'.repeat(25000),
           quotes: '>'.repeat(100000) + ' deep',
           lists: Array.from({ length: 1000 }, (_, i) => ' '.repeat(i * 2) + '- x').join('\\n'),
           list_markers: '- '.repeat(50000) + 'x',
           url: 'http://' + 'a('.repeat(50000),
           lt: '<'.repeat(100000),
         };
         const out = {};
         for (const [name, text] of Object.entries(cases)) {
           const t0 = performance.now();
           const d = render(text);
           const ms = performance.now() - t0;
           out[name] = { kb: Math.round(text.length / 1024), ms: Math.round(ms), depth: depth(d) };
           d.remove();
         }
         return out;",
        json!(null),
    )
    .await;
    eprintln!("pathological inputs: {result:#}");
    for (name, case) in result.as_object().unwrap() {
        let ms = case["ms"].as_u64().unwrap();
        let depth = case["depth"].as_u64().unwrap();
        // Each takes well under a second here even on a loaded machine; a
        // quadratic step on 100 KB takes minutes (measured while fixing
        // one), so this bound leaves room for load without hiding that.
        assert!(ms < 5_000, "{name} took {ms} ms: {result:#}");
        // 16 block levels of two elements each, 16 inline levels, and a
        // few for the code block and table wrappers.
        assert!(depth <= 60, "{name} nests {depth} deep: {result:#}");
    }
}

/// A reply with every kind of block, repeated to `size` characters.
const SAMPLE_UNIT: &str = "## Section {i}\n\nSome *text* with **bold**, `code` and a [link](https://example.com/{i}).\nA second line.\n\n- item one\n- [x] item two\n  - nested\n\n```rust\nfn f{i}(x: u32) -> u32 {\n    x + {i} // done\n}\n```\n\n| a | b |\n|---|--:|\n| 1 | 2 |\n\n> quoted\n\n";

#[tokio::test]
async fn streaming_reuses_finished_blocks_and_stays_cheap() {
    let page = page().await;
    let mut full = String::new();
    let mut i = 0;
    while full.len() < 200_000 {
        full.push_str(&SAMPLE_UNIT.replace("{i}", &i.to_string()));
        i += 1;
    }
    full.truncate(200_000);
    let result = run(
        &page.browser,
        "const full = arg; const deltas = 2000; const step = Math.ceil(full.length / deltas);
         const d = document.createElement('div');
         document.body.append(d);
         let total = 0, worst = 0, kept = null, button = null;
         for (let k = 1; k <= deltas; k++) {
           const t0 = performance.now();
           m.renderMarkdown(d, full.slice(0, Math.min(full.length, k * step)));
           const ms = performance.now() - t0;
           total += ms; worst = Math.max(worst, ms);
           if (k === 100) {
             // Hold on to the first blocks, select text in the first, focus
             // the first copy button: later deltas must not disturb them.
             kept = [...d.children].slice(0, 10);
             button = d.querySelector('[data-testid=copy-code]');
             button.focus();
             const range = document.createRange();
             range.selectNodeContents(d.querySelector('p'));
             getSelection().removeAllRanges();
             getSelection().addRange(range);
           }
         }
         const fresh = document.createElement('div');
         m.renderMarkdown(fresh, full);
         // Random cut points give the same result as one render.
         let mismatches = 0;
         for (let trial = 0; trial < 40; trial++) {
           const text = full.slice(0, 2000 + trial * 97);
           const a = document.createElement('div');
           for (let pos = 0; pos < text.length;) {
             pos = Math.min(text.length, pos + 1 + ((pos * 7919 + trial) % 37));
             m.renderMarkdown(a, text.slice(0, pos));
           }
           const b = document.createElement('div');
           m.renderMarkdown(b, text);
           if (a.innerHTML !== b.innerHTML) mismatches++;
         }
         return {
           total_ms: Math.round(total), worst_ms: Math.round(worst), blocks: d.children.length,
           same_as_fresh: d.innerHTML === fresh.innerHTML,
           kept_nodes: kept.every((node, i) => d.children[i] === node),
           selection: getSelection().rangeCount === 1 && getSelection().getRangeAt(0).toString() === kept[1].textContent
             && getSelection().anchorNode.isConnected,
           focus: document.activeElement === button && button.isConnected,
           mismatches,
         };",
        json!(full),
    )
    .await;
    eprintln!("streaming 200 KB in 2000 deltas: {result:#}");
    assert_eq!(
        (
            &result["same_as_fresh"],
            &result["kept_nodes"],
            &result["selection"],
            &result["focus"],
            &result["mismatches"]
        ),
        (
            &json!(true),
            &json!(true),
            &json!(true),
            &json!(true),
            &json!(0)
        ),
        "{result:#}"
    );
    let total = result["total_ms"].as_u64().unwrap();
    assert!(
        total < 8_000,
        "2000 deltas of a 200 KB reply took {total} ms"
    );
}

#[tokio::test]
async fn code_is_highlighted_per_language_and_never_parsed_as_markup() {
    let page = page().await;
    let cases = [
        (
            "rust",
            "fn main() { let s: String = \"x\"; } // c\n#[derive(Debug)]",
        ),
        ("ts", "const x: number = 1; // c\nclass Foo extends Bar {}"),
        ("python", "def f(x):\n    return 'a'  # c\n@dec"),
        ("bash", "echo \"$HOME\" | grep x # c"),
        ("json", "{\"k\": [1, true, null, \"s\"]}"),
        ("toml", "[package]\nname = \"x\" # c\nv = 1"),
        ("yaml", "key: value # c\nlist:\n  - 1"),
        ("go", "func main() { var s string = `raw` }"),
        ("cpp", "#include <stdio.h>\nint main() { return 0; }"),
        ("java", "@Override public void f() { String s = \"x\"; }"),
        ("diff", "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-old\n+new\n ctx"),
        ("html", "<a href=\"x\" onclick=\"y\">t</a><!-- c -->"),
        ("", "fn main() {}"),
        ("klingon", "fn main() {}"),
    ];
    let inputs: Vec<String> = cases
        .iter()
        .map(|(lang, code)| format!("```{lang}\n{code}\n```"))
        .collect();
    let result = run(
        &page.browser,
        "return arg.map((t) => { const c = render(t).querySelector('code'); return [c.dataset.language || '', c.innerHTML, c.querySelectorAll(':not(span)').length]; });",
        json!(inputs),
    )
    .await;
    let s = |class: &str, text: &str| format!("<span class=\"tok-{class}\">{text}</span>");
    let p = |text: &str| s("punct", text);
    let expected = json!([
        [
            "rust",
            format!(
                "{} main{} {} {} s{} {} {} {}{} {} {}\n{}",
                s("keyword", "fn"),
                p("()"),
                p("{"),
                s("keyword", "let"),
                p(":"),
                s("type", "String"),
                p("="),
                s("string", "\"x\""),
                p(";"),
                p("}"),
                s("comment", "// c"),
                s("meta", "#[derive(Debug)]")
            )
        ],
        [
            "javascript",
            format!(
                "{} x{} {} {} {}{} {}\n{} {} {} {} {}",
                s("keyword", "const"),
                p(":"),
                s("type", "number"),
                p("="),
                s("number", "1"),
                p(";"),
                s("comment", "// c"),
                s("keyword", "class"),
                s("type", "Foo"),
                s("keyword", "extends"),
                s("type", "Bar"),
                p("{}")
            )
        ],
        [
            "python",
            format!(
                "{} f{}x{}\n    {} {}  {}\n{}",
                s("keyword", "def"),
                p("("),
                p("):"),
                s("keyword", "return"),
                s("string", "'a'"),
                s("comment", "# c"),
                s("meta", "@dec")
            )
        ],
        [
            "bash",
            format!(
                "{} {} {} {} x {}",
                s("type", "echo"),
                s("string", "\"$HOME\""),
                s("punct", "|"),
                s("type", "grep"),
                s("comment", "# c")
            )
        ],
        [
            "json",
            format!(
                "{}{}{} {}{}{} {}{} {}{} {}{}{}",
                p("{"),
                s("property", "\"k\""),
                p(":"),
                p("["),
                s("number", "1"),
                p(","),
                s("keyword", "true"),
                p(","),
                s("keyword", "null"),
                p(","),
                s("string", "\"s\""),
                p("]"),
                p("}")
            )
        ],
        [
            "toml",
            format!(
                "{}\n{} {} {} {}\n{} {} {}",
                s("type", "[package]"),
                s("property", "name"),
                p("="),
                s("string", "\"x\""),
                s("comment", "# c"),
                s("property", "v"),
                p("="),
                s("number", "1")
            )
        ],
        [
            "yaml",
            format!(
                "{}{} value {}\n{}{}\n  {} {}",
                s("property", "key"),
                p(":"),
                s("comment", "# c"),
                s("property", "list"),
                p(":"),
                p("-"),
                s("number", "1")
            )
        ],
        [
            "go",
            format!(
                "{} main{} {} {} s {} {} {} {}",
                s("keyword", "func"),
                p("()"),
                p("{"),
                s("keyword", "var"),
                s("type", "string"),
                p("="),
                s("string", "`raw`"),
                p("}")
            )
        ],
        [
            "c",
            format!(
                "{}\n{} main{} {} {} {}{} {}",
                s("meta", "#include &lt;stdio.h&gt;"),
                s("type", "int"),
                p("()"),
                p("{"),
                s("keyword", "return"),
                s("number", "0"),
                p(";"),
                p("}")
            )
        ],
        [
            "java",
            format!(
                "{} {} {} f{} {} {} s {} {}{} {}",
                s("meta", "@Override"),
                s("keyword", "public"),
                s("keyword", "void"),
                p("()"),
                p("{"),
                s("type", "String"),
                p("="),
                s("string", "\"x\""),
                p(";"),
                p("}")
            )
        ],
        [
            "diff",
            format!(
                "{}\n{}\n{}\n{}\n{}\n ctx",
                s("meta", "--- a/x"),
                s("meta", "+++ b/x"),
                s("meta", "@@ -1 +1 @@"),
                s("deleted", "-old"),
                s("inserted", "+new")
            )
        ],
        [
            "html",
            ([
                s("tag", "&lt;a"),
                " ".into(),
                s("attr", "href"),
                "=".into(),
                s("string", "\"x\""),
                " ".into(),
                s("attr", "onclick"),
                "=".into(),
                s("string", "\"y\""),
                s("tag", "&gt;"),
                "t".into(),
                s("tag", "&lt;/a"),
                s("tag", "&gt;"),
                s("comment", "&lt;!-- c --&gt;")
            ]
            .concat())
        ],
        ["", "fn main() {}"],
        ["", "fn main() {}"],
    ]);
    let actual: Vec<Value> = result
        .as_array()
        .unwrap()
        .iter()
        .map(|r| json!([r[0], r[1]]))
        .collect();
    assert_eq!(Value::Array(actual), expected);
    // Only spans and text inside any code block.
    for r in result.as_array().unwrap() {
        assert_eq!(r[2], json!(0), "{r}");
    }
}

#[tokio::test]
async fn the_copy_button_copies_the_code_by_mouse_and_keyboard_and_says_copied() {
    let page = page().await;
    let code = "let x = \"<b>\";\n  println!(\"{x}\");";
    run(
        &page.browser,
        "window.__copied = [];
         navigator.clipboard.writeText = async (text) => { window.__copied.push(text); };
         const d = render(arg);
         d.id = 'sample';
         return null;",
        json!(format!("Text\n\n```rust\n{code}\n```\n\n```\nsecond\n```")),
    )
    .await;
    let buttons = page
        .browser
        .client
        .find_all("#sample [data-testid=copy-code]")
        .await
        .unwrap();
    assert_eq!(buttons.len(), 2);
    buttons[0].click().await.unwrap();
    page.browser
        .until(
            "the first button saying Copied",
            "const b = document.querySelectorAll('#sample [data-testid=copy-code]')[0]; \
             return b.textContent === 'Copied' && b.nextElementSibling.textContent === 'Copied';",
        )
        .await;
    // Keyboard: the second button takes focus and Enter presses it.
    buttons[1].send_keys("\u{E007}").await.unwrap();
    page.browser
        .until(
            "the second button saying Copied",
            "return document.querySelectorAll('#sample [data-testid=copy-code]')[1].textContent === 'Copied';",
        )
        .await;
    let state = page
        .browser
        .client
        .execute(
            "const b = [...document.querySelectorAll('#sample [data-testid=copy-code]')];
             return [window.__copied, b.map((x) => [x.tagName, x.type, x.getAttribute('aria-label')]),
                     [...document.querySelectorAll('#sample [data-testid=code-language]')].map((x) => x.textContent),
                     b[1] === document.activeElement];",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(
        state,
        json!([
            [code, "second"],
            [
                ["BUTTON", "button", "Copy rust code"],
                ["BUTTON", "button", "Copy code"]
            ],
            ["rust", "text"],
            true
        ])
    );
    page.browser
        .until(
            "the button back to Copy",
            "const b = document.querySelectorAll('#sample [data-testid=copy-code]')[0]; \
             return b.textContent === 'Copy' && b.nextElementSibling.textContent === '';",
        )
        .await;
}

/// Makes the page's dark-scheme rules apply (Chromium here has no dark
/// theme to emulate): every `prefers-color-scheme: dark` media rule of the
/// page's own stylesheets becomes unconditional.
const FORCE_DARK: &str = "for (const sheet of document.styleSheets) {
  for (const rule of sheet.cssRules) {
    if (rule.media && /prefers-color-scheme:\\s*dark/.test(rule.media.mediaText)) rule.media.mediaText = 'all';
  }
}";

const CONTRAST: &str = "const lum = (c) => {
  const [r, g, b] = c.match(/\\d+(\\.\\d+)?/g).slice(0, 3).map(Number).map((v) => v / 255)
    .map((v) => (v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4));
  return 0.2126 * r + 0.7152 * g + 0.0722 * b;
};
const ratio = (a, b) => { const [x, y] = [lum(a), lum(b)].sort((p, q) => q - p); return (x + 0.05) / (y + 0.05); };
const contrasts = () => {
  const d = render('```rust\\nx\\n```');
  const code = d.querySelector('code');
  const out = {};
  for (const t of ['keyword', 'string', 'comment', 'number', 'type', 'punct', 'meta', 'property', 'variable', 'tag', 'attr', 'inserted', 'deleted']) {
    const span = document.createElement('span');
    span.className = 'tok-' + t;
    span.textContent = 'x';
    code.append(span);
    const style = getComputedStyle(span);
    const own = style.backgroundColor;
    const bg = own !== 'rgba(0, 0, 0, 0)' ? own : getComputedStyle(d.querySelector('pre')).backgroundColor;
    out[t] = Math.round(ratio(style.color, bg) * 100) / 100;
  }
  d.remove();
  return out;
};";

#[tokio::test]
async fn token_colours_have_aa_contrast_in_light_and_dark() {
    let page = page().await;
    let result = run(
        &page.browser,
        &format!(
            "{CONTRAST}
             const light = contrasts();
             {FORCE_DARK}
             const dark = contrasts();
             return {{ light, dark }};"
        ),
        json!(null),
    )
    .await;
    eprintln!("contrast against the code background: {result:#}");
    for scheme in ["light", "dark"] {
        let ratios = result[scheme].as_object().unwrap();
        assert_eq!(ratios.len(), 13);
        for (token, r) in ratios {
            assert!(
                r.as_f64().unwrap() >= 4.5,
                "tok-{token} in {scheme}: {r}:1 is below WCAG AA's 4.5:1"
            );
        }
    }
    // The two schemes differ (the dark rules applied).
    assert_ne!(result["light"], result["dark"]);
}

const SAMPLE_REPLY: &str = "## Plan\n\nI'll change **two** things in `src/lib.rs` (see [the docs](https://example.com/docs)):\n\n1. Make the parser *stream*\n2. Keep ~~old~~ finished blocks\n\n- [x] tokenizer\n- [ ] tests\n\n```rust\n/// Adds one.\nfn add_one(x: u32) -> u32 {\n    x + 1 // never overflows here\n}\n```\n\n```diff\n-let a = 1;\n+let a = 2;\n```\n\n| lang | highlighted |\n|:--|:-:|\n| rust | yes |\n| text | no |\n\n> Raw <script>alert(1)</script> stays text.\n";

#[tokio::test]
async fn a_streamed_sample_reply_renders_in_the_chat_light_and_dark() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let gateway = Gateway::start(&sandbox, &mock).await;
    let parts: Vec<String> = SAMPLE_REPLY
        .as_bytes()
        .chunks(17)
        .map(|c| String::from_utf8(c.to_vec()).unwrap())
        .collect();
    let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
    mock.push(Reply::Sse {
        body: anthropic_deltas(&parts),
        delay: Duration::from_millis(5),
        gate: None,
    });
    let browser = Browser::start(1100, 1000).await;
    browser
        .client
        .goto(&format!("http://{}/", gateway.addr))
        .await
        .unwrap();
    browser
        .testid("login-secret")
        .await
        .send_keys(gateway.token.as_deref().unwrap())
        .await
        .unwrap();
    browser.testid("login-submit").await.click().await.unwrap();
    browser
        .testid("message-input")
        .await
        .send_keys("Show me a sample")
        .await
        .unwrap();
    browser.testid("send").await.click().await.unwrap();
    browser
        .until(
            "the whole sample reply",
            "const m = document.querySelector('[data-testid=message][data-role=assistant]'); \
             return !!m && m.querySelectorAll('[data-testid=code-block]').length === 2 \
               && !!m.querySelector('blockquote') && m.textContent.endsWith('stays text.');",
        )
        .await;
    let fresh = run(
        &browser,
        "const msg = document.querySelector('[data-testid=message][data-role=assistant]');
         const body = msg.querySelector('.body');
         const d = render(arg); const same = d.innerHTML === body.innerHTML; d.remove();
         return [same, msg.querySelectorAll('script').length, typeof window.alert === 'function'];",
        json!(SAMPLE_REPLY),
    )
    .await;
    // Streamed through the page, it is what one render of the whole makes.
    assert_eq!(fresh, json!([true, 0, true]));
    browser.screenshot("web-markdown-light").await;
    run(&browser, &format!("{FORCE_DARK} return null;"), json!(null)).await;
    browser.screenshot("web-markdown-dark").await;
}
