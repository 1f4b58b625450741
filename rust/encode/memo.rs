//! The memo of merged chunks: chunk -> ids, for one thread at a time.
//!
//! Chunks that are not one token need merging, the slow path; in real text
//! they are ~8% of chunks but recur (in 10 MB of English, 180k such chunks
//! are 46k distinct words), so their ids are remembered: chunk -> ids. A
//! memo is used by one thread at a time, so a look-up takes no lock.
//!
//! A memo, when full (`MAX_CHUNKS` chunks or `MAX_IDS` ids), doubles its
//! room if its old chunks keep being found (at most `MAX_GROWN` times: 256k
//! chunks), else starts afresh, which bounds each one (~17 MiB at most). It
//! returns exactly the ids merging gave, so the ids never depend on what the
//! pool of memos (`pool.rs`) holds.
use std::hash::BuildHasher;
use std::sync::Arc;

use hashbrown::HashTable;
use rustc_hash::{FxBuildHasher, FxHashMap};

use super::shared::{Shared, Sharing};
use super::table::Table;
use crate::vocab::{pack, Rank, NONE};

/// chunk -> ids for the chunks that took merging.
#[derive(Default)]
pub struct Memo {
    /// chunk -> (start, len) in `ids`, for chunks of up to 15 bytes (most
    /// of them: 12 bytes on average on FLORES-200), keyed by `pack`: a hit
    /// compares two integers, where a key of bytes compares them with a
    /// call to `memcmp` (2.5% of encoding FLORES-200). Keyed so, encoding
    /// went 2-10% faster on FLORES-200 (o200k and cl100k) and 6-15% on
    /// English.
    short: FxHashMap<(u64, u64), (u32, u32)>,
    /// The same for longer chunks (these are the chunks whose merging
    /// costs most): their bytes one after another in `long_bytes`, and an
    /// index of `Long` entries over them. A key of its own for each (a
    /// `Box<[u8]>`) cost an allocation at each insert and a free at each
    /// start afresh: 1-4% of encoding Chinese, Japanese and Korean text,
    /// whose long runs of letters are mostly merged once
    /// (docs/dev/performance.md, "Long chunks' keys in one buffer").
    long: HashTable<Long>,
    long_bytes: Vec<u8>,
    ids: Vec<Rank>,
    /// The front tables: chunk -> its ids, for tokens and merged chunks
    /// alike, so that a chunk seen lately costs one probe in a small table
    /// instead of one into the vocabulary's maps (and for a merged chunk a
    /// second into `short`). Chunks of 1 to 7 bytes, 86% of English's,
    /// go in `short_front` (32k slots of 16 bytes, 512 KiB: the chunk's
    /// bytes and length in one `u64`, at most `SHORT_IDS` ids), chunks of 8
    /// to 15 in `front` (8k slots of 32 bytes, 256 KiB: `pack`ed, at most
    /// `FRONT_IDS` ids). Each takes tokens and chunks found in the memo, not
    /// a chunk merged for the first time (most of those never recur).
    /// Direct-mapped: a chunk takes its slot from the one before, so the
    /// tables need no clearing, their size is fixed, and the memo's starting
    /// afresh leaves them as they are (their ids are still right). Empty
    /// until `ready`. (`front.rs`, `Encoder::encode_with_front`; why two
    /// tables, and every chunk of 1-2 bytes too: docs/dev/performance.md, "The
    /// hot loop".)
    front: Vec<Front>,
    short_front: Vec<ShortFront>,
    /// The seen table (`table.rs`): the vocabulary's tokens of 8 to 15
    /// bytes and the chunks of 8 to 15 bytes this memo merged, behind the
    /// front table. `None` until `ready_table`; with it, such chunks go in
    /// it instead of `short`.
    pub(super) table: Option<Table>,
    /// How a memo learns whether holding more chunks pays (`insert`): the
    /// chunks put in since it last grew or started afresh; how many times
    /// it has grown; where in `ids` the current epoch's chunks start (those
    /// before it are "old"); the old chunks found this epoch, each counted
    /// once in its life (`FOUND_OLD`); whether the last epoch found enough.
    puts: u32,
    grown: u32,
    mark: u32,
    old_hits: u32,
    pays: bool,
    /// The pool's shared table while the memo is out of the pool, where
    /// threads encode at once (`shared.rs`), and how the memo uses it
    /// (`shared_push`).
    pub(super) shared: Option<Arc<Shared>>,
    pub(super) sharing: Sharing,
}

/// A long chunk in the memo: its hash (kept, so that the index grows without
/// hashing the bytes again), where its bytes are in `long_bytes`, and where
/// its ids are in `ids` (start, count), as `short`'s values.
#[derive(Clone, Copy)]
struct Long {
    hash: u64,
    at: u32,
    len: u32,
    ids: (u32, u32),
}

/// The hash of a long chunk's bytes.
#[inline(always)]
fn long_hash(chunk: &[u8]) -> u64 {
    FxBuildHasher.hash_one(chunk)
}

/// In a memo entry's id count: found again after the epoch it was put in.
const FOUND_OLD: u32 = 1 << 31;

/// A `pack`ed key as two `u64`s: a `u128` is aligned to 16 bytes, which
/// pads each bucket of `short` (key and value) from 24 to 32 bytes.
#[inline(always)]
fn halves(key: u128) -> (u64, u64) {
    (key as u64, (key >> 64) as u64)
}

/// How many ids a front slot holds, and a short front slot.
const FRONT_IDS: usize = 3;
const SHORT_IDS: usize = 2;
/// The front table has `1 << FRONT_BITS` slots of 32 bytes, the short one
/// `1 << SHORT_BITS` of 16.
const FRONT_BITS: u32 = 13;
const SHORT_BITS: u32 = 15;

/// A slot of the front table: key 0 (the packing of no bytes) is empty.
#[derive(Clone, Copy, Default)]
#[repr(C, align(32))]
struct Front {
    key: u128,
    ids: [Rank; FRONT_IDS],
    n: u32,
}

/// A slot of the short front table: key 0 (length 0) is empty; a second id
/// of `NONE` means one id.
#[derive(Clone, Copy, Default)]
#[repr(C, align(16))]
struct ShortFront {
    key: u64,
    ids: [Rank; SHORT_IDS],
}

impl Memo {
    /// Past this many chunks (`<< grown`), or this many ids, the memo
    /// grows or starts afresh (`insert`). A small memo stays in cache: on
    /// 200 languages (FLORES), where words recur less, an unbounded one made
    /// encoding 15-20% slower than 32k chunks. (Both are small in unit
    /// tests, so that they reach them quickly.)
    pub const MAX_CHUNKS: usize = if cfg!(test) { 1 << 10 } else { 1 << 15 };
    pub const MAX_IDS: usize = if cfg!(test) { 1 << 14 } else { 1 << 20 };
    /// A memo doubles at most this many times: 256k chunks, with `MAX_IDS`
    /// ~17 MiB (`bytes`).
    pub const MAX_GROWN: u32 = 3;
    /// Chunks put in per epoch; an epoch "pays" if at least `PAYS` of its
    /// look-ups found a chunk from before it.
    const EPOCH: u32 = Self::MAX_CHUNKS as u32 / 2;
    const PAYS: u32 = Self::EPOCH / 4;

    /// The ids of `chunk`, if held; `&mut` since finding an old chunk is
    /// counted (see `insert`).
    ///
    /// Always inlined: called once for each chunk that is not one token
    /// (left to the compiler it was a call, 5-6% of `perf`'s samples on
    /// English).
    #[inline(always)]
    pub fn get(&mut self, chunk: &[u8]) -> Option<&[Rank]> {
        let found = if chunk.len() <= 15 {
            self.short.get_mut(&halves(pack(chunk)))
        } else {
            let bytes = &self.long_bytes;
            let same = |e: &Long| e.len as usize == chunk.len() && &bytes[e.at as usize..][..chunk.len()] == chunk;
            self.long.find_mut(long_hash(chunk), same).map(|e| &mut e.ids)
        };
        let (start, len) = found?;
        let start = *start;
        // (A chunk put in before this epoch, found for the first time since:
        // see `insert`.)
        if start < self.mark && *len & FOUND_OLD == 0 {
            *len |= FOUND_OLD;
            self.old_hits += 1;
        }
        let len = *len & !FOUND_OLD;
        Some(&self.ids[start as usize..(start + len) as usize])
    }

    /// Whether `ready` made the front table.
    #[inline]
    pub fn has_front(&self) -> bool {
        !self.front.is_empty()
    }

    /// Makes the front tables (once per memo: 768 KiB of zeros).
    #[inline]
    pub fn ready(&mut self) {
        if self.front.is_empty() {
            self.front = vec![Front::default(); 1 << FRONT_BITS];
            self.short_front = vec![ShortFront::default(); 1 << SHORT_BITS];
        }
    }

    /// The front slot of `key` (a `pack`ed chunk of 8..=15 bytes).
    #[inline(always)]
    pub fn front_slot(key: u128) -> usize {
        let (lo, hi) = halves(key);
        let h = (lo ^ hi.rotate_left(29).wrapping_mul(0x9e37_79b9_7f4a_7c15)).wrapping_mul(0xf135_7aea_2e62_a9c5);
        (h >> (64 - FRONT_BITS)) as usize
    }

    /// The ids in slot `slot` if it holds `key` (`ready` made the table):
    /// the slot's three, of which the first `n` (1 to 3) are the chunk's.
    #[inline(always)]
    pub fn front_get(&self, slot: usize, key: u128) -> Option<(&[Rank; FRONT_IDS], usize)> {
        let f = &self.front[slot];
        if f.key == key {
            Some((&f.ids, f.n as usize))
        } else {
            None
        }
    }

    /// Puts `key` -> `ids` in slot `slot` if they fit.
    #[inline(always)]
    pub fn front_put(&mut self, slot: usize, key: u128, ids: &[Rank]) {
        if ids.len() <= FRONT_IDS {
            let id = |k: usize| ids.get(k).copied().unwrap_or(0);
            self.front[slot] = Front { key, ids: [id(0), id(1), id(2)], n: ids.len() as u32 };
        }
    }

    /// The short front slot of `key` (a chunk of 1..=7 bytes by
    /// `short_key_at`).
    #[inline(always)]
    pub fn short_slot(key: u64) -> usize {
        (key.wrapping_mul(0xf135_7aea_2e62_a9c5) >> (64 - SHORT_BITS)) as usize
    }

    /// The ids in short slot `slot` if it holds `key`: both, of which the
    /// second is `NONE` for a chunk of one id.
    #[inline(always)]
    pub fn short_get(&self, slot: usize, key: u64) -> Option<&[Rank; SHORT_IDS]> {
        let f = &self.short_front[slot];
        (f.key == key).then_some(&f.ids)
    }

    /// Puts `key` -> `ids` in short slot `slot` if they fit.
    #[inline(always)]
    pub fn short_put(&mut self, slot: usize, key: u64, ids: &[Rank]) {
        if (1..=SHORT_IDS).contains(&ids.len()) {
            self.short_front[slot] = ShortFront { key, ids: [ids[0], ids.get(1).copied().unwrap_or(NONE)] };
        }
    }

    /// Remembers `chunk` -> `ids`. A full memo (`MAX_CHUNKS << grown`
    /// chunks, or `MAX_IDS` ids) doubles its room if the last epoch's
    /// look-ups kept finding chunks older than the epoch, else it starts
    /// afresh.
    ///
    /// Why: on long texts of one language the words merged long ago keep
    /// recurring, and a memo that forgets them every 32k chunks merges them
    /// again (10 MB of English: 51.7k merges, ~27% of a warm call; a model
    /// that keeps them all: 26.6k). On FLORES-200, a run of a few
    /// languages at a time, the old chunks are rarely found again (~2-15%
    /// of an epoch's chunks, against 40-57% on English), and a larger memo
    /// only made every look-up and insert slower (measured in
    /// docs/dev/performance.md, "The memo's growth").
    #[inline]
    pub fn insert(&mut self, chunk: &[u8], ids: &[Rank]) {
        let ids_full = self.ids.len() + ids.len() > Self::MAX_IDS;
        // (`long_bytes` is indexed by `u32`: a memo holding 4 GiB of long
        // chunks' bytes starts afresh, as one holding too many ids does.)
        let bytes_full = chunk.len() > 15 && self.long_bytes.len() + chunk.len() > u32::MAX as usize;
        if ids_full || bytes_full || self.held() >= Self::MAX_CHUNKS << self.grown {
            if ids.len() > Self::MAX_IDS || chunk.len() > u32::MAX as usize {
                return;
            }
            if !ids_full && !bytes_full && self.pays && self.grown < Self::MAX_GROWN {
                self.grown += 1;
            } else {
                self.start_afresh();
            }
            self.puts = 0;
            self.old_hits = 0;
        }
        let at = (self.ids.len() as u32, ids.len() as u32);
        if chunk.len() <= 15 {
            self.short.insert(halves(pack(chunk)), at);
        } else {
            let long =
                Long { hash: long_hash(chunk), at: self.long_bytes.len() as u32, len: chunk.len() as u32, ids: at };
            self.long_bytes.extend_from_slice(chunk);
            self.long.insert_unique(long.hash, long, |e| e.hash);
        }
        self.puts += 1;
        if self.puts % Self::EPOCH == 0 {
            self.pays = self.old_hits >= Self::PAYS;
            self.old_hits = 0;
            self.mark = (self.ids.len() + ids.len()) as u32;
        }
        self.ids.extend_from_slice(ids);
    }

    /// Forgets every chunk (not the front tables: their ids stay right). The
    /// room stays, grown or not (`MAX_GROWN` bounds it): given back, it was
    /// mapped afresh page by page as the memo filled again, and a text that
    /// grew the memo once (a run of one script in FLORES-200) encoded 8%
    /// slower (Python, alternated: 58.6-59.8 vs 60.7-64.1 MB/s).
    fn start_afresh(&mut self) {
        self.short.clear();
        self.long.clear();
        self.long_bytes.clear();
        self.ids.clear();
        self.grown = 0;
        self.mark = 0;
        self.pays = false;
    }

    /// How many times it has doubled its room since it last started afresh.
    pub fn grown(&self) -> u32 {
        self.grown
    }

    /// The chunks its maps hold (the seen table has its own bound).
    #[inline]
    fn held(&self) -> usize {
        self.short.len() + self.long.len()
    }

    /// The chunks it holds.
    pub fn len(&self) -> usize {
        self.held() + self.table.as_ref().map_or(0, Table::learned)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Its memory, roughly: the tables' buckets (key, value and control
    /// byte), the long keys' bytes, the ids' buffer, the front table.
    pub fn bytes(&self) -> usize {
        self.short.capacity() * 25
            + self.long.capacity() * (std::mem::size_of::<Long>() + 1)
            + self.long_bytes.capacity()
            + self.ids.capacity() * 4
            + self.front.len() * std::mem::size_of::<Front>()
            + self.short_front.len() * std::mem::size_of::<ShortFront>()
            + self.table.as_ref().map_or(0, Table::bytes)
    }
}

#[cfg(test)]
#[path = "memo_tests.rs"]
mod tests;
