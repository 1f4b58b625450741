//! The shared table: chunks merged by one thread, found by the others.
//!
//! Each thread of a call has its own memo (`memo.rs`), so with 16 threads a
//! word is merged by each thread that meets it: 10 MB of English took 71.6k
//! merges with 16 memos against 26.6k with one. A memo that misses now
//! looks here before merging, and a chunk it merges goes in here, so that
//! a word merged by one thread is found by the others, and by the next
//! call's threads (the pool keeps the table: `MemoPool`).
//!
//! Shared without a lock: fixed-size entries of atomics, written once. A
//! writer claims an empty entry with a compare-and-swap of its first word,
//! writes the rest, then publishes it (release); a reader takes an entry
//! only once published (acquire), so it never sees half an entry. Entries
//! are never changed or removed: a full table stops taking chunks, and the
//! pool puts a fresh one in its place when the full one is no longer found
//! (`MemoPool::take`). Chunks of 1 to 15 bytes (`pack`ed keys) and up to 4
//! ids: 32-byte entries, two to a cache line.
//!
//! Why not the earlier designs (docs/dev/performance.md, "Threads sharing
//! what they merge: tried, not kept"): one shared cache consulted after every memo miss,
//! with locks for long chunks, made 200 languages 20% slower, since most
//! chunks merged are words met once, which no thread looks for again; and
//! copying every merged chunk into every other thread's memo cost as much as
//! merging. Here a miss costs one probe (a cache line of L2 or L3) and a
//! merge one more write; a memo whose probes rarely find a chunk stops
//! probing for a while (`Memo::shared_push`), and the table stops taking
//! chunks once those it holds are rarely found (`Shared::worth_putting`).
//! Measured on 16 cores (docs/dev/performance.md, "A table the threads
//! share"): English 10-20% less CPU per call, 200 languages unchanged
//! within noise. With 2 threads it cost more than it saved, so calls of
//! fewer than `SHARE_FROM` threads do without it (`pool.rs`).
use std::sync::atomic::{
    AtomicBool, AtomicU64, AtomicUsize,
    Ordering::{Acquire, Relaxed, Release},
};
use std::sync::Arc;

use crate::vocab::Rank;

/// A memo's use of the shared table: look-ups and hits in the current
/// window, look-ups left to skip before the next window, and chunks put in
/// (the hits and puts are reported to the table at the window's end).
#[derive(Default)]
pub(super) struct Sharing {
    pub(super) probes: u32,
    pub(super) hits: u32,
    pub(super) skip: u32,
    pub(super) puts: u32,
}

/// Chunks put in before the table judges whether putting pays
/// (`Shared::worth_putting`).
const FIRST: usize = 1 << 14;
/// The most ids an entry holds.
const SHARED_IDS: usize = 4;
/// Entries probed from a key's home before a look-up or an insert gives up.
const PROBES: usize = 8;
/// In an entry's `hi` word (the key's high half: bytes 8 to 14 and the
/// length, at most 15, in the top byte, so its top four bits are free):
/// written and published, or claimed by a writer that has not published it;
/// and the count of its ids less one.
const READY: u64 = 1 << 63;
const WRITING: u64 = 1 << 62;
const COUNT_SHIFT: u32 = 60;
const FLAGS: u64 = 15 << COUNT_SHIFT;

/// An entry: 0 in `hi` is empty (a key's length is never 0).
#[repr(C, align(32))]
struct Entry {
    hi: AtomicU64,
    lo: AtomicU64,
    /// Its ids, two to a word (`NONE`-free: the count is in `hi`).
    ids: [AtomicU64; 2],
}

pub struct Shared {
    entries: Box<[Entry]>,
    shift: u32,
    /// Chunks put in (added to by each memo in batches), the most it takes,
    /// and whether it has reached that.
    filled: AtomicUsize,
    room: usize,
    full: AtomicBool,
    /// Look-ups that found a chunk (added to in batches), in all and since
    /// it became full.
    hits: AtomicUsize,
    hits_full: AtomicUsize,
}

/// `n` empty entries, from the allocator's zeroed pages (a fresh mapping for
/// a table of megabytes, so none is written until used), advised to the
/// kernel as huge pages: the table is probed at random, and with 4 KiB pages
/// nearly every probe also missed the TLB (as the seen table's did:
/// `table.rs`).
fn zeroed(n: usize) -> Box<[Entry]> {
    let layout = std::alloc::Layout::array::<Entry>(n).expect("a table of at most 2^40 entries");
    // SAFETY: `n` >= 1,024, so the layout is not empty; an `Entry` is four
    // atomic integers, for which all-zero bytes are a valid (empty) entry;
    // the pointer comes from the global allocator with `Entry`'s layout for
    // `n` of them, which is what the box frees.
    unsafe {
        let p = std::alloc::alloc_zeroed(layout) as *mut Entry;
        if p.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        crate::pages::advise_huge(p as *mut u8, layout.size());
        Box::from_raw(std::ptr::slice_from_raw_parts_mut(p, n))
    }
}

/// The first entry to probe for `key`.
#[inline(always)]
fn home(lo: u64, hi: u64, shift: u32) -> usize {
    let h = (lo ^ hi.rotate_left(29).wrapping_mul(0x9e37_79b9_7f4a_7c15)).wrapping_mul(0xf135_7aea_2e62_a9c5);
    (h >> shift) as usize
}

impl Shared {
    /// A table of at most `bytes` bytes (a power of two entries, at least
    /// 1,024), which takes chunks up to half full.
    pub fn new(bytes: usize) -> Shared {
        let n = (bytes / std::mem::size_of::<Entry>()).max(1 << 10);
        let n = if n.is_power_of_two() { n } else { n.next_power_of_two() / 2 };
        Shared {
            entries: zeroed(n),
            shift: 64 - n.trailing_zeros(),
            filled: AtomicUsize::new(0),
            room: n / 2,
            full: AtomicBool::new(false),
            hits: AtomicUsize::new(0),
            hits_full: AtomicUsize::new(0),
        }
    }

    /// Its memory in bytes.
    pub fn bytes(&self) -> usize {
        std::mem::size_of_val(&*self.entries)
    }

    /// The chunks it holds, roughly (memos add theirs in batches).
    pub fn len(&self) -> usize {
        self.filled.load(Relaxed)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Look-ups that found a chunk, in all (as memos have reported them).
    pub fn hits(&self) -> usize {
        self.hits.load(Relaxed)
    }

    /// Whether chunks merged now are worth putting in: while it holds
    /// fewer than `FIRST` (so that threads find each other's words at the
    /// start of a call), then while its look-ups find at least one chunk
    /// for every eight put in. (Text whose words each thread meets once,
    /// 200 languages, stops putting early; a memo's own look-ups stop at
    /// their own pace: `Memo::shared_push`.)
    #[inline]
    pub fn worth_putting(&self) -> bool {
        let filled = self.filled.load(Relaxed);
        filled < FIRST || self.hits.load(Relaxed) * 8 >= filled
    }

    /// Whether it is full and its chunks are rarely found any more: fewer
    /// hits since it filled than an eighth of what it holds (then the pool
    /// starts a fresh one).
    pub fn stale(&self) -> bool {
        self.full.load(Relaxed) && self.hits_full.load(Relaxed) < self.room / 8
    }

    /// Appends the ids of `key` (a `pack`ed chunk of 1 to 15 bytes) to
    /// `out` if held: whether it was.
    #[inline]
    pub fn push(&self, key: u128, out: &mut Vec<Rank>) -> bool {
        let (lo, hi) = (key as u64, (key >> 64) as u64);
        let mask = self.entries.len() - 1;
        let mut i = home(lo, hi, self.shift);
        for _ in 0..PROBES {
            let e = &self.entries[i];
            let h = e.hi.load(Acquire);
            if h == 0 {
                return false;
            }
            // (Published, so `lo` and the ids were written before `hi`'s
            // release store, which this acquire load saw.)
            if h & !(3 << COUNT_SHIFT) == hi | READY && e.lo.load(Relaxed) == lo {
                let ids = [e.ids[0].load(Relaxed), e.ids[1].load(Relaxed)];
                let ids = [ids[0] as Rank, (ids[0] >> 32) as Rank, ids[1] as Rank, (ids[1] >> 32) as Rank];
                super::front::push_ids(out, &ids, 1 + (h >> COUNT_SHIFT & 3) as usize);
                return true;
            }
            i = (i + 1) & mask;
        }
        false
    }

    /// Puts `key` -> `ids` if they fit (1 to 4 ids), there is room and an
    /// entry near its home is free: whether it did. A key held already
    /// (another thread merged it too) is not put twice, unless both write
    /// at once; then the second copy, with the same ids, is never found.
    #[inline]
    pub fn insert(&self, key: u128, ids: &[Rank]) -> bool {
        if ids.is_empty() || ids.len() > SHARED_IDS || self.full.load(Relaxed) {
            return false;
        }
        let (lo, hi) = (key as u64, (key >> 64) as u64);
        debug_assert!(hi != 0 && hi & FLAGS == 0);
        let mask = self.entries.len() - 1;
        let mut i = home(lo, hi, self.shift);
        for _ in 0..PROBES {
            let e = &self.entries[i];
            let mut h = e.hi.load(Acquire);
            if h == 0 {
                match e.hi.compare_exchange(0, hi | WRITING, Acquire, Acquire) {
                    Ok(_) => {
                        let id = |k: usize| ids.get(k).copied().unwrap_or(0) as u64;
                        e.lo.store(lo, Relaxed);
                        e.ids[0].store(id(0) | id(1) << 32, Relaxed);
                        e.ids[1].store(id(2) | id(3) << 32, Relaxed);
                        e.hi.store(hi | READY | ((ids.len() - 1) as u64) << COUNT_SHIFT, Release);
                        return true;
                    }
                    Err(now) => h = now,
                }
            }
            if h & !(3 << COUNT_SHIFT) == hi | READY && e.lo.load(Relaxed) == lo {
                return false;
            }
            i = (i + 1) & mask;
        }
        false
    }

    /// Counts `puts` chunks put in and `hits` found by a memo since it last
    /// reported; a table that reaches its room is full from then on.
    pub fn report(&self, puts: usize, hits: usize) {
        if puts > 0 && self.filled.fetch_add(puts, Relaxed) + puts >= self.room {
            self.full.store(true, Relaxed);
        }
        if hits > 0 {
            self.hits.fetch_add(hits, Relaxed);
            if self.full.load(Relaxed) {
                self.hits_full.fetch_add(hits, Relaxed);
            }
        }
    }
}

/// A memo's look-ups in the shared table are judged in windows of this many;
/// a window in which fewer than `FEW` found a chunk makes the memo skip
/// looking for the next `SKIP` chunks it lacks, then try another window.
/// (Small in unit tests, so that they reach them.)
const WINDOW: u32 = if cfg!(test) { 64 } else { 1 << 10 };
const FEW: u32 = WINDOW / 16;
const SKIP: u32 = 8 * WINDOW;

/// A memo's use of the shared table.
impl super::Memo {
    /// Takes `shared` for the call it is out for (the pool's table), or
    /// none; reports its counts to the table it had.
    pub fn attach(&mut self, shared: Option<Arc<Shared>>) {
        if let Some(old) = self.shared.take() {
            old.report(self.sharing.puts as usize, self.sharing.hits as usize);
        }
        self.sharing = Default::default();
        self.shared = shared;
    }

    /// Whether it has a shared table (then a chunk it lacks is looked for
    /// there: `pack` it).
    #[inline(always)]
    pub fn is_sharing(&self) -> bool {
        self.shared.is_some()
    }

    /// Appends the ids of `key` (a `pack`ed chunk of 1 to 15 bytes that the
    /// memo lacks) to `out` if the shared table holds it: whether it did.
    /// Counted, and judged every `WINDOW` look-ups (see `WINDOW`).
    #[inline]
    pub fn shared_push(&mut self, key: u128, out: &mut Vec<Rank>) -> bool {
        let Some(table) = self.shared.as_deref() else {
            return false;
        };
        let s = &mut self.sharing;
        if s.skip > 0 {
            s.skip -= 1;
            return false;
        }
        let hit = table.push(key, out);
        s.probes += 1;
        s.hits += hit as u32;
        if s.probes == WINDOW {
            if s.hits < FEW {
                s.skip = SKIP;
            }
            table.report(s.puts as usize, s.hits as usize);
            (s.probes, s.hits, s.puts) = (0, 0, 0);
        }
        hit
    }

    /// Puts a merged chunk's `key` -> `ids` in the shared table while that
    /// is worth it (`Shared::worth_putting`).
    #[inline]
    pub fn shared_put(&mut self, key: u128, ids: &[Rank]) {
        if let Some(table) = self.shared.as_deref() {
            if table.worth_putting() && table.insert(key, ids) {
                self.sharing.puts += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::pack;

    fn key(k: usize) -> u128 {
        pack(format!("w{k:06}").as_bytes())
    }

    fn ids(k: usize) -> Vec<Rank> {
        (0..1 + k % 4).map(|j| (k * 4 + j) as Rank).collect()
    }

    fn get(s: &Shared, key: u128) -> Option<Vec<Rank>> {
        let mut out = vec![7];
        s.push(key, &mut out).then(|| out[1..].to_vec())
    }

    #[test]
    fn finds_what_was_put_and_nothing_else() {
        let s = Shared::new(1 << 16);
        for k in 0..500 {
            assert!(s.insert(key(k), &ids(k)));
        }
        // (Held already: not put twice.)
        assert!(!s.insert(key(3), &ids(3)));
        for k in 0..500 {
            assert_eq!(get(&s, key(k)), Some(ids(k)), "chunk {k}");
        }
        for k in 500..1000 {
            assert_eq!(get(&s, key(k)), None, "chunk {k}");
        }
        // Too many ids, or none: not taken.
        assert!(!s.insert(key(2000), &[1, 2, 3, 4, 5]));
        assert!(!s.insert(key(2001), &[]));
        assert_eq!(get(&s, key(2000)), None);
        // Keys of every length, NUL bytes included.
        for n in 1..=15 {
            let chunk = vec![0u8; n];
            assert!(s.insert(pack(&chunk), &[n as Rank]));
        }
        for n in 1..=15 {
            assert_eq!(get(&s, pack(&vec![0u8; n])), Some(vec![n as Rank]));
        }
    }

    #[test]
    fn a_full_table_takes_no_more() {
        let s = Shared::new(0);
        assert_eq!(s.entries.len(), 1 << 10);
        s.report(512, 0);
        assert!(!s.insert(key(1), &ids(1)));
        assert_eq!(get(&s, key(1)), None);
        // Full and not found: stale, until found often enough.
        assert!(s.stale());
        s.report(0, 64);
        assert!(!s.stale());
        assert_eq!(s.hits(), 64);
    }

    #[test]
    fn crowded_homes_give_up_without_harm() {
        // A table of 1,024 entries takes 2,000 keys as far as their homes'
        // neighbourhoods allow; whatever it took is found with its own ids.
        let s = Shared::new(0);
        let put: Vec<bool> = (0..2000).map(|k| s.insert(key(k), &ids(k))).collect();
        assert!(put.iter().filter(|&&p| p).count() > 900);
        for (k, &put) in put.iter().enumerate() {
            assert_eq!(get(&s, key(k)), put.then(|| ids(k)), "chunk {k}");
        }
    }

    #[test]
    fn threads_writing_at_once_never_show_a_wrong_id() {
        // Four threads put overlapping keys and read each other's at once:
        // every look-up either misses or gives the key's own ids.
        let s = Shared::new(1 << 20);
        std::thread::scope(|scope| {
            for t in 0..4 {
                let s = &s;
                scope.spawn(move || {
                    for round in 0..3 {
                        for k in (t * 700)..(t * 700 + 2000) {
                            s.insert(key(k), &ids(k));
                            let other = (k * 7 + round) % 4000;
                            if let Some(found) = get(s, key(other)) {
                                assert_eq!(found, ids(other), "chunk {other}");
                            }
                        }
                    }
                });
            }
        });
        for k in 0..4100 {
            assert_eq!(get(&s, key(k)), Some(ids(k)), "chunk {k}");
        }
    }
}
