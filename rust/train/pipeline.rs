//! Counting streamed input: text files (each one document, read in
//! segments cut at safe cut points) and JSON Lines records, in one pipeline:
//! this thread reads (and decompresses, and parses records) while one
//! counting thread per core lexes and counts what it is handed through a
//! short queue, each keeping its own map and adding it to a `Tally` now and
//! then. What a chunk count is, and summing them: `count.rs`.

use std::sync::atomic::AtomicUsize;
use std::sync::mpsc::Receiver;

use super::count::{count_chunks, ChunkCounts, Chunker, Tally, SEGMENT_BYTES};
use crate::split::pretokenize::last_safe_cut;

/// How many bytes of a file are read at a time: each read is cut back to its
/// last safe cut point, the rest carried into the next, and the piece before
/// the cut is one segment for a counting thread.
const READ_BYTES: usize = SEGMENT_BYTES;

/// Streams UTF-8 text files and counts their chunks. `on_bytes` gets the
/// number of bytes read after each segment and may stop the work by
/// returning an error (Ctrl-C).
///
/// Each file is one document, read in segments cut at safe cut points (see
/// `split/pretokenize.rs`): exact for the built-in patterns; a custom pattern whose
/// matches cross "\n" followed by a letter or digit is cut there.
///
/// A pipeline: this thread reads and checks UTF-8 while one counting thread
/// per core (as many as rayon's pool has) lexes and counts the segments it
/// hands them through a short queue, so the cores never wait for a read.
/// Memory: a few segments in flight plus the counts. (What it replaced:
/// docs/dev/performance.md, "Streaming files".)
pub fn count_files(
    splitter: &dyn Chunker,
    paths: &[std::path::PathBuf],
    on_bytes: impl FnMut(u64) -> Result<(), String>,
) -> Result<ChunkCounts, String> {
    let mut total = ChunkCounts::default();
    count_files_into(splitter, paths, &mut total, on_bytes)?;
    Ok(total)
}

/// [`count_files`], adding the counts to `total` as the counting threads
/// hand them over (every `total.flush_bytes()` of text each).
pub fn count_files_into(
    splitter: &dyn Chunker,
    paths: &[std::path::PathBuf],
    total: &mut dyn Tally,
    on_bytes: impl FnMut(u64) -> Result<(), String>,
) -> Result<(), String> {
    let count = |text: &str, counts: &mut ChunkCounts| count_chunks(splitter, text, counts);
    let sizes = (READ_BYTES, total.flush_bytes());
    count_files_to(&count, paths, sizes, total, on_bytes)
}

/// What counts one segment into a map (tests pass one that fails).
type CountFn<'a> = &'a (dyn Fn(&str, &mut ChunkCounts) -> Result<(), String> + Sync);

/// `count_files` with `count` for each segment, reading `sizes.0` bytes at a
/// time, each counting thread adding to the total every `sizes.1` bytes
/// (tests use tiny sizes).
#[cfg(test)]
fn count_files_in(
    count: CountFn,
    paths: &[std::path::PathBuf],
    sizes: (usize, usize),
    on_bytes: impl FnMut(u64) -> Result<(), String>,
) -> Result<ChunkCounts, String> {
    let mut total = ChunkCounts::default();
    count_files_to(count, paths, sizes, &mut total, on_bytes)?;
    Ok(total)
}

/// A numbered piece for a counting thread: one document, or records (`ends`).
type Segment = (usize, String, Vec<usize>);
type SendSegment<'s> = dyn FnMut(Segment) -> Result<(), String> + 's;
/// Hands segments over in order, given spare buffers, the first failed one's number, the queue.
type Reader<'a> = Box<dyn FnOnce(&Receiver<String>, &AtomicUsize, &mut SendSegment) -> Result<(), String> + 'a>;

/// `count_files_in`, into `total`.
fn count_files_to(
    count: CountFn,
    paths: &[std::path::PathBuf],
    (read_bytes, flush_bytes): (usize, usize),
    total: &mut dyn Tally,
    on_bytes: impl FnMut(u64) -> Result<(), String>,
) -> Result<(), String> {
    let read: Reader = Box::new(move |spare, failed, send| {
        read_segments(paths, read_bytes, spare, failed, on_bytes, |(n, text)| send((n, text, Vec::new())))
    });
    count_pipeline(count, read, flush_bytes, total)
}

/// Counts the records of JSON Lines files (`input::records`) into `total`:
/// a file per thread when there are enough files (`shards.rs`), else in the
/// pipeline of text files, whose counting threads keep their maps (a map
/// per batch had made records count twice as slow as the same text).
/// `on_bytes`: bytes read (as stored). Returns the bad records skipped in
/// each file (`skip_bad`).
pub fn count_records_into(
    splitter: &dyn Chunker,
    paths: &[std::path::PathBuf],
    field: &[String],
    skip_bad: bool,
    total: &mut dyn Tally,
    on_bytes: impl FnMut(u64) -> Result<(), String>,
) -> Result<Vec<u64>, String> {
    // Enough files to keep every thread busy with whole files: each reads its
    // own (`shards.rs`: the lone reader here is the limit past a few cores).
    // One thread asked for keeps the pipeline, whose reader overlaps it.
    let threads = crate::threads::current_num_threads();
    if threads > 1 && paths.len() >= threads.min(4) {
        return super::shards::count_record_files(splitter, paths, field, skip_bad, threads, total, on_bytes);
    }
    count_records_into_pipeline(splitter, paths, field, skip_bad, total, on_bytes)
}

/// `count_records_into` through the pipeline: one reader for all files.
pub(super) fn count_records_into_pipeline(
    splitter: &dyn Chunker,
    paths: &[std::path::PathBuf],
    field: &[String],
    skip_bad: bool,
    total: &mut dyn Tally,
    mut on_bytes: impl FnMut(u64) -> Result<(), String>,
) -> Result<Vec<u64>, String> {
    use crate::input::records::{read_batches, BATCH_BYTES};
    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
    let count = |text: &str, counts: &mut ChunkCounts| count_chunks(splitter, text, counts);
    let (mut skipped, read) = (Vec::new(), AtomicU64::new(0));
    let (skipped_ref, read) = (&mut skipped, &read);
    let read: Reader = Box::new(move |spare, failed, send| {
        let mut number = 0;
        // A buffer given back by a counting thread is filled again (at most
        // one in flight per thread and a few queued: memory stays bounded).
        let buffer = || spare.try_recv().unwrap_or_default();
        *skipped_ref = read_batches(paths, field, skip_bad, BATCH_BYTES, read, buffer, |batch| {
            if failed.load(Relaxed) != usize::MAX {
                // A counting thread's error is reported instead of this one.
                return Err("a counting thread failed".into());
            }
            send((number, batch.text, batch.ends))?;
            number += 1;
            on_bytes(read.swap(0, Relaxed))
        })?;
        on_bytes(read.swap(0, Relaxed))
    });
    count_pipeline(&count, read, total.flush_bytes(), total)?;
    Ok(skipped)
}

/// The counting pipeline: `read` on this thread, one counting thread per
/// core of rayon's pool, each adding its map to `total` every `flush_bytes`.
fn count_pipeline(count: CountFn, read: Reader, flush_bytes: usize, total: &mut dyn Tally) -> Result<(), String> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{mpsc, Mutex};

    let threads = crate::threads::current_num_threads().max(1);
    let total = Mutex::new(total);
    // The number of the first segment known to have failed (none: MAX).
    let failed = AtomicUsize::new(usize::MAX);
    // Segments to count, and their buffers back for reuse (no fresh pages).
    let (to_count, segments) = mpsc::sync_channel::<Segment>(threads);
    let segments = Mutex::new(segments);
    let (give_back, spare) = mpsc::channel::<String>();

    let (read, counted) = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                let give_back = give_back.clone();
                let (segments, total, failed) = (&segments, &total, &failed);
                scope.spawn(move || count_segments(count, segments, give_back, total, failed, flush_bytes))
            })
            .collect();
        drop(give_back);
        let read = read(&spare, &failed, &mut |segment| {
            // Cannot fail: the queue's receiver lives until the scope ends.
            to_count.send(segment).map_err(|_| "the counting threads are gone".to_string())
        });
        if read.is_err() {
            failed.store(0, Ordering::Relaxed); // the rest is not counted
        }
        drop(to_count); // the counting threads finish the queue and return
        let counted: Vec<_> = workers.into_iter().map(|w| w.join()).collect();
        (read, counted)
    });
    // The first failure in file order: a counting thread's (on an earlier
    // segment than the reader's position), else the reader's.
    let mut first: Option<(usize, String)> = None;
    for result in counted {
        match result {
            Err(panic) => std::panic::resume_unwind(panic),
            Ok(Err((i, e))) if first.as_ref().is_none_or(|(j, _)| i < *j) => first = Some((i, e)),
            Ok(_) => {}
        }
    }
    if let Some((_, e)) = first {
        return Err(e);
    }
    read
}

/// A counting thread: counts segments from the queue into its own map, and
/// adds that map to `total` every `flush_bytes` and at the end. Segments
/// after one that failed (here or in another thread) are skipped, but every
/// one before it is still counted, so the failure reported is the first in
/// file order. After a failure it drains the queue, so the reader never
/// waits on a full queue. Returns the failed segment's number and error.
fn count_segments(
    count: CountFn,
    segments: &std::sync::Mutex<std::sync::mpsc::Receiver<Segment>>,
    give_back: std::sync::mpsc::Sender<String>,
    total: &std::sync::Mutex<&mut dyn Tally>,
    failed: &std::sync::atomic::AtomicUsize,
    flush_bytes: usize,
) -> Result<(), (usize, String)> {
    use std::sync::atomic::Ordering;
    use std::sync::PoisonError;
    // The lock is held only while waiting for the next segment.
    let next = || segments.lock().unwrap_or_else(PoisonError::into_inner).recv();
    let flush = |counts: &mut ChunkCounts| total.lock().unwrap_or_else(PoisonError::into_inner).absorb(counts);
    // A panic is caught so that the queue is drained below before it is
    // handed on: the reader must never be left waiting.
    let mut current = 0; // the segment being counted
    let work = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut counts = ChunkCounts::default();
        let mut since_flush = 0;
        while let Ok((i, mut text, ends)) = next() {
            if i > failed.load(Ordering::Relaxed) {
                continue;
            }
            current = i;
            if ends.is_empty() {
                count(&text, &mut counts).map_err(|e| (i, e))?;
            } else {
                // Records: each one a document of its own.
                let mut start = 0;
                for &end in &ends {
                    count(&text[start..end], &mut counts).map_err(|e| (i, e))?;
                    start = end;
                }
            }
            since_flush += text.len();
            if since_flush >= flush_bytes {
                flush(&mut counts).map_err(|e| (i, e))?;
                since_flush = 0;
            }
            text.clear();
            let _ = give_back.send(text);
        }
        flush(&mut counts).map_err(|e| (current, e))
    }));
    match &work {
        Ok(Ok(())) => {}
        Ok(Err((i, _))) => _ = failed.fetch_min(*i, Ordering::Relaxed),
        Err(_) => _ = failed.fetch_min(current, Ordering::Relaxed),
    }
    while next().is_ok() {} // returns at once unless something failed
    work.unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

/// Reads the files in segments of about `read_bytes` cut at safe cut points,
/// checks that they are UTF-8 and hands them to `send`, numbered in order.
fn read_segments(
    paths: &[std::path::PathBuf],
    read_bytes: usize,
    spare: &std::sync::mpsc::Receiver<String>,
    failed: &std::sync::atomic::AtomicUsize,
    mut on_bytes: impl FnMut(u64) -> Result<(), String>,
    mut send: impl FnMut((usize, String)) -> Result<(), String>,
) -> Result<(), String> {
    use std::io::Read;
    use std::sync::atomic::Ordering;
    let mut number = 0;
    let mut carry: Vec<u8> = Vec::new();
    for path in paths {
        let name = crate::input::name(path);
        // Stdin (`-`) and compressed files too (`input::open`).
        let mut file = crate::input::open(path)?.0;
        let mut offset: u64 = 0; // file offset of the next segment's first byte
        let mut eof = false;
        carry.clear();
        while !eof {
            if failed.load(Ordering::Relaxed) != usize::MAX {
                return Ok(()); // a counting thread's error is reported instead
            }
            // A reused buffer has its pages already; a new one is sized to
            // hold a read and a usual carry without growing.
            let mut buf = spare
                .try_recv()
                .map(String::into_bytes)
                .unwrap_or_else(|_| Vec::with_capacity(read_bytes + (64 << 10)));
            buf.extend_from_slice(&carry);
            carry.clear();
            let cut = loop {
                // `read_to_end` on a `Take` reads into the spare capacity
                // without zeroing it first, and stops at the limit or EOF.
                let want = read_bytes as u64;
                let n = (&mut file).take(want).read_to_end(&mut buf).map_err(|e| format!("cannot read {name}: {e}"))?;
                eof = (n as u64) < want;
                if eof {
                    break buf.len();
                }
                if let Some(cut) = last_safe_cut(&buf) {
                    break cut;
                }
                if buf.len() >= crate::limits::MAX_UNCUT_BYTES {
                    // Bad bytes leave no cut point either: name them first.
                    return Err(match std::str::from_utf8(&buf) {
                        Err(e) if e.error_len().is_some() => crate::input::not_utf8(path, offset, e),
                        _ => crate::limits::uncut_error(path, offset, buf.len()),
                    });
                }
                // No cut point yet (one huge line): read more.
            };
            carry.extend_from_slice(&buf[cut..]);
            buf.truncate(cut);
            let text = crate::input::utf8_string(buf).map_err(|e| crate::input::not_utf8(path, offset, e))?;
            if !text.is_empty() {
                send((number, text))?;
                number += 1;
            }
            offset += cut as u64;
            on_bytes(cut as u64)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::split::patterns::{GPT2_PATTERN, GPT4O_PATTERN, GPT4_PATTERN};
    use crate::split::pretokenize::Splitter;
    use crate::train::testing::random_text;

    /// Temporary files holding `texts`, removed when dropped.
    struct TempFiles(Vec<std::path::PathBuf>);

    impl TempFiles {
        fn new(name: &str, texts: &[&[u8]]) -> TempFiles {
            let dir = std::env::temp_dir().join(format!("bpe-train-{name}-{}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            TempFiles(
                texts
                    .iter()
                    .enumerate()
                    .map(|(i, t)| {
                        let path = dir.join(format!("{i}.txt"));
                        std::fs::write(&path, t).unwrap();
                        path
                    })
                    .collect(),
            )
        }
    }

    impl Drop for TempFiles {
        fn drop(&mut self) {
            if let Some(dir) = self.0.first().and_then(|p| p.parent()) {
                let _ = std::fs::remove_dir_all(dir);
            }
        }
    }

    /// Files streamed in reads of a few bytes to 4 KB, on 1 to 3 counting
    /// threads that add to the total every few bytes or only at the end,
    /// count what each file counts as one document, and report every byte.
    #[test]
    fn streamed_files_count_like_whole_documents() {
        let words = ["The", " fox", "\n", "\n\n", " 日本語", "é", "  ", "123", "'s", "!", "\t", "ǅx", " ", "\r\n"];
        let texts = [random_text(&words, 3000, 5, 7, true), String::new(), random_text(&words, 500, 3, 11, false)];
        let files = TempFiles::new("stream", &texts.iter().map(|t| t.as_bytes()).collect::<Vec<_>>());
        for pattern in [GPT2_PATTERN, GPT4_PATTERN, GPT4O_PATTERN] {
            let s = Splitter::new(pattern).unwrap();
            let mut expected = ChunkCounts::default();
            for t in &texts {
                count_chunks(&s, t, &mut expected).unwrap();
            }
            for threads in 1..=3 {
                let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
                for sizes in [(1, 1), (7, 50), (100, 1000), (4096, usize::MAX)] {
                    let mut reported = 0;
                    let got = pool.install(|| {
                        count_files_in(&|t, c| count_chunks(&s, t, c), &files.0, sizes, |n| {
                            reported += n;
                            Ok(())
                        })
                    });
                    let total: usize = texts.iter().map(String::len).sum();
                    assert_eq!(got.unwrap(), expected, "{pattern} threads {threads} sizes {sizes:?}");
                    assert_eq!(reported, total as u64);
                }
            }
        }
    }

    /// A bad byte deep in a file (or a character cut off at its end) is
    /// named by its file offset, however the file was cut; an error from
    /// `on_bytes` (Ctrl-C) stops the count with that error.
    #[test]
    fn streamed_files_report_bad_bytes_and_stop_on_request() {
        let s = Splitter::new(GPT4_PATTERN).unwrap();
        let count = |t: &str, c: &mut ChunkCounts| count_chunks(&s, t, c);
        let good = random_text(&["one", " two", "\n", "3"], 400, 4, 5, true);
        let mut bad = good.clone().into_bytes();
        bad.insert(1234, 0xff);
        let mut cut_off = good.clone().into_bytes();
        cut_off.extend_from_slice(&"日".as_bytes()[..2]);
        let files = TempFiles::new("bad", &[good.as_bytes(), &bad, &cut_off]);
        for sizes in [(3, 1), (64, 100), (1 << 20, usize::MAX)] {
            for (path, at) in [(&files.0[1], 1234), (&files.0[2], good.len())] {
                let err = count_files_in(&count, &[files.0[0].clone(), path.clone()], sizes, |_| Ok(())).unwrap_err();
                let expected = format!("{} is not valid UTF-8 at byte offset {at} (line ", path.display());
                assert!(err.starts_with(&expected), "{err}");
            }
            let mut calls = 0;
            let err = count_files_in(&count, &files.0[..1], sizes, |_| {
                calls += 1;
                if calls == 2 {
                    Err("interrupted".to_string())
                } else {
                    Ok(())
                }
            });
            if good.len() > sizes.0 {
                assert_eq!(err, Err("interrupted".to_string()), "sizes {sizes:?}");
            }
        }
    }

    /// When counting a segment fails or panics, on any number of threads:
    /// the count stops (no thread left waiting), with the error of the first
    /// failing segment in file order, or with the panic itself.
    #[test]
    fn streamed_counting_stops_on_a_failure_or_a_panic() {
        let text: String = (0..2000).map(|i| format!("line {i}\n")).collect();
        let files = TempFiles::new("fail", &[text.as_bytes()]);
        let fail = |t: &str, _: &mut ChunkCounts| match ["line 1000\n", "line 1500\n"].iter().find(|l| t.contains(*l)) {
            Some(l) => Err(format!("failed at {}", l.trim())),
            None => Ok(()),
        };
        let panic = |t: &str, _: &mut ChunkCounts| {
            assert!(!t.contains("line 1500\n"), "deliberate panic");
            Ok(())
        };
        for threads in 1..=3 {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
            for read in [10, 100, 1000] {
                let got = pool.install(|| count_files_in(&fail, &files.0, (read, 100), |_| Ok(())));
                assert_eq!(got, Err("failed at line 1000".to_string()), "threads {threads} read {read}");
                let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    pool.install(|| count_files_in(&panic, &files.0, (read, 100), |_| Ok(())))
                }));
                let payload = caught.expect_err("the panic is handed on");
                let message = payload
                    .downcast_ref::<&str>()
                    .copied()
                    .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
                    .unwrap_or_default();
                assert!(message.contains("deliberate panic"), "{message:?}");
            }
        }
    }
}
