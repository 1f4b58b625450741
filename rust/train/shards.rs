//! Counting many record files (shards) at once: each counting thread takes
//! the next whole file and reads, decompresses, parses and counts it
//! itself, keeping its own map.
//!
//! Why: in the pipeline of `pipeline.rs` one thread reads for all of them,
//! and reading a `.jsonl.zst` shard costs about 2 CPU-seconds per GB of
//! text (half decompressing, half parsing JSON: `examples/profile.rs
//! records`) against about 6 for counting it, so past three or four
//! counting threads the lone reader is the limit (about 500 MB/s). A corpus
//! of shards is many files, and files are independent: with one file per
//! thread nothing is shared but the total, and the work grows with the
//! cores. Counts are sums, so the order in which files finish changes
//! nothing; with fewer files than threads the pipeline is used instead
//! (`count_records_into` chooses).
//!
//! Failures are reported as the pipeline reports them: the first in file
//! order. A thread stops when a file before the one it counts has failed;
//! files before a failed one are still finished, so the failure kept is the
//! lowest-numbered whatever the timing.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Mutex, PoisonError};

use super::count::{count_chunks, ChunkCounts, Chunker, Tally};
use crate::input::records::{read_batches, BATCH_BYTES};

/// How often the calling thread reports progress (and hears of Ctrl-C).
const POLL: std::time::Duration = std::time::Duration::from_millis(50);

/// Not a failure: a thread stopped because of another one's.
const STOPPED: &str = "\u{0}stopped";

/// Counts the records of `paths` into `total` on `threads` threads, a whole
/// file each at a time. `on_bytes` (bytes read, as stored) is called on this
/// thread every `POLL` and may stop the work by returning an error. Returns
/// the bad records skipped in each file (`skip_bad`).
pub(super) fn count_record_files(
    splitter: &dyn Chunker,
    paths: &[std::path::PathBuf],
    field: &[String],
    skip_bad: bool,
    threads: usize,
    total: &mut dyn Tally,
    mut on_bytes: impl FnMut(u64) -> Result<(), String>,
) -> Result<Vec<u64>, String> {
    let flush_bytes = total.flush_bytes();
    let total = Mutex::new(total);
    let next = AtomicUsize::new(0); // the next file to take
    let failed = AtomicUsize::new(usize::MAX); // the lowest file that failed
    let stop = AtomicBool::new(false); // `on_bytes` said stop
    let read = AtomicU64::new(0);
    let outcomes: Mutex<Vec<Option<Result<u64, String>>>> = Mutex::new(vec![None; paths.len()]);
    let flush = |counts: &mut ChunkCounts| total.lock().unwrap_or_else(PoisonError::into_inner).absorb(counts);

    let worker = || {
        let mut counts = ChunkCounts::default();
        let mut since_flush = 0;
        // The batch buffer, filled again for each batch (no fresh pages).
        let spare = RefCell::new(String::new());
        loop {
            let k = next.fetch_add(1, Relaxed);
            if k >= paths.len() || k > failed.load(Relaxed) || stop.load(Relaxed) {
                break;
            }
            let counted = read_batches(
                &paths[k..=k],
                field,
                skip_bad,
                BATCH_BYTES,
                &read,
                || spare.take(),
                |batch| {
                    if k > failed.load(Relaxed) || stop.load(Relaxed) {
                        return Err(STOPPED.into());
                    }
                    for doc in batch.docs() {
                        count_chunks(splitter, doc, &mut counts)?;
                    }
                    since_flush += batch.text.len();
                    if since_flush >= flush_bytes {
                        flush(&mut counts)?;
                        since_flush = 0;
                    }
                    *spare.borrow_mut() = batch.text;
                    Ok(())
                },
            );
            let outcome = match counted {
                Ok(skipped) => Ok(skipped[0]),
                Err(e) if e == STOPPED => break,
                Err(e) => {
                    failed.fetch_min(k, Relaxed);
                    Err(e)
                }
            };
            outcomes.lock().unwrap_or_else(PoisonError::into_inner)[k] = Some(outcome);
        }
        flush(&mut counts)
    };

    let (flushed, stopped_by) = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads.clamp(1, paths.len().max(1))).map(|_| scope.spawn(worker)).collect();
        let mut stopped_by = None;
        while !workers.iter().all(|w| w.is_finished()) {
            std::thread::sleep(POLL);
            if stopped_by.is_none() {
                if let Err(e) = on_bytes(read.swap(0, Relaxed)) {
                    stop.store(true, Relaxed);
                    stopped_by = Some(e);
                }
            }
        }
        let flushed: Vec<_> = workers.into_iter().map(|w| w.join()).collect();
        (flushed, stopped_by)
    });
    let mut last_flush = Ok(());
    for result in flushed {
        match result {
            Err(panic) => std::panic::resume_unwind(panic),
            Ok(Err(e)) => last_flush = Err(e),
            Ok(Ok(())) => {}
        }
    }
    if let Some(e) = stopped_by {
        return Err(e);
    }
    // The bytes read since the last poll, and the last chance to hear of a
    // stop (Ctrl-C): asked before a file's failure is reported, so a stop is
    // reported as one even when the work ended before the first poll.
    on_bytes(read.swap(0, Relaxed))?;
    let outcomes = outcomes.into_inner().unwrap_or_else(PoisonError::into_inner);
    if let Some(Some(Err(e))) = outcomes.get(failed.load(Relaxed)) {
        return Err(e.clone());
    }
    last_flush?;
    Ok(outcomes.into_iter().map(|o| o.and_then(Result::ok).unwrap_or(0)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::split::patterns::GPT4_PATTERN;
    use crate::split::pretokenize::Splitter;
    use crate::train::pipeline::count_records_into_pipeline;
    use crate::train::testing::random_text;

    /// `text` as a JSON string.
    fn json_string(text: &str) -> String {
        let mut out = String::from('"');
        for c in text.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                c => out.push(c),
            }
        }
        out.push('"');
        out
    }

    fn write_shards(name: &str, n: usize) -> (std::path::PathBuf, Vec<std::path::PathBuf>) {
        let dir = std::env::temp_dir().join(format!("bpe-shards-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let paths = (0..n)
            .map(|k| {
                let path = dir.join(format!("{k}.jsonl"));
                let lines: String = (0..20)
                    .map(|i| {
                        let words = ["alpha", " beta", "\n", "42", " ünï", "日本", "\"q\""];
                        let text = random_text(&words, 60, 4, k as u64 * 100 + i + 1, true);
                        format!("{{\"id\": {i}, \"text\": {}}}\n", json_string(&text))
                    })
                    .collect();
                std::fs::write(&path, lines).unwrap();
                path
            })
            .collect();
        (dir, paths)
    }

    #[test]
    fn files_counted_at_once_count_as_the_pipeline_does() {
        let (dir, paths) = write_shards("same", 7);
        let splitter = Splitter::new(GPT4_PATTERN).unwrap();
        let field = ["text".to_string()];
        let mut piped = ChunkCounts::default();
        count_records_into_pipeline(&splitter, &paths, &field, false, &mut piped, |_| Ok(())).unwrap();
        for threads in [1, 2, 3, 8] {
            let mut at_once = ChunkCounts::default();
            let skipped =
                count_record_files(&splitter, &paths, &field, false, threads, &mut at_once, |_| Ok(())).unwrap();
            assert_eq!(skipped, vec![0; 7]);
            assert_eq!(at_once, piped, "{threads} threads");
        }
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn the_first_bad_file_in_order_is_named_and_skips_are_per_file() {
        let (dir, paths) = write_shards("bad", 6);
        for k in [2, 4] {
            let mut text = std::fs::read_to_string(&paths[k]).unwrap();
            text.push_str("{\"id\": 99}\n");
            std::fs::write(&paths[k], text).unwrap();
        }
        let splitter = Splitter::new(GPT4_PATTERN).unwrap();
        let field = ["text".to_string()];
        for threads in [1, 2, 6] {
            let err =
                count_record_files(&splitter, &paths, &field, false, threads, &mut ChunkCounts::default(), |_| Ok(()))
                    .unwrap_err();
            assert!(err.starts_with(&format!("{}: line 21", paths[2].display())), "{err}");
            let skipped =
                count_record_files(&splitter, &paths, &field, true, threads, &mut ChunkCounts::default(), |_| Ok(()))
                    .unwrap();
            assert_eq!(skipped, vec![0, 0, 1, 0, 1, 0]);
        }
        // A stop asked for by `on_bytes` (Ctrl-C) is the error returned, also
        // when the files fail before the first poll (as they do on a fast
        // machine: this was once timing-dependent).
        let err = count_record_files(&splitter, &paths, &field, false, 2, &mut ChunkCounts::default(), |_| {
            Err("interrupted".to_string())
        })
        .unwrap_err();
        assert_eq!(err, "interrupted");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
