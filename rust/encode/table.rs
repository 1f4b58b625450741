//! The seen table: chunk -> ids for every chunk of 8 to 15 bytes that the
//! vocabulary holds or that a memo has merged, one open-addressed table of
//! 32-byte entries (two to a cache line) with the `pack`ed key and up to
//! four ids inline.
//!
//! The vocabulary's tokens of that length are put in once, when the encoder
//! is made (its seed); a memo's table starts as a copy of it and takes every
//! such chunk the memo merges. So a chunk of 8 to 15 bytes that the memo's
//! front tables miss costs one probe (one cache line: key and ids together)
//! whether it is a token or a word merged before, where the vocabulary's map
//! and the memo's map cost a probe each (hashbrown's control bytes and
//! buckets are two lines each, and the memo's ids a third), and an absent key
//! proves the chunk is neither, so it goes straight to merging.
//!
//! Why not chunks of 1 to 7 bytes too (as one table for every chunk): their
//! tokens sit in the vocabulary's compact maps (8 bytes an entry for 3 and 4
//! bytes, ~400 KiB for cl100k), which stay in the L2 cache; the same tokens
//! in 32-byte entries of a table sized for all of them (8 MiB for cl100k)
//! made a front-table miss a probe into L3, and English encoded ~8% slower
//! (docs/dev/performance.md, "One probe for every chunk seen: the seen table").
//!
//! Bounded, and grown only where it pays: a table made from the seed has
//! room for `MAX_LEARNED` merged chunks (a load factor of at most 0.7 when
//! full). When full, it doubles if the chunks it learned keep being found
//! again (at least one hit on a learned chunk per chunk learned since it
//! last grew), at most `MAX_GROWN` times and never past the size its owner
//! allows (a share of the chunk cache's cap); else it is reset to the seed,
//! as the memo's maps start afresh. On long text of one language the words
//! of 8 to 15 bytes outnumber 32k: a table reset at 32k merged ~145k of
//! them again in every 50 MB of English it had seen before; on FLORES-200
//! the learned chunks are rarely found again, and the table stays small
//! (docs/dev/performance.md, "The seen table grows where it pays"). Spilled
//! ids are bounded too (`MAX_SPILL`: then it is reset).
use crate::vocab::{Rank, NONE};

/// Ids held in an entry itself; a chunk of more keeps them in `spill`.
const INLINE: usize = 4;
/// In the key's top four bits (a `pack`ed key uses bits 0-123: the bytes,
/// and the length in bits 120-123), the tag: in its low three bits the
/// number of inline ids (1 to 4), or `SPILLED` (ids[0] is the offset in
/// `spill`, ids[1] the count); `LEARNED` for a merged chunk (not a seed's
/// token), so that hits on learned chunks can be counted.
const SPILLED: u128 = 7;
const LEARNED: u128 = 8;
const TAG_SHIFT: u32 = 124;
const KEY_MASK: u128 = !(15 << TAG_SHIFT);

/// Merged chunks a table made from the seed takes before it is full, the
/// times it may double, and the ids its spill buffer takes. (Small in unit
/// tests, so that they reach them.)
pub const MAX_LEARNED: usize = if cfg!(test) { 1 << 10 } else { 1 << 15 };
pub const MAX_GROWN: u32 = 2;
const MAX_SPILL: usize = if cfg!(test) { 1 << 12 } else { 1 << 20 };

#[derive(Clone, Copy, Default)]
#[repr(C, align(32))]
struct Entry {
    /// `pack(chunk)` with the tag in the top four bits; 0: empty.
    key: u128,
    ids: [Rank; INLINE],
}

pub struct Table {
    entries: Box<[Entry]>,
    /// `64 - log2(entries.len())`: an index is a hash's top bits.
    shift: u32,
    spill: Vec<Rank>,
    /// The chunks put in since the seed, and how many it takes before it
    /// is full (0.7 of its entries, less the seed's tokens).
    learned: usize,
    room: usize,
    /// The seed's tokens (every table made from it holds them).
    seeded: usize,
    /// Times it doubled since it was the seed's copy; the chunks it had
    /// learned when it last grew (0 since a reset), and the hits on learned
    /// chunks since then.
    grown: u32,
    learned_at_growth: usize,
    learned_hits: usize,
}

/// The first entry to probe for `key` (a `pack`ed chunk).
#[inline(always)]
fn home(key: u128, shift: u32) -> usize {
    let (lo, hi) = (key as u64, (key >> 64) as u64);
    let h = (lo ^ hi.rotate_left(29).wrapping_mul(0x9e37_79b9_7f4a_7c15)).wrapping_mul(0xf135_7aea_2e62_a9c5);
    (h >> shift) as usize
}

/// `n` entries, copies of `from`'s (of length `n`) or empty, in memory
/// advised to the kernel as huge pages: the table is megabytes probed at
/// random, and with 4 KiB pages nearly every probe of a chunk the front
/// tables missed also missed the TLB.
fn entries(n: usize, from: Option<&[Entry]>) -> Box<[Entry]> {
    let mut v: Vec<Entry> = Vec::with_capacity(n);
    crate::pages::advise_huge(v.as_mut_ptr() as *mut u8, n * std::mem::size_of::<Entry>());
    // SAFETY: `Entry` is plain integers, for which all-zero bytes are a
    // valid (empty) entry; `with_capacity(n)` made room for the `n`
    // entries written here (zeros, or `from`'s `n`) before they are
    // counted in the length.
    unsafe {
        match from {
            Some(from) => {
                assert_eq!(from.len(), n);
                std::ptr::copy_nonoverlapping(from.as_ptr(), v.as_mut_ptr(), n);
            }
            None => std::ptr::write_bytes(v.as_mut_ptr(), 0, n),
        }
        v.set_len(n);
    }
    v.into_boxed_slice()
}

impl Clone for Table {
    fn clone(&self) -> Table {
        Table {
            entries: entries(self.entries.len(), Some(&self.entries)),
            shift: self.shift,
            spill: self.spill.clone(),
            learned: self.learned,
            room: self.room,
            seeded: self.seeded,
            grown: self.grown,
            learned_at_growth: self.learned_at_growth,
            learned_hits: self.learned_hits,
        }
    }
}

impl Table {
    /// A table holding `tokens` (`pack`ed bytes of 1 to 15 bytes, id), with
    /// room for `MAX_LEARNED` more chunks.
    pub fn seed(tokens: impl ExactSizeIterator<Item = (u128, Rank)>) -> Table {
        let seeded = tokens.len();
        let bits = ((seeded + MAX_LEARNED) * 10 / 7 + 1).next_power_of_two().trailing_zeros().max(4);
        let mut t = Table::empty(bits, seeded);
        for (key, id) in tokens {
            t.put(key, &[id], 0);
        }
        t.learned = 0;
        t.room = room(t.entries.len(), seeded);
        t
    }

    /// A table of 16 empty entries, for an encoder whose memos make none
    /// (SuperBPE's): used after all, it would work, growing from there.
    pub fn unused() -> Table {
        Table::empty(4, 0)
    }

    /// `1 << bits` empty entries, for `seeded` tokens (put in by the caller),
    /// with no room yet.
    fn empty(bits: u32, seeded: usize) -> Table {
        Table {
            entries: entries(1 << bits, None),
            shift: 64 - bits,
            spill: Vec::new(),
            learned: 0,
            room: 0,
            seeded,
            grown: 0,
            learned_at_growth: 0,
            learned_hits: 0,
        }
    }

    /// Its memory in bytes.
    pub fn bytes(&self) -> usize {
        std::mem::size_of_val(&*self.entries) + self.spill.capacity() * 4
    }

    /// The merged chunks it holds (not the seed's tokens).
    pub fn learned(&self) -> usize {
        self.learned
    }

    /// Appends the ids of `key` (a `pack`ed chunk) to `out` and returns
    /// true if held; else returns false.
    #[inline(always)]
    pub fn push(&mut self, key: u128, out: &mut Vec<Rank>) -> bool {
        let mask = self.entries.len() - 1;
        let mut i = home(key, self.shift);
        loop {
            let e = &self.entries[i];
            if e.key & KEY_MASK == key {
                let tag = (e.key >> TAG_SHIFT) as usize;
                self.learned_hits += tag >> 3;
                let tag = tag & 7;
                if tag <= INLINE {
                    super::front::push_ids(out, &e.ids, tag);
                } else {
                    let at = e.ids[0] as usize;
                    out.extend_from_slice(&self.spill[at..at + e.ids[1] as usize]);
                }
                return true;
            }
            if e.key == 0 {
                return false;
            }
            i = (i + 1) & mask;
        }
    }

    /// Asks the CPU to bring `key`'s first entry into the cache (a hint; a
    /// no-op off x86-64), for a look-up a few chunks later (`waiting.rs`).
    #[inline(always)]
    pub fn prefetch(&self, key: u128) {
        crate::pages::prefetch(&self.entries[home(key, self.shift)]);
    }

    /// Puts `key` -> `ids` (a chunk not held: `push` said so). A full table
    /// first doubles, if that pays and its entries would stay within
    /// `max_bytes`, else is reset to `seed`.
    #[inline]
    pub fn insert(&mut self, key: u128, ids: &[Rank], seed: &Table, max_bytes: usize) {
        if ids.is_empty() || ids.len() > MAX_SPILL {
            return;
        }
        let spills = ids.len() > INLINE;
        if spills && self.spill.len() + ids.len() > MAX_SPILL {
            self.reset(seed);
        } else if self.learned >= self.room {
            let pays = self.learned_hits >= self.learned - self.learned_at_growth;
            if pays && self.grown < MAX_GROWN && 2 * std::mem::size_of_val(&*self.entries) <= max_bytes {
                self.grow();
            } else {
                self.reset(seed);
            }
        }
        self.put(key, ids, LEARNED);
    }

    /// Back to the seed's tokens only, at the seed's size.
    pub fn reset(&mut self, seed: &Table) {
        if self.entries.len() == seed.entries.len() {
            self.entries.copy_from_slice(&seed.entries);
        } else {
            self.entries = entries(seed.entries.len(), Some(&seed.entries));
            self.shift = seed.shift;
        }
        self.spill.clear();
        self.learned = 0;
        self.room = seed.room;
        self.grown = 0;
        self.learned_at_growth = 0;
        self.learned_hits = 0;
    }

    /// Twice the entries, every chunk held put in again (the spill stays).
    fn grow(&mut self) {
        let bigger = entries(2 * self.entries.len(), None);
        let old = std::mem::replace(&mut self.entries, bigger);
        self.shift -= 1;
        for e in old.iter().filter(|e| e.key != 0) {
            let i = self.empty_slot(e.key & KEY_MASK);
            self.entries[i] = *e;
        }
        self.grown += 1;
        self.room = room(self.entries.len(), self.seeded);
        self.learned_at_growth = self.learned;
        self.learned_hits = 0;
    }

    fn put(&mut self, key: u128, ids: &[Rank], learned: u128) {
        debug_assert!(key != 0 && key & !KEY_MASK == 0 && !ids.is_empty());
        let (tag, inline) = if ids.len() <= INLINE {
            let id = |k: usize| ids.get(k).copied().unwrap_or(NONE);
            (ids.len() as u128, [id(0), id(1), id(2), id(3)])
        } else {
            let at = self.spill.len() as Rank;
            self.spill.extend_from_slice(ids);
            (SPILLED, [at, ids.len() as Rank, 0, 0])
        };
        let i = self.empty_slot(key);
        self.entries[i] = Entry { key: key | (tag | learned) << TAG_SHIFT, ids: inline };
        self.learned += 1;
    }

    /// The first empty entry from `key`'s home on (a key not held).
    fn empty_slot(&self, key: u128) -> usize {
        let mask = self.entries.len() - 1;
        let mut i = home(key, self.shift);
        while self.entries[i].key != 0 {
            i = (i + 1) & mask;
        }
        i
    }
}

/// The merged chunks a table of `entries` entries takes, `seeded` of them
/// the seed's tokens: up to a load factor of 0.7.
fn room(entries: usize, seeded: usize) -> usize {
    (entries * 7 / 10).saturating_sub(seeded)
}

/// A memo's seen table (its `table`).
impl super::Memo {
    /// Makes the seen table, a copy of `seed` (once per memo).
    #[inline]
    pub fn ready_table(&mut self, seed: &Table) {
        if self.table.is_none() {
            self.table = Some(seed.clone());
        }
    }

    /// Whether `ready_table` made the seen table.
    #[inline(always)]
    pub fn has_table(&self) -> bool {
        self.table.is_some()
    }

    /// Appends the ids of `key` (a `pack`ed chunk of 8..=15 bytes) to `out`
    /// if the seen table (made) holds it: whether it did.
    #[inline(always)]
    pub fn table_push(&mut self, key: u128, out: &mut Vec<Rank>) -> bool {
        self.table.as_mut().is_some_and(|t| t.push(key, out))
    }

    /// Prefetches `key`'s entry in the seen table (made).
    #[inline(always)]
    pub fn table_prefetch(&self, key: u128) {
        if let Some(t) = self.table.as_ref() {
            t.prefetch(key);
        }
    }

    /// Puts a merged chunk's `key` -> `ids` in the seen table (made), which
    /// when full doubles (where that pays, within `max_bytes`) or goes back
    /// to `seed`.
    #[inline]
    pub fn table_insert(&mut self, key: u128, ids: &[Rank], seed: &Table, max_bytes: usize) {
        if let Some(t) = self.table.as_mut() {
            t.insert(key, ids, seed, max_bytes);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::pack;

    /// Chunk `k`'s ids: 1 to 4 (inline), or 5 to 7 (spilled) for one in 20.
    fn ids(k: usize) -> Vec<Rank> {
        let n = if k % 20 == 0 { 5 + k % 3 } else { 1 + k % 4 };
        (0..n).map(|j| (k * 10 + j) as Rank).collect()
    }

    fn key(k: usize) -> u128 {
        pack(format!("w{k}").as_bytes())
    }

    /// Fills `t` with learned chunks `from..` until full; each is looked up
    /// `finds` times after it is put in. Returns the next chunk's number.
    fn fill(t: &mut Table, seed: &Table, from: usize, finds: usize) -> usize {
        let mut k = from;
        while t.learned() < t.room {
            let mut out = vec![];
            assert!(!t.push(key(k), &mut out));
            t.insert(key(k), &ids(k), seed, usize::MAX);
            for _ in 0..finds {
                out.clear();
                assert!(t.push(key(k), &mut out));
            }
            k += 1;
        }
        k
    }

    /// Everything held is found: the seed's tokens and learned chunks from
    /// `from` to `to`, inline and spilled ids alike.
    fn holds(t: &mut Table, from: usize, to: usize) {
        for (k, want) in [(pack(b"ab"), vec![7]), (pack(b"the longest one"), vec![9])] {
            let mut out = vec![];
            assert!(t.push(k, &mut out));
            assert_eq!(out, want);
        }
        for k in from..to {
            let mut out = vec![1];
            assert!(t.push(key(k), &mut out), "{k}");
            assert_eq!(out[1..], ids(k)[..], "{k}");
        }
    }

    /// What goes in comes out (inline and spilled ids alike), an absent key
    /// is absent, and a full table whose learned chunks are not found again
    /// is reset to its seed, keeping only the seed's tokens and what came
    /// after.
    #[test]
    fn puts_finds_and_resets() {
        let seed = Table::seed([(pack(b"ab"), 7), (pack(b"the longest one"), 9)].into_iter());
        assert!(seed.room >= MAX_LEARNED);
        let mut t = seed.clone();
        let n = fill(&mut t, &seed, 0, 0);
        assert_eq!(t.learned(), seed.room);
        holds(&mut t, 0, n);
        t.learned_hits = 0; // (`holds` found every one)
        t.insert(key(n), &[3, 4], &seed, usize::MAX);
        assert_eq!((t.learned(), t.grown, t.entries.len()), (1, 0, seed.entries.len()));
        let mut out = vec![];
        assert!(!t.push(key(0), &mut out));
        holds(&mut t, 0, 0);
        assert!(t.push(key(n), &mut out));
        assert_eq!(out, [3, 4]);
        assert!(t.bytes() <= seed.bytes() + MAX_SPILL * 4 + 64);
    }

    /// A full table whose learned chunks keep being found (as many hits as
    /// chunks learned since it last grew) doubles (keeping all it holds) at
    /// most `MAX_GROWN` times and within the bytes allowed,
    /// then is reset to the seed, at the seed's size.
    #[test]
    fn grows_where_it_pays() {
        let seed = Table::seed([(pack(b"ab"), 7), (pack(b"the longest one"), 9)].into_iter());
        let mut t = seed.clone();
        let mut n = 0;
        for grown in 1..=MAX_GROWN {
            n = fill(&mut t, &seed, n, 1);
            t.insert(key(n), &ids(n), &seed, usize::MAX);
            n += 1;
            assert_eq!((t.grown, t.entries.len()), (grown, seed.entries.len() << grown));
            holds(&mut t, 0, n);
            // Only the chunks learned since it grew count: each found once
            // (this one, which made it grow, here; the next by `fill`) is
            // enough, the older ones not found again.
            t.learned_hits = 0;
            assert!(t.push(key(n - 1), &mut vec![]));
        }
        n = fill(&mut t, &seed, n, 1);
        t.insert(key(n), &ids(n), &seed, usize::MAX);
        assert_eq!((t.learned(), t.grown, t.entries.len()), (1, 0, seed.entries.len()));
        holds(&mut t, n, n + 1);
        // Not past the bytes allowed: reset instead.
        let mut t = seed.clone();
        let n = fill(&mut t, &seed, 0, 1);
        t.insert(key(n), &ids(n), &seed, 2 * seed.bytes() - 1);
        assert_eq!((t.learned(), t.grown), (1, 0));
        // Found too rarely (one learned chunk in three): reset.
        let mut t = seed.clone();
        let mut k = 0;
        while t.learned() < t.room {
            t.insert(key(k), &ids(k), &seed, usize::MAX);
            if k % 3 == 0 {
                assert!(t.push(key(k), &mut vec![]));
            }
            k += 1;
        }
        t.insert(key(k), &ids(k), &seed, usize::MAX);
        assert_eq!((t.learned(), t.grown), (1, 0));
    }

    /// A memo whose seen table has learned as many chunks as the memo's
    /// own maps may hold still keeps the chunks its maps take: the maps are
    /// bounded by what they hold, not by what the table holds (counting
    /// both, a memo next to a well-filled table started afresh at every
    /// insert, and 50 MB of English merged ~90k chunks again in each call).
    #[test]
    fn the_memo_is_bounded_by_its_own_chunks() {
        use super::super::Memo;
        let seed = Table::seed([(pack(b"the longest one"), 9)].into_iter());
        let mut memo = Memo::default();
        memo.ready_table(&seed);
        for k in 0..Memo::MAX_CHUNKS {
            memo.table_insert(key(k), &ids(k), &seed, 0);
        }
        assert!(memo.len() >= Memo::MAX_CHUNKS);
        let words: Vec<String> = (0..100).map(|k| format!(" x{k}")).collect();
        for (k, w) in words.iter().enumerate() {
            memo.insert(w.as_bytes(), &[k as Rank, 1]);
        }
        for (k, w) in words.iter().enumerate() {
            assert_eq!(memo.get(w.as_bytes()), Some(&[k as Rank, 1][..]), "{w}");
        }
    }

    /// An unused table, used after all, holds what was last put in (it
    /// grows from its 16 entries, or is reset to them), and never overfills.
    #[test]
    fn an_unused_table_still_works() {
        let seed = Table::unused();
        for max_bytes in [0, usize::MAX] {
            let mut t = seed.clone();
            for k in 0..5000 {
                t.insert(key(k), &ids(k), &seed, max_bytes);
                let mut out = vec![];
                assert!(t.push(key(k), &mut out));
                assert_eq!(out, ids(k));
                assert!(t.learned() * 10 <= t.entries.len() * 7 + 10, "{k}");
            }
        }
    }

    /// Spilled ids past `MAX_SPILL` reset the table too.
    #[test]
    fn the_spill_is_bounded() {
        let seed = Table::seed(std::iter::empty());
        let mut t = seed.clone();
        let long: Vec<Rank> = (0..MAX_SPILL as Rank / 3).collect();
        for k in 0..4 {
            t.insert(pack(format!("s{k}").as_bytes()), &long, &seed, usize::MAX);
        }
        assert!(t.spill.len() <= MAX_SPILL);
        let mut out = vec![];
        assert!(t.push(pack(b"s3"), &mut out));
        assert_eq!(out, long);
    }
}
