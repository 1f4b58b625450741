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
//! Bounded: a table takes at most `MAX_LEARNED` merged chunks (and
//! `MAX_SPILL` spilled ids); then it is reset to the seed, as the memo's
//! maps start afresh. Its size is fixed when the seed is made (a load
//! factor of at most 0.7 when full), so it never grows.
use crate::vocab::{Rank, NONE};

/// Ids held in an entry itself; a chunk of more keeps them in `spill`.
const INLINE: usize = 4;
/// In the key's top four bits (a `pack`ed key uses bits 0-123: the bytes,
/// and the length in bits 120-123): the number of inline ids (1 to 4), or
/// `SPILLED` (ids[0] is the offset in `spill`, ids[1] the count).
const SPILLED: u128 = 15;
const TAG_SHIFT: u32 = 124;
const KEY_MASK: u128 = !(15 << TAG_SHIFT);

/// Merged chunks a table takes before it is reset to its seed, and the ids
/// its spill buffer takes. (Small in unit tests, so that they reach them.)
pub const MAX_LEARNED: usize = if cfg!(test) { 1 << 10 } else { 1 << 15 };
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
    /// The chunks put in since the seed.
    learned: usize,
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
    #[cfg(target_os = "linux")]
    {
        const HUGE: usize = 2 << 20;
        let start = (v.as_mut_ptr() as usize).saturating_add(HUGE - 1) & !(HUGE - 1);
        let end = (v.as_mut_ptr() as usize).saturating_add(n * std::mem::size_of::<Entry>()) & !(HUGE - 1);
        if end > start {
            // SAFETY: advice about whole pages inside this fresh, unread
            // allocation; it changes no contents. Refused (no THP): ignored.
            unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE) };
        }
    }
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
        }
    }
}

impl Table {
    /// A table holding `tokens` (`pack`ed bytes of 1 to 15 bytes, id), with
    /// room for `MAX_LEARNED` more chunks.
    pub fn seed(tokens: impl ExactSizeIterator<Item = (u128, Rank)>) -> Table {
        let room = (tokens.len() + MAX_LEARNED) * 10 / 7 + 1;
        let bits = room.next_power_of_two().trailing_zeros().max(4);
        let mut t = Table { entries: entries(1 << bits, None), shift: 64 - bits, spill: Vec::new(), learned: 0 };
        for (key, id) in tokens {
            t.put(key, &[id]);
        }
        t.learned = 0;
        t
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
    pub fn push(&self, key: u128, out: &mut Vec<Rank>) -> bool {
        let mask = self.entries.len() - 1;
        let mut i = home(key, self.shift);
        loop {
            let e = &self.entries[i];
            if e.key & KEY_MASK == key {
                let tag = (e.key >> TAG_SHIFT) as usize;
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

    /// Puts `key` -> `ids` (a chunk not held: `push` said so), resetting
    /// the table to `seed` first if it is full.
    #[inline]
    pub fn insert(&mut self, key: u128, ids: &[Rank], seed: &Table) {
        if ids.is_empty() || ids.len() > MAX_SPILL {
            return;
        }
        let spills = ids.len() > INLINE;
        if self.learned >= MAX_LEARNED || (spills && self.spill.len() + ids.len() > MAX_SPILL) {
            self.reset(seed);
        }
        self.put(key, ids);
    }

    /// Back to the seed's tokens only (its room kept).
    pub fn reset(&mut self, seed: &Table) {
        debug_assert_eq!(self.entries.len(), seed.entries.len());
        self.entries.copy_from_slice(&seed.entries);
        self.spill.clear();
        self.learned = 0;
    }

    fn put(&mut self, key: u128, ids: &[Rank]) {
        debug_assert!(key != 0 && key & !KEY_MASK == 0 && !ids.is_empty());
        let (tag, inline) = if ids.len() <= INLINE {
            let id = |k: usize| ids.get(k).copied().unwrap_or(NONE);
            (ids.len() as u128, [id(0), id(1), id(2), id(3)])
        } else {
            let at = self.spill.len() as Rank;
            self.spill.extend_from_slice(ids);
            (SPILLED, [at, ids.len() as Rank, 0, 0])
        };
        let mask = self.entries.len() - 1;
        let mut i = home(key, self.shift);
        while self.entries[i].key != 0 {
            i = (i + 1) & mask;
        }
        self.entries[i] = Entry { key: key | tag << TAG_SHIFT, ids: inline };
        self.learned += 1;
    }
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
    pub fn table_push(&self, key: u128, out: &mut Vec<Rank>) -> bool {
        self.table.as_ref().is_some_and(|t| t.push(key, out))
    }

    /// Puts a merged chunk's `key` -> `ids` in the seen table (made), which
    /// goes back to `seed` when full.
    #[inline]
    pub fn table_insert(&mut self, key: u128, ids: &[Rank], seed: &Table) {
        if let Some(t) = self.table.as_mut() {
            t.insert(key, ids, seed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::pack;

    /// What goes in comes out (inline and spilled ids alike), an absent key
    /// is absent, and a full table is reset to its seed, keeping only the
    /// seed's tokens and what came after.
    #[test]
    fn puts_finds_and_resets() {
        let seed = Table::seed([(pack(b"ab"), 7), (pack(b"the longest one"), 9)].into_iter());
        let mut t = seed.clone();
        let ids = |k: usize| (0..1 + k % 7).map(|j| (k * 10 + j) as Rank).collect::<Vec<_>>();
        let key = |k: usize| pack(format!("w{k}").as_bytes());
        for k in 0..MAX_LEARNED {
            let mut out = vec![];
            assert!(!t.push(key(k), &mut out));
            t.insert(key(k), &ids(k), &seed);
        }
        assert_eq!(t.learned(), MAX_LEARNED);
        for k in 0..MAX_LEARNED {
            let mut out = vec![1];
            assert!(t.push(key(k), &mut out));
            assert_eq!(out[1..], ids(k)[..], "{k}");
        }
        t.insert(key(MAX_LEARNED), &[3, 4], &seed);
        assert_eq!(t.learned(), 1);
        let mut out = vec![];
        assert!(!t.push(key(0), &mut out));
        for (k, want) in [(pack(b"ab"), vec![7]), (pack(b"the longest one"), vec![9]), (key(MAX_LEARNED), vec![3, 4])] {
            let mut out = vec![];
            assert!(t.push(k, &mut out));
            assert_eq!(out, want);
        }
        assert!(t.bytes() <= seed.bytes() + MAX_SPILL * 4 + 64);
    }

    /// Spilled ids past `MAX_SPILL` reset the table too.
    #[test]
    fn the_spill_is_bounded() {
        let seed = Table::seed(std::iter::empty());
        let mut t = seed.clone();
        let long: Vec<Rank> = (0..MAX_SPILL as Rank / 3).collect();
        for k in 0..4 {
            t.insert(pack(format!("s{k}").as_bytes()), &long, &seed);
        }
        assert!(t.spill.len() <= MAX_SPILL);
        let mut out = vec![];
        assert!(t.push(pack(b"s3"), &mut out));
        assert_eq!(out, long);
    }
}
