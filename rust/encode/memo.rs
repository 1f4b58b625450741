//! The memo of merged chunks, and the pool that keeps memos from one call to
//! the next: the encoder's chunk cache.
//!
//! Chunks that are not one token need merging, the slow path; in real text
//! they are ~8% of chunks but recur (in 10 MB of English, 180k such chunks
//! are 46k distinct words), so their ids are remembered: chunk -> ids. A
//! memo is used by one thread at a time, so a look-up takes no lock.
//!
//! The `Encoder` keeps the memos of finished calls in a pool (`MemoPool`),
//! and a call takes one from it (`Encoder::memo`), so a word merged in an
//! earlier call is not merged again. Taking and giving back cost one
//! `try_lock` each per call (or per run of a batch), never one per chunk,
//! and never a wait: if another thread holds the pool's lock, the call
//! starts with a fresh memo and gives it back only if the lock is free
//! then. So 16 threads never queue on it. The pool keeps memos while their
//! memory fits its cap (`set_capacity`, 0: keep none); a memo itself starts
//! afresh past `MAX_CHUNKS` chunks or `MAX_IDS` ids, which bounds each one.
//! A memo returns exactly the ids merging gave, so the ids never depend on
//! what the pool holds.
//!
//! Why not one cache shared by all threads (the first version: a direct-
//! mapped table of seqlocked slots for short chunks, maps behind 64 locks
//! for long ones, consulted after each call's memo): every chunk the memo
//! had not seen paid for the shared look-up and insert (atomic operations,
//! a cache miss), as much as merging a short word costs; on 10 MB of 200
//! languages, which share few words with the text before, encoding was 20%
//! slower than without it, on English up to 15% (`examples/profile.rs`,
//! warmed on another slice).
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Mutex;

use rustc_hash::FxHashMap;

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
    /// The same for longer chunks (a copy of the bytes each: these are the
    /// chunks whose merging costs most).
    long: FxHashMap<Box<[u8]>, (u32, u32)>,
    ids: Vec<Rank>,
    /// The bytes of the long keys.
    long_bytes: usize,
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
    /// tables, and every chunk of 1-2 bytes too: docs/performance.md, "The
    /// hot loop".)
    front: Vec<Front>,
    short_front: Vec<ShortFront>,
}

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
    /// Past this many chunks, or this many ids, the memo starts afresh. A
    /// small memo stays in cache: on 200 languages (FLORES), where words
    /// recur less, an unbounded one made encoding 15-20% slower than 32k
    /// chunks; English gained nothing from more. (MAX_IDS is small in unit
    /// tests, so that they reach it quickly.)
    pub const MAX_CHUNKS: usize = 1 << 15;
    pub const MAX_IDS: usize = if cfg!(test) { 1 << 12 } else { 1 << 20 };

    /// Always inlined: called once for each chunk that is not one token
    /// (left to the compiler it was a call, 5-6% of `perf`'s samples on
    /// English).
    #[inline(always)]
    pub fn get(&self, chunk: &[u8]) -> Option<&[Rank]> {
        let found = if chunk.len() <= 15 { self.short.get(&halves(pack(chunk))) } else { self.long.get(chunk) };
        let &(start, len) = found?;
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

    #[inline]
    pub fn insert(&mut self, chunk: &[u8], ids: &[Rank]) {
        if self.ids.len() + ids.len() > Self::MAX_IDS || self.short.len() + self.long.len() >= Self::MAX_CHUNKS {
            if ids.len() > Self::MAX_IDS {
                return;
            }
            self.short.clear();
            self.long.clear();
            self.ids.clear();
            self.long_bytes = 0;
        }
        let at = (self.ids.len() as u32, ids.len() as u32);
        if chunk.len() <= 15 {
            self.short.insert(halves(pack(chunk)), at);
        } else {
            self.long.insert(chunk.into(), at);
            self.long_bytes += chunk.len();
        }
        self.ids.extend_from_slice(ids);
    }

    /// The chunks it holds.
    pub fn len(&self) -> usize {
        self.short.len() + self.long.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Its memory, roughly: the tables' buckets (key, value and control
    /// byte; a long key's box header too), the long keys' bytes, the ids'
    /// buffer, the front table.
    pub fn bytes(&self) -> usize {
        self.short.capacity() * 25
            + self.long.capacity() * 41
            + self.long_bytes
            + self.ids.capacity() * 4
            + self.front.len() * std::mem::size_of::<Front>()
            + self.short_front.len() * std::mem::size_of::<ShortFront>()
    }
}

/// The memos of finished calls, kept within `capacity` bytes.
pub struct MemoPool {
    memos: Mutex<Vec<Memo>>,
    capacity: AtomicUsize,
    /// Calls that found a memo in the pool, and calls that did not.
    reused: AtomicUsize,
    fresh: AtomicUsize,
}

/// The default cap: 64 MiB, room for a dozen full memos (16 threads rarely
/// fill theirs: 10 MB of English leaves ~2 MB in each).
pub const DEFAULT_CAPACITY: usize = 64 << 20;

/// What `MemoPool::info` reports.
pub struct CacheInfo {
    pub capacity: usize,
    pub bytes: usize,
    pub entries: usize,
    pub memos: usize,
    pub reused: usize,
    pub fresh: usize,
}

impl MemoPool {
    pub fn new(capacity: usize) -> MemoPool {
        MemoPool {
            memos: Mutex::new(Vec::new()),
            capacity: AtomicUsize::new(capacity),
            reused: AtomicUsize::new(0),
            fresh: AtomicUsize::new(0),
        }
    }

    /// A memo from the pool (the fullest), or a fresh one if it has none or
    /// another thread holds its lock.
    pub fn take(&self) -> Memo {
        let taken = self.memos.try_lock().ok().and_then(|mut m| m.pop());
        match taken {
            Some(memo) => {
                self.reused.fetch_add(1, Relaxed);
                memo
            }
            None => {
                self.fresh.fetch_add(1, Relaxed);
                Memo::default()
            }
        }
    }

    /// Keeps `memo` if it fits the cap beside the others and the lock is
    /// free; else drops it.
    pub fn give_back(&self, memo: Memo) {
        let capacity = self.capacity.load(Relaxed);
        if (memo.is_empty() && !memo.has_front()) || capacity == 0 {
            return;
        }
        let Ok(mut memos) = self.memos.try_lock() else { return };
        let held: usize = memos.iter().map(Memo::bytes).sum();
        if held + memo.bytes() <= capacity {
            // Fullest last, so that `take` hands out the one that knows most.
            let at = memos.partition_point(|m| m.len() <= memo.len());
            memos.insert(at, memo);
        }
    }

    /// Drops every memo (and the counts).
    pub fn clear(&self) {
        let dropped = std::mem::take(&mut *self.memos.lock().unwrap_or_else(|e| e.into_inner()));
        drop(dropped);
        self.reused.store(0, Relaxed);
        self.fresh.store(0, Relaxed);
    }

    /// A new cap in bytes (0: keep no memo between calls); drops every memo.
    pub fn set_capacity(&self, capacity: usize) {
        self.capacity.store(capacity, Relaxed);
        self.clear();
    }

    pub fn info(&self) -> CacheInfo {
        let memos = self.memos.lock().unwrap_or_else(|e| e.into_inner());
        CacheInfo {
            capacity: self.capacity.load(Relaxed),
            bytes: memos.iter().map(Memo::bytes).sum(),
            entries: memos.iter().map(Memo::len).sum(),
            memos: memos.len(),
            reused: self.reused.load(Relaxed),
            fresh: self.fresh.load(Relaxed),
        }
    }
}

/// A memo taken from a pool, given back when dropped (so every path out of
/// a call, an error included, gives it back).
pub struct PooledMemo<'p> {
    memo: Option<Memo>,
    pool: &'p MemoPool,
}

impl<'p> PooledMemo<'p> {
    pub fn new(pool: &'p MemoPool) -> PooledMemo<'p> {
        PooledMemo { memo: Some(pool.take()), pool }
    }
}

impl std::ops::Deref for PooledMemo<'_> {
    type Target = Memo;
    fn deref(&self) -> &Memo {
        self.memo.as_ref().expect("present until dropped")
    }
}

impl std::ops::DerefMut for PooledMemo<'_> {
    fn deref_mut(&mut self) -> &mut Memo {
        self.memo.as_mut().expect("present until dropped")
    }
}

impl Drop for PooledMemo<'_> {
    fn drop(&mut self) {
        if let Some(memo) = self.memo.take() {
            self.pool.give_back(memo);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pool_keeps_memos_within_its_cap() {
        let pool = MemoPool::new(1 << 20);
        {
            let mut m = PooledMemo::new(&pool);
            m.insert(b"hello", &[1, 2]);
            m.insert(b"a chunk of more than fifteen bytes", &[3, 4, 5]);
        }
        let info = pool.info();
        assert_eq!((info.memos, info.entries, info.fresh), (1, 2, 1));
        assert!(info.bytes > 0 && info.bytes <= info.capacity);
        {
            let m = PooledMemo::new(&pool);
            assert_eq!(m.get(b"hello"), Some(&[1, 2][..]));
            assert_eq!(m.get(b"a chunk of more than fifteen bytes"), Some(&[3, 4, 5][..]));
            // Taken: a second call at the same time starts afresh.
            assert!(PooledMemo::new(&pool).is_empty());
        }
        assert_eq!(pool.info().reused, 1);
        // A memo too big for the cap is not kept.
        pool.set_capacity(50);
        {
            let mut m = PooledMemo::new(&pool);
            m.insert(b"hello", &[1, 2]);
        }
        assert_eq!(pool.info().memos, 0);
        pool.set_capacity(1 << 20);
        drop(PooledMemo::new(&pool)); // an empty memo is not kept
        assert_eq!(pool.info().memos, 0);
        pool.set_capacity(0);
        {
            let mut m = PooledMemo::new(&pool);
            m.insert(b"hello", &[1, 2]);
        }
        assert_eq!(pool.info().memos, 0);
    }
}
