//! Regular files encoded by every thread at once: each thread reads its own
//! piece of a file (`pread`), checks it and encodes it, and the calling
//! thread hands the pieces' ids to the sink in order. No block is read by
//! one thread while the others wait, and no thread waits for the slowest
//! one at the end of each block: on many cores the block pipeline of
//! `mod.rs` spent its time there (one thread reading and checking 16 MiB
//! while 16 threads encoded the last 16 MiB in less time, then a barrier,
//! then the ids copied into the sink with the pool idle).
//!
//! Pieces. Each range is divided at nominal points `start + k * piece`, and
//! each nominal point `x` is moved back to a safe cut (`cut_before`): the
//! last line or word cut in the few KiB before `x` (a window read for it,
//! larger windows if that has none), inside no special token's text. Both
//! pieces that meet at `x` compute the same cut from the same bytes, so the
//! pieces tile the range with no communication; a nominal point with no cut
//! near it is dropped (its piece is absorbed by the one before). The ids
//! are those of the whole range, as for blocks (`split/pretokenize.rs`: a text
//! cut at safe cuts gives the same chunks).
//!
//! Order and memory. Threads take pieces in order; a thread waits before
//! taking a piece more than `ahead` pieces past the last one handed to the
//! sink, so memory stays at about `ahead` pieces' ids whatever the input's
//! size. Errors (bad UTF-8, a NUL byte at the start, disallowed special
//! text, a read error, a stretch of over `MAX_UNCUT_BYTES` with no cut)
//! are reported for the first bad piece in order, as the block reader
//! would.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use super::{Options, Order, Segment, Sink};
use crate::encode::{ids_buffer, ids_room, Encoder, Memo};
use crate::input::{binary_error, name, not_utf8, open_file, Compression, BINARY_SNIFF_BYTES, STDIN};
use crate::limits::{uncut_error, MAX_UNCUT_BYTES};
use crate::run::pieces::last_cut_avoiding;
use crate::vocab::Rank;

/// The windows (bytes before a nominal point) searched for a cut, in turn,
/// each clipped at the nominal point before: text nearly always has a line
/// cut in the first (a piece then reads 8 KiB more than its text, for its
/// two ends); the last is the whole nominal piece.
const WINDOWS: [u64; 2] = [4 << 10, 64 << 10];

/// How often the calling thread checks Ctrl-C and reports progress.
const TICK: Duration = Duration::from_millis(50);

/// One range's bytes `start..end` (of a regular file, sized before).
struct Source {
    start: u64,
    end: u64,
}

/// The file a thread has open: the one its last piece was in. A thread
/// holds one at a time, so a directory of thousands of shards never needs
/// thousands of descriptors (the system's limit is often 1024).
#[derive(Default)]
struct Open(Option<(usize, File)>);

impl Open {
    fn file(&mut self, segment: usize, seg: &Segment) -> Result<&File, String> {
        if self.0.as_ref().map(|(s, _)| *s) != Some(segment) {
            self.0 = None; // closed before the next is opened
            let (file, _) = open_file(&seg.range.path)?;
            self.0 = Some((segment, file));
        }
        Ok(&self.0.as_ref().expect("opened above").1)
    }
}

/// A piece: nominal bytes `points[k]..points[k + 1]` of segment `segment`.
struct Piece {
    segment: usize,
    k: usize,
}

/// What a piece gave: its ids and the bytes it covered (none if absorbed
/// by the piece before it).
struct Done {
    ids: Vec<Rank>,
    bytes: u64,
}

/// The ranges' files if every one is a regular, uncompressed file that can
/// be read at any offset; else None (the block path reads them).
fn sources(segments: &[Segment]) -> Result<Option<Vec<Source>>, String> {
    let mut out = Vec::with_capacity(segments.len());
    for s in segments {
        let r = &s.range;
        if r.path.as_os_str() == STDIN || Compression::of(&r.path) != Compression::None {
            return Ok(None);
        }
        // Looked at before it is opened: a pipe must be opened once only (a
        // second open waits for a writer that may have gone), by the block
        // reader, which reads it to its end.
        let size = match std::fs::metadata(&r.path) {
            Ok(m) if m.is_file() => m.len(),
            Ok(_) => return Ok(None),
            Err(e) => return Err(format!("cannot read {}: {e}", name(&r.path))),
        };
        let end = r.end.unwrap_or(size).min(size);
        out.push(Source { start: r.start.min(end), end });
    }
    Ok(Some(out))
}

/// The nominal points of a range `start..end`: every `piece` bytes, and its end.
fn points(src: &Source, piece: u64) -> Vec<u64> {
    let mut p: Vec<u64> = (src.start..src.end).step_by(piece as usize).collect();
    if p.is_empty() {
        p.push(src.start); // an empty range is one empty piece, so the sink sees it
    }
    p.push(src.end);
    p
}

/// Reads `len` bytes of `file` (segment `seg`'s) from `at` into `buf`
/// (grown, never shrunk, so that a thread's buffer is zeroed once); an error
/// if the file is shorter.
fn read_into<'b>(file: &File, seg: &Segment, at: u64, len: usize, buf: &'b mut Vec<u8>) -> Result<&'b [u8], String> {
    if buf.len() < len {
        buf.resize(len, 0);
    }
    let out = &mut buf[..len];
    file.read_exact_at(out, at).map_err(|e| {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            format!("cannot read {}: it became shorter while being read", name(&seg.range.path))
        } else {
            format!("cannot read {}: {e}", name(&seg.range.path))
        }
    })?;
    Ok(out)
}

/// The safe cut for nominal point `x` of `file`, whose nominal point before
/// is `lo`: the last cut (line, else word; inside no `avoid` text) in the
/// window before `x`, the smallest window that has one, never before `lo`.
/// None if there is none: then `x` is no boundary (the pieces on both sides
/// are one). So the cuts of a range's points are increasing, and the pieces
/// that meet at `x` compute the same cut from the same bytes. A cut closer
/// to its window's start than the longest `avoid` text is not taken (an
/// occurrence starting before the window could straddle it).
fn cut_before(
    file: &File,
    seg: &Segment,
    lo: u64,
    x: u64,
    avoid: &[&str],
    buf: &mut Vec<u8>,
) -> Result<Option<u64>, String> {
    let margin = avoid.iter().map(|s| s.len()).max().unwrap_or(0);
    for w in WINDOWS.into_iter().chain([x - lo]) {
        let from = x.saturating_sub(w).max(lo);
        let window = read_into(file, seg, from, (x - from) as usize, buf)?;
        if let Some(c) = last_cut_avoiding(window, avoid).filter(|&c| c >= margin && c > 0) {
            return Ok(Some(from + c as u64));
        }
        if from == lo {
            break;
        }
    }
    Ok(None)
}

/// Reads, checks and encodes piece `k` of a range whose nominal points are
/// `points` (see the module's doc), into `ids` (an empty spare buffer,
/// replaced by a fresh one if it has too little room).
#[allow(clippy::too_many_arguments)]
fn encode_piece(
    enc: &Encoder,
    seg: &Segment,
    file: &File,
    points: &[u64],
    k: usize,
    opts: &Options,
    avoid: &[&str],
    memo: &mut Memo,
    buf: &mut Vec<u8>,
    mut ids: Vec<Rank>,
) -> Result<Done, String> {
    let last = points.len() - 1;
    let start = if k == 0 {
        points[0]
    } else {
        match cut_before(file, seg, points[k - 1], points[k], avoid, buf)? {
            Some(c) => c,
            None => return Ok(Done { ids, bytes: 0 }),
        }
    };
    let path = &seg.range.path;
    let mut m = k + 1;
    let end = loop {
        if m == last {
            break points[last];
        }
        if let Some(c) = cut_before(file, seg, points[m - 1], points[m], avoid, buf)? {
            break c;
        }
        m += 1;
        // The block reader refuses a stretch of MAX_UNCUT_BYTES with no
        // cut (memory); this one is never stricter (a cut within a special
        // token's length of a nominal point may be passed over).
        if points[m] - start > (MAX_UNCUT_BYTES + (4 << 20)) as u64 {
            return Err(uncut_error(path, start, (points[m] - start) as usize));
        }
    };
    let bytes = read_into(file, seg, start, (end - start) as usize, buf)?;
    if start < BINARY_SNIFF_BYTES as u64 {
        let head = &bytes[..bytes.len().min(BINARY_SNIFF_BYTES - start as usize)];
        if let Some(at) = memchr::memchr(0, head) {
            return Err(binary_error(path, start + at as u64));
        }
    }
    let text = crate::input::utf8(bytes).map_err(|e| not_utf8(path, start, e))?;
    if !opts.disallowed.is_empty() {
        if let Some(found) = enc.find_special(text, opts.disallowed) {
            let at = start + memchr::memmem::find(text.as_bytes(), found.as_bytes()).unwrap_or(0) as u64;
            return Err(super::disallowed_error(path, found, at));
        }
    }
    if ids.capacity() < ids_room(text.len()) {
        ids = ids_buffer(text.len());
    }
    enc.encode_into(text, opts.allowed, memo, &mut ids)?;
    Ok(Done { ids, bytes: end - start })
}

/// `encode_segments` for regular files (see the module's doc); `Ok(None)`
/// if some range is not a regular, uncompressed file. `piece_bytes` is the
/// nominal piece size's cap (tests make it small).
#[allow(clippy::too_many_arguments)]
pub(super) fn encode_files_parallel(
    enc: &Encoder,
    segments: &[Segment],
    opts: &Options,
    avoid: &[&str],
    pool: &rayon::ThreadPool,
    piece_bytes: usize,
    mut between: impl FnMut(u64) -> Result<(), String>,
    sink: &mut dyn Sink,
) -> Result<Option<()>, String> {
    let Some(sources) = sources(segments)? else { return Ok(None) };
    let threads = pool.current_num_threads().max(1);
    let total: u64 = sources.iter().map(|s| s.end - s.start).sum();
    // About sixteen pieces per thread, so the threads' loads even out to
    // within a sixteenth, of 64 KiB (a piece costs two small reads and a
    // hand-over on a channel) to 2 MiB.
    let piece = (total / (16 * threads as u64)).clamp(64 << 10, 2 << 20).min(piece_bytes.max(1) as u64);
    let points: Vec<Vec<u64>> = sources.iter().map(|s| points(s, piece)).collect();
    let pieces: Vec<Piece> = points
        .iter()
        .enumerate()
        .flat_map(|(segment, p)| (0..p.len() - 1).map(move |k| Piece { segment, k }))
        .collect();
    let n = pieces.len();
    let ahead = 4 * threads + 4;

    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    // The pieces handed to the sink so far (threads wait on it to run ahead).
    let handed = (Mutex::new(0usize), Condvar::new());
    let (tx, rx) = std::sync::mpsc::channel::<(usize, Result<Done, String>)>();
    // Ids buffers the sink is done with, for the next pieces: a fresh
    // buffer's pages are each mapped and zeroed by the kernel (a 2 MiB piece
    // of English fills ~2 MB of ids). A buffer is made only when none is
    // spare, so there are never more than pieces in flight.
    let spare: Mutex<Vec<Vec<Rank>>> = Mutex::new(Vec::new());

    let halt = || {
        stop.store(true, Relaxed);
        let _guard = handed.0.lock().unwrap_or_else(|e| e.into_inner());
        handed.1.notify_all();
    };
    let worker = |tx: std::sync::mpsc::Sender<(usize, Result<Done, String>)>| {
        // A panicking thread stops the others, which could otherwise wait
        // for ever for its piece to be handed on (the scope then resumes
        // the panic, which the bindings turn into an exception).
        let _halt = OnPanic(&halt);
        let mut memo = enc.memo();
        let mut buf = Vec::new();
        let mut open = Open::default();
        loop {
            let k = next.fetch_add(1, Relaxed);
            if k >= n || stop.load(Relaxed) {
                return;
            }
            {
                let mut h = handed.0.lock().unwrap_or_else(|e| e.into_inner());
                while k >= *h + ahead && !stop.load(Relaxed) {
                    h = handed.1.wait(h).unwrap_or_else(|e| e.into_inner());
                }
            }
            if stop.load(Relaxed) {
                return;
            }
            let p = &pieces[k];
            let seg = &segments[p.segment];
            let mut ids = spare.lock().unwrap_or_else(|e| e.into_inner()).pop().unwrap_or_default();
            ids.clear();
            let done = open.file(p.segment, seg).and_then(|file| {
                encode_piece(enc, seg, file, &points[p.segment], p.k, opts, avoid, &mut memo, &mut buf, ids)
            });
            if tx.send((k, done)).is_err() {
                return;
            }
        }
    };

    let mut outcome: Result<(), String> = Ok(());
    pool.in_place_scope(|scope| {
        for _ in 0..threads {
            let tx = tx.clone();
            let worker = &worker;
            scope.spawn(move |_| worker(tx));
        }
        drop(tx);
        // The calling thread: pieces to the sink in order, separators and
        // segment starts as the block path gives them, Ctrl-C and progress
        // every TICK.
        let mut waiting: Vec<Option<Result<Done, String>>> = (0..n).map(|_| None).collect();
        let (mut first, mut done_bytes) = (0usize, 0u64);
        let mut order = Order::default();
        let mut last_tick = Instant::now();
        let mut hand = |k: usize, d: &Done, sink: &mut dyn Sink| -> Result<(), String> {
            let seg_index = pieces[k].segment;
            let seg = &segments[seg_index];
            order.enter(seg_index, seg, opts, sink)?;
            if !d.ids.is_empty() {
                sink.ids(seg.sink, &d.ids)?;
            }
            Ok(())
        };
        while first < n {
            match rx.recv_timeout(TICK) {
                Ok((k, r)) => waiting[k] = Some(r),
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
            }
            let before = first;
            while first < n {
                let Some(r) = waiting[first].take() else { break };
                match r.and_then(|d| hand(first, &d, sink).map(|()| d)) {
                    Ok(Done { ids, bytes }) => {
                        if ids.capacity() > 0 {
                            spare.lock().unwrap_or_else(|e| e.into_inner()).push(ids);
                        }
                        done_bytes += bytes;
                        first += 1;
                    }
                    Err(e) => {
                        outcome = Err(e);
                        break;
                    }
                }
            }
            if outcome.is_err() {
                break;
            }
            if first != before {
                *handed.0.lock().unwrap_or_else(|e| e.into_inner()) = first;
                handed.1.notify_all();
            }
            if last_tick.elapsed() >= TICK {
                last_tick = Instant::now();
                if let Err(e) = between(done_bytes) {
                    outcome = Err(e);
                    break;
                }
            }
        }
        if outcome.is_ok() && first < n {
            // The workers ended early: only a panic does that (caught by
            // the scope, which resumes it); say so if it did not.
            outcome = Err("internal error: pieces of the input were not encoded".into());
        }
        if outcome.is_ok() {
            outcome = between(done_bytes);
        }
        halt();
    });
    outcome.map(Some)
}

/// Runs its function if dropped by a panicking thread.
struct OnPanic<'a, F: Fn()>(&'a F);

impl<F: Fn()> Drop for OnPanic<'_, F> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            (self.0)();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{segment as whole, temp};
    use super::super::{encode_segments, Collect, Options, Segment};
    use crate::encode::Encoder;
    use crate::input::Range;
    use crate::split::patterns::{GPT4O_PATTERN, GPT4_PATTERN};
    use crate::vocab::{byte_ranks, Rank};
    use rustc_hash::{FxHashMap, FxHashSet};

    fn run(
        enc: &Encoder,
        segs: &[Segment],
        opts: &Options,
        threads: usize,
        piece: usize,
    ) -> Result<(Vec<Rank>, Vec<u64>), String> {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
        let mut out = Collect::default();
        encode_segments(enc, segs, opts, &pool, piece, |_| Ok(()), &mut out)?;
        Ok(out.finish(segs.len()))
    }

    use crate::split::lexer::tests::rng;

    /// Pieces of every size give the ids of the texts encoded whole: texts
    /// with cuts everywhere, long words and lines with none for many pieces
    /// (their nominal points are dropped), special tokens at every place
    /// (allowed: never cut inside), ranges that start and end mid-file.
    #[test]
    fn pieces_encode_as_whole_texts() {
        let specials: FxHashMap<String, Rank> =
            [("<|end|>".to_string(), 300), ("<|endoftext|>".to_string(), 301)].into_iter().collect();
        let mut next = rng(0x2545_f491_4f6c_dd1d);
        let words =
            ["the", "héllo", "\n", "\n\n", " ", "<|end|>", "<|endoftext|>", "12345", "wörld", "日本", "x", ".", "'s"];
        let mut text = String::new();
        while text.len() < 300_000 {
            text.push_str(words[(next() % words.len() as u64) as usize]);
            if next().is_multiple_of(3) {
                text.push(' ');
            }
        }
        // A stretch of 150 KB with no cut (one word), and one long line.
        text.push_str(&"a".repeat(150_000));
        text.push_str(" then more words. ");
        text.push_str(&"word ".repeat(40_000));
        text.push_str("\nThe end.\n");
        let a = temp("a.txt", text.as_bytes());
        let b = temp("b.txt", b"");
        let boundary = |mut i: usize| {
            while !text.is_char_boundary(i) {
                i += 1;
            }
            i
        };
        let (s1, e1, s2) = (boundary(1000), boundary(text.len() - 777), boundary(77_777));
        let segs = vec![
            whole(&a),
            whole(&b),
            Segment {
                range: Range { path: a.clone(), start: s1 as u64, end: Some(e1 as u64) },
                sink: 0,
                doc_start: true,
            },
            Segment {
                range: Range { path: a.clone(), start: s2 as u64, end: Some(text.len() as u64) },
                sink: 0,
                doc_start: false,
            },
        ];
        for pattern in [GPT4_PATTERN, GPT4O_PATTERN] {
            let enc = Encoder::new(
                byte_ranks(&["th", "the", "he", " the", "wo", "wor", "word", "aa", "aaaa"]),
                specials.clone(),
                pattern,
            )
            .unwrap();
            let none = FxHashSet::default();
            let allowed: FxHashSet<String> = specials.keys().cloned().collect();
            for allow in [&none, &allowed] {
                let texts = [&text[..], "", &text[s1..e1], &text[s2..]];
                let alone: Vec<Vec<Rank>> = texts.iter().map(|t| enc.encode(t, allow).unwrap()).collect();
                let want: Vec<Rank> = [&alone[0][..], &[9], &[9], &alone[2], &alone[3]].concat();
                for (threads, piece) in [(1, 1 << 30), (2, 64 << 10), (3, 4096), (4, 100), (2, 7)] {
                    let opts = Options { allowed: allow, disallowed: &[], separator: Some(9) };
                    let (ids, offsets) = run(&enc, &segs, &opts, threads, piece).unwrap();
                    assert!(ids == want, "threads {threads}, piece {piece}, allowed {}", allow.len());
                    let n0 = alone[0].len() as u64;
                    let n2 = alone[2].len() as u64;
                    assert_eq!(offsets, vec![0, n0 + 1, n0 + 2, n0 + 2 + n2, want.len() as u64]);
                }
            }
        }
    }

    /// The first bad piece in the input's order is the error, wherever the
    /// threads find bad bytes first; a NUL byte at a file's start is a
    /// binary file; disallowed special text is named by offset.
    #[test]
    fn the_first_error_in_order_is_reported() {
        let enc = Encoder::new(byte_ranks(&["th"]), [("<|end|>".to_string(), 300)].into_iter().collect(), GPT4_PATTERN)
            .unwrap();
        let none = FxHashSet::default();
        let opts = Options { allowed: &none, disallowed: &[], separator: None };
        let mut bytes = b"good text\nmore good text\n".repeat(20_000);
        let (early, late) = (150_003, 480_011);
        bytes[late] = 0xff;
        let p = temp("late.txt", &bytes);
        for (threads, piece) in [(1, 4096), (3, 4096), (4, 1 << 20)] {
            let err = run(&enc, &[whole(&p)], &opts, threads, piece).unwrap_err();
            assert!(err.contains(&format!("not valid UTF-8 at byte offset {late}")), "{err}");
        }
        bytes[early] = 0xc3;
        let p = temp("both.txt", &bytes);
        for (threads, piece) in [(1, 4096), (3, 4096), (4, 100)] {
            let err = run(&enc, &[whole(&p)], &opts, threads, piece).unwrap_err();
            assert!(err.contains(&format!("not valid UTF-8 at byte offset {early}")), "{err}");
        }
        let mut nul = b"text\n".repeat(20_000);
        nul[60_000 - 7] = 0;
        let p = temp("nul.txt", &nul);
        let err = run(&enc, &[whole(&p)], &opts, 3, 4096).unwrap_err();
        assert!(err.contains("looks like a binary file") && err.contains("byte offset 59993"), "{err}");
        let special = format!("{}a <|end|> b\n", "words and words\n".repeat(30_000));
        let p = temp("special.txt", special.as_bytes());
        let refuse = ["<|end|>".to_string()];
        let opts = Options { allowed: &none, disallowed: &refuse, separator: None };
        let err = run(&enc, &[whole(&p)], &opts, 3, 4096).unwrap_err();
        assert!(err.contains(&format!("special token \"<|end|>\" at byte offset {}", 16 * 30_000 + 2)), "{err}");
        // A missing file: named, before anything is encoded.
        let err = run(&enc, &[whole(&p.with_extension("missing"))], &opts, 2, 4096).unwrap_err();
        assert!(err.starts_with("cannot read"), "{err}");
    }

    /// Ctrl-C (an error from `between`) stops the threads and is the error.
    #[test]
    fn an_error_from_between_stops_the_work() {
        let enc = Encoder::new(byte_ranks(&["th"]), FxHashMap::default(), GPT4_PATTERN).unwrap();
        let p = temp("long.txt", "some words\n".repeat(400_000).as_bytes());
        let none = FxHashSet::default();
        let opts = Options { allowed: &none, disallowed: &[], separator: None };
        let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
        let mut calls = 0;
        let err = encode_segments(
            &enc,
            &[whole(&p)],
            &opts,
            &pool,
            4096,
            |_| {
                calls += 1;
                Err("interrupted".to_string())
            },
            &mut Collect::default(),
        )
        .unwrap_err();
        assert_eq!((err.as_str(), calls), ("interrupted", 1));
    }
}
