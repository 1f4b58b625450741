//! Training: learn a merge list from a corpus.
//!
//! Two phases, both here:
//!
//! 1. **Counting.** Every document is pre-tokenized (see `pretokenize.rs`) and
//!    each distinct chunk is counted. Only the counts are kept, so memory grows
//!    with the number of *distinct* chunks, never with the corpus size. Texts
//!    are cut at safe points into segments that all cores count in parallel,
//!    each into its own map, and the maps are summed at the end (a shared map
//!    behind a lock would serialise the cores).
//!
//! 2. **Merging.** Each distinct chunk becomes a "word": its list of token ids,
//!    starting from its bytes, weighted by its count. We keep the count of every
//!    adjacent pair over all words and, per pair, the words it occurs in. Each
//!    step takes the most frequent pair from a priority queue, rewrites only the
//!    words that contain it and adjusts the pair counts by the difference. A
//!    full recount per merge (minbpe's way, our Python reference) would be
//!    O(corpus) per merge; this is O(affected words).
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

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::sync::Arc;

use rayon::prelude::*;
use rustc_hash::FxHashMap;

use crate::pretokenize::{last_safe_cut, segments, Splitter};

/// Distinct chunk bytes -> how often it occurred. Counts are 64-bit: a large
/// corpus overflows 32 bits (a known bug of other trainers).
pub type ChunkCounts = FxHashMap<Vec<u8>, u64>;

/// Segment size for parallel counting: big enough to amortise scheduling,
/// small enough to keep both cores busy on a few-MB text.
const SEGMENT_BYTES: usize = 1 << 20;

/// Counts the chunks of one document into `counts` (single thread).
pub fn count_chunks(splitter: &Splitter, text: &str, counts: &mut ChunkCounts) -> Result<(), String> {
    splitter.for_each_chunk(text, |chunk| {
        // Look up by slice first: allocating a key only for new chunks is the
        // difference between ~1 and ~N allocations per distinct chunk.
        if let Some(c) = counts.get_mut(chunk.as_bytes()) {
            *c += 1;
        } else {
            counts.insert(chunk.as_bytes().to_vec(), 1);
        }
    })
}

/// Adds `other` into `into`, iterating the smaller map.
pub fn merge_counts(mut into: ChunkCounts, mut other: ChunkCounts) -> ChunkCounts {
    if other.len() > into.len() {
        std::mem::swap(&mut into, &mut other);
    }
    for (k, v) in other {
        *into.entry(k).or_insert(0) += v;
    }
    into
}

/// Counts the chunks of many documents, in parallel over all rayon threads.
/// Long documents are cut at safe points when the pattern allows it (or when
/// `force_cut`: file blocks, which are cut at such points anyway).
pub fn count_documents(splitter: &Splitter, docs: &[&str], force_cut: bool) -> Result<ChunkCounts, String> {
    let mut pieces: Vec<&str> = Vec::new();
    for doc in docs {
        if (force_cut || splitter.cuttable()) && doc.len() > SEGMENT_BYTES {
            pieces.extend(segments(doc, SEGMENT_BYTES));
        } else {
            pieces.push(doc);
        }
    }
    pieces
        .par_iter()
        .try_fold(ChunkCounts::default, |mut acc, piece| {
            count_chunks(splitter, piece, &mut acc)?;
            Ok(acc)
        })
        .try_reduce(ChunkCounts::default, |a, b| Ok(merge_counts(a, b)))
}

/// How many bytes of a file are read at a time. The block is cut back to its
/// last safe cut point and the rest carried into the next block.
const BLOCK_BYTES: usize = 8 << 20;

/// Streams UTF-8 text files and counts their chunks. Memory: one block plus
/// the counts. `on_bytes` gets the number of bytes done after each block and
/// may stop the work by returning an error (Ctrl-C).
///
/// Each file is one document, read in blocks cut at safe cut points (see
/// `pretokenize.rs`): exact for the built-in patterns; a custom pattern whose
/// matches cross "\n" followed by a letter or digit is cut there.
pub fn count_files(
    splitter: &Splitter,
    paths: &[std::path::PathBuf],
    mut on_bytes: impl FnMut(u64) -> Result<(), String>,
) -> Result<ChunkCounts, String> {
    use std::io::Read;
    let mut counts = ChunkCounts::default();
    for path in paths {
        let name = path.display();
        let mut file = std::fs::File::open(path).map_err(|e| format!("cannot read {name}: {e}"))?;
        let mut buf: Vec<u8> = Vec::new();
        let mut offset: u64 = 0; // file offset of buf[0]
        let mut eof = false;
        while !eof {
            let old = buf.len();
            buf.resize(old + BLOCK_BYTES, 0);
            let mut filled = old;
            while filled < buf.len() {
                let n = file.read(&mut buf[filled..]).map_err(|e| format!("cannot read {name}: {e}"))?;
                if n == 0 {
                    eof = true;
                    break;
                }
                filled += n;
            }
            buf.truncate(filled);
            let cut = if eof { buf.len() } else { last_safe_cut(&buf).unwrap_or(0) };
            if cut == 0 && !eof {
                continue; // no cut point yet (one huge line): read more
            }
            let text = std::str::from_utf8(&buf[..cut]).map_err(|e| {
                format!(
                    "{name} is not valid UTF-8 at byte offset {}; convert it to UTF-8 \
                     (e.g. `iconv -f latin1 -t utf-8`) or remove the bad bytes",
                    offset + e.valid_up_to() as u64
                )
            })?;
            let block = count_documents(splitter, &[text], true)?;
            counts = merge_counts(counts, block);
            on_bytes(cut as u64)?;
            buf.drain(..cut);
            offset += cut as u64;
        }
    }
    Ok(counts)
}

// ---------------------------------------------------------------------------
// The merge loop

type Pair = (u32, u32);

/// A priority-queue entry. The queue is a max-heap on (count, reversed bytes),
/// so the top is the winner of the tie-break rule above. Entries are not
/// updated in place: when a pair's count changes we push a new entry and let
/// stale ones be skipped on pop ("lazy deletion"), which is simpler and faster
/// than a decrease-key heap.
struct Candidate {
    count: u64,
    left: Arc<[u8]>,
    right: Arc<[u8]>,
    pair: Pair,
}

impl Ord for Candidate {
    fn cmp(&self, other: &Self) -> Ordering {
        self.count
            .cmp(&other.count)
            // Smaller bytes must come out first, so they compare as greater.
            .then_with(|| other.left.cmp(&self.left))
            .then_with(|| other.right.cmp(&self.right))
    }
}
impl PartialOrd for Candidate {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl PartialEq for Candidate {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Candidate {}

/// Replaces every non-overlapping (left to right) occurrence of `pair` in `word` by `new`.
fn merge_word(word: &mut Vec<u32>, pair: Pair, new: u32) {
    let mut out = Vec::with_capacity(word.len());
    let mut i = 0;
    while i < word.len() {
        if i + 1 < word.len() && word[i] == pair.0 && word[i + 1] == pair.1 {
            out.push(new);
            i += 2;
        } else {
            out.push(word[i]);
            i += 1;
        }
    }
    *word = out;
}

/// One learned merge: `left` and `right` become `new`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Merge {
    pub left: u32,
    pub right: u32,
    pub new: u32,
}

/// Learns merges until the vocabulary holds `target` ordinary tokens (256
/// bytes included) or no pair is left. `on_token` is called with the
/// vocabulary size after each new token (for progress) and may stop the work
/// by returning an error (Ctrl-C).
pub fn learn_merges(
    counts: ChunkCounts,
    target: usize,
    mut on_token: impl FnMut(usize) -> Result<(), String>,
) -> Result<Vec<Merge>, String> {
    // Words of one byte have no pairs and can never change: drop them.
    let (words, freqs): (Vec<Vec<u32>>, Vec<u64>) = counts
        .into_iter()
        .filter(|(bytes, _)| bytes.len() >= 2)
        .map(|(bytes, n)| (bytes.into_iter().map(u32::from).collect(), n))
        .unzip();
    let mut words = words;

    // Initial pair counts and the words each pair occurs in, in parallel.
    let (mut pair_counts, mut where_) = words
        .par_iter()
        .enumerate()
        .fold(
            || (FxHashMap::<Pair, i64>::default(), FxHashMap::<Pair, Vec<u32>>::default()),
            |(mut pc, mut wh), (i, w)| {
                for p in w.windows(2) {
                    let pair = (p[0], p[1]);
                    *pc.entry(pair).or_insert(0) += freqs[i] as i64;
                    wh.entry(pair).or_default().push(i as u32);
                }
                (pc, wh)
            },
        )
        .reduce(
            || (FxHashMap::default(), FxHashMap::default()),
            |(mut pc, mut wh), (pc2, wh2)| {
                for (k, v) in pc2 {
                    *pc.entry(k).or_insert(0) += v;
                }
                for (k, v) in wh2 {
                    wh.entry(k).or_default().extend(v);
                }
                (pc, wh)
            },
        );

    let mut vocab: Vec<Arc<[u8]>> = (0..=255u8).map(|b| Arc::from(&[b][..])).collect();
    let mut ids: FxHashMap<Arc<[u8]>, u32> =
        vocab.iter().enumerate().map(|(i, b)| (b.clone(), i as u32)).collect();

    let candidate = |vocab: &[Arc<[u8]>], pair: Pair, count: i64| Candidate {
        count: count as u64,
        left: vocab[pair.0 as usize].clone(),
        right: vocab[pair.1 as usize].clone(),
        pair,
    };
    let mut heap: BinaryHeap<Candidate> = pair_counts
        .iter()
        .filter(|(_, &c)| c > 0)
        .map(|(&p, &c)| candidate(&vocab, p, c))
        .collect();

    let mut merges = Vec::new();
    let mut delta: FxHashMap<Pair, i64> = FxHashMap::default();
    let mut pairs_buf: Vec<Pair> = Vec::new();
    while vocab.len() < target {
        let Some(top) = heap.pop() else { break }; // corpus exhausted
        let current = pair_counts.get(&top.pair).copied().unwrap_or(0);
        if current <= 0 {
            continue;
        }
        if current as u64 != top.count {
            // Stale entry: the pair's count dropped since it was pushed.
            heap.push(candidate(&vocab, top.pair, current));
            continue;
        }

        let pair = top.pair;
        let mut bytes = top.left.to_vec();
        bytes.extend_from_slice(&top.right);
        let new = match ids.get(&bytes[..]) {
            Some(&id) => id, // duplicate: same bytes reached by another path
            None => {
                let id = vocab.len() as u32;
                let bytes: Arc<[u8]> = Arc::from(bytes);
                vocab.push(bytes.clone());
                ids.insert(bytes, id);
                on_token(vocab.len())?;
                id
            }
        };
        merges.push(Merge { left: pair.0, right: pair.1, new });

        // Rewrite the affected words; the pair-count change of each word is
        // (its pairs after) - (its pairs before), times its frequency.
        let mut affected = where_.remove(&pair).unwrap_or_default();
        affected.sort_unstable();
        affected.dedup();
        delta.clear();
        for &wi in &affected {
            let word = &mut words[wi as usize];
            // The list may be stale (the word no longer holds the pair).
            if !word.windows(2).any(|p| (p[0], p[1]) == pair) {
                continue;
            }
            let f = freqs[wi as usize] as i64;
            for p in word.windows(2) {
                *delta.entry((p[0], p[1])).or_insert(0) -= f;
            }
            merge_word(word, pair, new);
            pairs_buf.clear();
            pairs_buf.extend(word.windows(2).map(|p| (p[0], p[1])));
            for &p in &pairs_buf {
                *delta.entry(p).or_insert(0) += f;
                // Only pairs with the new token are new to this word.
                if p.0 == new || p.1 == new {
                    where_.entry(p).or_default().push(wi);
                }
            }
        }
        for (&p, &d) in &delta {
            if d == 0 {
                continue;
            }
            let c = pair_counts.entry(p).or_insert(0);
            *c += d;
            let c = *c;
            if c <= 0 {
                pair_counts.remove(&p);
            } else if d > 0 {
                // A count that grew needs a fresh entry; one that shrank keeps
                // its (now too high) entry, which is fixed when popped.
                heap.push(candidate(&vocab, p, c));
            }
        }
    }
    Ok(merges)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pretokenize::GPT4_PATTERN;

    fn counts_of(words: &[(&str, u64)]) -> ChunkCounts {
        words.iter().map(|(w, n)| (w.as_bytes().to_vec(), *n)).collect()
    }

    #[test]
    fn textbook_example() {
        // "aaabdaaabac" as one chunk, trained to 259 tokens.
        let merges = learn_merges(counts_of(&[("aaabdaaabac", 1)]), 259, |_| Ok(())).unwrap();
        let got: Vec<(u32, u32, u32)> = merges.iter().map(|m| (m.left, m.right, m.new)).collect();
        assert_eq!(got, vec![(97, 97, 256), (97, 98, 257), (256, 257, 258)]);
    }

    #[test]
    fn ties_go_to_the_smallest_bytes() {
        // "ab" and "cd" both occur twice; "ab" < "cd".
        let merges = learn_merges(counts_of(&[("cd", 2), ("ab", 2)]), 257, |_| Ok(())).unwrap();
        assert_eq!(merges, vec![Merge { left: b'a' as u32, right: b'b' as u32, new: 256 }]);
    }

    #[test]
    fn stops_when_the_corpus_is_exhausted() {
        let merges = learn_merges(counts_of(&[("ab", 5)]), 1000, |_| Ok(())).unwrap();
        assert_eq!(merges.len(), 1);
    }

    #[test]
    fn parallel_counting_equals_sequential() {
        let s = Splitter::new(GPT4_PATTERN).unwrap();
        let text = "The quick brown fox.\nJumps over 1234 lazy dogs!\n".repeat(50_000);
        let mut seq = ChunkCounts::default();
        count_chunks(&s, &text, &mut seq).unwrap();
        let par = count_documents(&s, &[&text], false).unwrap();
        assert_eq!(seq, par);
    }
}
