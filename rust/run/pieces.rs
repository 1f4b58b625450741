//! Long inputs in pieces, so that the Python bindings can notice Ctrl-C
//! between pieces instead of after the whole call.
//!
//! A text is cut only at line and word cuts (`split/pretokenize.rs`), which for the
//! three built-in patterns change no chunk, and, when special tokens are
//! allowed, never inside an occurrence of any special token (so every piece
//! finds exactly the special tokens the whole text holds). With a custom
//! pattern it is encoded whole. `between` runs before each piece; an error
//! from it (Ctrl-C) stops the work.

use rustc_hash::FxHashSet;

use crate::encode::{ids_buffer, Encoder};
use crate::split::pretokenize::{cut_at, is_safe_cut, is_word_cut, last_safe_cut};
use crate::train::{self, ChunkCounts};
use crate::vocab::Rank;

/// About this many bytes are encoded or counted between two calls of `between`.
pub const PIECE_BYTES: usize = 1 << 20;

/// `enc.encode(text, allowed)`, calling `between` every `PIECE_BYTES` or so.
pub fn encode(
    enc: &Encoder,
    text: &str,
    allowed: &FxHashSet<String>,
    between: impl FnMut() -> Result<(), String>,
) -> Result<Vec<Rank>, String> {
    encode_with(enc, text, allowed, PIECE_BYTES, between)
}

/// [`encode`] with a piece size of one's choosing (tests and fuzzing).
pub fn encode_with(
    enc: &Encoder,
    text: &str,
    allowed: &FxHashSet<String>,
    piece_bytes: usize,
    mut between: impl FnMut() -> Result<(), String>,
) -> Result<Vec<Rank>, String> {
    if !enc.splitter().cuttable() || text.len() <= 2 * piece_bytes {
        return enc.encode(text, allowed);
    }
    let mut out = ids_buffer(text.len());
    // One memo for all pieces: a word merged in the first piece is not
    // merged again in the last.
    let mut memo = enc.memo();
    for piece in cut_for(enc, allowed, text, piece_bytes) {
        between()?;
        enc.encode_into(piece, allowed, &mut memo, &mut out)?;
    }
    Ok(out)
}

/// `text` cut into pieces of about `target` bytes that `enc` encodes, one
/// after another, to the ids of the whole (as [`encode`] cuts it), or whole
/// where the encoder's pattern allows no cut.
pub fn cut_for<'t>(enc: &Encoder, allowed: &FxHashSet<String>, text: &'t str, target: usize) -> Vec<&'t str> {
    if !enc.splitter().cuttable() {
        return vec![text];
    }
    // With special tokens allowed, a cut inside any special token's text
    // (allowed or not: a longer one can shadow a shorter one) could change
    // which ones are found.
    let avoid: Vec<&str> = if allowed.is_empty() { Vec::new() } else { enc.special_texts().collect() };
    cut(text, target, &avoid)
}

/// `enc.encode(text, allowed)` on the threads of `pool`: the text cut into
/// pieces (as for [`encode`]) that the threads encode at once, for a single
/// large text. Texts too short to share out, and custom patterns, are
/// encoded whole on this thread.
pub fn encode_parallel(
    enc: &Encoder,
    text: &str,
    allowed: &FxHashSet<String>,
    pool: &rayon::ThreadPool,
) -> Result<Vec<Rank>, String> {
    let threads = pool.current_num_threads();
    // About sixteen pieces per thread (so the threads' loads even out to
    // within a sixteenth), between 64 KiB and 4 MiB.
    let target = (text.len() / (16 * threads)).clamp(64 << 10, 4 << 20);
    if threads <= 1 || !enc.splitter().cuttable() || text.len() < 2 * target {
        return enc.encode(text, allowed);
    }
    let pieces = cut_for(enc, allowed, text, target);
    let ids = pool.install(|| encode_pieces(enc, &pieces, allowed))?;
    Ok(pool.install(|| concat_parallel(&ids)))
}

/// `lists.concat()`, the copies made by the current pool's threads: on 16
/// threads one thread copying 45 MB of ids took as long as encoding them.
pub fn concat_parallel(lists: &[Vec<Rank>]) -> Vec<Rank> {
    use rayon::prelude::*;
    let total: usize = lists.iter().map(Vec::len).sum();
    let mut out: Vec<Rank> = Vec::with_capacity(total);
    let mut parts = Vec::with_capacity(lists.len());
    let mut room = &mut out.spare_capacity_mut()[..total];
    for l in lists {
        let (part, rest) = room.split_at_mut(l.len());
        parts.push(part);
        room = rest;
    }
    parts.into_par_iter().zip(lists).for_each(|(part, l)| {
        for (slot, &id) in part.iter_mut().zip(l) {
            slot.write(id);
        }
    });
    // SAFETY: the parts tile the first `total` slots, and every one was
    // written above (each part has its list's length).
    unsafe { out.set_len(total) };
    out
}

/// The ids of `pieces` (cut at safe points), each encoded by a thread of
/// the current rayon pool with a memo of the encoder's (`Encoder::memo`).
pub fn encode_pieces(enc: &Encoder, pieces: &[&str], allowed: &FxHashSet<String>) -> Result<Vec<Vec<Rank>>, String> {
    use rayon::prelude::*;
    pieces
        .par_iter()
        .map_init(
            || enc.memo(),
            |memo, piece| {
                let mut ids = ids_buffer(piece.len());
                enc.encode_into(piece, allowed, memo, &mut ids)?;
                Ok(ids)
            },
        )
        .collect()
}

/// `train::count_documents(splitter, docs)` in groups of about
/// `group_bytes`, calling `between` before each group. Each group is counted
/// on all cores, as a whole call would be.
pub fn count_documents_interruptibly(
    splitter: &dyn train::Chunker,
    docs: &[&str],
    group_bytes: usize,
    mut between: impl FnMut() -> Result<(), String>,
) -> Result<ChunkCounts, String> {
    let total: usize = docs.iter().map(|d| d.len()).sum();
    if total <= group_bytes || !splitter.cuttable() && docs.len() == 1 {
        return train::count_documents(splitter, docs);
    }
    let mut pieces: Vec<&str> = Vec::new();
    for doc in docs {
        if splitter.cuttable() && doc.len() > PIECE_BYTES {
            pieces.extend(cut(doc, PIECE_BYTES, &[]));
        } else {
            pieces.push(doc);
        }
    }
    let sizes: Vec<usize> = pieces.iter().map(|p| p.len()).collect();
    let mut counts = ChunkCounts::default();
    for group in groups(&sizes, group_bytes) {
        between()?;
        counts = train::merge_counts(counts, train::count_documents(splitter, &pieces[group])?);
    }
    Ok(counts)
}

/// Cuts `text` into pieces of at least `target` bytes (but the last) at line
/// and word cuts that fall inside no occurrence of a string in `avoid`. The
/// pieces concatenate to `text`.
pub fn cut<'t>(text: &'t str, target: usize, avoid: &[&str]) -> Vec<&'t str> {
    let b = text.as_bytes();
    let next = |from: usize| {
        // Cut points are character starts: skip continuation bytes.
        (from.max(1)..b.len())
            .find(|&p| (b[p] & 0xc0) != 0x80 && (is_word_cut(b, p) || is_safe_cut(b, p)) && !straddled(b, p, avoid))
    };
    cut_at(text, target, next)
}

/// Does an occurrence of one of `avoid` in `b` start before `p` and end after it?
fn straddled(b: &[u8], p: usize, avoid: &[&str]) -> bool {
    avoid.iter().any(|s| {
        let lo = (p + 1).saturating_sub(s.len());
        let hi = (p + s.len()).saturating_sub(1).min(b.len());
        lo < hi && memchr::memmem::find_iter(&b[lo..hi], s.as_bytes()).any(|i| lo + i < p)
    })
}

/// The last point of `b` (bytes read so far from a longer text) where a
/// block may end: a line cut or else a word cut (`last_safe_cut`) inside no
/// occurrence of a string in `avoid`, far enough from the end of `b` that an
/// occurrence running on past it could not straddle it.
pub fn last_cut_avoiding(b: &[u8], avoid: &[&str]) -> Option<usize> {
    let margin = avoid.iter().map(|s| s.len()).max().unwrap_or(0);
    let mut end = b.len().checked_sub(margin)?;
    loop {
        let p = last_safe_cut(&b[..end])?;
        if !straddled(b, p, avoid) {
            return Some(p);
        }
        end = p - 1;
    }
}

/// Splits `0..sizes.len()` into consecutive ranges of about `group_bytes`
/// (at least one item each), for batches worked through group by group.
pub fn groups(sizes: &[usize], group_bytes: usize) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let mut start = 0;
    while start < sizes.len() {
        let mut end = start;
        let mut size = 0;
        while end < sizes.len() && (end == start || size + sizes[end] <= group_bytes) {
            size += sizes[end];
            end += 1;
        }
        out.push(start..end);
        start = end;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::split::patterns::{GPT4O_PATTERN, GPT4_PATTERN};
    use crate::split::pretokenize::Splitter;
    use rustc_hash::FxHashMap;

    /// `concat_parallel` is `concat`, empty lists and all, on any pool.
    #[test]
    fn parallel_concat_is_concat() {
        let lists: Vec<Vec<Rank>> = (0..300u32).map(|i| (0..(i * 7919) % 53).map(|j| i * 1000 + j).collect()).collect();
        for threads in [1, 3] {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
            assert_eq!(pool.install(|| concat_parallel(&lists)), lists.concat());
            assert_eq!(pool.install(|| concat_parallel(&lists[..0])), Vec::<Rank>::new());
        }
    }

    fn encoder(pattern: &str) -> Encoder {
        let mut ranks: FxHashMap<Vec<u8>, Rank> = (0..=255u8).map(|b| (vec![b], b as Rank)).collect();
        for (i, t) in ["th", "the", "e ", "he", "in", "an", "\n\n"].iter().enumerate() {
            ranks.insert(t.as_bytes().to_vec(), 256 + i as Rank);
        }
        let specials: FxHashMap<String, Rank> =
            [("<|end|>".to_string(), 300), ("a\nb".to_string(), 301)].into_iter().collect();
        Encoder::new(ranks, specials, pattern).unwrap()
    }

    #[test]
    fn pieces_give_the_ids_of_the_whole() {
        // Lines that end in a space: no line cut, only word cuts.
        let text = "The theme\nthen <|end|> in an\n\n  a\nb Anthem 123\n".repeat(300) + &"the end. ".repeat(2000);
        for pattern in [GPT4_PATTERN, GPT4O_PATTERN, r"\s+|\w+|[^\s\w]+"] {
            let enc = encoder(pattern);
            for allowed in [vec![], vec!["<|end|>"], vec!["<|end|>", "a\nb"]] {
                let allowed: FxHashSet<String> = allowed.into_iter().map(String::from).collect();
                let whole = enc.encode(&text, &allowed).unwrap();
                for piece in [1, 7, 100, 4096, 1 << 20] {
                    let mut calls = 0;
                    let cut = encode_with(&enc, &text, &allowed, piece, || {
                        calls += 1;
                        Ok(())
                    })
                    .unwrap();
                    assert_eq!(cut, whole, "{pattern} {allowed:?} {piece}");
                    let expect_calls = enc.splitter().cuttable() && 2 * piece < text.len();
                    assert_eq!(calls > 0, expect_calls, "{pattern} {allowed:?} {piece}");
                }
            }
        }
    }

    #[test]
    fn parallel_encoding_equals_whole() {
        let text = "The theme\nthen <|end|> in an\n\n  a\nb Anthem 123\n".repeat(30_000);
        let pool = rayon::ThreadPoolBuilder::new().num_threads(3).build().unwrap();
        for pattern in [GPT4_PATTERN, GPT4O_PATTERN, r"\s+|\w+|[^\s\w]+"] {
            let enc = encoder(pattern);
            for allowed in [vec![], vec!["<|end|>", "a\nb"]] {
                let allowed: FxHashSet<String> = allowed.into_iter().map(String::from).collect();
                let whole = enc.encode(&text, &allowed).unwrap();
                assert!(encode_parallel(&enc, &text, &allowed, &pool).unwrap() == whole, "{pattern} {allowed:?}");
            }
        }
    }

    #[test]
    fn an_error_from_between_stops_the_work() {
        let enc = encoder(GPT4_PATTERN);
        let text = "word\n".repeat(10_000);
        let err = encode_with(&enc, &text, &FxHashSet::default(), 100, || Err("stop".into()));
        assert_eq!(err, Err("stop".to_string()));
        let s = Splitter::new(GPT4_PATTERN).unwrap();
        assert_eq!(count_documents_interruptibly(&s, &[&text], 1000, || Err("stop".into())), Err("stop".to_string()));
    }

    #[test]
    fn grouped_counting_equals_whole() {
        let text = "The quick brown fox.\nJumps over 1234 lazy dogs!\n".repeat(60_000);
        let docs = [text.as_str(), "short doc", text.as_str()];
        for pattern in [GPT4_PATTERN, r"\s+|\w+|[^\s\w]+"] {
            let s = Splitter::new(pattern).unwrap();
            let whole = train::count_documents(&s, &docs).unwrap();
            let mut calls = 0;
            let grouped = count_documents_interruptibly(&s, &docs, 1 << 20, || {
                calls += 1;
                Ok(())
            })
            .unwrap();
            assert_eq!(grouped, whole, "{pattern}");
            assert!(calls >= 3, "{calls}");
        }
    }

    /// The merge loop on a rayon pool equals it on the calling thread. (Small
    /// enough for Miri, which runs it: see docs/reliability.md, "Concurrency".)
    #[test]
    fn merging_on_a_pool() {
        let counts: train::ChunkCounts = [("abab", 3u64), ("ab", 5), ("bcbc", 2), ("ca", 1)]
            .iter()
            .map(|(w, n)| (w.as_bytes().to_vec(), *n))
            .collect();
        let sequential = train::learn_merges(counts.clone(), 262, |_, _| Ok(())).unwrap();
        let pool = rayon::ThreadPoolBuilder::new().num_threads(3).build().unwrap();
        let parallel = pool.install(|| train::learn_merges(counts.clone(), 262, |_, _| Ok(())).unwrap());
        assert_eq!(parallel, sequential);
        let merged = pool.install(|| {
            rayon::join(
                || train::merge_counts(counts.clone(), counts.clone()),
                || train::merge_counts(counts.clone(), counts.clone()),
            )
        });
        assert_eq!(merged.0, merged.1);
    }

    /// One encoder used by several threads at once, and counting on a rayon
    /// pool, give the sequential results (also run under ThreadSanitizer: see
    /// docs/reliability.md, "Concurrency"; too slow for Miri, which spends minutes
    /// compiling the regexes).
    #[test]
    #[cfg_attr(miri, ignore)]
    fn shared_across_threads() {
        let pattern = r"\s+|\w+|[^\s\w]+";
        let enc = encoder(pattern);
        let texts = ["The theme\nthen <|end|> in", "an anthem, the end", "a\nb  the <|end|>"];
        let allowed: FxHashSet<String> = ["<|end|>".to_string()].into_iter().collect();
        let expected: Vec<Vec<Rank>> = texts.iter().map(|t| enc.encode(t, &allowed).unwrap()).collect();
        std::thread::scope(|s| {
            for _ in 0..3 {
                s.spawn(|| {
                    for (t, e) in texts.iter().zip(&expected) {
                        assert_eq!(&enc.encode(t, &allowed).unwrap(), e);
                        assert_eq!(enc.decode_bytes(e).unwrap(), t.as_bytes());
                    }
                });
            }
        });
        let splitter = Splitter::new(pattern).unwrap();
        let sequential = train::count_documents(&splitter, &texts).unwrap();
        let pool = rayon::ThreadPoolBuilder::new().num_threads(3).build().unwrap();
        let parallel = pool.install(|| train::count_documents(&splitter, &texts).unwrap());
        assert_eq!(parallel, sequential);
        let merges = pool.install(|| train::learn_merges(parallel, 270, |_, _| Ok(())).unwrap());
        assert_eq!(merges, train::learn_merges(sequential, 270, |_, _| Ok(())).unwrap());
    }

    /// Threads encoding with one encoder (alone, and sharing the process's
    /// pool) while another changes and clears its chunk cache: the ids of
    /// one thread, no deadlock (also run under ThreadSanitizer).
    #[test]
    #[cfg_attr(miri, ignore)]
    fn shared_across_threads_while_the_cache_changes() {
        let enc = encoder(r"\s+|\w+|[^\s\w]+");
        let none = FxHashSet::default();
        let texts: Vec<String> =
            (0..6).map(|k| format!("word{k} the theme then {k} anthem\n").repeat(40 + k)).collect();
        let expected: Vec<Vec<Rank>> = texts.iter().map(|t| enc.encode(t, &none).unwrap()).collect();
        let pool = crate::threads::pool(2).unwrap();
        let stop = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            let workers: Vec<_> = (0..4)
                .map(|k| {
                    let (enc, none, texts, expected, pool) = (&enc, &none, &texts, &expected, &pool);
                    s.spawn(move || {
                        for round in 0..5 {
                            let i = (k + round) % texts.len();
                            assert_eq!(&enc.encode(&texts[i], none).unwrap(), &expected[i]);
                            assert_eq!(encode_parallel(enc, &texts[i], none, pool).unwrap(), expected[i]);
                        }
                    })
                })
                .collect();
            s.spawn(|| {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    enc.cache().set_capacity(1 << 10);
                    enc.cache().clear();
                    enc.cache().set_capacity(crate::encode::DEFAULT_CACHE_BYTES);
                    let _ = enc.cache().info();
                }
            });
            for w in workers {
                w.join().unwrap();
            }
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
        });
    }

    #[test]
    fn cuts_avoid_special_tokens() {
        // Word cuts at "d|" inside "<|end|>", a line cut inside "a\nb".
        let text = "x <|end|> a\nbc <|end|> y".repeat(50);
        let inside = |pieces: &[&str], s: &str| {
            let mut ends = Vec::new();
            let mut at = 0;
            for p in pieces {
                at += p.len();
                ends.push(at);
            }
            text.match_indices(s).any(|(i, _)| ends.iter().any(|&e| i < e && e < i + s.len()))
        };
        let plain = cut(&text, 1, &[]);
        assert!(inside(&plain, "<|end|>") && inside(&plain, "a\nb"));
        let avoiding = cut(&text, 1, &["<|end|>", "a\nb"]);
        assert_eq!(avoiding.concat(), text);
        assert!(!inside(&avoiding, "<|end|>") && !inside(&avoiding, "a\nb"));
        assert!(avoiding.len() > 100);
    }

    #[test]
    fn groups_cover_everything() {
        assert_eq!(groups(&[5, 5, 5, 20, 1], 10), vec![0..2, 2..3, 3..4, 4..5]);
        assert!(groups(&[], 10).is_empty());
    }
}
