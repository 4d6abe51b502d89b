//! The usage methods' figures, read from the sessions' transcripts: each
//! message of a transcript is one contribution (a prompt, a model call
//! with its tokens and cost, a tool's result), and a request adds up the
//! contributions whose time falls in its window, as OpenClaw's rollup
//! does, so that its Control UI's own accumulator, fed the rows, arrives
//! at the same aggregates.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use crate::gateway::protocol::usage::{
    Activity, AgentTotals, Aggregates, ChannelTotals, CreatorTotals, DailyModel, DailyTotals,
    Dated, DayRow, LOG_TEXT_MAX, Latency, LogEntry, MAX_POINTS, MessageCounts, ModelUsage, Point,
    Quarter, QuarterTokens, SessionUsage, Timeseries, ToolCount, ToolUsage, Totals,
    UNKNOWN_CREATOR, Window,
};
use crate::llm::{AssistantContent, Content, Message, StopReason};
use crate::session::transcript::Record;

/// The longest wait from a prompt to an answer that counts as latency
/// (OpenClaw's `MAX_LATENCY_MS`, 12 hours).
const MAX_LATENCY_MS: i64 = 12 * 3600 * 1000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    User,
    Assistant,
    ToolResult,
}

/// One message of a transcript, as usage counts it.
#[derive(Clone, Debug)]
struct Contribution {
    at: Option<i64>,
    role: Role,
    tools: Vec<String>,
    result_error: bool,
    error_stop: bool,
    usage: Option<Totals>,
    provider: Option<String>,
    model: Option<String>,
    /// For the logs only.
    text: String,
}

impl Contribution {
    fn counts(&self) -> MessageCounts {
        let mut counts = MessageCounts::default();
        match self.role {
            Role::User => {
                counts.user = 1;
                counts.total = 1;
            }
            Role::Assistant => {
                counts.assistant = 1;
                counts.total = 1;
            }
            Role::ToolResult => {
                counts.tool_results = 1;
                counts.errors += u64::from(self.result_error);
            }
        }
        counts.tool_calls = self.tools.len() as u64;
        counts.errors += u64::from(self.error_stop);
        counts
    }
}

fn millis(rfc3339: &str) -> Option<i64> {
    rfc3339
        .parse::<jiff::Timestamp>()
        .ok()
        .map(|t| t.as_millisecond())
}

fn joined(blocks: impl Iterator<Item = String>) -> String {
    blocks
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join("\n")
}

fn content_text(content: &[Content]) -> String {
    joined(content.iter().map(|block| match block {
        Content::Text { text } => text.clone(),
        _ => String::new(),
    }))
}

/// A model call's tokens and cost as OpenClaw's totals.
fn totals_of(usage: &crate::llm::Usage, provider: &str, model: &str) -> Totals {
    let tokens = usage.context_tokens();
    let missing = tokens > 0 && usage.cost.total == 0.0;
    Totals {
        input: usage.input,
        output: usage.output,
        cache_read: usage.cache_read,
        cache_write: usage.cache_write,
        total_tokens: tokens,
        total_cost: usage.cost.total,
        input_cost: usage.cost.input,
        output_cost: usage.cost.output,
        cache_read_cost: usage.cost.cache_read,
        cache_write_cost: usage.cost.cache_write,
        missing_cost_entries: u64::from(missing),
        missing_cost_by_model: missing
            .then(|| BTreeMap::from([(format!("{provider}/{model}"), 1)])),
    }
}

/// The contributions of the transcript at `path`, in its order.
fn contributions(path: &Path) -> Result<Vec<Contribution>, String> {
    let transcript = crate::session::transcript::load(path).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    for entry in transcript.entries {
        let at = millis(&entry.timestamp);
        let message = match entry.record {
            Record::Message { message, .. } => message,
            Record::ToolResult { message, .. } => Message::ToolResult(message),
            _ => continue,
        };
        let contribution = match message {
            Message::User { content } => Contribution {
                at,
                role: Role::User,
                tools: Vec::new(),
                result_error: false,
                error_stop: false,
                usage: None,
                provider: None,
                model: None,
                text: content_text(&content),
            },
            Message::Assistant(reply) => {
                let tools: Vec<String> = reply.tool_calls().map(|c| c.name.clone()).collect();
                let text = joined(reply.content.iter().map(|block| match block {
                    AssistantContent::Text { text } => text.clone(),
                    AssistantContent::ToolCall(call) => format!("[Tool: {}]", call.name),
                    _ => String::new(),
                }));
                Contribution {
                    at,
                    role: Role::Assistant,
                    error_stop: matches!(
                        reply.stop_reason,
                        StopReason::Error | StopReason::Aborted
                    ),
                    usage: Some(totals_of(&reply.usage, &reply.provider, &reply.model)),
                    provider: Some(reply.provider),
                    model: Some(reply.model),
                    tools,
                    result_error: false,
                    text,
                }
            }
            Message::ToolResult(result) => Contribution {
                at,
                role: Role::ToolResult,
                tools: Vec::new(),
                result_error: result.is_error,
                error_stop: false,
                usage: None,
                provider: None,
                model: None,
                text: joined(
                    [
                        format!("[Tool: {}]", result.tool_name),
                        "[Tool Result]".to_string(),
                        content_text(&result.content),
                    ]
                    .into_iter(),
                ),
            },
        };
        out.push(contribution);
    }
    Ok(out)
}

/// Latencies, kept whole: a session has few enough answers.
#[derive(Default)]
struct Latencies(Vec<f64>);

impl Latencies {
    fn stats(&self) -> Option<Latency> {
        if self.0.is_empty() {
            return None;
        }
        let mut sorted = self.0.clone();
        sorted.sort_by(f64::total_cmp);
        let count = sorted.len();
        let p95 = sorted[(count as f64 * 0.95).ceil() as usize - 1];
        Some(Latency {
            count: count as u64,
            avg_ms: sorted.iter().sum::<f64>() / count as f64,
            p95_ms: p95,
            min_ms: sorted[0],
            max_ms: sorted[count - 1],
        })
    }
}

/// Adds a model call to a list of models, keyed by provider and model.
fn add_model(
    models: &mut Vec<ModelUsage>,
    provider: &Option<String>,
    model: &Option<String>,
    count: u64,
    totals: &Totals,
) {
    match models
        .iter_mut()
        .find(|m| m.provider == *provider && m.model == *model)
    {
        Some(existing) => {
            existing.count += count;
            existing.totals.add(totals);
        }
        None => {
            let mut entry = ModelUsage {
                provider: provider.clone(),
                model: model.clone(),
                count,
                totals: Totals::default(),
            };
            entry.totals.add(totals);
            models.push(entry);
        }
    }
}

fn by_cost_then_tokens(models: &mut [ModelUsage]) {
    models.sort_by(|a, b| {
        b.totals
            .total_cost
            .total_cmp(&a.totals.total_cost)
            .then(b.totals.total_tokens.cmp(&a.totals.total_tokens))
    });
}

fn add_tool(tools: &mut Vec<ToolCount>, name: &str, count: u64) {
    match tools.iter_mut().find(|t| t.name == name) {
        Some(tool) => tool.count += count,
        None => tools.push(ToolCount {
            name: name.to_string(),
            count,
        }),
    }
}

fn tool_usage(mut tools: Vec<ToolCount>, ties_by_name: bool) -> ToolUsage {
    tools.sort_by(|a, b| {
        let by_count = b.count.cmp(&a.count);
        if ties_by_name {
            by_count.then_with(|| a.name.cmp(&b.name))
        } else {
            by_count
        }
    });
    ToolUsage {
        total_calls: tools.iter().map(|t| t.count).sum(),
        unique_tools: tools.len(),
        tools,
    }
}

/// The UTC day and quarter hour of `ms`.
fn quarter(ms: i64) -> (String, u32) {
    let Ok(at) = jiff::Timestamp::from_millisecond(ms) else {
        return (String::new(), 0);
    };
    let utc = at.to_zoned(jiff::tz::TimeZone::UTC);
    let minutes = utc.hour() as u32 * 60 + utc.minute() as u32;
    (utc.date().to_string(), minutes / 15)
}

/// Quarter-hour rows in order; none for none.
fn quarters<T>(rows: BTreeMap<(String, u32), T>) -> Option<Vec<Quarter<T>>> {
    let rows: Vec<_> = rows
        .into_iter()
        .map(|((date, quarter_index), value)| Quarter {
            date,
            quarter_index,
            value,
        })
        .collect();
    (!rows.is_empty()).then_some(rows)
}

/// The usage of the session `session_id` whose transcript is `path`, in
/// `window` (OpenClaw's `buildSessionCostSummaryFromRollup`).
pub fn session(path: &Path, session_id: &str, window: &Window) -> Result<SessionUsage, String> {
    Ok(summarize(&contributions(path)?, session_id, window))
}

fn summarize(contributions: &[Contribution], session_id: &str, window: &Window) -> SessionUsage {
    let mut usage = SessionUsage {
        session_id: session_id.to_string(),
        ..Default::default()
    };
    let mut dates = BTreeSet::new();
    let mut daily: BTreeMap<String, Totals> = BTreeMap::new();
    let mut daily_messages: BTreeMap<String, MessageCounts> = BTreeMap::new();
    let mut quarter_messages: BTreeMap<(String, u32), MessageCounts> = BTreeMap::new();
    let mut quarter_tokens: BTreeMap<(String, u32), QuarterTokens> = BTreeMap::new();
    let mut daily_latency: BTreeMap<String, Latencies> = BTreeMap::new();
    let mut daily_models: Vec<DailyModel> = Vec::new();
    let mut latencies = Latencies::default();
    let mut tools: Vec<ToolCount> = Vec::new();
    let mut models: Vec<ModelUsage> = Vec::new();
    let mut last_prompt: Option<i64> = None;
    for contribution in contributions {
        let counts = contribution.counts();
        let Some(at) = contribution.at else {
            // Untimed: counted only for the whole history.
            if window.all {
                usage.message_counts.add(&counts);
                for tool in &contribution.tools {
                    add_tool(&mut tools, tool, 1);
                }
                if let Some(totals) = &contribution.usage {
                    usage.totals.add(totals);
                    add_model(
                        &mut models,
                        &contribution.provider,
                        &contribution.model,
                        1,
                        totals,
                    );
                }
            }
            continue;
        };
        let latency = match contribution.role {
            Role::Assistant => last_prompt
                .map(|prompt| (at - prompt).max(0))
                .filter(|ms| *ms <= MAX_LATENCY_MS),
            _ => None,
        };
        if contribution.role == Role::User {
            last_prompt = Some(at);
        }
        if !window.contains(at) {
            continue;
        }
        let day = window.day(at);
        usage.first_activity = Some(usage.first_activity.map_or(at, |first| first.min(at)));
        usage.last_activity = Some(usage.last_activity.map_or(at, |last| last.max(at)));
        dates.insert(day.clone());
        usage.message_counts.add(&counts);
        daily_messages.entry(day.clone()).or_default().add(&counts);
        let (utc_day, index) = quarter(at);
        quarter_messages
            .entry((utc_day.clone(), index))
            .or_default()
            .add(&counts);
        for tool in &contribution.tools {
            add_tool(&mut tools, tool, 1);
        }
        if let Some(totals) = &contribution.usage {
            usage.totals.add(totals);
            daily.entry(day.clone()).or_default().add(totals);
            let q = quarter_tokens.entry((utc_day, index)).or_default();
            q.input += totals.input;
            q.output += totals.output;
            q.cache_read += totals.cache_read;
            q.cache_write += totals.cache_write;
            q.total_tokens += totals.total_tokens;
            q.total_cost += totals.total_cost;
            if contribution.provider.is_some() || contribution.model.is_some() {
                add_model(
                    &mut models,
                    &contribution.provider,
                    &contribution.model,
                    1,
                    totals,
                );
                match daily_models.iter_mut().find(|m| {
                    m.date == day
                        && m.provider == contribution.provider
                        && m.model == contribution.model
                }) {
                    Some(m) => {
                        m.tokens += totals.total_tokens;
                        m.cost += totals.total_cost;
                        m.count += 1;
                    }
                    None => daily_models.push(DailyModel {
                        date: day.clone(),
                        provider: contribution.provider.clone(),
                        model: contribution.model.clone(),
                        tokens: totals.total_tokens,
                        cost: totals.total_cost,
                        count: 1,
                    }),
                }
            }
        }
        if let Some(ms) = latency {
            latencies.0.push(ms as f64);
            daily_latency.entry(day).or_default().0.push(ms as f64);
        }
    }
    if let (Some(first), Some(last)) = (usage.first_activity, usage.last_activity) {
        usage.duration_ms = Some((last - first).max(0));
    }
    usage.activity_dates = dates.into_iter().collect();
    usage.daily_breakdown = daily
        .into_iter()
        .map(|(date, totals)| DailyTotals {
            date,
            tokens: totals.total_tokens,
            cost: totals.total_cost,
            totals,
        })
        .collect();
    usage.daily_message_counts = daily_messages
        .into_iter()
        .map(|(date, value)| Dated { date, value })
        .collect();
    usage.utc_quarter_hour_message_counts = quarters(quarter_messages);
    usage.utc_quarter_hour_token_usage = quarters(quarter_tokens);
    let days: Vec<_> = daily_latency
        .into_iter()
        .filter_map(|(date, l)| l.stats().map(|value| Dated { date, value }))
        .collect();
    usage.daily_latency = (!days.is_empty()).then_some(days);
    daily_models.sort_by(|a, b| a.date.cmp(&b.date).then(b.cost.total_cmp(&a.cost)));
    usage.daily_model_usage = (!daily_models.is_empty()).then_some(daily_models);
    usage.tool_usage = (!tools.is_empty()).then(|| tool_usage(tools, true));
    by_cost_then_tokens(&mut models);
    usage.model_usage = (!models.is_empty()).then_some(models);
    usage.latency = latencies.stats();
    usage
}

/// Latency merged across sessions as OpenClaw merges it: counts and
/// means exactly, the 95th percentile as the largest of the parts'.
struct MergedLatency {
    count: u64,
    sum: f64,
    min: f64,
    max: f64,
    p95: f64,
}

impl Default for MergedLatency {
    fn default() -> Self {
        Self {
            count: 0,
            sum: 0.0,
            min: f64::INFINITY,
            max: 0.0,
            p95: 0.0,
        }
    }
}

impl MergedLatency {
    fn add(&mut self, l: &Latency) {
        self.count += l.count;
        self.sum += l.avg_ms * l.count as f64;
        self.min = self.min.min(l.min_ms);
        self.max = self.max.max(l.max_ms);
        self.p95 = self.p95.max(l.p95_ms);
    }

    fn summary(&self) -> Latency {
        Latency {
            count: self.count,
            avg_ms: if self.count > 0 {
                self.sum / self.count as f64
            } else {
                0.0
            },
            min_ms: if self.min.is_finite() { self.min } else { 0.0 },
            max_ms: self.max,
            p95_ms: self.p95,
        }
    }
}

/// The aggregates of many sessions' usage (OpenClaw's
/// `createUsageAggregateAccumulator`).
#[derive(Default)]
pub struct Accumulator {
    totals: Totals,
    messages: MessageCounts,
    tools: Vec<ToolCount>,
    models: Vec<ModelUsage>,
    providers: Vec<ModelUsage>,
    agents: Vec<(String, Totals)>,
    channels: Vec<(String, Totals)>,
    creator: Option<CreatorTotals>,
    creator_daily: BTreeMap<String, Totals>,
    creator_activity: BTreeMap<String, Activity>,
    days: BTreeMap<String, DayRow>,
    cost_days: BTreeMap<String, Totals>,
    daily_latency: BTreeMap<String, MergedLatency>,
    daily_models: Vec<DailyModel>,
    latency: MergedLatency,
    session_count: u64,
    longest: i64,
}

fn add_grouped(groups: &mut Vec<(String, Totals)>, key: &str, totals: &Totals) {
    match groups.iter_mut().find(|(k, _)| k == key) {
        Some((_, existing)) => existing.add(totals),
        None => {
            let mut sum = Totals::default();
            sum.add(totals);
            groups.push((key.to_string(), sum));
        }
    }
}

impl Accumulator {
    pub fn add(&mut self, usage: Option<&SessionUsage>, agent: &str, channel: Option<&str>) {
        let Some(usage) = usage else {
            return;
        };
        self.totals.add(&usage.totals);
        self.longest = self.longest.max(usage.duration_ms.unwrap_or(0));
        let counted = usage.first_activity.is_some() || usage.message_counts.total > 0;
        self.session_count += u64::from(counted);
        self.messages.add(&usage.message_counts);
        for tool in usage.tool_usage.iter().flat_map(|t| &t.tools) {
            add_tool(&mut self.tools, &tool.name, tool.count);
        }
        for model in usage.model_usage.iter().flatten() {
            add_model(
                &mut self.models,
                &model.provider,
                &model.model,
                model.count,
                &model.totals,
            );
            let provider = Some(
                model
                    .provider
                    .clone()
                    .unwrap_or_else(|| "unknown".to_string()),
            );
            add_model(
                &mut self.providers,
                &provider,
                &None,
                model.count,
                &model.totals,
            );
        }
        add_grouped(&mut self.agents, agent, &usage.totals);
        if let Some(channel) = channel.filter(|c| !c.is_empty()) {
            add_grouped(&mut self.channels, channel, &usage.totals);
        }
        let creator = self.creator.get_or_insert_with(|| CreatorTotals {
            key: UNKNOWN_CREATOR.to_string(),
            totals: Totals::default(),
            session_count: 0,
            daily: Vec::new(),
            session_activity: Vec::new(),
        });
        creator.totals.add(&usage.totals);
        if counted {
            creator.session_count += 1;
            let dates: BTreeSet<String> = usage
                .activity_dates
                .iter()
                .cloned()
                .chain(usage.daily_breakdown.iter().map(|d| d.date.clone()))
                .chain(usage.daily_message_counts.iter().map(|d| d.date.clone()))
                .collect();
            let dates: Vec<String> = dates.into_iter().collect();
            self.creator_activity
                .entry(dates.join(","))
                .or_insert_with(|| Activity {
                    dates,
                    session_count: 0,
                })
                .session_count += 1;
        }
        if let Some(latency) = &usage.latency
            && latency.count > 0
        {
            self.latency.add(latency);
        }
        for day in usage.daily_latency.iter().flatten() {
            self.daily_latency
                .entry(day.date.clone())
                .or_default()
                .add(&day.value);
        }
        for day in &usage.daily_breakdown {
            let row = self.day(&day.date);
            row.tokens += day.tokens;
            row.cost += day.cost;
            self.cost_days
                .entry(day.date.clone())
                .or_default()
                .add(&day.totals);
            self.creator_daily
                .entry(day.date.clone())
                .or_default()
                .add(&day.totals);
        }
        for day in &usage.daily_message_counts {
            let row = self.day(&day.date);
            row.messages += day.value.total;
            row.tool_calls += day.value.tool_calls;
            row.errors += day.value.errors;
        }
        for day in usage.daily_model_usage.iter().flatten() {
            match self
                .daily_models
                .iter_mut()
                .find(|m| m.date == day.date && m.provider == day.provider && m.model == day.model)
            {
                Some(m) => {
                    m.tokens += day.tokens;
                    m.cost += day.cost;
                    m.count += day.count;
                }
                None => self.daily_models.push(day.clone()),
            }
        }
    }

    fn day(&mut self, date: &str) -> &mut DayRow {
        self.days.entry(date.to_string()).or_insert_with(|| DayRow {
            date: date.to_string(),
            tokens: 0,
            cost: 0.0,
            messages: 0,
            tool_calls: 0,
            errors: 0,
        })
    }

    /// The totals and the aggregates.
    pub fn finish(self) -> (Totals, Aggregates) {
        let mut models = self.models;
        by_cost_then_tokens(&mut models);
        let mut providers = self.providers;
        by_cost_then_tokens(&mut providers);
        let mut agents: Vec<AgentTotals> = self
            .agents
            .into_iter()
            .map(|(agent_id, totals)| AgentTotals { agent_id, totals })
            .collect();
        agents.sort_by(|a, b| b.totals.total_cost.total_cmp(&a.totals.total_cost));
        let mut channels: Vec<ChannelTotals> = self
            .channels
            .into_iter()
            .map(|(channel, totals)| ChannelTotals { channel, totals })
            .collect();
        channels.sort_by(|a, b| b.totals.total_cost.total_cmp(&a.totals.total_cost));
        let creators = self
            .creator
            .map(|mut creator| {
                creator.daily = self
                    .creator_daily
                    .into_iter()
                    .map(|(date, value)| Dated { date, value })
                    .collect();
                creator.session_activity = self.creator_activity.into_values().collect();
                creator
            })
            .into_iter()
            .collect();
        let mut daily_models = self.daily_models;
        daily_models.sort_by(|a, b| a.date.cmp(&b.date).then(b.cost.total_cmp(&a.cost)));
        let aggregates = Aggregates {
            session_count: self.session_count,
            longest_session_duration_ms: (self.longest > 0).then_some(self.longest),
            messages: self.messages,
            tools: tool_usage(self.tools, false),
            by_model: models,
            by_provider: providers,
            by_agent: agents,
            by_channel: channels,
            by_creator: creators,
            cost_daily: self
                .cost_days
                .into_iter()
                .map(|(date, value)| Dated { date, value })
                .collect(),
            latency: (self.latency.count > 0).then(|| self.latency.summary()),
            daily_latency: self
                .daily_latency
                .into_iter()
                .map(|(date, l)| Dated {
                    date,
                    value: l.summary(),
                })
                .collect(),
            model_daily: daily_models,
            daily: self.days.into_values().collect(),
        };
        (self.totals, aggregates)
    }
}

/// `sessions.usage.timeseries`: each model call's tokens and cost, with
/// running sums, at most [`MAX_POINTS`] (neighbours summed).
pub fn timeseries(path: &Path, session_id: &str) -> Result<Timeseries, String> {
    let mut points: Vec<Point> = contributions(path)?
        .into_iter()
        .filter_map(|c| {
            let totals = c.usage?;
            let at = c.at.filter(|at| *at > 0)?;
            Some(Point {
                timestamp: at,
                input: totals.input,
                output: totals.output,
                cache_read: totals.cache_read,
                cache_write: totals.cache_write,
                total_tokens: totals.total_tokens,
                cost: totals.total_cost,
                ..Default::default()
            })
        })
        .collect();
    points.sort_by_key(|p| p.timestamp);
    if points.len() > MAX_POINTS {
        let step = points.len().div_ceil(MAX_POINTS);
        points = points
            .chunks(step)
            .map(|chunk| {
                let mut sum = Point::default();
                for p in chunk {
                    sum.timestamp = p.timestamp;
                    sum.input += p.input;
                    sum.output += p.output;
                    sum.cache_read += p.cache_read;
                    sum.cache_write += p.cache_write;
                    sum.total_tokens += p.total_tokens;
                    sum.cost += p.cost;
                }
                sum
            })
            .collect();
    }
    let (mut tokens, mut cost) = (0, 0.0);
    for point in &mut points {
        tokens += point.total_tokens;
        cost += point.cost;
        point.cumulative_tokens = tokens;
        point.cumulative_cost = cost;
    }
    Ok(Timeseries {
        session_id: session_id.to_string(),
        points,
    })
}

/// Cuts `text` to [`LOG_TEXT_MAX`] UTF-16 units, ending with `…`.
fn cut(text: String) -> String {
    let mut units = 0;
    for (i, c) in text.char_indices() {
        units += c.len_utf16();
        if units > LOG_TEXT_MAX {
            return format!("{}…", &text[..i]);
        }
    }
    text
}

/// `sessions.usage.logs`: the newest `limit` messages, oldest first.
pub fn logs(path: &Path, limit: usize) -> Result<Vec<LogEntry>, String> {
    let mut entries: Vec<LogEntry> = contributions(path)?
        .into_iter()
        .filter_map(|c| {
            let content = c.text.trim().to_string();
            if content.is_empty() {
                return None;
            }
            let role = match c.role {
                Role::User => "user",
                Role::Assistant => "assistant",
                Role::ToolResult => "toolResult",
            };
            Some(LogEntry {
                timestamp: c.at.unwrap_or(0),
                role,
                content: cut(content),
                tokens: c.usage.as_ref().map(|u| u.total_tokens),
                cost: c.usage.as_ref().map(|u| u.total_cost),
            })
        })
        .collect();
    entries.sort_by_key(|e| e.timestamp);
    if entries.len() > limit {
        entries.drain(..entries.len() - limit);
    }
    Ok(entries)
}

#[cfg(test)]
mod tests;
