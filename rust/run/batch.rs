//! Encoding a batch of texts on several threads: the scheduler behind the
//! Python `encode_batch` (`py/encoder.rs`), free of Python so that
//! `cargo test` runs it. The binding passes in what needs Python: the work
//! of one run (with its panics caught), what the calling thread does before
//! its first run (make the result lists) and between runs (check Ctrl-C).

use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};

use crate::run::pieces::groups;
use crate::vocab::Rank;

/// The most bytes a run holds (unless one text is longer).
const RUN_BYTES: usize = 1 << 20;

/// A long text's pieces are no shorter than this: a memo makes its front
/// tables for a text of 64 KiB or more (`encode/front.rs`), and a piece is
/// encoded as a text.
const MIN_PIECE: usize = 1 << 16;

/// The size of a run for `total` bytes on `threads` threads: about sixteen
/// runs per thread, of at most 1 MiB, so that the threads' loads even out to
/// within a sixteenth (with four per thread, 16 threads were busy 9.6 cores'
/// worth of the batch on a 16-core machine, the last runs left to a few
/// threads). A run costs a hand-over on a channel, nothing more: each thread
/// keeps its memo for all its runs.
fn run_bytes(total: usize, threads: usize) -> usize {
    (total / (16 * threads.max(1))).clamp(1, RUN_BYTES)
}

/// The runs of neighbouring documents (texts of `sizes` bytes) that the
/// threads take in turn, each encoding its runs with one memo of merged
/// chunks (see docs/dev/performance.md, "encode_batch").
pub fn runs(sizes: &[usize], threads: usize) -> Vec<Range<usize>> {
    groups(sizes, run_bytes(sizes.iter().sum(), threads))
}

/// The indices of `runs` (ranges of items of `sizes` bytes), the run with
/// the most bytes first (ties in batch order): the order the threads take
/// them in. Taken in batch order, a long run near the end kept one thread
/// busy while the others had nothing left to take.
pub fn largest_first(runs: &[Range<usize>], sizes: &[usize]) -> Vec<usize> {
    let bytes: Vec<usize> = runs.iter().map(|r| sizes[r.clone()].iter().sum()).collect();
    let mut order: Vec<usize> = (0..runs.len()).collect();
    order.sort_by_key(|&k| std::cmp::Reverse(bytes[k]));
    order
}

/// A batch's work for [`run_batch`]: the texts as parts (a text, or for a
/// text much longer than a run, its pieces), the parts in runs of
/// neighbours, and the order the threads take the runs in (largest first).
/// A long text is shared by the threads as `encode` with `num_threads`
/// shares one: left whole, one thread encoded it while the others waited.
pub struct Plan<'t> {
    /// The texts' parts, in batch order.
    pub parts: Vec<&'t str>,
    /// Text i's parts: `parts[spans[i]]`.
    spans: Vec<Range<usize>>,
    /// Runs of neighbouring parts (ranges of `parts`).
    pub runs: Vec<Range<usize>>,
    /// The runs' indices, in the order the threads take them.
    pub order: Vec<usize>,
}

impl<'t> Plan<'t> {
    /// The plan for `texts` on `threads` threads. `cut(text, bytes)` cuts a
    /// long text into pieces of about `bytes` that encode, one after another,
    /// to the text's ids (`pieces::cut_for`), or leaves it whole.
    pub fn new(texts: &[&'t str], threads: usize, cut: impl Fn(&'t str, usize) -> Vec<&'t str>) -> Plan<'t> {
        let run = run_bytes(texts.iter().map(|t| t.len()).sum(), threads);
        let piece = run.max(MIN_PIECE);
        let mut parts = Vec::with_capacity(texts.len());
        let mut spans = Vec::with_capacity(texts.len());
        for &text in texts {
            let start = parts.len();
            if threads > 1 && text.len() >= 2 * piece {
                parts.extend(cut(text, piece));
            } else {
                parts.push(text);
            }
            spans.push(start..parts.len());
        }
        let sizes: Vec<usize> = parts.iter().map(|p| p.len()).collect();
        let runs = groups(&sizes, run);
        let order = largest_first(&runs, &sizes);
        Plan { parts, spans, runs, order }
    }

    /// Each text's ids, from its parts' ids (`ids`, in the order of `parts`).
    pub fn join(&self, ids: Vec<Vec<Rank>>) -> Vec<Vec<Rank>> {
        debug_assert_eq!(ids.len(), self.parts.len());
        let mut ids = ids.into_iter();
        self.spans
            .iter()
            .map(|span| match span.len() {
                1 => ids.next().unwrap_or_default(),
                n => ids.by_ref().take(n).collect::<Vec<_>>().concat(),
            })
            .collect()
    }
}

/// Runs `work(k, memo)` for every run `k` in `order` (a permutation of
/// `0..order.len()`), on the calling thread and the threads of `workers` (if
/// any), which take the next run in `order` nobody has taken until none is
/// left; each thread keeps one memo (`new_memo()`) for all the runs it takes.
/// Returns the runs' results by run (`k`), or the batch's first error, which
/// stops it (no run is started after it).
///
/// The calling thread runs `first` before it takes a run, and `between`
/// before each of its runs (Ctrl-C is seen on the calling thread only).
pub fn run_batch<M, T: Default + Send, E: Send>(
    order: &[usize],
    workers: Option<&rayon::ThreadPool>,
    new_memo: impl Fn() -> M + Sync,
    first: impl FnOnce() -> Result<(), E>,
    mut between: impl FnMut() -> Result<(), E>,
    work: impl Fn(usize, &mut M) -> Result<T, E> + Sync,
) -> Result<Vec<T>, E> {
    let runs = order.len();
    let next_run = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let (next_run, stop, work, new_memo) = (&next_run, &stop, &work, &new_memo);
    // The next run nobody has taken; none after an error or Ctrl-C.
    let take = move || {
        let k = next_run.fetch_add(1, Relaxed);
        (k < runs && !stop.load(Relaxed)).then(|| order[k])
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

/// The ids of `lists` in `parts` shares of as many ids each (to within
/// one; a share may be empty): share k is a list of `(list, range of its
/// ids)`, in order, a list cut between two shares where a share ends inside
/// it (so that one long list is written by every thread). Empty lists are in
/// no share.
pub fn shares(lists: &[Vec<Rank>], parts: usize) -> Vec<Vec<(usize, Range<usize>)>> {
    let parts = parts.max(1);
    let total: usize = lists.iter().map(Vec::len).sum();
    // Share k holds the ids from flat position bound(k) to bound(k + 1).
    let bound = |k: usize| (k as u128 * total as u128 / parts as u128) as usize;
    let mut out = vec![Vec::new(); parts];
    let (mut k, mut at) = (0, 0);
    for (d, l) in lists.iter().enumerate() {
        let mut i = 0;
        while i < l.len() {
            // (bound(parts) = total > at + i, so k stays below parts.)
            while bound(k + 1) <= at + i {
                k += 1;
            }
            let end = (bound(k + 1) - at).min(l.len());
            out[k].push((d, i..end));
            i = end;
        }
        at += l.len();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encode::{Encoder, Memo};
    use crate::run::pieces::cut_for;
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
            let order = largest_first(&runs, &sizes);
            let (mut firsts, mut betweens) = (0, 0);
            let got = run_batch(
                &order,
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
            // (`between` runs before each of the calling thread's runs: all
            // of them alone, else as many as it took, none if the workers
            // took every run first, as on a loaded machine.)
            if threads == 1 {
                assert_eq!(betweens, runs.len());
            } else {
                assert!(betweens <= runs.len(), "{betweens}");
            }
            // A failing run, or Ctrl-C on the calling thread, stops the batch.
            let failed = run_batch(
                &order,
                workers.as_deref(),
                Memo::default,
                || Ok(()),
                || Ok(()),
                |k, _| if k == 3 { Err(format!("run {k}")) } else { Ok(vec![vec![k as Rank]]) },
            );
            assert_eq!(failed, Err("run 3".to_string()));
            let interrupted = run_batch::<Memo, (), _>(
                &order,
                workers.as_deref(),
                Memo::default,
                || Ok(()),
                || Err("interrupted"),
                |_, _| Ok(()),
            );
            assert_eq!(interrupted, Err("interrupted"));
        }
    }

    /// The threads take the runs with the most bytes first, ties in batch
    /// order.
    #[test]
    fn runs_are_taken_largest_first() {
        let sizes = [3, 9, 1, 1, 5, 4, 4];
        let runs = [0..1, 1..2, 2..4, 4..5, 5..6, 6..7];
        assert_eq!(largest_first(&runs, &sizes), vec![1, 3, 4, 5, 0, 2]);
        assert_eq!(largest_first(&[], &[]), Vec::<usize>::new());
    }

    /// A plan cuts only the texts much longer than a run (and only for more
    /// than one thread) into pieces that make up the text, takes its longest
    /// runs first, and its parts' ids joined are every text's ids alone,
    /// wherever the long texts stand in the batch; special tokens allowed
    /// are never cut.
    #[test]
    fn a_plan_shares_long_texts_and_gives_each_text_its_ids() {
        let enc = Encoder::new(
            byte_ranks(&["th", "the", "he", "en", "an", " the"]),
            [("<|end|>".to_string(), 999)].into_iter().collect(),
            GPT4_PATTERN,
        )
        .unwrap();
        let long =
            |n: usize| -> String { (0..n).map(|i| format!("then the<|end|> anthem {}\n", i * 7919 % 1000)).collect() };
        let (a, b) = (long(20_000), long(9_000));
        let short: Vec<String> = (0..50).map(|i| format!("the anthem {i}\n").repeat(i % 5 + 1)).collect();
        for allowed in [FxHashSet::default(), ["<|end|>".to_string()].into_iter().collect()] {
            for layout in 0..3 {
                let mut texts: Vec<&str> = short.iter().map(String::as_str).collect();
                match layout {
                    0 => texts.extend([a.as_str(), b.as_str()]),
                    1 => texts.splice(0..0, [a.as_str(), b.as_str()]).for_each(drop),
                    _ => texts.insert(25, &a),
                }
                let alone: Vec<Vec<Rank>> = texts.iter().map(|t| enc.encode(t, &allowed).unwrap()).collect();
                for threads in [1, 2, 3] {
                    let plan = Plan::new(&texts, threads, |t, n| cut_for(&enc, &allowed, t, n));
                    if threads == 1 {
                        assert_eq!(plan.parts, texts);
                    } else {
                        assert!(plan.parts.len() >= texts.len() + 4, "{} parts", plan.parts.len());
                    }
                    let bytes = |k: usize| plan.parts[plan.runs[k].clone()].iter().map(|p| p.len()).sum::<usize>();
                    assert!(plan.order.windows(2).all(|w| bytes(w[0]) >= bytes(w[1])));
                    let mut sorted = plan.order.clone();
                    sorted.sort();
                    assert_eq!(sorted, (0..plan.runs.len()).collect::<Vec<_>>());
                    let workers = (threads > 1).then(|| crate::threads::pool(threads - 1).unwrap());
                    let ids = run_batch(
                        &plan.order,
                        workers.as_deref(),
                        || enc.memo(),
                        || Ok::<(), String>(()),
                        || Ok(()),
                        |k, memo| enc.encode_each(&plan.parts[plan.runs[k].clone()], &allowed, memo),
                    )
                    .unwrap();
                    assert_eq!(plan.join(ids.into_iter().flatten().collect()), alone, "{threads} threads");
                }
            }
        }
    }

    #[test]
    fn shares_hold_as_many_ids() {
        let lists: Vec<Vec<Rank>> = [5, 1, 1, 1, 2, 0, 6].iter().map(|&n| vec![0; n]).collect();
        assert_eq!(
            shares(&lists, 2),
            vec![vec![(0, 0..5), (1, 0..1), (2, 0..1), (3, 0..1)], vec![(4, 0..2), (6, 0..6)]]
        );
        assert_eq!(shares(&lists, 1), vec![vec![(0, 0..5), (1, 0..1), (2, 0..1), (3, 0..1), (4, 0..2), (6, 0..6)]]);
        assert_eq!(
            shares(&lists, 3),
            vec![vec![(0, 0..5)], vec![(1, 0..1), (2, 0..1), (3, 0..1), (4, 0..2)], vec![(6, 0..6)]]
        );
        // One long list, shared by all.
        assert_eq!(shares(&[vec![0; 10]], 3), vec![vec![(0, 0..3)], vec![(0, 3..6)], vec![(0, 6..10)]]);
        assert_eq!(shares(&lists[..0], 3), vec![vec![], vec![], vec![]]);
        // Every id in exactly one share, in order, each share within one of its due.
        for parts in 1..9 {
            for lens in [&[7usize, 0, 3, 12, 1][..], &[1, 1, 1], &[100], &[0, 0]] {
                let lists: Vec<Vec<Rank>> = lens.iter().map(|&n| vec![0; n]).collect();
                let got = shares(&lists, parts);
                assert_eq!(got.len(), parts);
                let flat: Vec<(usize, usize)> =
                    got.iter().flatten().flat_map(|(d, r)| r.clone().map(move |i| (*d, i))).collect();
                let want: Vec<(usize, usize)> =
                    lens.iter().enumerate().flat_map(|(d, &n)| (0..n).map(move |i| (d, i))).collect();
                assert_eq!(flat, want);
                let total: usize = lens.iter().sum();
                for s in &got {
                    let n: usize = s.iter().map(|(_, r)| r.len()).sum();
                    assert!(n * parts + parts >= total && n * parts <= total + parts, "{n} of {total} in {parts}");
                }
            }
        }
    }
}
