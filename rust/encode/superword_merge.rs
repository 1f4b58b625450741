//! BPE with a merge list from given parts (SuperBPE's phase B, and its slow
//! path from single bytes: see `superword.rs`): the adjacent pair that
//! comes first in the list is merged first (the leftmost on a tie), until
//! no adjacent pair is a merge.
//!
//! Two implementations with the same result, as `merge.rs` has for ranks: a
//! scan that looks for the earliest pair among all of them after each merge
//! (O(n²), and the fastest for the few tens of parts of a sentence, with
//! no heap to build and no allocation), and a heap over a linked list
//! (O(n log n)) for long runs of parts, where the scan would take hours.
//! The test below checks one against the other on random lists and parts.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::vocab::{Rank, NONE};

/// Runs of parts longer than this take the heap.
const LONG_PARTS: usize = 128;

/// A merge list: `(left, right) -> (its place in the list, the new id)`.
#[derive(Default)]
pub(super) struct Merges {
    map: rustc_hash::FxHashMap<(Rank, Rank), (u32, Rank)>,
    /// Bit `id`: `id` is the left (`lefts`) or the right (`rights`) of
    /// some merge. Most adjacent parts of a second-stage chunk are no
    /// merge, and these answer many of them without a hash probe.
    lefts: Vec<u64>,
    rights: Vec<u64>,
}

fn set_bit(bits: &mut Vec<u64>, id: Rank) {
    let k = id as usize / 64;
    if bits.len() <= k {
        bits.resize(k + 1, 0);
    }
    bits[k] |= 1 << (id % 64);
}

#[inline(always)]
fn has_bit(bits: &[u64], id: Rank) -> bool {
    bits.get(id as usize / 64).copied().unwrap_or(0) & (1 << (id % 64)) != 0
}

impl Merges {
    /// Adds a merge; the first place of a pair counts, should a list hold it
    /// twice.
    pub(super) fn insert(&mut self, left: Rank, right: Rank, place: u32, new: Rank) {
        self.map.entry((left, right)).or_insert((place, new));
        set_bit(&mut self.lefts, left);
        set_bit(&mut self.rights, right);
    }

    #[inline(always)]
    fn get(&self, left: Rank, right: Rank) -> Option<(u32, Rank)> {
        if !has_bit(&self.lefts, left) || !has_bit(&self.rights, right) {
            return None;
        }
        self.map.get(&(left, right)).copied()
    }

    /// The merge of `left` and `right` as one key that orders by place:
    /// the place in the high half, the new id in the low; `u64::MAX` for
    /// no merge.
    #[inline(always)]
    fn key(&self, left: Rank, right: Rank) -> u64 {
        self.get(left, right).map_or(u64::MAX, |(place, new)| (place as u64) << 32 | new as u64)
    }
}

/// Where phase B may join adjacent parts: the pairs `(a, b)` of
/// first-stage ids that lie side by side in some second-stage token (its
/// merges undone down to the first stage's tokens). A merge of phase B
/// joins two parts X and Y into a second-stage token that holds the last
/// first-stage id of X next to the first of Y; so between phase A's ids `a`
/// and `b` of no such pair no merge ever crosses, and the chunk falls into
/// short runs that merge alone (most of one id: nothing to do). The pairs
/// are kept as bits of a hash (a pair of another's bit is only a run
/// joined for nothing).
pub(super) struct Joins {
    bits: Box<[u64]>,
}

const JOIN_BITS: u32 = 19; // 64 KiB: ~2-4% false joins at 10-20k merges

impl Joins {
    /// `merges`: every merge in order as `(left, right, new)`, each making
    /// the id `256 + its place`; those of ids from `transition` on are the
    /// second stage's.
    pub(super) fn new(merges: &[(Rank, Rank, Rank)], transition: Rank) -> Joins {
        let mut bits = vec![0u64; 1 << (JOIN_BITS - 6)].into_boxed_slice();
        // The first and last first-stage ids of each second-stage token, by
        // id (a first-stage id is its own).
        let mut ends: Vec<(Rank, Rank)> = Vec::new();
        let end = |ends: &Vec<(Rank, Rank)>, id: Rank| match ends.get(id as usize) {
            Some(&(first, last)) if id >= transition && first != NONE => (first, last),
            _ => (id, id),
        };
        for &(l, r, new) in merges {
            if new < transition {
                continue;
            }
            let ((first, left), (right, last)) = (end(&ends, l), end(&ends, r));
            let h = Joins::hash(left, right);
            bits[h / 64] |= 1 << (h % 64);
            if ends.len() <= new as usize {
                ends.resize(new as usize + 1, (NONE, NONE));
            }
            ends[new as usize] = (first, last);
        }
        Joins { bits }
    }

    #[inline(always)]
    fn hash(a: Rank, b: Rank) -> usize {
        (((a as u64) << 32 | b as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - JOIN_BITS)) as usize
    }

    /// Whether a merge may join `a` and `b`, phase A's ids side by side.
    #[inline(always)]
    fn may_join(&self, a: Rank, b: Rank) -> bool {
        let h = Joins::hash(a, b);
        self.bits[h / 64] & (1 << (h % 64)) != 0
    }
}

/// Phase B: [`merge_parts`] on each run of `ids` that [`Joins`] may join,
/// the ids between them as they are.
pub(super) fn merge_runs(
    merges: &Merges,
    joins: &Joins,
    ids: &[Rank],
    scratch: &mut PartsScratch,
    out: &mut Vec<Rank>,
) {
    let mut start = 0;
    for k in 1..=ids.len() {
        if k == ids.len() || !joins.may_join(ids[k - 1], ids[k]) {
            if k - start == 1 {
                out.push(ids[start]);
            } else if k - start == 2 {
                // (Runs of two, about half of the runs in English: one
                // probe, without the scan's buffers.)
                match merges.get(ids[start], ids[start + 1]) {
                    Some((_, new)) => out.push(new),
                    None => out.extend_from_slice(&ids[start..k]),
                }
            } else {
                merge_parts(merges, &ids[start..k], scratch, out);
            }
            start = k;
        }
    }
}

/// Buffers that [`merge_parts`] keeps between calls.
#[derive(Default)]
pub(super) struct PartsScratch {
    ids: Vec<Rank>,
    keys: Vec<u64>,
    parts: Vec<Part>,
}

/// BPE with `merges` from the parts `ids`; the final ids are appended to
/// `out`.
pub(super) fn merge_parts(merges: &Merges, ids: &[Rank], scratch: &mut PartsScratch, out: &mut Vec<Rank>) {
    if ids.len() > LONG_PARTS {
        merge_with_heap(merges, ids, &mut scratch.parts, out);
    } else {
        merge_with_scan(merges, ids, scratch, out);
    }
}

/// [`merge_parts`] by a scan: the keys of the adjacent pairs in an array,
/// the smallest (the earliest merge, the leftmost on a tie: equal keys are
/// the same pair) merged, its neighbours' keys redone.
fn merge_with_scan(merges: &Merges, ids: &[Rank], scratch: &mut PartsScratch, out: &mut Vec<Rank>) {
    let PartsScratch { ids: live, keys, .. } = scratch;
    keys.clear();
    keys.extend(ids.windows(2).map(|w| merges.key(w[0], w[1])));
    let Some(first) = keys.iter().position(|&k| k != u64::MAX) else {
        out.extend_from_slice(ids); // (most chunks: no merge of the second stage)
        return;
    };
    live.clear();
    live.extend_from_slice(ids);
    let mut from = first; // no merge among the pairs before it
    loop {
        let (mut k, mut best) = (usize::MAX, u64::MAX);
        for (j, &key) in keys.iter().enumerate().skip(from) {
            if key < best {
                (k, best) = (j, key);
            }
        }
        if k == usize::MAX {
            break;
        }
        live[k] = best as Rank;
        live.remove(k + 1);
        keys.remove(k);
        if k + 1 < live.len() {
            keys[k] = merges.key(live[k], live[k + 1]);
        }
        if k > 0 {
            keys[k - 1] = merges.key(live[k - 1], live[k]);
        }
        from = from.min(k.saturating_sub(1));
    }
    out.extend_from_slice(live);
}

/// One part of [`merge_with_heap`]: its id, the previous and next live
/// parts, and the place of the merge with the next one (`u32::MAX`: none).
#[derive(Clone, Copy)]
pub(super) struct Part {
    id: Rank,
    prev: u32,
    next: u32,
    place: u32,
}

/// [`merge_parts`] by a min-heap of (place in the list, position) over a
/// linked list of parts (in `parts`, a buffer kept between calls), with lazy
/// deletion, as `merge.rs`'s heap merge does with ranks.
pub(super) fn merge_with_heap(merges: &Merges, ids: &[Rank], parts: &mut Vec<Part>, out: &mut Vec<Rank>) {
    let n = ids.len();
    let place_of = |l: Rank, r: Rank| merges.get(l, r).unwrap_or((u32::MAX, NONE));
    parts.clear();
    parts.extend((0..n).map(|k| Part {
        id: ids[k],
        prev: (k as u32).wrapping_sub(1),
        next: k as u32 + 1,
        place: if k + 1 < n { place_of(ids[k], ids[k + 1]).0 } else { u32::MAX },
    }));
    let mut heap: BinaryHeap<Reverse<(u32, u32)>> = parts
        .iter()
        .enumerate()
        .filter(|(_, p)| p.place != u32::MAX)
        .map(|(k, p)| Reverse((p.place, k as u32)))
        .collect();
    if heap.is_empty() {
        out.extend_from_slice(ids);
        return;
    }
    let mut alive = vec![true; n];
    while let Some(Reverse((p, k))) = heap.pop() {
        let k = k as usize;
        if !alive[k] || parts[k].place != p {
            continue; // stale
        }
        let j = parts[k].next as usize;
        let (_, new) = place_of(parts[k].id, parts[j].id);
        alive[j] = false;
        parts[k].id = new;
        parts[k].next = parts[j].next;
        let after = parts[k].next as usize;
        if after < n {
            parts[after].prev = k as u32;
            parts[k].place = place_of(new, parts[after].id).0;
            if parts[k].place != u32::MAX {
                heap.push(Reverse((parts[k].place, k as u32)));
            }
        } else {
            parts[k].place = u32::MAX;
        }
        if k > 0 {
            let q = parts[k].prev as usize;
            parts[q].place = place_of(parts[q].id, new).0;
            if parts[q].place != u32::MAX {
                heap.push(Reverse((parts[q].place, q as u32)));
            }
        }
    }
    let mut k = 0;
    while k < n {
        out.push(parts[k].id);
        k = parts[k].next as usize;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Phase B by runs equals BPE over the whole: random merge lists over a
    /// few ids, all of the "second stage" (so that runs are joined by
    /// every kind of pair), on random parts.
    #[test]
    fn runs_equal_the_whole() {
        let mut rng = crate::split::lexer::tests::rng(0x9e3779b97f4a7c15u64);
        let mut next = |m: u64| rng() % m;
        let mut scratch = PartsScratch::default();
        for round in 0..3000 {
            let alphabet = 2 + next(8) as Rank;
            let mut list = Vec::new();
            let mut merges = Merges::default();
            for place in 0..next(30) as u32 {
                let top = alphabet + place;
                let (l, r) = (next(top as u64) as Rank, next(top as u64) as Rank);
                list.push((l, r, top));
                merges.insert(l, r, place, top);
            }
            let joins = Joins::new(&list, alphabet);
            let n = if round % 10 == 0 { next(300) } else { next(40) } as usize;
            let ids: Vec<Rank> = (0..n).map(|_| next(alphabet as u64) as Rank).collect();
            let (mut runs, mut whole) = (Vec::new(), Vec::new());
            merge_runs(&merges, &joins, &ids, &mut scratch, &mut runs);
            merge_with_heap(&merges, &ids, &mut Vec::new(), &mut whole);
            assert_eq!(runs, whole, "{ids:?} {list:?}");
        }
    }

    /// The scan and the heap agree on random merge lists over a few ids
    /// (so that merges chain and compete) and random runs of parts, short
    /// and past `LONG_PARTS`.
    #[test]
    fn the_scan_equals_the_heap() {
        let mut rng = crate::split::lexer::tests::rng(0x2545f4914f6cdd1du64);
        let mut next = |m: u64| rng() % m;
        let mut scratch = PartsScratch::default();
        for round in 0..3000 {
            let mut merges = Merges::default();
            let alphabet = 2 + next(6) as Rank;
            for place in 0..next(40) as u32 {
                let top = alphabet + place;
                let (l, r) = (next(top as u64) as Rank, next(top as u64) as Rank);
                merges.insert(l, r, place, top);
            }
            let n = if round % 10 == 0 { next(400) } else { next(40) } as usize;
            let ids: Vec<Rank> = (0..n).map(|_| next(alphabet as u64) as Rank).collect();
            let (mut scan, mut heap) = (Vec::new(), Vec::new());
            merge_with_scan(&merges, &ids, &mut scratch, &mut scan);
            merge_with_heap(&merges, &ids, &mut Vec::new(), &mut heap);
            assert_eq!(scan, heap, "{ids:?}");
        }
    }
}
