//! What sessions used, as OpenClaw's usage methods answer: `sessions.usage`
//! (one row per session and the aggregates the Control UI's usage page
//! draws), `sessions.usage.timeseries` and `sessions.usage.logs` (one
//! session's detail), `usage.cost` (`openclaw gateway usage-cost`) and
//! `usage.status` (providers' quota windows). The shapes are those of
//! OpenClaw's `session-cost-usage` rollup and its Control UI's copy of
//! the accumulator, which rebuilds the aggregates from the rows when the
//! user filters: the rows must add up as the server's totals do.

use std::collections::BTreeMap;

use jiff::civil::Date;
use jiff::tz::{Offset, TimeZone};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The creator of every session pincer lists: pincer does not record who
/// started a session, as OpenClaw files sessions it cannot attribute.
pub const UNKNOWN_CREATOR: &str = "[\"unknown\"]";

/// The most points `sessions.usage.timeseries` answers with.
pub const MAX_POINTS: usize = 200;

/// The longest a text of `sessions.usage.logs` is, in UTF-16 units.
pub const LOG_TEXT_MAX: usize = 2000;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AgentScope {
    All,
}

/// How `startDate` and `endDate` are read: as UTC days, the gateway's
/// own days, or a time zone's (`timeZone`, else `utcOffset`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DateMode {
    Utc,
    Gateway,
    Specific,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
pub enum RangePreset {
    #[serde(rename = "7d")]
    Week,
    #[serde(rename = "30d")]
    Month,
    #[serde(rename = "90d")]
    Quarter,
    #[serde(rename = "1y")]
    Year,
    #[serde(rename = "all")]
    All,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GroupBy {
    Instance,
    Family,
}

/// `sessions.usage`'s params (OpenClaw's `SessionsUsageParamsSchema`).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SessionsParams {
    pub key: Option<String>,
    pub agent_id: Option<String>,
    pub agent_scope: Option<AgentScope>,
    pub creator_key: Option<String>,
    pub start_date: Option<String>,
    pub end_date: Option<String>,
    pub mode: Option<DateMode>,
    pub range: Option<RangePreset>,
    /// Every pincer session is its own row: a key's earlier sessions
    /// (before a reset) are rows of their own in either grouping.
    pub group_by: Option<GroupBy>,
    pub include_historical: Option<bool>,
    pub utc_offset: Option<String>,
    pub time_zone: Option<String>,
    pub limit: Option<u64>,
    pub include_context_weight: Option<bool>,
}

impl SessionsParams {
    pub fn dates(&self) -> Dates<'_> {
        Dates {
            start_date: self.start_date.as_deref(),
            end_date: self.end_date.as_deref(),
            mode: self.mode,
            range: self.range,
            days: None,
            utc_offset: self.utc_offset.as_deref(),
            time_zone: self.time_zone.as_deref(),
        }
    }
}

/// `usage.cost`'s params: a window of days and the agent. (The date
/// fields are declared again rather than shared: serde cannot refuse
/// unknown fields of a struct that flattens another.)
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CostParams {
    /// A number or a numeric string.
    pub days: Option<Value>,
    pub start_date: Option<String>,
    pub end_date: Option<String>,
    pub mode: Option<DateMode>,
    pub range: Option<RangePreset>,
    pub utc_offset: Option<String>,
    pub time_zone: Option<String>,
    pub agent_id: Option<String>,
    pub agent_scope: Option<AgentScope>,
}

impl CostParams {
    pub fn dates(&self) -> Dates<'_> {
        Dates {
            start_date: self.start_date.as_deref(),
            end_date: self.end_date.as_deref(),
            mode: self.mode,
            range: self.range,
            days: self.days.as_ref(),
            utc_offset: self.utc_offset.as_deref(),
            time_zone: self.time_zone.as_deref(),
        }
    }
}

/// `sessions.usage.timeseries` and `sessions.usage.logs`: one session.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DetailParams {
    pub key: Option<String>,
    pub agent_id: Option<String>,
    /// Logs only: the newest this many (200; at most 1,000).
    pub limit: Option<f64>,
}

/// The date fields of a usage request.
pub struct Dates<'a> {
    start_date: Option<&'a str>,
    end_date: Option<&'a str>,
    mode: Option<DateMode>,
    range: Option<RangePreset>,
    days: Option<&'a Value>,
    utc_offset: Option<&'a str>,
    time_zone: Option<&'a str>,
}

/// The instants a usage request covers and the zone its days are read in.
#[derive(Clone, Debug)]
pub struct Window {
    pub start_ms: i64,
    pub end_ms: i64,
    /// `range: "all"`: entries without a time count too.
    pub all: bool,
    pub zone: TimeZone,
}

impl Window {
    pub fn contains(&self, ms: i64) -> bool {
        (self.start_ms..=self.end_ms).contains(&ms)
    }

    /// The day (`YYYY-MM-DD`) `ms` falls on in the request's zone.
    pub fn day(&self, ms: i64) -> String {
        jiff::Timestamp::from_millisecond(ms)
            .map(|t| t.to_zoned(self.zone.clone()).date().to_string())
            .unwrap_or_default()
    }

    /// The calendar days from the first to the last, both counted.
    pub fn days(&self) -> i64 {
        let first = self.date(self.start_ms.max(0));
        let last = self.date(self.end_ms);
        match (first, last) {
            (Some(first), Some(last)) => first
                .until(last)
                .map_or(1, |span| i64::from(span.get_days()) + 1),
            _ => 1,
        }
    }

    fn date(&self, ms: i64) -> Option<Date> {
        jiff::Timestamp::from_millisecond(ms)
            .ok()
            .map(|t| t.to_zoned(self.zone.clone()).date())
    }
}

/// `UTC+5:30` (OpenClaw's `utcOffset`) in minutes east of UTC.
fn offset_minutes(raw: &str) -> Option<i32> {
    let rest = raw.trim().strip_prefix("UTC")?;
    let (sign, rest) = match rest.as_bytes().first()? {
        b'+' => (1, &rest[1..]),
        b'-' => (-1, &rest[1..]),
        _ => return None,
    };
    let (hours, minutes) = rest.split_once(':').unwrap_or((rest, "0"));
    let digits = |s: &str, max_len: usize| {
        (!s.is_empty() && s.len() <= max_len && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| s.parse::<i32>().ok())
            .flatten()
    };
    let hours = digits(hours, 2)?;
    let minutes = if rest.contains(':') {
        let m = digits(minutes, 2).filter(|m| *m < 60)?;
        (minutes.len() == 2).then_some(m)?
    } else {
        0
    };
    let total = sign * (hours * 60 + minutes);
    (-720..=840).contains(&total).then_some(total)
}

/// `YYYY-MM-DD`, a real calendar day.
fn calendar_day(field: &str, raw: &str) -> Result<Date, String> {
    let invalid = || format!("invalid {field}: expected a valid YYYY-MM-DD calendar date");
    let raw = raw.trim();
    let bytes = raw.as_bytes();
    if bytes.len() != 10 || bytes[4] != b'-' || bytes[7] != b'-' {
        return Err(invalid());
    }
    let number = |range: std::ops::Range<usize>| raw[range].parse::<i16>().map_err(|_| invalid());
    Date::new(number(0..4)?, number(5..7)? as i8, number(8..10)? as i8).map_err(|_| invalid())
}

impl Dates<'_> {
    /// The zone days are read in, as OpenClaw resolves it.
    fn zone(&self) -> Result<TimeZone, String> {
        match self.mode {
            Some(DateMode::Gateway) => Ok(TimeZone::system()),
            Some(DateMode::Specific) => {
                let offset = self.utc_offset.and_then(offset_minutes);
                let fixed = |minutes: i32| {
                    Offset::from_seconds(minutes * 60)
                        .map(TimeZone::fixed)
                        .map_err(|e| e.to_string())
                };
                if let Some(name) = self.time_zone {
                    return match TimeZone::get(name.trim()) {
                        Ok(zone) => Ok(zone),
                        Err(_) => match offset {
                            Some(minutes) => fixed(minutes),
                            None => {
                                Err("invalid timeZone: expected a valid IANA time zone".to_string())
                            }
                        },
                    };
                }
                match (offset, self.utc_offset) {
                    (Some(minutes), _) => fixed(minutes),
                    (None, Some(raw)) if !raw.trim().is_empty() => {
                        Err("invalid utcOffset: expected UTC-12:00 through UTC+14:00".to_string())
                    }
                    _ => Ok(TimeZone::UTC),
                }
            }
            Some(DateMode::Utc) | None => Ok(TimeZone::UTC),
        }
    }

    /// The window asked for: `startDate`..`endDate`, else `range`, else
    /// `days`, else the last 30 days, each ending with today.
    pub fn window(&self, now: jiff::Timestamp) -> Result<Window, String> {
        let given = |field: &str, raw: Option<&str>| match raw.map(str::trim) {
            None | Some("") => Ok(None),
            Some(raw) => calendar_day(field, raw).map(Some),
        };
        let start = given("startDate", self.start_date)?;
        let end = given("endDate", self.end_date)?;
        let zone = self.zone()?;
        let start_of = |date: Date| -> Result<i64, String> {
            date.to_zoned(zone.clone())
                .map(|z| z.timestamp().as_millisecond())
                .map_err(|_| "calendar day does not exist in requested time zone".to_string())
        };
        let end_of = |date: Date| -> Result<i64, String> {
            let next = date
                .tomorrow()
                .map_err(|_| "calendar day does not exist in requested time zone".to_string())?;
            Ok(start_of(next)? - 1)
        };
        let today = now.to_zoned(zone.clone()).date();
        match (start, end) {
            (Some(start), Some(end)) => {
                if start > end {
                    return Err("startDate must not be after endDate".to_string());
                }
                Ok(Window {
                    start_ms: start_of(start)?,
                    end_ms: end_of(end)?,
                    all: false,
                    zone,
                })
            }
            (None, None) => {
                let days = match self.range {
                    Some(RangePreset::All) => {
                        return Ok(Window {
                            start_ms: 0,
                            end_ms: end_of(today)?,
                            all: true,
                            zone,
                        });
                    }
                    Some(RangePreset::Week) => 7,
                    Some(RangePreset::Month) => 30,
                    Some(RangePreset::Quarter) => 90,
                    Some(RangePreset::Year) => 365,
                    None => match self.days {
                        None | Some(Value::Null) => 30,
                        Some(Value::Number(n)) => n.as_f64().map_or(30, |n| n.floor() as i64),
                        Some(Value::String(s)) if !s.trim().is_empty() => {
                            s.trim().parse::<f64>().map_or(30, |n| n.floor() as i64)
                        }
                        Some(_) => 30,
                    },
                };
                let days = days.clamp(1, 36_600);
                let first = today
                    .checked_sub(jiff::Span::new().days(days - 1))
                    .map_err(|e| e.to_string())?;
                Ok(Window {
                    start_ms: start_of(first)?,
                    end_ms: end_of(today)?,
                    all: false,
                    zone,
                })
            }
            _ => Err("startDate and endDate must be provided together".to_string()),
        }
    }
}

/// Tokens and what they cost (OpenClaw's `CostUsageTotals`).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Totals {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
    pub total_tokens: u64,
    pub total_cost: f64,
    pub input_cost: f64,
    pub output_cost: f64,
    pub cache_read_cost: f64,
    pub cache_write_cost: f64,
    /// Model calls with tokens but no price (pincer knows no price for
    /// the model), by `provider/model`.
    pub missing_cost_entries: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub missing_cost_by_model: Option<BTreeMap<String, u64>>,
}

impl Totals {
    pub fn add(&mut self, other: &Totals) {
        self.input += other.input;
        self.output += other.output;
        self.cache_read += other.cache_read;
        self.cache_write += other.cache_write;
        self.total_tokens += other.total_tokens;
        self.total_cost += other.total_cost;
        self.input_cost += other.input_cost;
        self.output_cost += other.output_cost;
        self.cache_read_cost += other.cache_read_cost;
        self.cache_write_cost += other.cache_write_cost;
        self.missing_cost_entries += other.missing_cost_entries;
        if let Some(theirs) = &other.missing_cost_by_model {
            let ours = self.missing_cost_by_model.get_or_insert_with(BTreeMap::new);
            for (model, count) in theirs {
                *ours.entry(model.clone()).or_default() += count;
            }
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageCounts {
    pub total: u64,
    pub user: u64,
    pub assistant: u64,
    pub tool_calls: u64,
    pub tool_results: u64,
    pub errors: u64,
}

impl MessageCounts {
    pub fn add(&mut self, other: &MessageCounts) {
        self.total += other.total;
        self.user += other.user;
        self.assistant += other.assistant;
        self.tool_calls += other.tool_calls;
        self.tool_results += other.tool_results;
        self.errors += other.errors;
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ToolCount {
    pub name: String,
    pub count: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolUsage {
    pub total_calls: u64,
    pub unique_tools: usize,
    pub tools: Vec<ToolCount>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ModelUsage {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    pub count: u64,
    pub totals: Totals,
}

/// Model latency: from a prompt to each answer of its turn.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Latency {
    pub count: u64,
    pub avg_ms: f64,
    pub p95_ms: f64,
    pub min_ms: f64,
    pub max_ms: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Dated<T> {
    pub date: String,
    #[serde(flatten)]
    pub value: T,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DailyTotals {
    pub date: String,
    pub tokens: u64,
    pub cost: f64,
    #[serde(flatten)]
    pub totals: Totals,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Quarter<T> {
    pub date: String,
    pub quarter_index: u32,
    #[serde(flatten)]
    pub value: T,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct QuarterTokens {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
    pub total_tokens: u64,
    pub total_cost: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DailyModel {
    pub date: String,
    pub provider: Option<String>,
    pub model: Option<String>,
    pub tokens: u64,
    pub cost: f64,
    pub count: u64,
}

/// One session's usage in the window (OpenClaw's `SessionCostSummary`).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionUsage {
    pub session_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_activity: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_activity: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<i64>,
    pub activity_dates: Vec<String>,
    pub daily_breakdown: Vec<DailyTotals>,
    pub daily_message_counts: Vec<Dated<MessageCounts>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub utc_quarter_hour_message_counts: Option<Vec<Quarter<MessageCounts>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub utc_quarter_hour_token_usage: Option<Vec<Quarter<QuarterTokens>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub daily_latency: Option<Vec<Dated<Latency>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub daily_model_usage: Option<Vec<DailyModel>>,
    pub message_counts: MessageCounts,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_usage: Option<ToolUsage>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_usage: Option<Vec<ModelUsage>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency: Option<Latency>,
    #[serde(flatten)]
    pub totals: Totals,
}

/// A row of `sessions.usage`.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionRow {
    pub key: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    pub session_id: String,
    pub scope: &'static str,
    pub updated_at: u64,
    pub agent_id: &'static str,
    pub creator_key: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub channel: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_provider: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    pub usage: Option<SessionUsage>,
    /// pincer does not break a session's context down by source.
    pub has_context_weight: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context_weight: Option<Value>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DayRow {
    pub date: String,
    pub tokens: u64,
    pub cost: f64,
    pub messages: u64,
    pub tool_calls: u64,
    pub errors: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentTotals {
    pub agent_id: String,
    pub totals: Totals,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ChannelTotals {
    pub channel: String,
    pub totals: Totals,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Activity {
    pub dates: Vec<String>,
    pub session_count: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CreatorTotals {
    pub key: String,
    pub totals: Totals,
    pub session_count: u64,
    pub daily: Vec<Dated<Totals>>,
    pub session_activity: Vec<Activity>,
}

/// Everything the usage page charts (OpenClaw's usage aggregates).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Aggregates {
    pub session_count: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub longest_session_duration_ms: Option<i64>,
    pub messages: MessageCounts,
    pub tools: ToolUsage,
    pub by_model: Vec<ModelUsage>,
    pub by_provider: Vec<ModelUsage>,
    pub by_agent: Vec<AgentTotals>,
    pub by_channel: Vec<ChannelTotals>,
    pub by_creator: Vec<CreatorTotals>,
    pub cost_daily: Vec<Dated<Totals>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency: Option<Latency>,
    pub daily_latency: Vec<Dated<Latency>>,
    pub model_daily: Vec<DailyModel>,
    pub daily: Vec<DayRow>,
}

/// The usage data is read from the transcripts on each request.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CacheStatus {
    pub status: &'static str,
    pub cached_files: usize,
    pub pending_files: usize,
    pub stale_files: usize,
    pub refreshed_at: i64,
}

impl CacheStatus {
    pub fn fresh(files: usize, now_ms: i64) -> Self {
        Self {
            status: "fresh",
            cached_files: files,
            pending_files: 0,
            stale_files: 0,
            refreshed_at: now_ms,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Creator {
    pub key: &'static str,
}

/// `sessions.usage`'s answer.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionsUsage {
    pub updated_at: i64,
    pub start_date: String,
    pub end_date: String,
    pub sessions: Vec<SessionRow>,
    pub totals: Totals,
    pub aggregates: Aggregates,
    pub creator_options: Vec<Creator>,
    pub cache_status: CacheStatus,
}

/// `usage.cost`'s answer (OpenClaw's `CostUsageSummary`).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CostSummary {
    pub updated_at: i64,
    pub days: i64,
    pub daily: Vec<Dated<Totals>>,
    pub totals: Totals,
    pub cache_status: CacheStatus,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Point {
    pub timestamp: i64,
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
    pub total_tokens: u64,
    pub cost: f64,
    pub cumulative_tokens: u64,
    pub cumulative_cost: f64,
}

/// `sessions.usage.timeseries`'s answer.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Timeseries {
    pub session_id: String,
    pub points: Vec<Point>,
}

/// `sessions.usage.logs`'s answer: a session's messages, newest last.
#[derive(Clone, Debug, Serialize)]
pub struct SessionLogs {
    pub logs: Vec<LogEntry>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LogEntry {
    pub timestamp: i64,
    pub role: &'static str,
    pub content: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost: Option<f64>,
}

/// `usage.status`'s answer: the providers' quota windows. pincer reads no
/// provider's quota, so there are none to show.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProviderStatus {
    pub updated_at: i64,
    pub providers: Vec<Value>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(json: Value) -> Result<Window, String> {
        let params: SessionsParams = serde_json::from_value(json).unwrap();
        // 2026-03-08 12:00 UTC; in New York a day of 23 hours.
        let now: jiff::Timestamp = "2026-03-08T12:00:00Z".parse().unwrap();
        params.dates().window(now)
    }

    fn ms(at: &str) -> i64 {
        at.parse::<jiff::Timestamp>().unwrap().as_millisecond()
    }

    #[test]
    fn windows_are_read_in_the_zone_asked_for() {
        let utc = window(serde_json::json!({"startDate": "2026-03-01", "endDate": "2026-03-02"}))
            .unwrap();
        assert_eq!(utc.start_ms, ms("2026-03-01T00:00:00Z"));
        assert_eq!(utc.end_ms, ms("2026-03-03T00:00:00Z") - 1);
        let offset = window(
            serde_json::json!({"startDate": "2026-03-01", "endDate": "2026-03-01",
            "mode": "specific", "utcOffset": "UTC+5:30"}),
        )
        .unwrap();
        assert_eq!(offset.start_ms, ms("2026-02-28T18:30:00Z"));
        assert_eq!(offset.day(ms("2026-02-28T18:30:00Z")), "2026-03-01");
        let zoned = window(
            serde_json::json!({"startDate": "2026-03-08", "endDate": "2026-03-08",
            "mode": "specific", "timeZone": "America/New_York", "utcOffset": "UTC-5"}),
        )
        .unwrap();
        assert_eq!(zoned.start_ms, ms("2026-03-08T05:00:00Z"));
        assert_eq!(zoned.end_ms, ms("2026-03-09T04:00:00Z") - 1);
        // The last 30 days, today included; `range` before that.
        let month = window(serde_json::json!({})).unwrap();
        assert_eq!(month.start_ms, ms("2026-02-07T00:00:00Z"));
        assert_eq!(month.days(), 30);
        let week = window(serde_json::json!({"range": "7d"})).unwrap();
        assert_eq!(week.day(week.start_ms), "2026-03-02");
        assert!(window(serde_json::json!({"range": "all"})).unwrap().all);
    }

    #[test]
    fn bad_dates_are_refused_as_openclaw_refuses_them() {
        for (params, error) in [
            (
                serde_json::json!({"startDate": "2026-02-30", "endDate": "2026-03-01"}),
                "invalid startDate: expected a valid YYYY-MM-DD calendar date",
            ),
            (
                serde_json::json!({"startDate": "2026-03-01"}),
                "startDate and endDate must be provided together",
            ),
            (
                serde_json::json!({"startDate": "2026-03-02", "endDate": "2026-03-01"}),
                "startDate must not be after endDate",
            ),
            (
                serde_json::json!({"mode": "specific", "timeZone": "Mars/Olympus"}),
                "invalid timeZone: expected a valid IANA time zone",
            ),
            (
                serde_json::json!({"mode": "specific", "utcOffset": "UTC+15"}),
                "invalid utcOffset: expected UTC-12:00 through UTC+14:00",
            ),
        ] {
            assert_eq!(window(params.clone()).unwrap_err(), error, "{params}");
        }
        assert_eq!(offset_minutes("UTC-4"), Some(-240));
        assert_eq!(offset_minutes("UTC+14:00"), Some(840));
        assert_eq!(offset_minutes("UTC+5:3"), None);
        assert_eq!(offset_minutes("GMT+1"), None);
    }

    #[test]
    fn totals_add_field_by_field() {
        let mut total = Totals::default();
        let one = Totals {
            input: 3,
            total_tokens: 3,
            missing_cost_entries: 1,
            missing_cost_by_model: Some(BTreeMap::from([("a/b".to_string(), 1)])),
            ..Default::default()
        };
        total.add(&one);
        total.add(&one);
        assert_eq!(total.input, 6);
        assert_eq!(total.missing_cost_by_model.unwrap()["a/b"], 2);
    }
}
