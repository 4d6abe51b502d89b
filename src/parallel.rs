//! Splitting CPU-bound work over the machine's cores.

/// Applies `work` to consecutive chunks of `items`, one chunk per core (at
/// most eight), and concatenates the results in order. Fewer than `min_len`
/// items are done on the calling thread, where starting threads would cost
/// more than it saves.
pub fn map_chunks<T, R>(items: &[T], min_len: usize, work: impl Fn(&[T]) -> Vec<R> + Sync) -> Vec<R>
where
    T: Sync,
    R: Send,
{
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(8));
    if threads < 2 || items.len() < min_len.max(2) {
        return work(items);
    }
    let chunk = items.len().div_ceil(threads);
    let work = &work;
    std::thread::scope(|scope| {
        let workers: Vec<_> = items
            .chunks(chunk)
            .skip(1)
            .map(|part| scope.spawn(move || work(part)))
            .collect();
        let mut out = work(&items[..chunk]);
        for worker in workers {
            match worker.join() {
                Ok(part) => out.extend(part),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        out
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_keep_the_order_of_the_items() {
        for len in [0, 1, 2, 3, 7, 100, 1001] {
            let items: Vec<usize> = (0..len).collect();
            let doubled = map_chunks(&items, 2, |part| part.iter().map(|n| n * 2).collect());
            assert_eq!(doubled, items.iter().map(|n| n * 2).collect::<Vec<_>>());
        }
    }
}
