//! The merge loop's state and its steps: which pair wins next, the token it
//! becomes, and rewriting the words that hold it (see `train/mod.rs`).

use std::sync::Arc;

use rayon::prelude::*;
use rustc_hash::FxHashMap;

use super::cold::{class, thaw, Cold, CLASSES};
use super::count::Source;
use super::heap::{floor_for, histogram, PairHeap};
use super::occurrences::{push_sized, varint_len, Lists, PairInfo, INLINE, IN_ARENA, TRAILER};
use super::stretches::{in_stretches, STRETCHES};
use super::words::{merge_word, new_pairs, pairs_at, Pair, Symbol, Words};

pub(super) use crate::pages::prefetch;

/// One learned merge: `left` and `right` become `new`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Merge {
    pub left: u32,
    pub right: u32,
    pub new: u32,
}

/// Pass 1's tally of one pair: its count, the number of words it occurs
/// in, the bytes of its list and the last of them plus one.
#[derive(Clone, Copy, Default)]
struct Tally {
    count: i64,
    words: u32,
    bytes: u32,
    next: u32,
}

/// How many parts the first pairs are cut into, by a hash: each part's map
/// holds a 64th of the pairs, which stays in the CPU's caches while a bucket
/// of its occurrences goes through it (see `initial_pairs`).
const PARTS: usize = 64;

/// Which part `pair` falls in (a multiplicative hash, so that the parts get
/// about as many pairs each whatever the ids): the top 6 bits.
#[inline]
fn part_of<S: Symbol>(pair: Pair<S>) -> usize {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let h = ((pair.0.id() as u64).wrapping_mul(K) ^ pair.1.id() as u64).wrapping_mul(K);
    (h >> 58) as usize
}
const _: () = assert!(PARTS == 1 << 6);

/// One stretch of words' pair occurrences, a bucket per part, each in word order.
type Buckets<S> = Vec<Vec<(Pair<S>, u32)>>;

/// Visits every pair occurrence of `words`: sorts them, a block of words
/// holding about `block` occurrences at a time, into one bucket per part,
/// and hands the buckets to `each`. The block is cut into stretches of
/// words, each scanned on any thread into buckets of its own: part `p`'s
/// occurrences are `stretches[0][p]`, `stretches[1][p]`, ... in word order
/// (the scan on one thread took a third of the first pairs' time of
/// SuperBPE's second stage on 1 GB). `between` runs before each hand-over;
/// an error from it (Ctrl-C) stops the visit and is returned.
fn by_part<S: Symbol>(
    words: &Words<S>,
    block: usize,
    between: &mut impl FnMut() -> Result<(), String>,
    mut each: impl FnMut(&[Buckets<S>]),
) -> Result<(), String> {
    let mut stretches: Vec<Buckets<S>> = (0..STRETCHES).map(|_| (0..PARTS).map(|_| Vec::new()).collect()).collect();
    let pairs = |len: usize| len.saturating_sub(1);
    let scan = |i: usize, buckets: &mut Buckets<S>| {
        for p in words.word(i).windows(2) {
            let p = (p[0], p[1]);
            buckets[part_of(p)].push((p, i as u32));
        }
    };
    in_stretches(words, block, pairs, &mut stretches, between, scan, |stretches| {
        each(stretches);
        stretches.iter_mut().flatten().for_each(Vec::clear);
    })
}

/// The initial pairs (byte pairs, or a base vocabulary's): their counts and
/// word lists.
///
/// Two passes over the words: pass 1 counts each pair and sizes its list,
/// pass 2 places the lists of more than `INLINE` words in the arena and
/// fills them. Both go through the occurrences part by part (`by_part`),
/// each part with a map of its own and its lists in a stretch of the arena
/// of their own. (A lookup per occurrence in one map of all pairs costs a
/// cache miss or two: SuperBPE's second stage starts with words of whole
/// sentences over a base vocabulary, millions of distinct pairs, and those
/// misses took longer than its merge loop: docs/dev/superbpe.md.) The parts
/// go on all cores; every list holds its words in order, and nothing
/// depends on the number of cores. `between` runs on the calling thread
/// between blocks (see `by_part`): an error from it (Ctrl-C) is returned.
pub(super) fn initial_pairs<S: Symbol>(
    words: &Words<S>,
    block: usize,
    mut between: impl FnMut() -> Result<(), String>,
) -> Result<(FxHashMap<Pair<S>, PairInfo>, Lists), String> {
    // On this process's pool, not rayon's global one.
    use crate::threads::install;
    // Pass 1: each pair's count, words and list bytes (exact: a part's
    // occurrences come in word order).
    let mut tallies: Vec<FxHashMap<Pair<S>, Tally>> = (0..PARTS).map(|_| FxHashMap::default()).collect();
    by_part(words, block, &mut between, |stretches| {
        install(|| {
            tallies.par_iter_mut().enumerate().for_each(|(part, m)| {
                for &(p, w) in stretches.iter().flat_map(|buckets| &buckets[part]) {
                    let id1 = w + 1;
                    let t = m.entry(p).or_default();
                    t.count += words.meta[w as usize].freq as i64;
                    if t.next != id1 {
                        t.words += 1;
                        t.bytes += varint_len(id1 - t.next) as u32;
                        t.next = id1;
                    }
                }
            })
        })
    })?;
    let room = |t: &Tally| if t.words as usize > INLINE { TRAILER + t.bytes as usize } else { 0 };
    let sizes: Vec<usize> = install(|| tallies.par_iter().map(|m| m.values().map(room).sum()).collect());
    let total: usize = sizes.iter().sum();
    u32::try_from(total).map_err(|_| "too many distinct chunks to train on (over 4 GB of word lists)")?;
    // Twice as much room again is reserved for the lists of the first
    // merges: it costs address space, not memory, until they write it,
    // and growing the array later copies it (old and new array at once:
    // see docs/dev/performance.md, "Word lists"). If the system refuses
    // that much address space, it is reserved as needed.
    let mut lists = Lists { arena: Vec::new(), dead: 0 };
    if lists.arena.try_reserve_exact(3 * total).is_err() {
        lists.arena.reserve_exact(total);
    }
    lists.arena.resize(total, 0);
    let mut stretches = Vec::with_capacity(PARTS);
    let (mut rest, mut base) = (&mut lists.arena[..], 0);
    for &size in &sizes {
        let (mine, after) = std::mem::take(&mut rest).split_at_mut(size);
        stretches.push((base, mine));
        (rest, base) = (after, base + size);
    }
    // Each part's records, its lists one after another in its stretch.
    // (With each list's last word plus one: see `push_sized`.)
    let mut maps: Vec<FxHashMap<Pair<S>, (PairInfo, u32)>> = install(|| {
        tallies
            .into_par_iter()
            .zip(stretches.par_iter())
            .map(|(tally, &(base, _))| {
                let mut m = FxHashMap::with_capacity_and_hasher(tally.len(), Default::default());
                let mut next = base;
                for (p, t) in tally {
                    let mut info = PairInfo::default();
                    info.set_count(t.count);
                    if room(&t) > 0 {
                        info.len = IN_ARENA | TRAILER as u32;
                        info.slots = [next as u32, room(&t) as u32];
                        next += room(&t);
                    }
                    m.insert(p, (info, 0));
                }
                m
            })
            .collect()
    });
    // Pass 2: the lists filled, in word order.
    by_part(words, block, &mut between, |scanned| {
        install(|| {
            maps.par_iter_mut().zip(stretches.par_iter_mut()).enumerate().for_each(|(part, (m, (base, stretch)))| {
                for &(p, w) in scanned.iter().flat_map(|buckets| &buckets[part]) {
                    let (info, next) = m.get_mut(&p).expect("counted in pass 1");
                    push_sized(stretch, *base, info, next, w);
                }
            })
        })
    })?;
    drop(stretches);
    let mut pairs = FxHashMap::with_capacity_and_hasher(maps.iter().map(|m| m.len()).sum(), Default::default());
    for m in maps {
        pairs.extend(m.into_iter().map(|(p, (info, _))| (p, info)));
    }
    Ok((pairs, lists))
}

/// Sizes that tune the merge loop's memory and speed, never its result
/// (tests pass small ones, to exercise on small inputs what they govern).
#[derive(Clone, Copy)]
pub(super) struct Tuning {
    /// Arrays shorter than this many bytes are never slid (see
    /// [`Words::compact`] and [`Lists::compact`]): there is little to give back.
    pub(super) min_slide: usize,
    /// About how many pairs the heap is built with (see [`floor_for`]):
    /// fewer save memory until the floor moves too often (docs/dev/performance.md,
    /// "Tuning").
    pub(super) heap_pairs: usize,
    /// About how many bytes of the word-list arena one pass of
    /// [`Lists::compact`] slides (see there): smaller passes lower the peak
    /// and cost a little time (docs/dev/performance.md, "Tuning").
    pub(super) slide_pass: usize,
    /// The arena is slid when more than one part in this many is dead (see
    /// [`Lists::compact`]).
    pub(super) slide_dead: usize,
    /// About how many pair occurrences the first pairs' buckets hold at a
    /// time (see `initial_pairs`): a few tens of MB of (pair, word) entries.
    pub(super) first_block: usize,
    /// About how many bytes of chunks each thread encodes per batch when
    /// the words start from a base vocabulary (see [`Words::new_with`]).
    pub(super) encode_batch: usize,
    /// The first threshold of a training on a base vocabulary (see
    /// `cut.rs`): `None`, the guess of [`super::cut::guess`]; tests set it.
    pub(super) first_cut: Option<u32>,
}

impl Tuning {
    pub(super) const DEFAULT: Tuning = Tuning {
        min_slide: 1 << 18,
        heap_pairs: 1 << 15,
        slide_pass: 2 << 20,
        slide_dead: 4,
        first_block: 1 << 21,
        encode_batch: 1 << 20,
        first_cut: None,
    };

    /// For a training that extends a base vocabulary (SuperBPE's second
    /// stage): the arena is slid when half of it is dead, not a quarter.
    /// Four slides of an arena of hundreds of MB took 0.48 s of a 3.9 s loop
    /// on 1 GB of English, where the peak comes before the loop (the cut,
    /// with the whole words kept for a retry); on 1 GB of Gutenberg the
    /// loop's arena raised the peak from 1.57 to 1.63 GB (docs/dev/superbpe.md,
    /// "The words and the first pairs on all cores").
    pub(super) const EXTEND: Tuning = Tuning { slide_dead: 2, ..Tuning::DEFAULT };
}

/// Everything the merge loop keeps between merges.
///
/// The heap holds only the pairs counted at least `floor` times, a floor
/// picked (see `floor_for`) so that about `heap_pairs` pairs are above it;
/// the pair map holds those and the pairs that may still gain occurrences
/// (made by the last merge); the other pairs are cold (see `Cold`). When
/// the heap runs empty, every pair left is below the floor: a lower one is
/// picked, cold pairs that reach it are thawed, and the heap is rebuilt.
/// (Exact: every pair at or above the floor is in the map and has a heap
/// entry, so the top is the winner.)
///
/// Why not every pair in the heap: pairs that occur once, half of all pairs
/// on multilingual text, never win while one occurring twice exists, and
/// merges draw from the top few thousand (see docs/dev/performance.md, "The
/// heap's floor"). The floor is never below 2 while such a pair exists.
pub(super) struct Merging<S> {
    words: Words<S>,
    /// The pairs counted exactly ("hot"), with their word lists.
    pairs: FxHashMap<Pair<S>, PairInfo>,
    /// The word lists too long to live in a pair's record.
    lists: Lists,
    cold: Cold<S>,
    heap: PairHeap<S>,
    floor: i64,
    /// Every token's bytes, by id.
    vocab: Vec<Arc<[u8]>>,
    /// The id of each token's bytes.
    ids: FxHashMap<Arc<[u8]>, u32>,
    /// Scratch of `apply`, kept between merges: the change of each pair's
    /// count, and the words that hold the pair merged.
    delta: FxHashMap<Pair<S>, i64>,
    affected: Vec<u32>,
    /// Where a word's merge put the new token (`merge_word`), and whether
    /// that token is new to every word (not a duplicate's existing id).
    made: Vec<u32>,
    fresh: bool,
    tuning: Tuning,
    /// Which merged tokens may be made (the bytes of the token a pair would
    /// become); `None`: every one (ordinary BPE). A pair refused once is
    /// refused for good (its bytes never change): it leaves the map and the
    /// heap and is remembered in `refused`, so a later merge that makes it
    /// again does not bring it back (SuperBPE's stage 2: `train/mod.rs`).
    allow: Option<Allow>,
    refused: rustc_hash::FxHashSet<Pair<S>>,
}

/// A rule on the bytes of the token a merge would make.
pub type Allow = std::sync::Arc<dyn Fn(&[u8]) -> bool + Send + Sync>;

impl<S: Symbol> Merging<S> {
    /// The words and byte pairs of `counts`, the 256 byte tokens, and a heap
    /// of the pairs above a first floor.
    pub(super) fn new(counts: impl Source, tuning: Tuning) -> Result<Self, String> {
        let words = Words::<S>::new(counts)?;
        let vocab: Vec<Arc<[u8]>> = (0..=255u8).map(|b| Arc::from(&[b][..])).collect();
        Merging::of(words, vocab, tuning, || Ok(()))
    }

    /// The state for `words` (from bytes, or from a base vocabulary: then
    /// `vocab` holds every token's bytes by id, empty for an id with no
    /// token, and new tokens take the ids after it). `between` runs between
    /// blocks of the first pairs (see `initial_pairs`).
    pub(super) fn of(
        words: Words<S>,
        vocab: Vec<Arc<[u8]>>,
        tuning: Tuning,
        between: impl FnMut() -> Result<(), String>,
    ) -> Result<Self, String> {
        let (pairs, lists) = initial_pairs(&words, tuning.first_block, between)?;
        let ids: FxHashMap<Arc<[u8]>, u32> =
            vocab.iter().enumerate().filter(|(_, b)| !b.is_empty()).map(|(i, b)| (b.clone(), i as u32)).collect();
        // (Reserved for twice the pairs it is built with: see the rebuild in `tidy`.)
        let reserve = 2 * tuning.heap_pairs.min(words.count()) + 4096;
        let heap = PairHeap { items: Vec::with_capacity(reserve), built: 0 };
        let mut state = Merging {
            words,
            pairs,
            lists,
            cold: Cold::new(),
            heap,
            floor: i64::MAX,
            vocab,
            ids,
            delta: FxHashMap::default(),
            affected: Vec::new(),
            made: Vec::new(),
            fresh: true,
            tuning,
            allow: None,
            refused: Default::default(),
        };
        state.refloor();
        Ok(state)
    }

    /// Makes only the tokens whose bytes `allow` accepts from now on.
    pub(super) fn set_allow(&mut self, allow: Allow) {
        self.allow = Some(allow);
    }

    /// Whether `pair` may be merged under the rule (if any); a refused pair
    /// leaves the map (with its word list) for good.
    fn allowed(&mut self, pair: Pair<S>) -> bool {
        let Some(allow) = &self.allow else { return true };
        let mut bytes = self.vocab[pair.0.id()].to_vec();
        bytes.extend_from_slice(&self.vocab[pair.1.id()]);
        if allow(&bytes) {
            return true;
        }
        if let Some(info) = self.pairs.remove(&pair) {
            self.lists.free(&info);
        }
        self.refused.insert(pair);
        false
    }

    /// The current count of `pair` if it is in the map (the winner is).
    pub(super) fn count_of(&self, pair: Pair<S>) -> i64 {
        self.pairs.get(&pair).map_or(0, |info| info.count())
    }

    /// Whether the last merge made a new token (not a duplicate's id).
    pub(super) fn made_new(&self) -> bool {
        self.fresh
    }

    /// The number of tokens (the 256 bytes included), or with a base
    /// vocabulary one more than the largest id.
    pub(super) fn tokens(&self) -> usize {
        self.vocab.len()
    }

    /// Moves the floor to the one `floor_for` picks now, keeping the rule
    /// above: cold pairs that reach a lower floor are thawed; pairs in the map
    /// below the new floor go cold; the heap is rebuilt from the map.
    fn refloor(&mut self) {
        let Merging { words, pairs, lists, cold, heap, floor, vocab, tuning, .. } = self;
        let new = floor_for(&histogram(pairs, cold), tuning.heap_pairs);
        if new < *floor {
            let taken = cold.take(class(new), None);
            thaw(taken, new, pairs, cold, lists, words);
        }
        *floor = new;
        pairs.retain(|&p, info| {
            let keep = info.count() >= new;
            if !keep {
                cold.push(p, info.count(), info, lists);
            }
            keep
        });
        if pairs.capacity() > 4 * pairs.len() + 4096 {
            pairs.shrink_to(2 * pairs.len());
        }
        heap.rebuild(vocab, pairs, new);
    }

    /// The pair to merge next: the most frequent (ties: the smallest bytes),
    /// or `None` when no pair is left (the corpus is exhausted).
    pub(super) fn pop_winner(&mut self) -> Option<Pair<S>> {
        loop {
            let Some((count, pair)) = self.heap.pop(&self.vocab) else {
                if self.floor > 1 && !(self.pairs.is_empty() && self.cold.is_empty()) {
                    // Every pair left is below the floor: the next floor is lower.
                    self.refloor();
                    continue;
                }
                return None;
            };
            let current = self.pairs.get(&pair).map_or(0, |info| info.count());
            if current < self.floor {
                continue;
            }
            if current as u64 != count {
                // Stale entry: the pair's count dropped since it was pushed.
                self.heap.push(&self.vocab, current as u64, pair);
                continue;
            }
            if !self.allowed(pair) {
                continue;
            }
            return Some(pair);
        }
    }

    /// The token `pair` becomes: a new one, or the existing one with the same
    /// bytes (see "Duplicates" in `train/mod.rs`).
    pub(super) fn new_token(&mut self, pair: Pair<S>) -> Merge {
        let mut bytes = self.vocab[pair.0.id()].to_vec();
        bytes.extend_from_slice(&self.vocab[pair.1.id()]);
        let new = match self.ids.get(&bytes[..]) {
            Some(&id) => {
                self.fresh = false;
                // Duplicate: same bytes reached by another path. The pairs
                // holding `id` can gain occurrences again: none may stay cold.
                let taken = self.cold.take(CLASSES, Some(id as usize));
                thaw(taken, 1, &mut self.pairs, &mut self.cold, &mut self.lists, &self.words);
                id
            }
            None => {
                self.fresh = true;
                let id = self.vocab.len() as u32;
                let bytes: Arc<[u8]> = Arc::from(bytes);
                self.vocab.push(bytes.clone());
                self.ids.insert(bytes, id);
                id
            }
        };
        Merge { left: pair.0.id() as u32, right: pair.1.id() as u32, new }
    }

    /// Merges every occurrence of `pair` into `new`: rewrites the words that
    /// hold it and moves the counts of the pairs around them.
    pub(super) fn apply(&mut self, pair: Pair<S>, new: S) -> Result<(), String> {
        let Merging { words, pairs, lists, cold, heap, floor, vocab, delta, affected, made, fresh, refused, .. } = self;
        let floor = *floor;

        // The pair disappears: every occurrence is merged. Its entry goes
        // now; the deltas below bring its count to zero and do not revive it.
        let info = pairs.remove(&pair).expect("popped pairs are present");
        affected.clear();
        lists.read(&info, affected);
        lists.free(&info);

        // `clear()` wipes the map's whole capacity, so a map that grew large
        // is replaced and a small one reused. It is not sized from the number
        // of occurrences: the pairs they change are mostly the same few
        // hundred (see docs/dev/performance.md, "The merge loop's deltas").
        if delta.capacity() > 4096 {
            *delta = FxHashMap::default();
        } else {
            delta.clear();
        }
        // A list may name a word that no longer holds the pair, or rarely
        // a word twice (a token id reused, see `Lists`): `merge_word` then
        // finds nothing, which is cheaper than keeping lists exact.
        for (k, &wi) in affected.iter().enumerate() {
            // The words of a merge lie anywhere in memory: the record of the
            // word 8 ahead and the symbols of the word 4 ahead are fetched
            // early (see docs/dev/performance.md, "Prefetching words").
            if let Some(&ahead) = affected.get(k + 8) {
                prefetch(&words.meta[ahead as usize]);
            }
            if let Some(&soon) = affected.get(k + 4) {
                // Every cache line of it: SuperBPE's second stage has words
                // of whole sentences (up to 8 lines, 128 symbols of u16).
                let w = &words.meta[soon as usize];
                let (start, len) = (w.start as usize, w.len as usize);
                let step = 64 / std::mem::size_of::<S>();
                for at in (start..start + len).step_by(step).take(8) {
                    prefetch(&words.symbols[at]);
                }
            }
            let i = wi as usize;
            let w = &mut words.meta[i];
            let n = w.len as usize;
            let word = &mut words.symbols[w.start as usize..w.start as usize + n];
            let m = merge_word(word, pair, new, w.freq as i64, delta, made);
            if m < n {
                w.len = m as u32;
                words.live -= n - m;
                let mut push = |p: Pair<S>| -> Result<(), String> {
                    if refused.is_empty() || !refused.contains(&p) {
                        lists.push(pairs.entry(p).or_default(), wi)?;
                    }
                    Ok(())
                };
                // A token new to every word stands only where this merge put
                // it; a duplicate's id may stand elsewhere in the word too.
                if *fresh {
                    pairs_at(&word[..m], made).try_for_each(&mut push)?;
                } else {
                    new_pairs(&word[..m], new).try_for_each(&mut push)?;
                }
            }
        }
        for (&p, &d) in delta.iter() {
            if d == 0 || p == pair || (!refused.is_empty() && refused.contains(&p)) {
                continue;
            }
            if d < 0 {
                // A pair that lost occurrences. A cold one (not in the map)
                // keeps its count as an upper bound. One in the map keeps its
                // heap entry (now too high), which is fixed when popped.
                let Some(info) = pairs.get_mut(&p) else { continue };
                let c = info.count() + d;
                info.set_count(c);
                if c <= 0 {
                    // Gone from every word: its (all stale) word list goes too.
                    let gone = pairs.remove(&p).expect("present");
                    lists.free(&gone);
                }
                continue;
            }
            // A pair this merge made (it holds `new`; the word loop put it
            // in the map) or, after a duplicate, one that gained.
            let info = pairs.get_mut(&p).expect("made by the word loop");
            let c = info.count() + d;
            info.set_count(c);
            if c >= floor {
                heap.push(vocab, c as u64, p);
            } else {
                // It can only lose occurrences from now on: cold.
                let info = pairs.remove(&p).expect("present");
                cold.push(p, c, &info, lists);
            }
        }
        Ok(())
    }

    /// Housekeeping after a merge: the heap rebuilt when it has grown, and
    /// the words and word lists slid down over what they no longer use.
    pub(super) fn tidy(&mut self) {
        // Entries pile up: stale ones (a pair pushed again each time its
        // count grows) and new pairs above the floor. When the heap has grown
        // to twice its size at the last rebuild, rebuild it, with a floor
        // picked afresh (higher, if counts above the old one are plenty).
        if self.heap.items.len() > 2 * self.heap.built + 4096 {
            self.refloor();
        }
        let Tuning { min_slide, slide_pass, slide_dead, .. } = self.tuning;
        self.lists.compact(&mut self.pairs, &mut self.cold, min_slide, slide_pass, slide_dead);
        self.words.compact(self.tuning.min_slide);
    }
}
