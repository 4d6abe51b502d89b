//! The web page's markdown renderer and code highlighter
//! (src/gateway/web/{markdown,highlight}.js) in a real browser (Debian's
//! headless Chromium, tests/support/browser.rs): the page is served by a
//! real gateway, and each test imports `/markdown.js` into it and compares
//! whole rendered structures. Hostile model text must render inert, deep or
//! pathological input must stay bounded in time and depth, and streaming
//! re-renders must keep the DOM nodes of finished blocks.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

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
    gateway: Gateway,
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
        gateway,
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
    let expected: Vec<(&str, String)> = cases
        .iter()
        .map(|(i, e)| (*i, e.clone()))
        .collect();
    assert_eq!(actual, expected);
}
