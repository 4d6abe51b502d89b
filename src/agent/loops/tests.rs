use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;

/// A scripted model: the `n`th call (from 0) and what it gets back.
type Script<'a> = dyn Fn(usize) -> (&'static str, Value, Value) + 'a;

/// Runs `calls` calls and returns, per level, the 1-based number of the
/// first call that reached it, and the first warning's text.
fn levels(
    settings: LoopSettings,
    calls: usize,
    script: &Script<'_>,
) -> (Vec<(String, usize)>, String) {
    let mut detector = LoopDetector::new(settings);
    let mut first = Vec::new();
    let mut warning = String::new();
    for n in 0..calls {
        let (tool, args, result) = script(n);
        let verdict = detector.check(tool, &args);
        let level = match &verdict {
            Verdict::Ok => "ok",
            Verdict::Warn(w) => {
                if warning.is_empty() {
                    warning = w.clone();
                }
                "warn"
            }
            Verdict::Block(_) => "block",
            Verdict::Break(_) => "break",
        };
        if first.last().map(|(l, _): &(String, usize)| l.as_str()) != Some(level) {
            first.push((level.to_string(), n + 1));
        }
        if matches!(verdict, Verdict::Ok | Verdict::Warn(_)) {
            detector.finished(tool, &args, &result, false);
        }
    }
    (first, warning)
}

fn steps(list: &[(&str, usize)]) -> Vec<(String, usize)> {
    list.iter().map(|(l, n)| (l.to_string(), *n)).collect()
}

const FULL: [(&str, usize); 4] = [("ok", 1), ("warn", 10), ("block", 20), ("break", 30)];

#[test]
fn identical_calls_warn_then_block_then_break() {
    let (seen, warning) = levels(LoopSettings::default(), 30, &|_| {
        ("read", json!({"path": "a.rs", "offset": 1}), json!("same"))
    });
    assert_eq!(seen, steps(&FULL));
    assert_eq!(
        warning,
        "Warning: you have made this exact `read` call 10 times. If you are not making progress, change your approach instead of repeating it."
    );
}

#[test]
fn argument_order_does_not_make_a_call_different() {
    let (seen, _) = levels(LoopSettings::default(), 10, &|n| {
        let args = if n % 2 == 0 {
            json!({"path": "a.rs", "offset": 1})
        } else {
            serde_json::from_str(r#"{"offset": 1, "path": "a.rs"}"#).unwrap()
        };
        ("read", args, json!("same"))
    });
    assert_eq!(seen, steps(&[("ok", 1), ("warn", 10)]));
}

#[test]
fn polling_without_progress_is_caught_and_polling_with_progress_is_not() {
    let poll = || json!({"action": "poll", "id": "p1"});
    let (seen, warning) = levels(LoopSettings::default(), 30, &|_| {
        ("process", poll(), json!("still running"))
    });
    assert_eq!(seen, steps(&FULL));
    assert!(
        warning.contains("polled with `process` 10 times"),
        "{warning}"
    );

    let (seen, _) = levels(LoopSettings::default(), 40, &|n| {
        ("process", poll(), json!(format!("line {n}")))
    });
    assert_eq!(seen, steps(&[("ok", 1)]));
}

#[test]
fn two_calls_alternating_with_unchanged_results_is_ping_pong() {
    let (seen, warning) = levels(LoopSettings::default(), 30, &|n| {
        if n % 2 == 0 {
            ("read", json!({"path": "a.rs"}), json!("A"))
        } else {
            ("grep", json!({"pattern": "x"}), json!("B"))
        }
    });
    assert_eq!(seen, steps(&FULL));
    assert!(
        warning.contains("alternated between the same two calls 10 times"),
        "{warning}"
    );

    // The same alternation while a result keeps changing is work.
    let (seen, _) = levels(LoopSettings::default(), 20, &|n| {
        if n % 2 == 0 {
            (
                "bash",
                json!({"command": "cargo test"}),
                json!(format!("run {n}")),
            )
        } else {
            ("edit", json!({"path": "a.rs"}), json!("ok"))
        }
    });
    // Only the identical edit repeats: its 10th time is call 20.
    assert_eq!(seen, steps(&[("ok", 1), ("warn", 20)]));
}

#[test]
fn a_cycle_of_repeats_is_a_no_progress_streak() {
    let (seen, warning) = levels(LoopSettings::default(), 33, &|n| match n % 3 {
        0 => ("read", json!({"path": "a.rs"}), json!("A")),
        1 => ("ls", json!({"path": "."}), json!("B")),
        _ => ("find", json!({"pattern": "*.rs"}), json!("C")),
    });
    // The streak starts with the first repeat, call 4.
    assert_eq!(
        seen,
        steps(&[("ok", 1), ("warn", 13), ("block", 23), ("break", 33)])
    );
    assert!(
        warning.contains("your last 10 calls only repeated earlier calls"),
        "{warning}"
    );
}

#[test]
fn varied_work_never_trips_anything() {
    let (seen, _) = levels(LoopSettings::default(), 200, &|n| {
        ("read", json!({"path": format!("src/{n}.rs")}), json!(n))
    });
    assert_eq!(seen, steps(&[("ok", 1)]));
}

#[test]
fn thresholds_are_configurable_and_detection_can_be_off() {
    let settings = LoopSettings {
        enabled: true,
        history: 10,
        warning: 2,
        block: 3,
        breaker: 5,
    };
    let same = |_| ("read", json!({"path": "a"}), json!("a"));
    let (seen, _) = levels(settings, 5, &same);
    assert_eq!(
        seen,
        steps(&[("ok", 1), ("warn", 2), ("block", 3), ("break", 5)])
    );
    let off = LoopSettings {
        enabled: false,
        ..LoopSettings::default()
    };
    let (seen, _) = levels(off, 50, &same);
    assert_eq!(seen, steps(&[("ok", 1)]));
}
