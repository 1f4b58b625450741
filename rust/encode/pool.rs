//! The pool that keeps memos from one call to the next: the encoder's chunk
//! cache.
//!
//! The `Encoder` keeps the memos of finished calls in a pool (`MemoPool`),
//! and a call takes one from it (`Encoder::memo`), so a word merged in an
//! earlier call is not merged again. Taking and giving back cost one lock
//! each per call (or per thread of a batch), never one per chunk; the lock
//! is held for a pop or an insert into a short list, so 16 threads that
//! start together wait for each other a few hundred nanoseconds at most.
//! (With a `try_lock` that gave up and started a fresh memo, 1-4 of 16
//! threads starting together found the lock taken and merged their words
//! again: docs/dev/performance.md, "A memo for every thread".) The pool
//! keeps memos while their memory fits its cap (`set_capacity`, 0: keep
//! none; by default 64 MiB, or room for a memo per thread where more
//! threads encode at once: `MemoPool::capacity`), and, where `SHARE_FROM`
//! threads or more encode at once, the table of merged chunks they share
//! (`shared.rs`).
//! The pool belongs to one process (`threads.rs`): a forked child takes
//! over the parent's memos if no thread of the parent held the pool's lock
//! at the fork, and starts with none otherwise.
//!
//! Why not one cache shared by all threads (the first version: a direct-
//! mapped table of seqlocked slots for short chunks, maps behind 64 locks
//! for long ones, consulted after each call's memo): every chunk the memo
//! had not seen paid for the shared look-up and insert (atomic operations,
//! a cache miss), as much as merging a short word costs; on 10 MB of 200
//! languages, which share few words with the text before, encoding was 20%
//! slower than without it, on English up to 15% (`examples/profile.rs`,
//! warmed on another slice). What the threads share now, and why it does
//! not cost that: `shared.rs`.
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

use super::memo::Memo;
use super::shared::Shared;
use crate::threads::ForkLocal;

/// The memos of finished calls, kept within `capacity` bytes.
pub struct MemoPool {
    memos: ForkLocal<Mutex<Pooled>>,
    capacity: AtomicUsize,
    /// Whether the cap is the default (no `set_capacity` yet): then it
    /// widens to room for a memo per thread (`capacity`).
    default: AtomicBool,
    /// What a memo is expected to take (`Encoder`: its copy of the seen
    /// table's seed, and `MEMO_REST`).
    per_memo: usize,
    /// Memos taken and not yet given back, and the most there have been at
    /// once: the threads that encode with the encoder at the same time.
    out: AtomicUsize,
    widest: AtomicUsize,
    /// Calls that found a memo in the pool, and calls that did not.
    reused: AtomicUsize,
    fresh: AtomicUsize,
}

/// What the pool holds: the memos, and the table they share where threads
/// encode at once (`shared.rs`), made by the first call that needs it.
#[derive(Default)]
struct Pooled {
    memos: Vec<Memo>,
    shared: Option<Arc<Shared>>,
}

/// The default cap: 64 MiB, room for a dozen memos of 32k chunks or three at
/// their largest (16 threads rarely fill theirs: 10 MB of English leaves ~2
/// MB in each), unless more threads encode at once (`MemoPool::capacity`).
pub const DEFAULT_CAPACITY: usize = 64 << 20;

/// A memo's expected memory beyond its copy of the seed: the front tables
/// (768 KiB) and its maps as a few calls leave them (~1-2 MiB with 16
/// threads on English), with room to spare.
pub const MEMO_REST: usize = 4 << 20;

/// The fewest threads encoding at once that share a table (`shared.rs`). On
/// 16 cores the table took 10-20% off a call's CPU time on English; with 2
/// threads, where each memo already holds half of what the call meets, its
/// look-ups and puts (misses in a 16 MiB table) cost 5.5% of a batch's CPU
/// and its hits saved ~1% (docs/dev/performance.md, "A table the threads
/// share").
pub const SHARE_FROM: usize = 4;

/// What `MemoPool::info` reports.
pub struct CacheInfo {
    pub capacity: usize,
    pub bytes: usize,
    pub entries: usize,
    pub memos: usize,
    pub reused: usize,
    pub fresh: usize,
    /// The chunks in the shared table, and the look-ups that found one
    /// there (as the memos have reported them).
    pub shared: usize,
    pub shared_hits: usize,
}

impl Pooled {
    fn shared_bytes(&self) -> usize {
        self.shared.as_deref().map_or(0, Shared::bytes)
    }
}

impl MemoPool {
    /// A pool with the default cap, for memos of `per_memo` bytes.
    pub fn new(per_memo: usize) -> MemoPool {
        MemoPool {
            memos: ForkLocal::new(),
            capacity: AtomicUsize::new(DEFAULT_CAPACITY),
            default: AtomicBool::new(true),
            per_memo,
            out: AtomicUsize::new(0),
            widest: AtomicUsize::new(0),
            reused: AtomicUsize::new(0),
            fresh: AtomicUsize::new(0),
        }
    }

    /// This process's memos (a forked child takes over its parent's if no
    /// thread held their lock at the fork: `try_lock` never waits).
    fn memos(&self) -> &Mutex<Pooled> {
        self.memos.get_or(|parents| {
            let taken = parents.and_then(|m| m.try_lock().ok()).map(|mut m| std::mem::take(&mut *m));
            Mutex::new(taken.unwrap_or_default())
        })
    }

    /// The pool's list, locked (a thread that panicked holding it left the
    /// list whole: each change is one push, pop or insert).
    fn lock(&self) -> std::sync::MutexGuard<'_, Pooled> {
        self.memos().lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Counts `threads` threads as encoding at once (a call about to take a
    /// memo on each of them).
    pub fn expect(&self, threads: usize) {
        self.widest.fetch_max(threads, Relaxed);
    }

    /// A memo from the pool (the fullest), or a fresh one if it has none;
    /// with the shared table where threads encode at once.
    pub fn take(&self) -> Memo {
        let out = self.out.fetch_add(1, Relaxed) + 1;
        self.widest.fetch_max(out, Relaxed);
        let (taken, shared) = {
            let mut pooled = self.lock();
            (pooled.memos.pop(), self.shared(&mut pooled))
        };
        let mut memo = match taken {
            Some(memo) => {
                self.reused.fetch_add(1, Relaxed);
                memo
            }
            None => {
                self.fresh.fetch_add(1, Relaxed);
                Memo::default()
            }
        };
        memo.attach(shared);
        memo
    }

    /// The shared table for a memo taken now: none while fewer than
    /// `SHARE_FROM` threads have encoded at once, or
    /// with the cache off; else the pool's, made afresh where there is none
    /// or the one there is full and no longer found (`Shared::stale`).
    fn shared(&self, pooled: &mut Pooled) -> Option<Arc<Shared>> {
        let bytes = self.shared_bytes();
        if bytes == 0 || self.widest.load(Relaxed) < SHARE_FROM {
            return None;
        }
        if pooled.shared.as_ref().is_none_or(|s| s.stale()) {
            pooled.shared = Some(Arc::new(Shared::new(bytes)));
        }
        pooled.shared.clone()
    }

    /// The shared table's size: a quarter of the cap as set (16 MiB by
    /// default); none under 1 MiB (the cache off, say).
    fn shared_bytes(&self) -> usize {
        let bytes = self.capacity.load(Relaxed) / 4;
        if bytes < 1 << 20 {
            0
        } else {
            bytes
        }
    }

    /// Keeps `memo` (taken by `take`) if it fits the cap beside the others;
    /// else drops it.
    pub fn give_back(&self, memo: Memo) {
        // (Saturating: a forked child counts the memos its parent's other
        // threads had out, which never come back.)
        let _ = self.out.fetch_update(Relaxed, Relaxed, |n| n.checked_sub(1));
        let mut memo = memo;
        memo.attach(None);
        let capacity = self.capacity();
        if (memo.is_empty() && !memo.has_front()) || capacity == 0 {
            return;
        }
        let mut pooled = self.lock();
        let held: usize = pooled.memos.iter().map(Memo::bytes).sum::<usize>() + pooled.shared_bytes();
        if held + memo.bytes() <= capacity {
            // Fullest last, so that `take` hands out the one that knows most.
            let at = pooled.memos.partition_point(|m| m.len() <= memo.len());
            pooled.memos.insert(at, memo);
        }
    }

    /// The cap in bytes: as set, or by default 64 MiB widened to a memo per
    /// thread that has encoded with the encoder at once (each call's threads
    /// take a memo each, and the next call finds them). With the cap fixed
    /// at 64 MiB, 16 threads encoding with o200k (~9 MiB a memo, 8 MiB of
    /// it its copy of the seed) left 10 of their memos behind, and the
    /// next call's threads started afresh: 7-10% slower on a 16-core
    /// machine (docs/dev/performance.md, "A memo for every thread").
    pub fn capacity(&self) -> usize {
        let set = self.capacity.load(Relaxed);
        if self.default.load(Relaxed) {
            let widest = self.widest.load(Relaxed);
            let shared = if widest >= SHARE_FROM { self.shared_bytes() } else { 0 };
            set.max(widest.saturating_mul(self.per_memo) + shared)
        } else {
            set
        }
    }

    /// The most a memo's seen table may grow to: a quarter of the cap as set
    /// (64 MiB by default), not widened by the threads.
    pub fn table_bytes(&self) -> usize {
        self.capacity.load(Relaxed) / 4
    }

    /// Drops every memo (and the counts).
    pub fn clear(&self) {
        let dropped = std::mem::take(&mut *self.memos().lock().unwrap_or_else(|e| e.into_inner()));
        drop(dropped);
        self.reused.store(0, Relaxed);
        self.fresh.store(0, Relaxed);
    }

    /// A new cap in bytes (0: keep no memo between calls), fixed whatever
    /// the threads; drops every memo.
    pub fn set_capacity(&self, capacity: usize) {
        self.capacity.store(capacity, Relaxed);
        self.default.store(false, Relaxed);
        self.clear();
    }

    pub fn info(&self) -> CacheInfo {
        let pooled = self.lock();
        let shared = pooled.shared.as_deref();
        CacheInfo {
            capacity: self.capacity(),
            bytes: pooled.memos.iter().map(Memo::bytes).sum::<usize>() + pooled.shared_bytes(),
            entries: pooled.memos.iter().map(Memo::len).sum(),
            memos: pooled.memos.len(),
            reused: self.reused.load(Relaxed),
            fresh: self.fresh.load(Relaxed),
            shared: shared.map_or(0, Shared::len),
            shared_hits: shared.map_or(0, Shared::hits),
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
