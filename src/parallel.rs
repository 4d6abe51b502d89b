//! Splitting CPU-bound work over the machine's cores.

/// Applies `work` to consecutive chunks of `items`, one chunk per core (at
/// most eight), and hands the results to `emit` in order, each as soon as
/// it and every result before it are ready: the first chunk's as they are
/// made (on the calling thread), a later chunk's once the chunks before it
/// are done. Fewer than `min_len` items are done on the calling thread,
/// where starting threads would cost more than it saves. `work` is handed
/// its chunk and a function that takes each result it makes. After `emit`
/// returns false it is not called again (the workers still finish; what
/// they make is dropped).
///
/// A long result written as it is made overlaps the writing with the
/// making of the rest (a session's replay, several megabytes, goes to the
/// editor while it is still being serialised).
pub fn stream_chunks<T, R>(
    items: &[T],
    min_len: usize,
    work: impl Fn(&[T], &mut dyn FnMut(R)) + Sync,
    emit: &mut dyn FnMut(R) -> bool,
) where
    T: Sync,
    R: Send,
{
    let mut open = true;
    let mut give = |result: R| {
        if open {
            open = emit(result);
        }
    };
    let threads = cores();
    if threads < 2 || items.len() < min_len.max(2) {
        work(items, &mut give);
        return;
    }
    let chunk = items.len().div_ceil(threads);
    let work = &work;
    std::thread::scope(|scope| {
        let later: Vec<_> = items
            .chunks(chunk)
            .skip(1)
            .map(|part| {
                let (tx, rx) = std::sync::mpsc::channel();
                let worker = scope.spawn(move || {
                    work(part, &mut |result| {
                        // The receiver goes only when the caller panics.
                        let _ = tx.send(result);
                    })
                });
                (worker, rx)
            })
            .collect();
        work(&items[..chunk], &mut give);
        for (worker, rx) in later {
            // Ends when the worker drops its sender: done or panicked.
            for result in rx {
                give(result);
            }
            if let Err(panic) = worker.join() {
                std::panic::resume_unwind(panic);
            }
        }
    });
}

/// The cores work is split over (at most eight), found once: the standard
/// library reads the cgroup's files each time it is asked.
/// `work` applied to each of `items`, the results in order, spread over
/// the cores as [`stream_chunks`] spreads them (below `min_len` items, on
/// the calling thread).
pub fn map_chunks<T, R>(items: &[T], min_len: usize, work: impl Fn(&T) -> R + Sync) -> Vec<R>
where
    T: Sync,
    R: Send,
{
    let mut out = Vec::with_capacity(items.len());
    stream_chunks(
        items,
        min_len,
        |chunk, give| {
            for item in chunk {
                give(work(item));
            }
        },
        &mut |result| {
            out.push(result);
            true
        },
    );
    out
}

/// A bound on blocking work: at most `n` jobs of it on tokio's blocking
/// pool at once, the rest waiting (asynchronously) for a lane. Work that
/// reads files goes through one, off the runtime's workers, without a
/// burst of it starting a thread per job.
pub struct Lanes(tokio::sync::Semaphore);

impl Lanes {
    pub const fn new(lanes: usize) -> Self {
        Self(tokio::sync::Semaphore::const_new(lanes))
    }

    /// Runs `work` on the blocking pool once a lane is free.
    pub async fn run<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, tokio::task::JoinError> {
        // The semaphore is never closed.
        let _permit = self.0.acquire().await.ok();
        tokio::task::spawn_blocking(work).await
    }
}

/// How many runs read their files at once (see [`file_work`]).
pub const FILE_LANES: usize = 2;

/// The lanes of the runs' file work.
static RUN_FILES: Lanes = Lanes::new(FILE_LANES);

/// How many answers to the gateway's clients read files at once: enough
/// that a big transcript read does not hold up the rest, and a client
/// sending many requests at once cannot start a thread for each.
pub const ANSWER_LANES: usize = 8;

/// The lanes of the gateway's answers that read files (transcripts,
/// settings, the sessions directory).
pub static ANSWERS: Lanes = Lanes::new(ANSWER_LANES);

/// Runs a run's file work (reading skills, templates, settings) on the
/// blocking pool, off the runtime's workers, at most [`FILE_LANES`] at a
/// time: a hundred runs that start or end together queue here rather
/// than each taking a thread of its own, and the workers go on writing
/// frames.
pub async fn file_work<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, tokio::task::JoinError> {
    RUN_FILES.run(work).await
}

pub fn cores() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get().min(8)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A hundred runs starting at once take at most [`FILE_LANES`]
    /// threads for their file work, and every job still runs.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn file_work_runs_at_most_its_lanes_at_once() {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicUsize, Ordering};
        let running = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let jobs: Vec<_> = (0..12)
            .map(|n| {
                let (running, most) = (running.clone(), most.clone());
                tokio::spawn(file_work(move || {
                    let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    std::thread::sleep(std::time::Duration::from_millis(15));
                    running.fetch_sub(1, Ordering::SeqCst);
                    n
                }))
            })
            .collect();
        let mut done = Vec::new();
        for job in jobs {
            done.push(job.await.unwrap().unwrap());
        }
        assert_eq!(done, (0..12).collect::<Vec<_>>());
        assert_eq!(most.load(Ordering::SeqCst), FILE_LANES);
    }

    /// The answers' lanes hold a burst of requests to their number.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn answers_read_at_most_their_lanes_at_once() {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicUsize, Ordering};
        let running = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let jobs: Vec<_> = (0..3 * ANSWER_LANES)
            .map(|_| {
                let (running, most) = (running.clone(), most.clone());
                tokio::spawn(ANSWERS.run(move || {
                    let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    std::thread::sleep(std::time::Duration::from_millis(15));
                    running.fetch_sub(1, Ordering::SeqCst);
                }))
            })
            .collect();
        for job in jobs {
            job.await.unwrap().unwrap();
        }
        assert_eq!(most.load(Ordering::SeqCst), ANSWER_LANES);
    }

    #[test]
    fn streamed_results_keep_the_order_of_the_items_and_stop_when_told() {
        for len in [0, 1, 2, 3, 7, 100, 1001] {
            let items: Vec<usize> = (0..len).collect();
            let mut seen = Vec::new();
            stream_chunks(
                &items,
                2,
                |part, out| part.iter().for_each(|n| out(n * 2)),
                &mut |n| {
                    seen.push(n);
                    true
                },
            );
            assert_eq!(seen, items.iter().map(|n| n * 2).collect::<Vec<_>>());
        }
        let items: Vec<usize> = (0..1000).collect();
        let mut seen = Vec::new();
        stream_chunks(
            &items,
            2,
            |part, out| part.iter().for_each(|n| out(*n)),
            &mut |n| {
                seen.push(n);
                n < 700
            },
        );
        assert_eq!(seen, (0..=700).collect::<Vec<_>>());
    }

    /// The first results are handed on before the last are made.
    #[test]
    fn the_first_results_go_out_before_the_work_is_done() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let items: Vec<usize> = (0..4000).collect();
        let made = AtomicUsize::new(0);
        let mut made_at_first = None;
        stream_chunks(
            &items,
            2,
            |part, out| {
                for n in part {
                    made.fetch_add(1, Ordering::SeqCst);
                    out(*n);
                }
            },
            &mut |_| {
                made_at_first.get_or_insert(made.load(Ordering::SeqCst));
                true
            },
        );
        let first = made_at_first.unwrap();
        assert!(
            first < items.len(),
            "the first result waited for all {first}"
        );
    }
}
