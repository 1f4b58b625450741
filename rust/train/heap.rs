//! The priority queue of pairs, holding only those counted at least a
//! moving floor's times (the others are cold: see `cold.rs`).

use std::sync::Arc;

use rustc_hash::FxHashMap;

use super::cold::{class, low, Cold, CLASSES};
use super::occurrences::PairInfo;
use super::words::{Pair, Symbol};

/// The priority queue of pairs: a binary max-heap of `(count, pair)` whose
/// top is the winner of the tie-break rule (see `train/mod.rs`: highest
/// count, then the smallest (left bytes, right bytes)). Entries are not updated in place:
/// when a pair's count changes we push a new entry and let stale ones be
/// skipped on pop ("lazy deletion"), which is simpler and faster than a
/// decrease-key heap.
///
/// Hand-written rather than `std::collections::BinaryHeap` because the
/// tie-break needs the token bytes: with std's heap, `Ord` sees only the
/// entries, so each entry would carry its own references to both tokens'
/// bytes. Here entries are 16 bytes (24 with u32 symbols) and comparisons
/// read the vocabulary only when counts and left-token prefixes tie (see
/// docs/dev/performance.md, "The pair heap").
pub(super) struct PairHeap<S> {
    pub(super) items: Vec<Entry<S>>,
    /// The number of entries after the last rebuild.
    pub(super) built: usize,
}

/// The floor for a heap of about `heap_pairs` pairs, given how many pairs
/// are counted in each class: the least count of the highest class such that
/// at least that many pairs (or all pairs) are in it or above; never below 2
/// while some pair is counted twice or more. 1 if none is.
///
/// From a histogram of the counts, not a sort of them: that needs no array
/// of a million counts beside the pairs at their most numerous.
pub(super) fn floor_for(histogram: &[usize; CLASSES], heap_pairs: usize) -> i64 {
    let mut above = 0;
    for c in (2..CLASSES).rev() {
        above += histogram[c];
        if above >= heap_pairs || (c == 2 && above > 0) {
            return low(c);
        }
    }
    1
}

/// How many pairs are in each class: those in the map by their count, the
/// cold ones by the class they are kept in (a bound of their count).
pub(super) fn histogram<S: Symbol>(pairs: &FxHashMap<Pair<S>, PairInfo>, cold: &Cold<S>) -> [usize; CLASSES] {
    let mut histogram = [0usize; CLASSES];
    for info in pairs.values() {
        histogram[class(info.count().max(1))] += 1;
    }
    cold.count_classes(&mut histogram);
    histogram
}

/// A heap entry: a pair, its count when pushed, and the first 4 bytes of its
/// left token (big-endian, zero-padded). Among equal counts (most late
/// comparisons: thousands of pairs have count 2 or 3) the prefix decides
/// without reading the vocabulary, whose scattered bytes cost cache misses.
/// (An 8-byte prefix would make u16 entries 24 bytes instead of 16.)
#[derive(Clone, Copy)]
pub(super) struct Entry<S> {
    count: u64,
    prefix: u32,
    pair: Pair<S>,
}

impl<S: Symbol> PairHeap<S> {
    /// Whether `a` must come out before `b`.
    #[inline]
    pub(super) fn before(vocab: &[Arc<[u8]>], a: &Entry<S>, b: &Entry<S>) -> bool {
        if a.count != b.count {
            return a.count > b.count;
        }
        if a.prefix != b.prefix {
            // Big-endian prefixes order like the bytes they hold; zero
            // padding can make two prefixes equal, never misorder them.
            return a.prefix < b.prefix;
        }
        let bytes = |e: &Entry<S>| (&vocab[e.pair.0.id()], &vocab[e.pair.1.id()]);
        bytes(a) < bytes(b)
    }

    /// Empties the heap and pushes every pair counted at least `floor` times.
    pub(super) fn rebuild(&mut self, vocab: &[Arc<[u8]>], pairs: &FxHashMap<Pair<S>, PairInfo>, floor: i64) {
        // No pass to count them first: the array is reserved at its likely
        // largest size when the heap is made (see `learn`).
        self.items.clear();
        for (&p, info) in pairs {
            if info.count() >= floor {
                self.items.push(Entry { count: info.count() as u64, prefix: prefix(vocab, p), pair: p });
            }
        }
        // Floyd's heap construction: O(n) where pushing each would be O(n log n).
        for i in (0..self.items.len() / 2).rev() {
            self.sift_down(vocab, i);
        }
        self.built = self.items.len();
    }

    pub(super) fn push(&mut self, vocab: &[Arc<[u8]>], count: u64, pair: Pair<S>) {
        let mut i = self.items.len();
        self.items.push(Entry { count, prefix: prefix(vocab, pair), pair });
        while i > 0 {
            let parent = (i - 1) / 2;
            if !Self::before(vocab, &self.items[i], &self.items[parent]) {
                break;
            }
            self.items.swap(i, parent);
            i = parent;
        }
    }

    pub(super) fn pop(&mut self, vocab: &[Arc<[u8]>]) -> Option<(u64, Pair<S>)> {
        if self.items.is_empty() {
            return None;
        }
        // The last entry takes the top's place and sinks to where it belongs.
        let top = self.items.swap_remove(0);
        self.sift_down(vocab, 0);
        Some((top.count, top.pair))
    }

    /// Moves the entry at `i` down until neither child must come out before it.
    pub(super) fn sift_down(&mut self, vocab: &[Arc<[u8]>], mut i: usize) {
        let n = self.items.len();
        loop {
            let left = 2 * i + 1;
            if left >= n {
                break;
            }
            let right = left + 1;
            let child =
                if right < n && Self::before(vocab, &self.items[right], &self.items[left]) { right } else { left };
            if !Self::before(vocab, &self.items[child], &self.items[i]) {
                break;
            }
            self.items.swap(i, child);
            i = child;
        }
    }
}

/// The first 4 bytes of `pair`'s left token, big-endian, zero-padded (see [`Entry`]).
pub(super) fn prefix<S: Symbol>(vocab: &[Arc<[u8]>], pair: Pair<S>) -> u32 {
    let left = &vocab[pair.0.id()];
    let mut prefix = [0u8; 4];
    let n = left.len().min(4);
    prefix[..n].copy_from_slice(&left[..n]);
    u32::from_be_bytes(prefix)
}
