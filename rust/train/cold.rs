//! The cold pairs: those below the heap's floor, kept out of the pair map
//! with a bound on their count (their count class), and recounted when the
//! floor comes down to them.

use rustc_hash::FxHashMap;

use super::occurrences::{Lists, PairInfo, IN_ARENA};
use super::words::{release_spare, Pair, Symbol, Words, NO_WORD};

/// Count classes: a count below 16 is its own class; larger ones fall in 8
/// classes per bit length, by the three bits after the leading one.
pub(super) const CLASSES: usize = 16 + 59 * 8;

/// The class of a count (1 ..= i64::MAX).
pub(super) fn class(c: i64) -> usize {
    let c = c as u64;
    if c < 16 {
        return c as usize;
    }
    let bits = 64 - c.leading_zeros() as usize;
    16 + (bits - 5) * 8 + ((c >> (bits - 4)) & 7) as usize
}

/// The least count of a class.
pub(super) fn low(class: usize) -> i64 {
    if class < 16 {
        return class as i64;
    }
    let (bits, step) = ((class - 16) / 8 + 5, (class - 16) % 8);
    (8 + step as i64) << (bits - 4)
}

/// The pairs kept out of the pair map ("cold"): below the heap's floor, and
/// unable to gain occurrences. Each keeps its word list, and the class of its
/// count when it went cold (see [`class`]) bounds its count from then on: the
/// words that lose a cold pair do not update anything.
///
/// **Why a pair can only lose occurrences:** a merge makes new pairs only
/// around its new token, so once the merge that made the later of a pair's
/// two tokens is done, the pair gains nothing more; it can only lose
/// occurrences, as its words are merged. The one exception is a merge that
/// reuses an existing id (same bytes reached again, see `learn`): the cold
/// pairs holding that id are thawed first.
///
/// **Why:** merging makes about a pair per word, and few of them ever come
/// near the top (docs/dev/performance.md, "Cold pairs"). Here each takes 12 bytes
/// (pair and list, no count: its class is where it is kept), in blocks of
/// [`COLD_BLOCK`] (no doubling copy), and the map keeps only the pairs that
/// may win soon. A cold pair costs nothing when its words are merged either.
///
/// **Thawing:** when the floor drops, the classes that reach it are thawed:
/// each pair gets its exact count back from its word list (see [`recount`])
/// and rejoins the map (or goes, if no word holds it any more).
pub(super) struct Cold<S> {
    /// By class: blocks of at most `COLD_BLOCK` entries, all full but the last.
    classes: Vec<Vec<Vec<ColdPair<S>>>>,
}

/// Entries per block of [`Cold`] (12 KB with `u16` symbols).
pub(super) const COLD_BLOCK: usize = 1024;

/// A cold pair and its word list: inline, up to two word ids (`b` is
/// [`NO_WORD`] for one); in the arena, `a` is its offset and `b` its bytes
/// with [`IN_ARENA`] set (no spare room: it never grows).
#[derive(Clone, Copy)]
pub(super) struct ColdPair<S> {
    pair: Pair<S>,
    a: u32,
    b: u32,
}

impl<S> ColdPair<S> {
    /// Its record as in the map, with count 0.
    pub(super) fn info(&self) -> PairInfo {
        let mut info = PairInfo::default();
        if self.b & IN_ARENA != 0 {
            info.len = self.b;
            info.slots = [self.a, self.b & !IN_ARENA];
        } else {
            info.slots = [self.a, self.b];
            info.len = u32::from(self.a != NO_WORD) + u32::from(self.b != NO_WORD);
        }
        info
    }
}

impl<S: Symbol> Cold<S> {
    pub(super) fn new() -> Cold<S> {
        Cold { classes: (0..CLASSES).map(|_| Vec::new()).collect() }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.classes.iter().all(Vec::is_empty)
    }

    /// Moves a pair counted `count` times (at least 1) out of the map. The
    /// spare room of its arena list is given up (the list never grows again).
    pub(super) fn push(&mut self, pair: Pair<S>, count: i64, info: &PairInfo, lists: &mut Lists) {
        let (a, b) = if info.in_arena() {
            lists.dead += info.slots[1] as usize - info.len();
            (info.slots[0], IN_ARENA | info.len() as u32)
        } else {
            match info.len() {
                0 => (NO_WORD, NO_WORD),
                1 => (info.slots[0], NO_WORD),
                _ => (info.slots[0], info.slots[1]),
            }
        };
        push_block(&mut self.classes[class(count)], ColdPair { pair, a, b });
    }

    /// Adds the number of cold pairs in each class to `histogram`.
    pub(super) fn count_classes(&self, histogram: &mut [usize; CLASSES]) {
        for (h, blocks) in histogram.iter_mut().zip(&self.classes) {
            *h += blocks.iter().map(Vec::len).sum::<usize>();
        }
    }

    /// Takes out the cold pairs of classes `from..` and those holding token
    /// `id` (if given), in blocks.
    pub(super) fn take(&mut self, from: usize, id: Option<usize>) -> Vec<Vec<ColdPair<S>>> {
        let mut taken = Vec::new();
        for (c, blocks) in self.classes.iter_mut().enumerate() {
            if c >= from {
                taken.append(blocks);
            } else if let Some(id) = id {
                // Rare (a reused id): the class is rebuilt without them.
                let mut keep = Vec::new();
                for e in std::mem::take(blocks).into_iter().flatten() {
                    if e.pair.0.id() == id || e.pair.1.id() == id {
                        push_block(&mut taken, e);
                    } else {
                        push_block(&mut keep, e);
                    }
                }
                *blocks = keep;
            }
        }
        taken
    }

    /// Where each class starts when the cold pairs are numbered class by
    /// class (as `for_each_in_arena` numbers them), and the total at the end.
    pub(super) fn starts(&self) -> Vec<usize> {
        let mut starts = vec![0];
        for blocks in &self.classes {
            starts.push(starts.last().expect("one") + blocks.iter().map(Vec::len).sum::<usize>());
        }
        starts
    }

    /// Calls `f(offset, place)` for each cold list in the arena.
    pub(super) fn for_each_in_arena(&self, mut f: impl FnMut(u32, u32)) {
        let mut place = 0u32;
        for blocks in &self.classes {
            for e in blocks.iter().flatten() {
                if e.b & IN_ARENA != 0 {
                    f(e.a, place);
                }
                place += 1;
            }
        }
    }

    /// Sets the offset of the list at `place` (as `for_each_in_arena` numbers
    /// them; `starts` from [`Cold::starts`]) to `to`; returns its bytes.
    pub(super) fn move_list(&mut self, starts: &[usize], place: u32, to: u32) -> usize {
        let place = place as usize;
        let c = starts.partition_point(|&s| s <= place) - 1;
        let i = place - starts[c];
        let e = &mut self.classes[c][i / COLD_BLOCK][i % COLD_BLOCK];
        e.a = to;
        (e.b & !IN_ARENA) as usize
    }
}

/// Appends `e` to blocks of at most [`COLD_BLOCK`] entries, all full but the
/// last (a new block when the last is full).
pub(super) fn push_block<T>(blocks: &mut Vec<Vec<T>>, e: T) {
    if blocks.last().is_none_or(|b| b.len() == COLD_BLOCK) {
        blocks.push(Vec::with_capacity(COLD_BLOCK));
    }
    blocks.last_mut().expect("just made").push(e);
}

/// The exact count of `pair` over the words of its list: a cold pair's
/// stored count is an upper bound (see [`Cold`]). Counted as the map counts:
/// every adjacent position, times the word's count. A list may name a word
/// twice (see `Lists`): each is counted once. `buf` is scratch.
pub(super) fn recount<S: Symbol>(
    words: &Words<S>,
    lists: &Lists,
    pair: Pair<S>,
    info: &PairInfo,
    buf: &mut Vec<u32>,
) -> i64 {
    buf.clear();
    lists.read(info, buf);
    buf.sort_unstable();
    buf.dedup();
    buf.iter()
        .map(|&w| {
            let n = words.word(w as usize).windows(2).filter(|x| (x[0], x[1]) == pair).count();
            n as i64 * words.meta[w as usize].freq as i64
        })
        .sum()
}

/// Gives pairs taken from [`Cold`] their exact counts: those counted at
/// least `hot_from` times go back in the map, the others back to `cold` (by
/// their exact count), and those that no word holds any more go.
///
/// (Not all into the map: when the floor drops, most of the pairs thawed are
/// below it after all, and putting them in made the map double just to leave
/// it again.)
///
/// The recounts go on all cores (they only read the words and lists), and
/// the pairs are then placed one by one in their order, as before: the same
/// map, cold store and lists on any number of threads. (SuperBPE's second
/// stage thaws millions of pairs with long word lists: on 1 GB the recounts
/// took 7% of its time on one core.)
pub(super) fn thaw<S: Symbol>(
    taken: Vec<Vec<ColdPair<S>>>,
    hot_from: i64,
    pairs: &mut FxHashMap<Pair<S>, PairInfo>,
    cold: &mut Cold<S>,
    lists: &mut Lists,
    words: &Words<S>,
) {
    use rayon::prelude::*;
    let shared = &*lists;
    let count = |buf: &mut Vec<u32>, block: &Vec<ColdPair<S>>| -> Vec<i64> {
        block.iter().map(|e| recount(words, shared, e.pair, &e.info(), buf)).collect()
    };
    // A few blocks are counted here: a thaw of ordinary training is often
    // that small, and the pool's round trip would cost more than it saves.
    let counts: Vec<Vec<i64>> = if taken.len() <= 4 {
        let mut buf = Vec::new();
        taken.iter().map(|block| count(&mut buf, block)).collect()
    } else {
        crate::threads::install(|| taken.par_iter().map_init(Vec::new, count).collect())
    };
    for (e, c) in taken.into_iter().flatten().zip(counts.into_iter().flatten()) {
        let mut info = e.info();
        if c <= 0 {
            lists.free(&info);
        } else if c >= hot_from {
            info.set_count(c);
            pairs.insert(e.pair, info);
        } else {
            cold.push(e.pair, c, &info, lists);
        }
    }
}

/// The most passes one slide of the word lists makes (see `Lists::compact`).
const MAX_PASSES: usize = 16;

/// (Here, not in `occurrences.rs`: a slide moves the cold pairs' lists too.)
impl Lists {
    /// When more than one part in `dead_share` of the array is dead (a
    /// quarter in ordinary training, see `Tuning::slide_dead`), slides the
    /// live lists down over the dead space, in place, and gives the freed
    /// end back to the OS.
    ///
    /// Why not at less: each slide reads the whole pair map, and late
    /// merges kill a few lists each, often. Why give the end back: space once
    /// written stays resident while the array keeps its capacity; shrinking
    /// the array instead would copy it, raising the peak. (Both measured:
    /// docs/dev/performance.md, "Sliding the word lists".)
    ///
    /// The lists are those of the pairs in the map and of the cold ones.
    pub(super) fn compact<S: Symbol>(
        &mut self,
        hot: &mut FxHashMap<Pair<S>, PairInfo>,
        cold: &mut Cold<S>,
        min_slide: usize,
        slide_pass: usize,
        dead_share: usize,
    ) {
        let len = self.arena.len();
        if len > min_slide && self.dead > len / dead_share {
            // In the order of their offsets, each list moves down to where
            // the one before it ends, sized exactly (the next push moves it
            // to the end with twice the room).
            // Sorted as (offset, key) pairs, 8 bytes each: the key is a cold
            // pair's place in `cold` (below 2^31: that many cold pairs would
            // take 24 GB), or (with `IN_ARENA` set) an index into `hot`, the
            // map's records. (The offset sits beside its key: a key read
            // through a reference was a cache miss per comparison.)
            //
            // In passes, each over the lists that start in one range of
            // offsets, lowest range first: the sorted array is the slide's
            // only extra memory, and in one pass it could set the peak of the
            // whole training (see `Tuning::slide_pass`). A list moved in one pass starts below the
            // next range, so no later pass sees it again, and every list
            // still moves down over dead space only. At most `MAX_PASSES`:
            // each pass reads every hot and cold pair, and with passes of
            // 2 MiB over the arena of SuperBPE's second stage on 1 GB (hundreds
            // of MB, millions of cold pairs) those reads were a third of the
            // training.
            let mut hot: Vec<&mut PairInfo> = hot.values_mut().filter(|i| i.in_arena()).collect();
            let starts = cold.starts();
            let passes = len.div_ceil(slide_pass.max(1)).min(MAX_PASSES);
            let mut to = 0;
            for pass in 0..passes {
                let range = (pass * len / passes) as u32..((pass + 1) * len / passes) as u32;
                let mut live: Vec<(u32, u32)> = hot
                    .iter()
                    .enumerate()
                    .filter(|(_, i)| range.contains(&i.slots[0]))
                    .map(|(k, i)| (i.slots[0], IN_ARENA | k as u32))
                    .collect();
                cold.for_each_in_arena(|at, place| {
                    if range.contains(&at) {
                        live.push((at, place));
                    }
                });
                live.sort_unstable();
                for (from, key) in live {
                    let from = from as usize;
                    let used = if key & IN_ARENA != 0 {
                        let info = &mut hot[(key & !IN_ARENA) as usize];
                        let used = info.len();
                        info.slots = [to as u32, used as u32];
                        used
                    } else {
                        cold.move_list(&starts, key, to as u32)
                    };
                    self.arena.copy_within(from..from + used, to);
                    to += used;
                }
            }
            self.arena.truncate(to);
            self.dead = 0;
            release_spare(&self.arena);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::train::testing::next_random;

    #[test]
    fn word_lists_survive_growth_death_and_sliding() {
        // Lists of every length (inline, moved to the arena, grown there),
        // some freed, checked against plain vectors after every slide. The
        // words come in four kinds of order: repeated (each pushed many times
        // in a row: named once), small gaps (one-byte varints), large gaps
        // (three bytes), and any id in any order (the escape, five bytes).
        let mut pairs: FxHashMap<Pair<u16>, PairInfo> = FxHashMap::default();
        let mut model: FxHashMap<Pair<u16>, Vec<u32>> = FxHashMap::default();
        let mut lists = Lists { arena: Vec::new(), dead: 0 };
        let mut seed = 0x2545f4914f6cdd1du64;
        let (mut slides, mut escapes) = (0, 0);
        for round in 0..400u32 {
            for _ in 0..2000 {
                next_random(&mut seed);
                // Skewed keys: a few long lists, many short ones.
                let k = ((seed % 1000) * (seed >> 32) % 1000 / 7) as u16;
                let key = (k, round as u16 % 3);
                let word = match k % 4 {
                    0 => round,
                    1 => round * 16 + (seed >> 20) as u32 % 16,
                    2 => round * 70_000,
                    _ => (seed >> 24) as u32 % (u32::MAX - 1),
                };
                let list = model.entry(key).or_default();
                if list.last().is_some_and(|&w| w > word) {
                    escapes += 1;
                }
                if list.last() != Some(&word) {
                    list.push(word);
                }
                lists.push(pairs.entry(key).or_default(), word).unwrap();
            }
            // Every third round, a third of the pairs die.
            if round % 3 == 2 {
                let doomed: Vec<_> = pairs.keys().copied().filter(|p| (p.0 as u32 + round) % 3 == 0).collect();
                for p in doomed {
                    lists.free(&pairs.remove(&p).unwrap());
                    model.remove(&p);
                }
            }
            let dead = lists.dead;
            // Slides in one pass or in passes of a few lists (1 to 64 KB).
            let slide_pass = if round % 2 == 0 { usize::MAX } else { 1 << (round % 17) };
            // (1 << 18 and 4: the default `Tuning::min_slide` and `slide_dead`.)
            lists.compact(&mut pairs, &mut Cold::new(), 1 << 18, slide_pass, 4);
            if lists.dead < dead {
                slides += 1;
                let in_arena: usize = pairs.values().filter(|i| i.in_arena()).map(PairInfo::len).sum();
                assert_eq!((lists.dead, lists.arena.len()), (0, in_arena));
            }
            assert_eq!(pairs.len(), model.len());
            for (p, words) in &model {
                let mut got = Vec::new();
                lists.read(&pairs[p], &mut got);
                assert_eq!(got, *words, "{p:?} after round {round}");
            }
        }
        assert!(slides > 3, "{slides} slides: the test no longer exercises sliding");
        assert!(escapes > 1000, "{escapes} ids out of order: the test no longer exercises the escape");
    }
}
