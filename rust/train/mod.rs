//! Training: learn a merge list from a corpus.
//!
//! Two phases:
//!
//! 1. **Counting** (`count.rs`). Every document is pre-tokenized (see `split/pretokenize.rs`) and
//!    each distinct chunk is counted. Only the counts are kept, so memory grows
//!    with the number of *distinct* chunks, never with the corpus size. Texts
//!    are cut at safe points into segments that all cores count in parallel,
//!    each into its own map, and the maps are summed at the end (a shared map
//!    behind a lock would serialise the cores).
//!
//!    Counts can be kept: a count table (`table.rs`, a `.bpec` file) holds
//!    them sorted, so that tables of shards merge in one streaming pass; and
//!    under a memory cap (`spill.rs`), counting moves its maps to such
//!    tables on disk as they fill, and merges them at the end, exactly.
//!
//! 2. **Merging** (the other files). Each distinct chunk becomes a "word": its list of token ids,
//!    starting from its bytes, weighted by its count. We keep the count of every
//!    adjacent pair over all words and, per pair, the words it occurs in. Each
//!    step takes the most frequent pair from a priority queue, rewrites only the
//!    words that contain it and adjusts the pair counts by the difference. A
//!    full recount per merge (minbpe's way, our Python reference) would be
//!    O(corpus) per merge; this is O(affected words). Only the pairs near
//!    the top are kept exactly, in a hash map and the queue; the many others,
//!    which can only lose occurrences, wait "cold" with a bound on their
//!    count and are recounted when the top comes down to them.
//!
//! **Tie-break (deterministic):** the most frequent pair wins; among equal
//! counts, the pair whose `(left token bytes, right token bytes)` is
//! lexicographically smallest. Nothing depends on hash order or thread count,
//! so the same corpus gives the same merges on any machine.
//!
//! **Duplicates:** rarely, two different pairs concatenate to the same bytes
//! (the same string reached by two merge paths). The later merge then reuses
//! the existing id instead of adding a second token with the same bytes, so
//! `vocab` stays a bijection (which tiktoken's rank files require).

// In the order they build on each other: counting stands alone, streamed
// counting (files, records) is its pipeline, or a file per thread for
// many record files (`shards.rs`); count
// tables (`.bpec` files) and spilling counts to them under a memory cap
// come next; the merge loop's parts go words, occurrences (word lists),
// cold pairs, heap, then the loop's state and steps (`merging.rs`), driven
// by `learn` below.
mod long;
mod count;
mod pipeline;
mod shards;
pub mod table;
mod spill;
mod words;
mod stretches;
mod cut;
mod occurrences;
mod cold;
mod heap;
mod merging;
mod picky;
mod ids;
#[cfg(test)]
mod testing;

pub use count::{count_chunks, count_documents, merge_counts, ChunkCounts, Chunker, Source, Tally};
pub use ids::IdChunker;
pub use merging::Merge;
pub use picky::{learn_picky, Event};
pub use pipeline::{count_files, count_files_into, count_records_into};
pub use spill::{Capped, Spill, Spilled};

pub use merging::Allow;
use merging::{Merging, Tuning};
use words::{Symbol, Words};

/// Learns merges until the vocabulary holds `target` ordinary tokens (256
/// bytes included) or no pair is left. `on_merge` is called with each merge
/// as it is made and the vocabulary size after it (for progress, and for the
/// Python tokenizer's state, made meanwhile on another core), and may stop
/// the work by returning an error (Ctrl-C).
///
/// The merge loop runs on one core: most of its time is in the tens of
/// thousands of late merges that touch a few words each (a parallel version
/// was no faster: docs/dev/performance.md, "The merge loop on one core").
pub fn learn_merges(
    counts: impl Source,
    target: usize,
    on_merge: impl FnMut(&Merge, usize) -> Result<(), String>,
) -> Result<Vec<Merge>, String> {
    if target <= 1 << 16 {
        learn::<u16>(counts, target, on_merge, Tuning::DEFAULT)
    } else {
        learn::<u32>(counts, target, on_merge, Tuning::DEFAULT)
    }
}

/// [`learn_merges`], handing the merges to `send` in batches of `batch` as
/// they come (the last one maybe shorter, and sent even after an error),
/// and telling `progress` the vocabulary size after each merge. Stops with
/// the error of `stopped` (Ctrl-C) as soon as it returns one. For a caller
/// that works on the merges on another thread while the loop runs.
pub fn learn_merges_in_batches(
    counts: impl Source,
    target: usize,
    batch: usize,
    mut progress: impl FnMut(usize),
    mut send: impl FnMut(Vec<Merge>),
    stopped: impl Fn() -> Result<(), String>,
) -> Result<(), String> {
    let mut merges = Vec::with_capacity(batch);
    let learnt = learn_merges(counts, target, |merge, size| {
        progress(size);
        merges.push(*merge);
        if merges.len() == batch {
            send(std::mem::replace(&mut merges, Vec::with_capacity(batch)));
        }
        stopped()
    });
    send(merges);
    learnt.map(|_| ())
}

/// Learns merges on top of a base vocabulary (extending it): `base` holds
/// every base token's bytes by id (empty for an id with no token), and
/// `encoder` makes an encoder (one per thread) that appends the ids the base
/// encodes a chunk to. Each chunk starts as its base encoding, and the loop
/// merges pairs of ids (base or new) from there, exactly as [`learn_merges`]
/// does from bytes; new tokens take the ids from `base.len()` until there are
/// `target` ids in all. A merge whose bytes are a base token already reuses
/// its id (see "Duplicates").
///
/// `allow`, if given, is a rule on the bytes of each token a merge would
/// make: a pair whose token it refuses is never merged, and the next best
/// pair is taken instead (SuperBPE's stage 2: [`superword_allowed`]).
///
/// `between` runs on the calling thread between batches of the work before
/// the first merge (the first encoding, the first pairs: tens of seconds
/// for SuperBPE on a large corpus), `on_merge` after each merge: an error
/// from either (Ctrl-C) stops the training and is returned. (The merges are
/// learnt on the words cut where no merge can reach, `cut.rs`; where that
/// proves inexact, they are learnt again, and `on_merge` sees them again
/// from the first.)
pub fn extend_merges<E>(
    counts: impl Source,
    base: &[Vec<u8>],
    encoder: impl Fn() -> E + Sync,
    target: usize,
    allow: Option<Allow>,
    between: impl FnMut() -> Result<(), String>,
    on_merge: impl FnMut(&Merge, usize) -> Result<(), String>,
) -> Result<Vec<Merge>, String>
where
    E: FnMut(&[u8], &mut Vec<u32>) + Send,
{
    extend_tuned(counts, base, Some(encoder), target, allow, Tuning::EXTEND, between, on_merge)
}

/// [`extend_merges`] from counts by ids (`ids.rs`): each word is its key
/// read back, on the calling thread (no encoding left to share out).
pub fn extend_merges_by_ids(
    counts: impl Source,
    base: &[Vec<u8>],
    target: usize,
    allow: Option<Allow>,
    between: impl FnMut() -> Result<(), String>,
    on_merge: impl FnMut(&Merge, usize) -> Result<(), String>,
) -> Result<Vec<Merge>, String> {
    type Encode = fn(&[u8], &mut Vec<u32>);
    extend_tuned(counts, base, None::<fn() -> Encode>, target, allow, Tuning::EXTEND, between, on_merge)
}

/// [`extend_merges`] with `tuning`; without an encoder, from counts by ids.
#[allow(clippy::too_many_arguments)]
fn extend_tuned<E>(
    counts: impl Source,
    base: &[Vec<u8>],
    encoder: Option<impl Fn() -> E + Sync>,
    target: usize,
    allow: Option<Allow>,
    tuning: Tuning,
    between: impl FnMut() -> Result<(), String>,
    on_merge: impl FnMut(&Merge, usize) -> Result<(), String>,
) -> Result<Vec<Merge>, String>
where
    E: FnMut(&[u8], &mut Vec<u32>) + Send,
{
    #[allow(clippy::too_many_arguments)]
    fn run<S: Symbol, E: FnMut(&[u8], &mut Vec<u32>) + Send>(
        counts: impl Source,
        base: &[Vec<u8>],
        encoder: Option<&(impl Fn() -> E + Sync)>,
        target: usize,
        allow: Option<Allow>,
        tuning: Tuning,
        mut between: impl FnMut() -> Result<(), String>,
        mut on_merge: impl FnMut(&Merge, usize) -> Result<(), String>,
    ) -> Result<Vec<Merge>, String> {
        let vocab: Vec<std::sync::Arc<[u8]>> = base.iter().map(|b| std::sync::Arc::from(&b[..])).collect();
        let words = match encoder {
            Some(encoder) => {
                let start = || {
                    let (mut encode, mut ids) = (encoder(), Vec::new());
                    move |bytes: &[u8], out: &mut Vec<S>| {
                        ids.clear();
                        encode(bytes, &mut ids);
                        out.extend(ids.iter().map(|&i| S::from_id(i)));
                    }
                };
                Words::<S>::new_with(counts, start, tuning.encode_batch, &mut between)?
            }
            None => Words::<S>::of_keys(counts, &mut between)?,
        };
        let with_allow = |mut state: Merging<S>| {
            if let Some(allow) = &allow {
                state.set_allow(allow.clone());
            }
            state
        };
        // First on the words cut where no merge can reach (`cut.rs`), with
        // lower and lower thresholds while a training there proves inexact;
        // at last on the whole words.
        let sketch = cut::Sketch::of(&words, &mut between)?;
        let mut least = tuning.first_cut.unwrap_or_else(|| cut::guess(&sketch, target.saturating_sub(vocab.len())));
        while least > 1 {
            between()?;
            let Some(pieces) = cut::cut(&words, &sketch, least, &mut between)? else { break };
            let state = with_allow(Merging::of(pieces, vocab.clone(), tuning, &mut between)?);
            match run_loop_above(state, target, least, &mut on_merge)? {
                Ok(merges) => return Ok(merges),
                Err(lower) => least = lower,
            }
        }
        drop(sketch);
        let state = with_allow(Merging::of(words, vocab, tuning, between)?);
        run_loop(state, target, on_merge)
    }
    if target <= 1 << 16 {
        run::<u16, E>(counts, base, encoder.as_ref(), target, allow, tuning, between, on_merge)
    } else {
        run::<u32, E>(counts, base, encoder.as_ref(), target, allow, tuning, between, on_merge)
    }
}

/// SuperBPE's rule on the tokens of its second stage (Liu et al., 2025, as
/// their trainer applies it): a token spans at most `max_words` words (the
/// runs of bytes between spaces: "by the way" is 3), and never holds a colon
/// followed by a space (": "), so that superwords do not run across the
/// colon of a heading, a dialogue turn or a key-value line.
pub fn superword_allowed(token: &[u8], max_words: usize) -> bool {
    if token.windows(2).any(|w| w == b": ") {
        return false;
    }
    token.split(|&b| b == b' ').filter(|w| !w.is_empty()).count() <= max_words
}

/// [`learn_merges`] with token ids stored as `S`, which must hold `target - 1`.
fn learn<S: Symbol>(
    counts: impl Source,
    target: usize,
    on_merge: impl FnMut(&Merge, usize) -> Result<(), String>,
    tuning: Tuning,
) -> Result<Vec<Merge>, String> {
    run_loop(Merging::<S>::new(counts, tuning)?, target, on_merge)
}

/// The merge loop: merges until `state` holds `target` tokens or no pair is left.
fn run_loop<S: Symbol>(
    state: Merging<S>,
    target: usize,
    on_merge: impl FnMut(&Merge, usize) -> Result<(), String>,
) -> Result<Vec<Merge>, String> {
    Ok(run_loop_above(state, target, 0, on_merge)?.expect("a loop with no threshold always ends"))
}

/// [`run_loop`] on words cut at pairs counted fewer than `least` times
/// (`cut.rs`; 0: not cut), which gives the merges of the whole words if
/// every merge counts `least` or more, none is a duplicate, and `target`
/// is reached. Where one of these fails, the loop stops and returns
/// `Err(lower)`: a threshold to try next (0: none, train on the whole words).
fn run_loop_above<S: Symbol>(
    mut state: Merging<S>,
    target: usize,
    least: u32,
    mut on_merge: impl FnMut(&Merge, usize) -> Result<(), String>,
) -> Result<Result<Vec<Merge>, u32>, String> {
    let mut merges = Vec::new();
    while state.tokens() < target {
        let Some(pair) = state.pop_winner() else {
            // The corpus is exhausted: on cut words, maybe too soon.
            if least > 1 {
                return Ok(Err(least / 4));
            }
            break;
        };
        let count = if least > 0 { state.count_of(pair) } else { i64::MAX };
        if count < i64::from(least) {
            // The pair at the top counts fewer (its count on the cut words,
            // no more than on the whole), and the next merges no more.
            return Ok(Err((count / 2) as u32));
        }
        let merge = state.new_token(pair);
        if least > 0 && !state.made_new() {
            return Ok(Err(0));
        }
        on_merge(&merge, state.tokens())?;
        merges.push(merge);
        state.apply(pair, S::from_id(merge.new))?;
        state.tidy();
    }
    Ok(Ok(merges))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::split::patterns::GPT4_PATTERN;
    use crate::split::pretokenize::Splitter;
    use testing::random_text;

    fn counts_of(words: &[(&str, u64)]) -> ChunkCounts {
        words.iter().map(|(w, n)| (w.as_bytes().to_vec(), *n)).collect()
    }
    #[test]
    fn textbook_example() {
        // "aaabdaaabac" as one chunk, trained to 259 tokens.
        let merges = learn_merges(counts_of(&[("aaabdaaabac", 1)]), 259, |_, _| Ok(())).unwrap();
        let got: Vec<(u32, u32, u32)> = merges.iter().map(|m| (m.left, m.right, m.new)).collect();
        assert_eq!(got, vec![(97, 97, 256), (97, 98, 257), (256, 257, 258)]);
    }

    #[test]
    fn ties_go_to_the_smallest_bytes() {
        // "ab" and "cd" both occur twice; "ab" < "cd".
        let merges = learn_merges(counts_of(&[("cd", 2), ("ab", 2)]), 257, |_, _| Ok(())).unwrap();
        assert_eq!(merges, vec![Merge { left: b'a' as u32, right: b'b' as u32, new: 256 }]);
    }

    #[test]
    fn pairs_occurring_once_merge_last_in_byte_order() {
        // "xy" occurs twice and goes first; then only pairs occurring once are
        // left ((x y)(x y) -> (xy, xy), and (a, b)): the heap, which holds
        // pairs occurring twice or more, runs empty and is rebuilt with them.
        let merges = learn_merges(counts_of(&[("xyxy", 1), ("ab", 1)]), 1000, |_, _| Ok(())).unwrap();
        let got: Vec<(u32, u32, u32)> = merges.iter().map(|m| (m.left, m.right, m.new)).collect();
        assert_eq!(got, vec![(120, 121, 256), (97, 98, 257), (256, 256, 258)]);
    }

    #[test]
    fn counts_beyond_32_bits_add_up() {
        // Each chunk becomes several words of at most u32::MAX; their counts
        // must add up: "ab" (2^33 + 1) beats "cd" (2^33), which beats "ef"
        // (2^32 + 7, more than a u32 holds).
        let counts = counts_of(&[("cd", 1 << 33), ("ef", (1 << 32) + 7), ("ab", (1 << 33) + 1)]);
        let merges = learn_merges(counts, 259, |_, _| Ok(())).unwrap();
        let got: Vec<(u32, u32)> = merges.iter().map(|m| (m.left, m.right)).collect();
        assert_eq!(got, vec![(97, 98), (99, 100), (101, 102)]);
    }

    #[test]
    fn stops_when_the_corpus_is_exhausted() {
        let merges = learn_merges(counts_of(&[("ab", 5)]), 1000, |_, _| Ok(())).unwrap();
        assert_eq!(merges.len(), 1);
    }

    #[test]
    fn u16_and_u32_symbols_learn_the_same_merges() {
        // Varied text (multi-byte letters, digits, punctuation), so that
        // thousands of merges happen and ties are broken by bytes.
        const WORDS: &[&str] = &["the", "a", "é", "日本", "ж", "1", "42", "x", "'s", "!", "\n", "qu", "ü", "🙂"];
        let text = random_text(WORDS, 60_000, 4, 0x9e3779b97f4a7c15, false);
        let s = Splitter::new(GPT4_PATTERN).unwrap();
        let counts = count_documents(&s, &[&text]).unwrap();
        let narrow = learn::<u16>(counts.clone(), 3000, |_, _| Ok(()), Tuning::DEFAULT).unwrap();
        let wide = learn::<u32>(counts.clone(), 3000, |_, _| Ok(()), Tuning::DEFAULT).unwrap();
        assert!(narrow.len() > 1000, "{}", narrow.len());
        assert_eq!(narrow, wide);
        // Sliding the words and lists down whenever a quarter (or a half, or
        // any of it) is unused, at any size, in passes of ~3000 bytes,
        // changes nothing.
        for slide_dead in [4, 2, usize::MAX] {
            let sliding = Tuning { min_slide: 0, slide_pass: 3000, slide_dead, ..Tuning::DEFAULT };
            let sliding = learn::<u16>(counts.clone(), 3000, |_, _| Ok(()), sliding).unwrap();
            assert_eq!(narrow, sliding, "slid when 1/{slide_dead} is dead");
        }
    }

    #[test]
    fn a_heap_of_few_pairs_learns_what_a_heap_of_all_pairs_learns() {
        // With a heap of a few pairs, the floor moves all the time: pairs go
        // cold and are thawed (recounted from their words) over and over.
        // The merges must be those of a heap holding every pair counted twice
        // or more (the floor stays at 2 until it drops to 1). (A merge that
        // reuses an id, whose cold pairs would be thawed too, cannot happen
        // in training: see test_reference.py,
        // `test_duplicate_merge_reuses_existing_id`.)
        const WORDS: &[&str] =
            &["the", "then", "he", "hen", "é", "日本", "本日", "ж", "1", "42", "x", "'s", "!", "ab", "abc", "bc"];
        let text = random_text(WORDS, 40_000, 5, 0x51afd7ed558ccd25, true);
        let s = Splitter::new(GPT4_PATTERN).unwrap();
        let counts = count_documents(&s, &[&text]).unwrap();
        let all = Tuning { heap_pairs: usize::MAX, ..Tuning::DEFAULT };
        let expected = learn::<u16>(counts.clone(), 5000, |_, _| Ok(()), all).unwrap();
        assert!(expected.len() > 2000, "{}", expected.len());
        for heap_pairs in [1, 7, 64, 1000] {
            let tuning = Tuning {
                heap_pairs,
                min_slide: 0,
                slide_pass: 1 << (heap_pairs % 17),
                first_block: 1 + heap_pairs,
                ..Tuning::DEFAULT
            };
            let got = learn::<u16>(counts.clone(), 5000, |_, _| Ok(()), tuning).unwrap();
            assert_eq!(got, expected, "heap of {heap_pairs} pairs");
        }
    }
}

#[cfg(test)]
mod superword_tests;
#[cfg(test)]
mod initial_tests;
