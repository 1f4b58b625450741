//! The chunk cache: the ids of chunks that took merging, kept by the
//! `Encoder` from one call to the next, so that a word merged in an earlier
//! call (or by another thread) is not merged again.
//!
//! It sits behind each call's own memo (`Memo` in `mod.rs`): the memo answers
//! the words a text repeats, lock-free and in cache; this answers the words
//! the memo has not seen this call. In a 10 MB slice of English, 180k chunks
//! need merging, 46k of them distinct: the memo saves the repeats, the cache
//! most of the 46k once the encoder has seen text of the same kind.
//!
//! Bounded: `capacity` bytes in all (counted as below), shared equally by
//! the shards. A shard that would pass its share starts afresh (all its
//! entries dropped), which keeps the cache within its cap at no bookkeeping
//! cost per hit; words that recur come back at once.
//!
//! Thread-safe without waiting: the entries are spread over `SHARDS` shards
//! by hash, each behind its own lock, and a thread never waits for a lock:
//! a shard that is busy counts as a miss on reading (the chunk is merged, as
//! with no cache) and is left alone on writing. So 16 threads of
//! `encode_batch` never queue behind one another, and the ids are the same
//! whatever the cache holds (a hit returns exactly what merging gives).
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::RwLock;

use rustc_hash::FxHashMap;

use crate::vocab::{pack, Rank};

/// The default cap: 64 MiB holds the merged words of several hundred MB of
/// English, or ~40 MB of text in 200 languages (whose words recur less).
pub const DEFAULT_CAPACITY: usize = 64 << 20;

/// Independent shards: more than any thread count in use, so two threads
/// seldom want the same one at once.
const SHARDS: usize = 64;

/// The bytes an entry is counted as, besides its ids (4 bytes each) and, for
/// a chunk of over 15 bytes, its bytes: the key (16), the value (8), the hash
/// table's control byte and free room (up to 1/8 of a table is kept free),
/// and the allocation of a long key.
const ENTRY_BYTES: usize = 40;

#[derive(Default)]
struct Shard {
    /// chunk -> (start, len) in `ids`, for chunks of up to 15 bytes (`pack`).
    short: FxHashMap<u128, (u32, u32)>,
    /// The same for longer chunks.
    long: FxHashMap<Box<[u8]>, (u32, u32)>,
    ids: Vec<Rank>,
    /// What the entries are counted as (see `ENTRY_BYTES`).
    bytes: usize,
}

impl Shard {
    fn get(&self, chunk: &[u8]) -> Option<&[Rank]> {
        let found = if chunk.len() <= 15 { self.short.get(&pack(chunk)) } else { self.long.get(chunk) };
        let &(start, len) = found?;
        Some(&self.ids[start as usize..(start + len) as usize])
    }

    fn clear(&mut self) {
        // Fresh tables, not `clear()`: the memory of a full shard is given
        // back, so a cache made smaller shrinks at once.
        *self = Shard::default();
    }
}

pub struct ChunkCache {
    shards: Box<[RwLock<Shard>]>,
    /// The cap in bytes (0: the cache is off).
    capacity: AtomicUsize,
    hits: AtomicU64,
    misses: AtomicU64,
}

/// What `ChunkCache::info` reports.
pub struct CacheInfo {
    pub capacity: usize,
    pub bytes: usize,
    pub entries: usize,
    pub hits: u64,
    pub misses: u64,
}

impl ChunkCache {
    pub fn new(capacity: usize) -> ChunkCache {
        ChunkCache {
            shards: (0..SHARDS).map(|_| RwLock::new(Shard::default())).collect(),
            capacity: AtomicUsize::new(capacity),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    #[inline]
    pub fn enabled(&self) -> bool {
        self.capacity.load(Relaxed) != 0
    }

    /// The shard of a chunk: Fx hash of its first and last eight bytes and
    /// its length (cheap, and spreads words well enough for 64 shards).
    #[inline]
    fn shard(&self, chunk: &[u8]) -> &RwLock<Shard> {
        let n = chunk.len();
        let word = |b: &[u8]| b.iter().take(8).fold(0u64, |h, &x| h << 8 | x as u64);
        let h = (word(chunk) ^ word(&chunk[n.saturating_sub(8)..]).rotate_left(29) ^ n as u64)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15);
        &self.shards[(h >> 58) as usize % SHARDS]
    }

    /// Appends the cached ids of `chunk` to `out`; false (and `out`
    /// unchanged) if it is not cached, or its shard is busy.
    #[inline]
    pub fn get_into(&self, chunk: &[u8], out: &mut Vec<Rank>) -> bool {
        let found = match self.shard(chunk).try_read() {
            Ok(shard) => shard.get(chunk).map(|ids| out.extend_from_slice(ids)).is_some(),
            Err(_) => false,
        };
        // (Counted per thread would be faster; these two counters are
        // touched once per chunk that needs merging, ~8% of chunks.)
        if found { &self.hits } else { &self.misses }.fetch_add(1, Relaxed);
        found
    }

    /// Remembers the ids of `chunk`, unless its shard is busy.
    pub fn insert(&self, chunk: &[u8], ids: &[Rank]) {
        let capacity = self.capacity.load(Relaxed);
        let cost = ENTRY_BYTES + 4 * ids.len() + if chunk.len() > 15 { chunk.len() } else { 0 };
        let share = capacity / SHARDS;
        if cost > share {
            return;
        }
        let Ok(mut shard) = self.shard(chunk).try_write() else { return };
        if shard.bytes + cost > share || shard.ids.len() + ids.len() > u32::MAX as usize {
            shard.clear();
        }
        // Another thread may have added it since our miss.
        if shard.get(chunk).is_some() {
            return;
        }
        let at = (shard.ids.len() as u32, ids.len() as u32);
        if chunk.len() <= 15 {
            shard.short.insert(pack(chunk), at);
        } else {
            shard.long.insert(chunk.into(), at);
        }
        shard.ids.extend_from_slice(ids);
        shard.bytes += cost;
    }

    /// Drops every entry (the hit and miss counts too).
    pub fn clear(&self) {
        for s in self.shards.iter() {
            s.write().unwrap_or_else(|e| e.into_inner()).clear();
        }
        self.hits.store(0, Relaxed);
        self.misses.store(0, Relaxed);
    }

    /// A new cap in bytes (0 turns the cache off); drops every entry.
    pub fn set_capacity(&self, capacity: usize) {
        self.capacity.store(capacity, Relaxed);
        self.clear();
    }

    pub fn info(&self) -> CacheInfo {
        let (mut bytes, mut entries) = (0, 0);
        for s in self.shards.iter() {
            let s = s.read().unwrap_or_else(|e| e.into_inner());
            bytes += s.bytes;
            entries += s.short.len() + s.long.len();
        }
        CacheInfo {
            capacity: self.capacity.load(Relaxed),
            bytes,
            entries,
            hits: self.hits.load(Relaxed),
            misses: self.misses.load(Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hits_what_was_inserted_and_stays_within_its_cap() {
        let cache = ChunkCache::new(SHARDS * 200);
        let mut out = vec![];
        assert!(!cache.get_into(b"hello", &mut out));
        cache.insert(b"hello", &[1, 2]);
        cache.insert(b"a chunk of more than fifteen bytes", &[3, 4, 5]);
        assert!(cache.get_into(b"hello", &mut out));
        assert!(cache.get_into(b"a chunk of more than fifteen bytes", &mut out));
        assert_eq!(out, [1, 2, 3, 4, 5]);
        // Many more entries than fit: the cap holds.
        for i in 0..10_000u32 {
            cache.insert(format!("w{i}").as_bytes(), &[i, i + 1]);
            assert!(cache.info().bytes <= SHARDS * 200);
        }
        let info = cache.info();
        assert!(info.entries > 0 && info.hits == 2 && info.misses == 1, "{}", info.entries);
        // Too big an entry for a shard is not kept.
        cache.insert(b"huge", &vec![7; 100]);
        assert!(!cache.get_into(b"huge", &mut out));
        cache.clear();
        assert_eq!(cache.info().entries, 0);
        cache.set_capacity(0);
        cache.insert(b"hello", &[1, 2]);
        assert!(!cache.enabled() && cache.info().entries == 0);
    }
}
