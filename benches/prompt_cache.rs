//! How warm pincer keeps the providers' prompt caches, measured on the real
//! binary against the mock model: a 20-prompt session in which each prompt
//! makes the model call a tool and then answer (40 model calls), with the
//! agent's clock (`PINCER_CLOCK_FILE`) moved before each prompt so that the
//! prompts spread evenly from 09:00 to 10:00 (3 min 9 s apart for 20):
//! the time of day changes at every prompt while every gap stays inside
//! Anthropic's 5-minute cache. Halfway, pincer is stopped and a new
//! process loads the session (`session/load`) before the next prompt, as
//! when an editor restarts: the first call after the load must repeat the
//! last one before it like any other.
//!
//! For each call it reports the share of the previous request that the new
//! one repeats byte for byte at its start (tools, system prompt, messages,
//! in that order; Anthropic's `cache_control` markers left out, since they
//! move to the newest messages by design and are not cached content), and
//! the input cost of the session at the providers' cache prices against
//! the ideal, in which every call reads all of the previous request from the
//! cache:
//!
//! - Anthropic (Claude Sonnet 4.5): a call reads the longest prefix that an
//!   earlier call wrote at one of its breakpoints, writes the rest up to its
//!   own last breakpoint at the cache-write price and pays the input price
//!   after it;
//! - OpenAI (GPT-4.1, the same request sizes): automatic prefix caching,
//!   the common prefix with the previous request in 128-token steps from
//!   1,024 tokens read at the cached price, the rest at the input price.
//!
//! Tokens are estimated as bytes / 4. Goals: 100% of the previous request
//! reused on every call; cost within 10% of the ideal. The figures are
//! printed, then one JSON line for scripts; a missed goal is reported, not
//! a failure. `PINCER_BENCH_PROMPTS` (default 20) changes the length.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

#[path = "../tests/support/acp_client.rs"]
mod acp_client;
#[path = "../tests/support/mock_model.rs"]
mod mock_model;

use std::collections::HashSet;

use acp_client::{Acp, Sandbox};
use mock_model::{MockModel, Reply};
use serde_json::{Value, json};

const PER_MILLION: f64 = 1e6;

fn main() {
    let prompts: usize = std::env::var("PINCER_BENCH_PROMPTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let bodies = runtime.block_on(session(prompts));
    let requests: Vec<Blocks> = bodies.iter().map(Blocks::of).collect();

    println!(
        "pincer prompt cache: {prompts} prompts with a tool call each, {} model calls, clock moved from 09:00 to 10:00, session loaded by a new process before prompt {}",
        requests.len(),
        load_before(prompts) + 1
    );
    println!("call  bytes    reused-of-previous");
    let mut shares = Vec::new();
    for (index, request) in requests.iter().enumerate().skip(1) {
        let previous = requests[index - 1].text();
        let common = common_prefix(&previous, &request.text());
        let share = common as f64 / previous.len() as f64;
        shares.push(share);
        println!(
            "{:>4}  {:>7}  {:>6.2}%",
            index + 1,
            request.text().len(),
            share * 100.0
        );
    }
    let full = shares.iter().filter(|s| **s >= 1.0).count();
    let min_share = shares.iter().copied().fold(1.0_f64, f64::min);

    let catalog = pincer::llm::catalog::Catalog::new(&Default::default(), &|_| None);
    let claude = catalog
        .resolve("anthropic/claude-sonnet-4-5")
        .unwrap()
        .pricing;
    let gpt = catalog.resolve("openai/gpt-4.1").unwrap().pricing;
    let anthropic = anthropic_cost(&requests, claude);
    let openai = openai_cost(&requests, gpt);
    let uncached: f64 = requests
        .iter()
        .map(|r| tokens(r.text().len()) * claude.input / PER_MILLION)
        .sum();

    println!();
    println!(
        "calls repeating the whole previous request: {full} of {} (lowest share {:.2}%)",
        shares.len(),
        min_share * 100.0
    );
    for (name, cost) in [("Anthropic", &anthropic), ("OpenAI", &openai)] {
        println!(
            "{name}: input cost ${:.4} vs ideal ${:.4} ({:+.1}%)",
            cost.actual,
            cost.ideal,
            (cost.actual / cost.ideal - 1.0) * 100.0
        );
    }
    println!("(without any cache, Anthropic's input would cost ${uncached:.4})");
    let met = full == shares.len()
        && anthropic.actual <= anthropic.ideal * 1.1
        && openai.actual <= openai.ideal * 1.1;
    println!("goals met: {met}");
    let summary = json!({
        "bench": "prompt_cache",
        "prompts": prompts,
        "calls": requests.len(),
        "loaded_before_prompt": load_before(prompts) + 1,
        "calls_reusing_whole_previous": full,
        "lowest_share": min_share,
        "anthropic": {"actual_usd": anthropic.actual, "ideal_usd": anthropic.ideal},
        "openai": {"actual_usd": openai.actual, "ideal_usd": openai.ideal},
        "uncached_anthropic_usd": uncached,
        "met": met,
    });
    println!("{summary}");
}

/// Runs the session and returns the request bodies the model received.
async fn session(prompts: usize) -> Vec<Value> {
    let sandbox = Sandbox::new();
    for i in 0..prompts {
        sandbox.write(
            &format!("src/file{i}.rs"),
            &format!(
                "// file {i}\n{}",
                "pub fn work() -> u32 { 42 }\n".repeat(40)
            ),
        );
    }
    std::fs::write(
        sandbox.home().join("config.toml"),
        "title_model = \"none\"\n",
    )
    .unwrap();
    let clock = sandbox.dir.path().join("clock");
    let mock = MockModel::start().await;
    for i in 0..prompts {
        mock.push(Reply::sse(tool_call(
            &format!("toolu_{i}"),
            &format!("src/file{i}.rs"),
        )));
        mock.push(Reply::sse(text(&format!(
            "file{i}.rs defines work(), which returns 42."
        ))));
    }
    let spawn = || {
        let mut cmd = sandbox.command(&["acp"]);
        cmd.env("ANTHROPIC_API_KEY", "bench-key")
            .env("ANTHROPIC_BASE_URL", mock.anthropic_url())
            .env("TZ", "UTC")
            .env("PINCER_CLOCK_FILE", &clock);
        Acp::spawn(cmd)
    };
    let mut acp = spawn();
    acp.initialize().await;
    let session = acp.new_session(&sandbox.work()).await;
    let start: jiff::Timestamp = "2026-11-24T09:00:00Z".parse().unwrap();
    for i in 0..prompts {
        let offset = 3600 * i as i64 / (prompts.max(2) - 1) as i64;
        let now = start + jiff::SignedDuration::from_secs(offset);
        std::fs::write(&clock, now.to_string()).unwrap();
        if i == load_before(prompts) && i > 0 {
            acp.close_stdin();
            assert!(acp.wait_exit().await.success());
            acp = spawn();
            acp.initialize().await;
            // `call` fails on an error answer.
            acp.call(
                "session/load",
                json!({"sessionId": session, "cwd": sandbox.work(), "mcpServers": []}),
            )
            .await;
        }
        let result = acp
            .call(
                "session/prompt",
                json!({"sessionId": session, "prompt": [{"type": "text", "text": format!("What does src/file{i}.rs do?")}]}),
            )
            .await;
        assert_eq!(result, json!({"stopReason": "end_turn"}), "prompt {i}");
    }
    assert!(mock.violations().is_empty(), "{:?}", mock.violations());
    let bodies: Vec<Value> = mock.requests().into_iter().map(|r| r.body).collect();
    // The figures mean something only if the clock really moved: the last
    // prompt was told 10:00.
    let last_prompt = &bodies[bodies.len() - 2]["messages"];
    let time = last_prompt.as_array().unwrap().last().unwrap()["content"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()["text"]
        .clone();
    assert_eq!(
        time,
        json!("Current time: 2026-11-24 10:00 (UTC, UTC+00:00)")
    );
    bodies
}

/// Before which prompt (from 0) a new process loads the session.
fn load_before(prompts: usize) -> usize {
    prompts / 2
}

/// A request as the cache sees it: its blocks in order (each tool, the
/// system prompt, each message's content blocks), serialised without
/// `cache_control`, and which blocks carry a breakpoint.
struct Blocks {
    blocks: Vec<String>,
    breakpoints: Vec<usize>,
}

impl Blocks {
    fn of(body: &Value) -> Self {
        let mut out = Blocks {
            blocks: Vec::new(),
            breakpoints: Vec::new(),
        };
        let mut push = |block: &Value, prefix: &str| {
            let mut block = block.clone();
            if block
                .as_object_mut()
                .and_then(|b| b.remove("cache_control"))
                .is_some()
            {
                out.breakpoints.push(out.blocks.len());
            }
            out.blocks.push(format!("{prefix}{block}"));
        };
        for tool in body["tools"].as_array().into_iter().flatten() {
            push(tool, "tool:");
        }
        for block in body["system"].as_array().into_iter().flatten() {
            push(block, "system:");
        }
        for message in body["messages"].as_array().into_iter().flatten() {
            let role = message["role"].as_str().unwrap_or_default();
            for (index, block) in message["content"]
                .as_array()
                .into_iter()
                .flatten()
                .enumerate()
            {
                // A new message starts with its role, so that two turns
                // never read as one.
                let prefix = if index == 0 {
                    format!("{role}:")
                } else {
                    String::new()
                };
                push(block, &prefix);
            }
        }
        out
    }

    fn text(&self) -> String {
        self.blocks.concat()
    }

    fn prefix(&self, end: usize) -> String {
        self.blocks[..end].concat()
    }
}

fn common_prefix(a: &str, b: &str) -> usize {
    a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count()
}

fn tokens(bytes: usize) -> f64 {
    bytes as f64 / 4.0
}

struct Cost {
    actual: f64,
    ideal: f64,
}

/// Anthropic's rules: reads at a previously written breakpoint, writes up
/// to the last breakpoint, input price after it.
fn anthropic_cost(requests: &[Blocks], price: pincer::llm::catalog::Pricing) -> Cost {
    let mut written: HashSet<String> = HashSet::new();
    let (mut actual, mut ideal) = (0.0, 0.0);
    let mut previous_len = 0;
    for request in requests {
        let total = request.text().len();
        let read = (1..=request.blocks.len())
            .rev()
            .map(|end| request.prefix(end))
            .find(|prefix| written.contains(prefix))
            .map_or(0, |prefix| prefix.len());
        let cached_end = request
            .breakpoints
            .last()
            .map_or(0, |&b| request.prefix(b + 1).len());
        let write = cached_end.saturating_sub(read);
        let input = total - read - write;
        actual += (tokens(read) * price.cache_read
            + tokens(write) * price.cache_write
            + tokens(input) * price.input)
            / PER_MILLION;
        ideal += (tokens(previous_len) * price.cache_read
            + tokens(total - previous_len) * price.cache_write)
            / PER_MILLION;
        for &b in &request.breakpoints {
            written.insert(request.prefix(b + 1));
        }
        previous_len = total;
    }
    Cost { actual, ideal }
}

/// OpenAI's automatic caching of the prefix shared with the previous
/// request, in 128-token steps from 1,024 tokens.
fn openai_cost(requests: &[Blocks], price: pincer::llm::catalog::Pricing) -> Cost {
    let cached = |bytes: usize| {
        let t = tokens(bytes).floor();
        if t < 1024.0 {
            0.0
        } else {
            (t / 128.0).floor() * 128.0
        }
    };
    let (mut actual, mut ideal) = (0.0, 0.0);
    let mut previous = String::new();
    for request in requests {
        let text = request.text();
        let total = tokens(text.len());
        let read = cached(common_prefix(&previous, &text));
        let best = cached(previous.len());
        actual += (read * price.cache_read + (total - read) * price.input) / PER_MILLION;
        ideal += (best * price.cache_read + (total - best) * price.input) / PER_MILLION;
        previous = text;
    }
    Cost { actual, ideal }
}

/// The model reads a file.
fn tool_call(id: &str, path: &str) -> String {
    let input = serde_json::to_string(&json!({"path": path}).to_string()).unwrap();
    format!(
        "event: message_start\ndata: {{\"type\":\"message_start\",\"message\":{{\"id\":\"msg_t\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5\",\"content\":[],\"stop_reason\":null,\"usage\":{{\"input_tokens\":10,\"output_tokens\":1}}}}}}\n\n\
event: content_block_start\ndata: {{\"type\":\"content_block_start\",\"index\":0,\"content_block\":{{\"type\":\"tool_use\",\"id\":\"{id}\",\"name\":\"read\",\"input\":{{}}}}}}\n\n\
event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{{\"type\":\"input_json_delta\",\"partial_json\":{input}}}}}\n\n\
event: content_block_stop\ndata: {{\"type\":\"content_block_stop\",\"index\":0}}\n\n\
event: message_delta\ndata: {{\"type\":\"message_delta\",\"delta\":{{\"stop_reason\":\"tool_use\"}},\"usage\":{{\"output_tokens\":20}}}}\n\n\
event: message_stop\ndata: {{\"type\":\"message_stop\"}}\n\n"
    )
}

/// The model answers.
fn text(text: &str) -> String {
    let text = serde_json::to_string(text).unwrap();
    format!(
        "event: message_start\ndata: {{\"type\":\"message_start\",\"message\":{{\"id\":\"msg_t\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5\",\"content\":[],\"stop_reason\":null,\"usage\":{{\"input_tokens\":10,\"output_tokens\":1}}}}}}\n\n\
event: content_block_start\ndata: {{\"type\":\"content_block_start\",\"index\":0,\"content_block\":{{\"type\":\"text\",\"text\":\"\"}}}}\n\n\
event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{{\"type\":\"text_delta\",\"text\":{text}}}}}\n\n\
event: content_block_stop\ndata: {{\"type\":\"content_block_stop\",\"index\":0}}\n\n\
event: message_delta\ndata: {{\"type\":\"message_delta\",\"delta\":{{\"stop_reason\":\"end_turn\"}},\"usage\":{{\"output_tokens\":12}}}}\n\n\
event: message_stop\ndata: {{\"type\":\"message_stop\"}}\n\n"
    )
}
