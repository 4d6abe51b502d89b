use super::*;
use crate::gateway::protocol::usage::SessionsParams;
use serde_json::json;

const HEADER: &str =
    r#"{"type":"session","version":1,"id":"s1","cwd":"/p","created":"2026-03-01T23:49:00.000Z"}"#;

fn user(id: &str, at: &str, text: &str) -> String {
    json!({"type": "message", "id": id, "parentId": null, "timestamp": at,
        "message": {"role": "user", "content": [{"type": "text", "text": text}]}})
    .to_string()
}

fn assistant(
    id: &str,
    at: &str,
    content: serde_json::Value,
    stop: &str,
    usage: (u64, u64, f64),
) -> String {
    let (input, output, cost) = usage;
    json!({"type": "message", "id": id, "parentId": null, "timestamp": at,
        "message": {"role": "assistant", "content": content, "provider": "anthropic",
            "api": "anthropic-messages", "model": "claude-sonnet-4-5", "stop_reason": stop,
            "usage": {"input": input, "output": output, "cache_read": 0, "cache_write": 0,
                "cost": {"input": cost / 2.0, "output": cost / 2.0, "cache_read": 0.0, "cache_write": 0.0, "total": cost}}}})
    .to_string()
}

fn result(id: &str, at: &str, error: bool) -> String {
    json!({"type": "tool_result", "id": id, "parentId": null, "timestamp": at,
        "message": {"tool_call_id": "t1", "tool_name": "read", "content": [{"type": "text", "text": "hello"}], "is_error": error}})
    .to_string()
}

/// A prompt late on 1 March (UTC) answered with a tool call, the tool's
/// result, the answer after midnight, then a prompt whose call failed.
fn transcript(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("s1.jsonl");
    let lines = [
        HEADER.to_string(),
        user("e1", "2026-03-01T23:50:00.000Z", "What does hello.txt say?"),
        assistant(
            "e2",
            "2026-03-01T23:50:02.000Z",
            json!([{"type": "tool_call", "id": "t1", "name": "read", "arguments": {"path": "hello.txt"}}]),
            "tool_use",
            (100, 20, 0.01),
        ),
        result("e3", "2026-03-01T23:50:03.000Z", false),
        assistant(
            "e4",
            "2026-03-02T00:10:00.000Z",
            json!([{"type": "text", "text": "It says hello."}]),
            "stop",
            (150, 30, 0.02),
        ),
        user("e5", "2026-03-02T01:00:00.000Z", "And now?"),
        assistant(
            "e6",
            "2026-03-02T01:00:05.000Z",
            json!([]),
            "error",
            (0, 0, 0.0),
        ),
    ];
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    path
}

fn window(params: serde_json::Value) -> Window {
    let params: SessionsParams = serde_json::from_value(params).unwrap();
    params
        .dates()
        .window("2026-03-05T00:00:00Z".parse().unwrap())
        .unwrap()
}

#[test]
fn a_session_adds_up_by_day_with_counts_tools_models_and_latency() {
    let dir = tempfile::tempdir().unwrap();
    let path = transcript(dir.path());
    let both = window(json!({"startDate": "2026-03-01", "endDate": "2026-03-02"}));
    let used = session(&path, "s1", &both).unwrap();
    assert_eq!(
        (
            used.totals.input,
            used.totals.output,
            used.totals.total_tokens
        ),
        (250, 50, 300)
    );
    assert!((used.totals.total_cost - 0.03).abs() < 1e-12);
    assert_eq!(used.totals.missing_cost_entries, 0);
    assert_eq!(
        used.message_counts,
        MessageCounts {
            total: 5,
            user: 2,
            assistant: 3,
            tool_calls: 1,
            tool_results: 1,
            errors: 1
        }
    );
    assert_eq!(used.activity_dates, ["2026-03-01", "2026-03-02"]);
    let days: Vec<(&str, u64)> = used
        .daily_breakdown
        .iter()
        .map(|d| (d.date.as_str(), d.tokens))
        .collect();
    assert_eq!(days, [("2026-03-01", 120), ("2026-03-02", 180)]);
    assert_eq!(used.first_activity, Some(ms("2026-03-01T23:50:00Z")));
    assert_eq!(used.duration_ms, Some(70 * 60 * 1000 + 5000));
    assert_eq!(
        used.tool_usage.as_ref().unwrap().tools,
        [ToolCount {
            name: "read".into(),
            count: 1
        }]
    );
    let models = used.model_usage.as_ref().unwrap();
    assert_eq!(models.len(), 1);
    assert_eq!(
        (models[0].model.as_deref(), models[0].count),
        (Some("claude-sonnet-4-5"), 3)
    );
    // From each prompt to each answer of its turn: 2 s, 20 min, 5 s.
    let latency = used.latency.unwrap();
    assert_eq!(latency.count, 3);
    assert_eq!(
        (latency.min_ms, latency.max_ms, latency.p95_ms),
        (2000.0, 1_200_000.0, 1_200_000.0)
    );
    // The quarter hours are UTC's: 23:45 on 1 March is its 95th.
    let quarters = used.utc_quarter_hour_message_counts.unwrap();
    assert_eq!(
        (quarters[0].date.as_str(), quarters[0].quarter_index),
        ("2026-03-01", 95)
    );

    // In India the evening of 1 March UTC is the morning of 2 March.
    let india = window(json!({"startDate": "2026-03-02", "endDate": "2026-03-02",
        "mode": "specific", "timeZone": "Asia/Kolkata"}));
    let used = session(&path, "s1", &india).unwrap();
    assert_eq!(used.activity_dates, ["2026-03-02"]);
    assert_eq!(used.totals.total_tokens, 300);

    // 2 March alone (UTC): the answer after midnight still measures from
    // its prompt the day before.
    let second = window(json!({"startDate": "2026-03-02", "endDate": "2026-03-02"}));
    let used = session(&path, "s1", &second).unwrap();
    assert_eq!(used.totals.total_tokens, 180);
    assert_eq!(used.message_counts.user, 1);
    assert_eq!(used.latency.unwrap().max_ms, 1_200_000.0);

    // A window with nothing in it: zeros and no activity.
    let before = window(json!({"startDate": "2026-02-01", "endDate": "2026-02-02"}));
    let used = session(&path, "s1", &before).unwrap();
    assert_eq!(used.first_activity, None);
    assert_eq!(used.message_counts, MessageCounts::default());
}

fn ms(at: &str) -> i64 {
    at.parse::<jiff::Timestamp>().unwrap().as_millisecond()
}

#[test]
fn aggregates_sum_sessions_by_model_provider_channel_and_day() {
    let dir = tempfile::tempdir().unwrap();
    let path = transcript(dir.path());
    let both = window(json!({"startDate": "2026-03-01", "endDate": "2026-03-02"}));
    let used = session(&path, "s1", &both).unwrap();
    let empty = session(
        &path,
        "s1",
        &window(json!({"startDate": "2026-02-01", "endDate": "2026-02-01"})),
    )
    .unwrap();
    let mut accumulator = Accumulator::default();
    accumulator.add(Some(&used), "main", None);
    accumulator.add(Some(&used), "main", Some("telegram"));
    accumulator.add(Some(&empty), "main", None);
    accumulator.add(None, "main", None);
    let (totals, aggregates) = accumulator.finish();
    assert_eq!(totals.total_tokens, 600);
    // The session with nothing in the window is not counted.
    assert_eq!(aggregates.session_count, 2);
    assert_eq!(aggregates.messages.total, 10);
    assert_eq!(aggregates.tools.total_calls, 2);
    assert_eq!(aggregates.by_model.len(), 1);
    assert_eq!(aggregates.by_model[0].count, 6);
    assert_eq!(
        aggregates.by_provider[0].provider.as_deref(),
        Some("anthropic")
    );
    assert_eq!(aggregates.by_provider[0].model, None);
    assert_eq!(aggregates.by_agent[0].totals.total_tokens, 600);
    assert_eq!(aggregates.by_channel.len(), 1);
    assert_eq!(aggregates.by_channel[0].channel, "telegram");
    assert_eq!(aggregates.by_channel[0].totals.total_tokens, 300);
    let daily: Vec<(&str, u64, u64)> = aggregates
        .daily
        .iter()
        .map(|d| (d.date.as_str(), d.tokens, d.messages))
        .collect();
    assert_eq!(daily, [("2026-03-01", 240, 4), ("2026-03-02", 360, 6)]);
    assert_eq!(aggregates.cost_daily.len(), 2);
    let creator = &aggregates.by_creator[0];
    assert_eq!(
        (creator.key.as_str(), creator.session_count),
        (UNKNOWN_CREATOR, 2)
    );
    assert_eq!(
        creator.session_activity[0].dates,
        ["2026-03-01", "2026-03-02"]
    );
    assert_eq!(creator.session_activity[0].session_count, 2);
    assert_eq!(aggregates.latency.unwrap().count, 6);
    assert_eq!(
        aggregates.longest_session_duration_ms,
        Some(70 * 60 * 1000 + 5000)
    );
    // The shape the Control UI reads without guards.
    let wire = serde_json::to_value(&aggregates).unwrap();
    for field in [
        "byModel",
        "byProvider",
        "byAgent",
        "byChannel",
        "byCreator",
        "costDaily",
        "dailyLatency",
        "modelDaily",
        "daily",
    ] {
        assert!(wire[field].is_array(), "{field}: {wire}");
    }
    assert!(wire["tools"]["tools"].is_array());
    assert_eq!(wire["messages"]["toolResults"], 2);
}

#[test]
fn a_call_with_tokens_and_no_price_is_counted_as_missing_its_cost() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let lines = [
        HEADER.to_string(),
        user("e1", "2026-03-01T10:00:00.000Z", "hi"),
        assistant(
            "e2",
            "2026-03-01T10:00:01.000Z",
            json!([{"type": "text", "text": "hello"}]),
            "stop",
            (10, 2, 0.0),
        ),
    ];
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    let used = session(&path, "s", &window(json!({"range": "all"}))).unwrap();
    assert_eq!(used.totals.missing_cost_entries, 1);
    assert_eq!(
        used.totals.missing_cost_by_model,
        Some(BTreeMap::from([(
            "anthropic/claude-sonnet-4-5".to_string(),
            1
        )]))
    );
}

#[test]
fn the_timeseries_runs_up_and_is_cut_to_two_hundred_points() {
    let dir = tempfile::tempdir().unwrap();
    let path = transcript(dir.path());
    let series = timeseries(&path, "s1").unwrap();
    let points: Vec<(u64, u64)> = series
        .points
        .iter()
        .map(|p| (p.total_tokens, p.cumulative_tokens))
        .collect();
    // The failed call used nothing but is a call.
    assert_eq!(points, [(120, 120), (180, 300), (0, 300)]);

    let long = dir.path().join("long.jsonl");
    let mut lines = vec![HEADER.to_string()];
    for i in 0..450 {
        let at = format!("2026-03-01T10:{:02}:{:02}.000Z", i / 60, i % 60);
        lines.push(assistant(
            &format!("e{i}"),
            &at,
            json!([]),
            "stop",
            (1, 1, 0.0),
        ));
    }
    std::fs::write(&long, lines.join("\n") + "\n").unwrap();
    let series = timeseries(&long, "long").unwrap();
    assert_eq!(series.points.len(), 150);
    assert_eq!(series.points.last().unwrap().cumulative_tokens, 900);
}

#[test]
fn logs_are_the_newest_messages_in_openclaw_s_text_form() {
    let dir = tempfile::tempdir().unwrap();
    let path = transcript(dir.path());
    let all = logs(&path, 200).unwrap();
    let shown: Vec<(&str, &str)> = all.iter().map(|l| (l.role, l.content.as_str())).collect();
    // The failed call said nothing and is left out.
    assert_eq!(
        shown,
        [
            ("user", "What does hello.txt say?"),
            ("assistant", "[Tool: read]"),
            ("toolResult", "[Tool: read]\n[Tool Result]\nhello"),
            ("assistant", "It says hello."),
            ("user", "And now?"),
        ]
    );
    assert_eq!(all[1].tokens, Some(120));
    assert_eq!(all[0].tokens, None);
    let newest = logs(&path, 2).unwrap();
    assert_eq!(newest[1].content, "And now?");
    assert_eq!(newest.len(), 2);

    let long = dir.path().join("long.jsonl");
    std::fs::write(
        &long,
        [
            HEADER.to_string(),
            user("e1", "2026-03-01T10:00:00.000Z", &"é".repeat(2500)),
        ]
        .join("\n")
            + "\n",
    )
    .unwrap();
    let cut = &logs(&long, 10).unwrap()[0].content;
    assert_eq!(cut.chars().count(), 2001);
    assert!(cut.ends_with('…'));
}
