//! Work of a session that goes on after its turn: helpers started with
//! `task` and `background: true`, and the `process` tool's commands. The session holds one [`Jobs`] table for
//! its life; each job has an id (`t1`, `t2`, …), a title, what it has
//! said so far and, once done, its result. When a job ends the session's
//! frontend hears of it ([`Jobs::finished`]) and tells the user at once
//! and the model at its next turn. Closing the session (or pincer
//! stopping) cancels [`Jobs::root`], which every job's token descends
//! from: nothing a session started outlives it.

use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// One job as `/tasks` shows it.
#[derive(Clone, Debug)]
pub struct Job {
    pub id: String,
    /// `subagent` or `shell`.
    pub kind: &'static str,
    /// What it is (`Helper `reviewer`: check the docs`).
    pub title: String,
    /// Its session, for a helper.
    pub session: Option<String>,
    pub started: Instant,
    /// The end of what it has said so far (bounded).
    pub output: String,
    /// `None` while it runs.
    pub result: Option<Finished>,
    cancel: CancellationToken,
}

/// How a job ended.
#[derive(Clone, Debug, PartialEq)]
pub struct Finished {
    pub id: String,
    pub title: String,
    pub text: String,
    pub is_error: bool,
    /// It was stopped (`/tasks stop`, the session closing) rather than
    /// failing on its own.
    pub stopped: bool,
    /// The model saw it end (it polled the process): nobody is told again.
    pub seen: bool,
}

/// What the frontend hears of a session's jobs.
#[derive(Clone, Debug, PartialEq)]
pub enum JobEvent {
    Started {
        id: String,
        title: String,
        /// `subagent` or `shell`.
        kind: &'static str,
        /// The call that started it.
        call_id: String,
    },
    Finished(Finished),
}

impl Finished {
    /// The message the model reads about it.
    pub fn for_model(&self) -> String {
        format!(
            "[Background task {} ({}) {}]\n{}",
            self.id,
            self.title,
            if self.is_error { "failed" } else { "finished" },
            self.text
        )
    }
}

/// Jobs kept once finished, for `/tasks`.
const KEEP_FINISHED: usize = 32;
/// Characters of output kept per job.
const KEEP_OUTPUT: usize = 4000;

/// A session's background jobs.
pub struct Jobs {
    jobs: Mutex<Vec<Job>>,
    next: Mutex<u64>,
    root: CancellationToken,
    finished: mpsc::UnboundedSender<JobEvent>,
    /// Taken once by the frontend that reports starts and endings.
    receiver: Mutex<Option<mpsc::UnboundedReceiver<JobEvent>>>,
    /// Results the model has not been given yet.
    undelivered: Mutex<Vec<Finished>>,
}

impl Default for Jobs {
    fn default() -> Self {
        let (finished, receiver) = mpsc::unbounded_channel();
        Self {
            jobs: Mutex::new(Vec::new()),
            next: Mutex::new(0),
            root: CancellationToken::new(),
            finished,
            receiver: Mutex::new(Some(receiver)),
            undelivered: Mutex::new(Vec::new()),
        }
    }
}

impl Drop for Jobs {
    fn drop(&mut self) {
        self.root.cancel();
    }
}

impl Jobs {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// The token every job's descends from.
    pub fn root(&self) -> &CancellationToken {
        &self.root
    }

    /// Stops every job (the session closes).
    pub fn stop_all(&self) {
        self.root.cancel();
    }

    /// Registers a job that call `call_id` started; its id and token, a
    /// child of the root's.
    pub fn start(
        &self,
        kind: &'static str,
        title: &str,
        session: Option<String>,
        call_id: &str,
    ) -> (String, CancellationToken) {
        let id = {
            let mut next = self.next.lock();
            *next += 1;
            format!("t{next}")
        };
        let cancel = self.root.child_token();
        self.jobs.lock().push(Job {
            id: id.clone(),
            kind,
            title: title.to_string(),
            session,
            started: Instant::now(),
            output: String::new(),
            result: None,
            cancel: cancel.clone(),
        });
        let _ = self.finished.send(JobEvent::Started {
            id: id.clone(),
            title: title.to_string(),
            kind,
            call_id: call_id.to_string(),
        });
        (id, cancel)
    }

    /// What job `id` has said so far (replaces the earlier text).
    pub fn progress(&self, id: &str, text: &str) {
        if let Some(job) = self.jobs.lock().iter_mut().find(|j| j.id == id) {
            job.output = tail(text);
        }
    }

    /// Job `id` ended: kept for `/tasks`, handed to the model at its next
    /// turn and reported to the frontend.
    pub fn finish(&self, id: &str, text: String, is_error: bool) {
        self.end(id, text, is_error, false, false);
    }

    /// Job `id` was stopped before it finished.
    pub fn stopped(&self, id: &str, text: String) {
        self.end(id, text, true, true, false);
    }

    /// The model saw job `id` end (it polled it): it ends, and nobody is
    /// told of it again.
    pub fn seen(&self, id: &str, text: String) {
        self.end(id, text, false, false, true);
    }

    fn end(&self, id: &str, text: String, is_error: bool, stopped: bool, seen: bool) {
        let finished = {
            let mut jobs = self.jobs.lock();
            // A job ends once (a process the model saw end, then its
            // watcher).
            let Some(job) = jobs.iter_mut().find(|j| j.id == id && j.result.is_none()) else {
                return;
            };
            let finished = Finished {
                id: id.to_string(),
                title: job.title.clone(),
                text,
                is_error,
                stopped,
                seen,
            };
            job.result = Some(finished.clone());
            let done = jobs.iter().filter(|j| j.result.is_some()).count();
            if done > KEEP_FINISHED
                && let Some(oldest) = jobs.iter().position(|j| j.result.is_some())
            {
                jobs.remove(oldest);
            }
            finished
        };
        if !seen {
            // Kept for the model's next turn, which may never come: the
            // oldest go past a bound.
            let mut undelivered = self.undelivered.lock();
            if undelivered.len() >= KEEP_FINISHED {
                undelivered.remove(0);
            }
            undelivered.push(finished.clone());
        }
        let _ = self.finished.send(JobEvent::Finished(finished));
    }

    /// The receiver of endings, for the frontend that reports them (once).
    pub fn take_finished(&self) -> Option<mpsc::UnboundedReceiver<JobEvent>> {
        self.receiver.lock().take()
    }

    /// The results the model has not seen, now delivered.
    pub fn take_undelivered(&self) -> Vec<Finished> {
        std::mem::take(&mut *self.undelivered.lock())
    }

    /// Stops job `id`; whether it was running.
    pub fn stop(&self, id: &str) -> bool {
        let jobs = self.jobs.lock();
        match jobs.iter().find(|j| j.id == id && j.result.is_none()) {
            Some(job) => {
                job.cancel.cancel();
                true
            }
            None => false,
        }
    }

    pub fn list(&self) -> Vec<Job> {
        self.jobs.lock().clone()
    }

    /// How many jobs of `kind` run now.
    pub fn running_of(&self, kind: &str) -> usize {
        self.jobs
            .lock()
            .iter()
            .filter(|j| j.kind == kind && j.result.is_none())
            .count()
    }

    pub fn running(&self) -> bool {
        self.jobs.lock().iter().any(|j| j.result.is_none())
    }
}

fn tail(text: &str) -> String {
    let count = text.chars().count();
    if count <= KEEP_OUTPUT {
        return text.to_string();
    }
    let rest: String = text.chars().skip(count - KEEP_OUTPUT).collect();
    format!("…{rest}")
}

/// `/tasks`: each job, running ones first, with what it has said.
pub fn describe(jobs: &[Job]) -> String {
    if jobs.is_empty() {
        return "No background tasks in this session.".to_string();
    }
    let mut text = String::from("Background tasks:\n");
    let running = jobs.iter().filter(|j| j.result.is_none());
    let done = jobs.iter().filter(|j| j.result.is_some());
    for job in running.chain(done) {
        let state = match &job.result {
            None => format!("running for {} s", job.started.elapsed().as_secs()),
            Some(f) if f.stopped => "stopped".to_string(),
            Some(f) if f.is_error => "failed".to_string(),
            Some(_) => "finished".to_string(),
        };
        text.push_str(&format!("\n{} — {} ({state})", job.id, job.title));
        if let Some(session) = &job.session {
            text.push_str(&format!(", session {session}"));
        }
        let said = match &job.result {
            Some(f) => f.text.as_str(),
            None => job.output.as_str(),
        };
        if !said.trim().is_empty() {
            for line in said.trim().lines().take(12) {
                text.push_str("\n    ");
                text.push_str(line);
            }
        }
        text.push('\n');
    }
    text.push_str("\n`/tasks stop ID` stops a running one.");
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_runs_finishes_and_is_delivered_once() {
        let jobs = Jobs::new();
        let mut ended = jobs.take_finished().unwrap();
        let (id, cancel) = jobs.start("subagent", "Helper: look", Some("sess_1".into()), "c1");
        assert_eq!(id, "t1");
        assert!(jobs.running());
        jobs.progress(&id, "looking");
        assert!(describe(&jobs.list()).contains("looking"));
        jobs.finish(&id, "found it".into(), false);
        assert!(!jobs.running());
        assert!(!cancel.is_cancelled());
        assert!(matches!(
            ended.try_recv().unwrap(),
            JobEvent::Started { .. }
        ));
        match ended.try_recv().unwrap() {
            JobEvent::Finished(done) => assert_eq!(done.text, "found it"),
            other => panic!("{other:?}"),
        }
        assert_eq!(jobs.take_undelivered().len(), 1);
        assert!(jobs.take_undelivered().is_empty());
        assert!(jobs.take_finished().is_none());
    }

    #[test]
    fn results_nobody_takes_are_bounded() {
        let jobs = Jobs::new();
        for n in 0..100 {
            let (id, _) = jobs.start("shell", &format!("job {n}"), None, "c");
            jobs.finish(&id, format!("done {n}"), false);
        }
        let kept = jobs.take_undelivered();
        assert_eq!(kept.len(), KEEP_FINISHED);
        assert_eq!(kept.last().unwrap().text, "done 99");
        assert!(jobs.list().len() <= KEEP_FINISHED + 1);
    }

    #[test]
    fn stopping_a_job_or_the_session_cancels_its_token() {
        let jobs = Jobs::new();
        let (one, first) = jobs.start("shell", "a", None, "c1");
        let (_, second) = jobs.start("shell", "b", None, "c2");
        assert!(jobs.stop(&one));
        assert!(first.is_cancelled() && !second.is_cancelled());
        assert!(!jobs.stop("t9"));
        drop(jobs);
        assert!(second.is_cancelled());
    }
}
