//! Encoding a batch of texts on several threads: the scheduler behind the
//! Python `encode_batch` (`py/encoder.rs`), free of Python so that
//! `cargo test` runs it. The binding passes in what needs Python: the work
//! of one run (with its panics caught), what the calling thread does before
//! its first run (make the result lists) and between runs (check Ctrl-C).

use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};

use crate::run::pieces::groups;
use crate::vocab::Rank;

/// The runs of neighbouring documents (texts of `sizes` bytes) that the
/// threads take in turn, each encoding its runs with one memo of merged
/// chunks (see docs/dev/performance.md, "encode_batch"). About sixteen runs per
/// thread, of at most 1 MiB: the threads' loads even out to within a
/// sixteenth (with four per thread, 16 threads were busy 9.6 cores' worth
/// of the batch on a 16-core machine, the last runs left to a few threads).
/// A run costs a hand-over on a channel, nothing more: each thread keeps its
/// memo for all its runs.
pub fn runs(sizes: &[usize], threads: usize) -> Vec<Range<usize>> {
    let total: usize = sizes.iter().sum();
    let run_bytes = (total / (16 * threads)).clamp(1, 1 << 20);
    groups(sizes, run_bytes)
}

/// Runs `work(k, memo)` for every run `k` in `0..runs`, on the calling thread
/// and the threads of `workers` (if any), which take the next run nobody has
/// taken until none is left; each thread keeps one memo (`new_memo()`) for
/// all the runs it takes. Returns the runs' results in run order, or the
/// batch's first error, which stops it (no run is started after it).
///
/// The calling thread runs `first` before it takes a run, and `between`
/// before each of its runs (Ctrl-C is seen on the calling thread only).
pub fn run_batch<M, T: Default + Send, E: Send>(
    runs: usize,
    workers: Option<&rayon::ThreadPool>,
    new_memo: impl Fn() -> M + Sync,
    first: impl FnOnce() -> Result<(), E>,
    mut between: impl FnMut() -> Result<(), E>,
    work: impl Fn(usize, &mut M) -> Result<T, E> + Sync,
) -> Result<Vec<T>, E> {
    let next_run = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let (next_run, stop, work, new_memo) = (&next_run, &stop, &work, &new_memo);
    // The next run nobody has taken; none after an error or Ctrl-C.
    let take = move || {
        let k = next_run.fetch_add(1, Relaxed);
        (k < runs && !stop.load(Relaxed)).then_some(k)
    };
    let run = move |k: usize, memo: &mut M| {
        let result = work(k, memo);
        // Stops the batch at once, before `keep` sees a worker's error.
        if result.is_err() {
            stop.store(true, Relaxed);
        }
        result
    };
    let (tx, rx) = std::sync::mpsc::channel::<(usize, Result<T, E>)>();
    let mut done: Vec<T> = (0..runs).map(|_| T::default()).collect();
    let mut outcome = Ok(());
    // A run's result, or the batch's first error (which stops it).
    let mut keep = |k: usize, result: Result<T, E>| match result {
        Ok(result) => done[k] = result,
        Err(e) => {
            stop.store(true, Relaxed);
            if outcome.is_ok() {
                outcome = Err(e);
            }
        }
    };
    let this_thread = |rx: std::sync::mpsc::Receiver<(usize, Result<T, E>)>| {
        if let Err(e) = first() {
            keep(0, Err(e));
        }
        let mut memo = new_memo();
        while let Some(k) = take() {
            if let Err(e) = between() {
                keep(k, Err(e));
                break;
            }
            keep(k, run(k, &mut memo));
        }
        for (k, result) in rx {
            keep(k, result);
        }
    };
    match workers {
        None => {
            drop(tx);
            this_thread(rx);
        }
        Some(workers) => workers.in_place_scope(|scope| {
            for _ in 0..workers.current_num_threads() {
                let tx = tx.clone();
                scope.spawn(move |_| {
                    let mut memo = new_memo();
                    while let Some(k) = take() {
                        let _ = tx.send((k, run(k, &mut memo)));
                    }
                });
            }
            drop(tx);
            this_thread(rx);
        }),
    }
    outcome.map(|()| done)
}

/// `0..lists.len()` cut into `parts` consecutive ranges (some maybe empty)
/// holding about as many ids each.
pub fn shares(lists: &[Vec<Rank>], parts: usize) -> Vec<Range<usize>> {
    let total: usize = lists.iter().map(Vec::len).sum();
    let mut out = Vec::with_capacity(parts);
    let (mut start, mut seen) = (0, 0);
    for (d, l) in lists.iter().enumerate() {
        seen += l.len();
        // Close share k once it holds its (k + 1) / parts of the ids.
        while out.len() + 1 < parts && seen * parts >= (out.len() + 1) * total {
            out.push(start..d + 1);
            start = d + 1;
        }
    }
    while out.len() < parts {
        out.push(start..lists.len());
        start = lists.len();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encode::{Encoder, Memo};
    use crate::split::patterns::GPT4_PATTERN;
    use crate::vocab::byte_ranks;
    use rustc_hash::{FxHashMap, FxHashSet};

    /// A batch on 1 to 3 threads gives every text the ids it gets alone, in
    /// order; an error stops it with the first error; `first` runs once and
    /// `between` before each of the calling thread's runs.
    #[test]
    fn batches_encode_as_texts_alone() {
        let enc =
            Encoder::new(byte_ranks(&["th", "the", "he", "en", "an"]), FxHashMap::default(), GPT4_PATTERN).unwrap();
        let texts: Vec<String> = (0..200).map(|i| format!("then the anthem {i}\n").repeat(i % 7 + 1)).collect();
        let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
        let none = FxHashSet::default();
        let alone: Vec<Vec<Rank>> = texts.iter().map(|t| enc.encode(t, &none).unwrap()).collect();
        let sizes: Vec<usize> = texts.iter().map(|t| t.len()).collect();
        for threads in 1..=3 {
            let workers = (threads > 1).then(|| crate::threads::pool(threads - 1).unwrap());
            let runs = runs(&sizes, threads);
            assert!(runs.len() >= 4 * threads, "{} runs", runs.len());
            let (mut firsts, mut betweens) = (0, 0);
            let got = run_batch(
                runs.len(),
                workers.as_deref(),
                || enc.memo(),
                || {
                    firsts += 1;
                    Ok::<(), String>(())
                },
                || {
                    betweens += 1;
                    Ok(())
                },
                |k, memo| enc.encode_each(&texts[runs[k].clone()], &none, memo),
            )
            .unwrap();
            assert_eq!(got.into_iter().flatten().collect::<Vec<_>>(), alone, "{threads} threads");
            assert_eq!(firsts, 1);
            assert!(betweens >= 1 && betweens <= runs.len(), "{betweens}");
            // A failing run, or Ctrl-C on the calling thread, stops the batch.
            let failed = run_batch(
                runs.len(),
                workers.as_deref(),
                Memo::default,
                || Ok(()),
                || Ok(()),
                |k, _| if k == 3 { Err(format!("run {k}")) } else { Ok(vec![vec![k as Rank]]) },
            );
            assert_eq!(failed, Err("run 3".to_string()));
            let interrupted = run_batch::<Memo, (), _>(
                runs.len(),
                workers.as_deref(),
                Memo::default,
                || Ok(()),
                || Err("interrupted"),
                |_, _| Ok(()),
            );
            assert_eq!(interrupted, Err("interrupted"));
        }
    }

    #[test]
    fn shares_hold_about_as_many_ids() {
        let lists: Vec<Vec<Rank>> = [5, 1, 1, 1, 2, 0, 6].iter().map(|&n| vec![0; n]).collect();
        assert_eq!(shares(&lists, 2), vec![0..4, 4..7]);
        assert_eq!(shares(&lists, 1), vec![0..7]);
        assert_eq!(shares(&lists[..0], 3), vec![0..0, 0..0, 0..0]);
    }
}
