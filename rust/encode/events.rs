//! Picky BPE's encoder (Chizhov et al., 2024, "BPE Gets Picky"): its
//! vocabulary is a sequence of events, merges and removals (`train/picky.rs`),
//! and a chunk is encoded by replaying them in order from its bytes: a merge
//! `(a, b) -> ab` merges every adjacent `a b`, left to right; a removal of
//! `x` splits every `x` into its parts. As the paper's encoder does, a chunk
//! that is a present token whole is that token (`Encoder::encode_chunk`'s
//! look-up); this replays the others.
//!
//! Ids: present tokens have their own ids; a removed token has an internal
//! id above `MAX_ID` (never output: a token present at the end of the replay
//! is present in the vocabulary, since its last event was not a removal).
//!
//! The replay visits only events that apply. Equivalent to the literal
//! replay, event by event: at any point, the next event to apply is the
//! earliest one after the current one among the merges of adjacent pairs
//! and the removals of present tokens (the events between apply to nothing,
//! and nothing changes until one does). A min-heap of (event, byte offset,
//! part) over a linked list of parts gives it, with lazy deletion: the
//! occurrences of one merge come out left to right (which decides runs such
//! as `a a a`), and no event makes a pair or a token that an event at its
//! own index or before would apply to (a merge's result is neither of its
//! parts; a removal's parts are not the token removed).
//! Tested against the literal replay here and against the Python oracle
//! (`bpe/reference.py`, `tests/tokenizer/test_picky.py`).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use rustc_hash::FxHashMap;

use crate::vocab::{Rank, MAX_ID};

/// One event, as the encoder is given it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// `(left, right) -> new`.
    Merge(Rank, Rank, Rank),
    /// The token, and the parts it is split into.
    Remove(Rank, Vec<Rank>),
}

/// The buffers of a replay: each part's id, byte offset, next and previous
/// part, and whether it is alive; the heap of candidate events.
#[derive(Default)]
struct Scratch {
    tok: Vec<Rank>,
    start: Vec<u32>,
    next: Vec<usize>,
    prev: Vec<usize>,
    alive: Vec<bool>,
    heap: BinaryHeap<Reverse<(u32, u32, usize)>>,
}

/// The events, indexed for the replay.
pub(super) struct Events {
    /// Per pair: its first merge, `(event index, new id)`, inline (a pair
    /// is merged again only if a removal undid it: rare), and its later
    /// merges in order in `later`. One probe per pair, without the
    /// indirection to a list that missed the cache on every pair.
    merges: FxHashMap<(Rank, Rank), (u32, Rank)>,
    later: FxHashMap<(Rank, Rank), Vec<(u32, Rank)>>,
    /// Per token: its removals, `(event index, parts start, parts end)` in
    /// `parts`, in order.
    removals: FxHashMap<Rank, Vec<(u32, u32, u32)>>,
    /// Bit `id`: `id` has a removal. Most tokens of a chunk have none, and
    /// this answers them without a probe of `removals`.
    removable: Vec<u64>,
    parts: Vec<Rank>,
    /// Every token's length in bytes (the bytes: 1).
    len: FxHashMap<Rank, u32>,
    is_merge: Vec<bool>,
}

impl Events {
    /// Checks and indexes `events` (ids 0..255 are the bytes).
    pub(super) fn new(events: &[Event]) -> Result<Events, String> {
        let mut ev = Events {
            merges: FxHashMap::default(),
            later: FxHashMap::default(),
            removals: FxHashMap::default(),
            removable: Vec::new(),
            parts: Vec::new(),
            len: (0..256).map(|b| (b, 1)).collect(),
            is_merge: Vec::with_capacity(events.len()),
        };
        u32::try_from(events.len()).map_err(|_| "too many events")?;
        for (k, e) in events.iter().enumerate() {
            let k = k as u32;
            match e {
                Event::Merge(l, r, new) => {
                    let (Some(a), Some(b)) = (ev.len.get(l), ev.len.get(r)) else {
                        return Err(format!("event {k}: merge ({l}, {r}) of a token not made yet"));
                    };
                    let n = a + b;
                    if *ev.len.entry(*new).or_insert(n) != n {
                        return Err(format!("event {k}: merge ({l}, {r}) -> {new} does not spell token {new}"));
                    }
                    if let Some(&(first, _)) = ev.merges.get(&(*l, *r)) {
                        debug_assert!(first < k);
                        ev.later.entry((*l, *r)).or_default().push((k, *new));
                    } else {
                        ev.merges.insert((*l, *r), (k, *new));
                    }
                    ev.is_merge.push(true);
                }
                Event::Remove(x, parts) => {
                    let total: Option<u32> = parts.iter().map(|p| ev.len.get(p).copied()).sum();
                    if *x < 256 || parts.len() < 2 || total.is_none() || total != ev.len.get(x).copied() {
                        return Err(format!("event {k}: the removal of {x} into {parts:?} does not spell it"));
                    }
                    let start = ev.parts.len() as u32;
                    ev.parts.extend_from_slice(parts);
                    ev.removals.entry(*x).or_default().push((k, start, ev.parts.len() as u32));
                    let word = *x as usize / 64;
                    if ev.removable.len() <= word {
                        ev.removable.resize(word + 1, 0);
                    }
                    ev.removable[word] |= 1 << (*x % 64);
                    ev.is_merge.push(false);
                }
            }
        }
        Ok(ev)
    }

    /// The first merge of `pair` at index `after` or later.
    #[inline]
    fn merge_from(&self, pair: (Rank, Rank), after: u32) -> Option<(u32, Rank)> {
        let &(first, new) = self.merges.get(&pair)?;
        if first >= after {
            return Some((first, new));
        }
        let list = self.later.get(&pair)?;
        list.get(list.partition_point(|&(k, _)| k < after)).copied()
    }

    /// The first removal of `token` at index `after` or later.
    #[inline]
    fn removal_from(&self, token: Rank, after: u32) -> Option<(u32, u32, u32)> {
        let word = self.removable.get(token as usize / 64).copied().unwrap_or(0);
        if word & (1 << (token % 64)) == 0 {
            return None;
        }
        let list = self.removals.get(&token)?;
        list.get(list.partition_point(|&(k, _, _)| k < after)).copied()
    }

    /// Replays the events on `ids` (a chunk's bytes' ids) and appends the
    /// result to `out`.
    pub(super) fn replay(&self, ids: &[Rank], out: &mut Vec<Rank>) -> Result<(), String> {
        // The buffers of the last replay on this thread, kept: most chunks
        // are words, and six allocations each cost more than their replay.
        thread_local! {
            static SCRATCH: std::cell::RefCell<Scratch> = std::cell::RefCell::new(Scratch::default());
        }
        SCRATCH.with(|scratch| match scratch.try_borrow_mut() {
            Ok(mut scratch) => self.replay_with(ids, &mut scratch, out),
            Err(_) => self.replay_with(ids, &mut Scratch::default(), out),
        })
    }

    fn replay_with(&self, ids: &[Rank], scratch: &mut Scratch, out: &mut Vec<Rank>) -> Result<(), String> {
        const END: usize = usize::MAX;
        let n = ids.len();
        let Scratch { tok, start, next, prev, alive, heap } = scratch;
        tok.clear();
        tok.extend_from_slice(ids);
        start.clear();
        start.extend(0..n as u32);
        next.clear();
        next.extend((1..=n).map(|k| if k == n { END } else { k }));
        prev.clear();
        prev.extend((0..n).map(|k| k.wrapping_sub(1)));
        alive.clear();
        alive.resize(n, true);
        heap.clear();
        let mut after = 0u32;
        // The candidates of part `k`: its pair with the next part, and its removal.
        let candidates = |heap: &mut BinaryHeap<_>, tok: &[Rank], next: &[usize], start: &[u32], k: usize, after| {
            if next[k] != END {
                if let Some((e, _)) = self.merge_from((tok[k], tok[next[k]]), after) {
                    heap.push(Reverse((e, start[k], k)));
                }
            }
            if let Some((e, _, _)) = self.removal_from(tok[k], after) {
                heap.push(Reverse((e, start[k], k)));
            }
        };
        for k in 0..n {
            candidates(heap, tok, next, start, k, after);
        }
        while let Some(Reverse((e, _, k))) = heap.pop() {
            if !alive[k] {
                continue;
            }
            if self.is_merge[e as usize] {
                let j = next[k];
                if j == END {
                    continue;
                }
                let Some((e2, new)) = self.merge_from((tok[k], tok[j]), after) else { continue };
                if e2 != e {
                    continue; // stale
                }
                after = e;
                tok[k] = new;
                alive[j] = false;
                next[k] = next[j];
                if next[k] != END {
                    prev[next[k]] = k;
                }
                candidates(heap, tok, next, start, k, after);
            } else {
                let Some((e2, from, to)) = self.removal_from(tok[k], after) else { continue };
                if e2 != e {
                    continue; // stale
                }
                after = e;
                let parts = &self.parts[from as usize..to as usize];
                let follow = next[k];
                tok[k] = parts[0];
                let mut at = start[k] + self.len[&parts[0]];
                let mut last = k;
                for &p in &parts[1..] {
                    let m = tok.len();
                    tok.push(p);
                    start.push(at);
                    at += self.len[&p];
                    alive.push(true);
                    prev.push(last);
                    next.push(follow);
                    next[last] = m;
                    last = m;
                }
                if follow != END {
                    prev[follow] = last;
                }
                let mut m = k;
                while m != follow {
                    candidates(heap, tok, next, start, m, after);
                    m = next[m];
                }
            }
            // The pair that ends at `k` is new too.
            if prev[k] != usize::MAX {
                candidates(heap, tok, next, start, prev[k], after);
            }
        }
        let mut k = if n == 0 { END } else { 0 };
        while k != END {
            if tok[k] > MAX_ID {
                return Err(format!("the events leave the removed token {} in a chunk", tok[k]));
            }
            out.push(tok[k]);
            k = next[k];
        }
        Ok(())
    }
}

/// The literal replay, event by event (for the tests).
#[cfg(test)]
pub(super) fn replay_literally(events: &[Event], ids: &[Rank]) -> Vec<Rank> {
    let mut word = ids.to_vec();
    for e in events {
        match e {
            Event::Merge(l, r, new) => {
                let mut out = Vec::with_capacity(word.len());
                let mut i = 0;
                while i < word.len() {
                    if i + 1 < word.len() && word[i] == *l && word[i + 1] == *r {
                        out.push(*new);
                        i += 2;
                    } else {
                        out.push(word[i]);
                        i += 1;
                    }
                }
                word = out;
            }
            Event::Remove(x, parts) => {
                word = word.iter().flat_map(|t| if t == x { parts.clone() } else { vec![*t] }).collect();
            }
        }
    }
    word
}

#[cfg(test)]
mod tests {
    use super::*;

    fn replay(events: &[Event], ids: &[Rank]) -> Vec<Rank> {
        let mut out = Vec::new();
        Events::new(events).unwrap().replay(ids, &mut out).unwrap();
        out
    }

    const R: Rank = MAX_ID + 1; // a removed token's id

    #[test]
    fn merges_and_removals_replay_in_order() {
        // "ab" (R) is made, "abc" from it, then "ab" removed; "ab" alone stays "a b".
        let events = [Event::Merge(97, 98, R), Event::Merge(R, 99, 256), Event::Remove(R, vec![97, 98])];
        assert_eq!(replay(&events, &[97, 98, 99]), vec![256]);
        assert_eq!(replay(&events, &[97, 98]), vec![97, 98]);
        assert_eq!(replay(&events, &[97, 98, 97, 98, 99]), vec![97, 98, 256]);
    }

    #[test]
    fn runs_merge_left_to_right() {
        let events = [Event::Merge(97, 97, 256), Event::Merge(256, 97, 257)];
        for n in 1..12 {
            let ids = vec![97; n];
            assert_eq!(replay(&events, &ids), replay_literally(&events, &ids), "{n}");
        }
    }

    #[test]
    fn random_events_replay_as_literally() {
        // Random vocabularies over the bytes "abc": merges of present tokens,
        // removals of merged ones into their parts, and restorations.
        let mut seed = 0x9e3779b97f4a7c15u64;
        let mut rand = |n: usize| (crate::split::lexer::tests::next_random(&mut seed) % n as u64) as usize;
        for _ in 0..300 {
            let mut bytes: FxHashMap<Rank, Vec<u8>> = (97..100).map(|b| (b, vec![b as u8])).collect();
            let mut made: FxHashMap<Rank, (Rank, Rank)> = FxHashMap::default();
            let mut present: Vec<Rank> = vec![97, 98, 99];
            let mut events = Vec::new();
            let mut next = 256;
            for _ in 0..12 {
                if rand(3) == 0 && present.len() > 3 {
                    let x = present[3 + rand(present.len() - 3)];
                    present.retain(|&t| t != x);
                    fn walk(t: Rank, present: &[Rank], made: &FxHashMap<Rank, (Rank, Rank)>, out: &mut Vec<Rank>) {
                        if t < 256 || present.contains(&t) {
                            out.push(t);
                        } else {
                            walk(made[&t].0, present, made, out);
                            walk(made[&t].1, present, made, out);
                        }
                    }
                    let mut parts = Vec::new();
                    walk(x, &present, &made, &mut parts);
                    events.push(Event::Remove(x, parts));
                } else {
                    let (l, r) = (present[rand(present.len())], present[rand(present.len())]);
                    let b = [&bytes[&l][..], &bytes[&r][..]].concat();
                    let new = match bytes.iter().find(|(_, v)| **v == b) {
                        Some((&id, _)) => id,
                        None => {
                            next += 1;
                            bytes.insert(next, b);
                            made.insert(next, (l, r));
                            next
                        }
                    };
                    if !present.contains(&new) {
                        present.push(new);
                    }
                    events.push(Event::Merge(l, r, new));
                }
            }
            for _ in 0..20 {
                let ids: Vec<Rank> = (0..rand(14)).map(|_| 97 + rand(3) as Rank).collect();
                let literal = replay_literally(&events, &ids);
                let mut out = Vec::new();
                Events::new(&events).unwrap().replay(&ids, &mut out).unwrap();
                // (Removed tokens here have ordinary ids: compare the replays only.)
                assert_eq!(out, literal, "{events:?} {ids:?}");
            }
        }
    }
}
