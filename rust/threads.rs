//! The threads and shared state of this process, safe across `fork(2)`.
//!
//! A forked child has one thread: the one that called `fork`. Every other
//! thread of the parent (a rayon pool's workers, a thread inside
//! `encode_batch` with the GIL released) is gone, but the memory it was
//! using is copied as it was: a pool whose workers do not exist, a lock
//! held by a thread that will never release it. A child that sends a job
//! to that pool or takes that lock waits forever (PyTorch's `DataLoader`
//! workers, `multiprocessing`'s fork start method and `datasets.map` all
//! fork).
//!
//! So every piece of shared state that has threads or locks is *owned by
//! the process that made it*: it lives in a [`ForkLocal`], which records
//! the fork generation it was made in. A `fork` handler
//! (`pthread_atfork`) counts the generations in the child; a `ForkLocal`
//! asked for in a later generation makes its value afresh and leaks the
//! parent's copy, untouched (its locks may be held, its threads are gone;
//! its pages are the parent's copy-on-write pages, so leaking costs no
//! memory). The parallel code never uses rayon's global pool, which
//! cannot be made again in a child: it runs in [`pool`]s, made per process.
//!
//! The cost, on every call: two relaxed atomic loads.

use std::ptr::null_mut;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Once};

/// How many forks separate this process from the one that loaded the
/// library: 0 in that process, incremented in each child.
static GENERATION: AtomicU64 = AtomicU64::new(0);
static REGISTERED: Once = Once::new();

/// The current fork generation.
#[inline]
pub fn generation() -> u64 {
    GENERATION.load(Ordering::Relaxed)
}

/// Runs in the parent just before `fork`, on the thread that forks: makes
/// whatever is made once per process (`OnceLock`s) now, so that no other
/// thread can be half-way through making it when the child is copied (the
/// child would wait for that thread forever).
extern "C" fn before_fork() {
    crate::split::lexer::warm();
}

/// Runs in the child just after `fork` (one thread; async-signal-safe: an
/// atomic add).
extern "C" fn after_fork_in_child() {
    GENERATION.fetch_add(1, Ordering::Relaxed);
}

/// Registers the fork handlers (once; later calls return at once). Done
/// before the first [`ForkLocal`] value is made, so that any value made in
/// a parent is seen as stale in its children.
pub fn register_fork_handlers() {
    REGISTERED.call_once(|| {
        // SAFETY: both handlers are `extern "C"` functions that live as long
        // as the process (this library is never unloaded by CPython).
        let rc = unsafe { libc::pthread_atfork(Some(before_fork), None, Some(after_fork_in_child)) };
        // Fails only without memory for the handler list: then a child could
        // hang, which must not pass silently.
        assert_eq!(rc, 0, "pthread_atfork failed ({rc})");
    });
}

/// A value owned by the process that made it: in a forked child it is made
/// afresh the first time it is asked for, and the parent's copy is leaked
/// (see the module's doc). The maker is shown the parent's copy, to take
/// over what can be taken safely (a cache behind a lock that `try_lock`
/// finds free: no thread of the parent held it at the fork).
pub struct ForkLocal<T> {
    slot: AtomicPtr<Slot<T>>,
}

struct Slot<T> {
    generation: u64,
    value: T,
}

// SAFETY: a `ForkLocal<T>` hands out `&T` to any thread (needs `T: Sync`)
// and drops its `T` on whichever thread drops it (needs `T: Send`).
unsafe impl<T: Send + Sync> Sync for ForkLocal<T> {}
// SAFETY: as above: sent to another thread, it drops its `T` there.
unsafe impl<T: Send> Send for ForkLocal<T> {}

impl<T> ForkLocal<T> {
    pub const fn new() -> Self {
        ForkLocal { slot: AtomicPtr::new(null_mut()) }
    }

    /// This process's value, made with `make` if this process has none yet
    /// (given the parent's, if any).
    #[inline]
    pub fn get_or(&self, make: impl FnOnce(Option<&T>) -> T) -> &T {
        let now = generation();
        let p = self.slot.load(Ordering::Acquire);
        // SAFETY: a non-null slot was published by `Box::into_raw` below and
        // is freed only by `drop` (which has `&mut self`): never while a
        // `&self` borrow lives. A stale one is never freed (leaked).
        if let Some(slot) = unsafe { p.as_ref() } {
            if slot.generation == now {
                return &slot.value;
            }
        }
        self.make(p, now, make)
    }

    #[cold]
    fn make(&self, mut seen: *mut Slot<T>, now: u64, make: impl FnOnce(Option<&T>) -> T) -> &T {
        register_fork_handlers();
        // SAFETY: as in `get_or`: a stale slot is never freed.
        let parents = unsafe { seen.as_ref() }.map(|slot| &slot.value);
        let fresh = Box::into_raw(Box::new(Slot { generation: now, value: make(parents) }));
        loop {
            match self.slot.compare_exchange(seen, fresh, Ordering::AcqRel, Ordering::Acquire) {
                // `seen` (none, or the parent's) is replaced; the parent's is
                // leaked on purpose.
                // SAFETY: `fresh` is ours, just published, and lives as `p` above.
                Ok(_) => return unsafe { &(*fresh).value },
                Err(other) => {
                    // SAFETY: as in `get_or`.
                    let slot = unsafe { &*other };
                    if slot.generation == now {
                        // Another thread of this process made one first: ours
                        // was never published.
                        // SAFETY: `fresh` came from `Box::into_raw` and no one else saw it.
                        drop(unsafe { Box::from_raw(fresh) });
                        return &slot.value;
                    }
                    seen = other;
                }
            }
        }
    }
}

impl<T> Default for ForkLocal<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Drop for ForkLocal<T> {
    fn drop(&mut self) {
        let p = *self.slot.get_mut();
        if p.is_null() {
            return;
        }
        // SAFETY: `&mut self`: no borrow of the slot lives; it came from `Box::into_raw`.
        let slot = unsafe { Box::from_raw(p) };
        if slot.generation != generation() {
            // The parent's: its locks may be held and its threads are gone, so
            // dropping it could wait forever (a pool's drop wakes its workers).
            std::mem::forget(slot);
        }
    }
}

/// The pools of this process, one per size, made on first use and kept:
/// making one spawns its threads, which costs more than encoding a small
/// batch.
static POOLS: ForkLocal<Pools> = ForkLocal::new();

/// The pools by size.
type Pools = Mutex<Vec<(usize, Arc<rayon::ThreadPool>)>>;

/// A rayon pool of `n` threads (0: rayon's default, `RAYON_NUM_THREADS` or
/// one per CPU this process may run on), owned by this process.
pub fn pool(n: usize) -> Result<Arc<rayon::ThreadPool>, String> {
    let mut pools = POOLS.get_or(|_| Mutex::default()).lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, p)) = pools.iter().find(|(k, _)| *k == n) {
        return Ok(p.clone());
    }
    let pool = Arc::new(
        rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .thread_name(|i| format!("bpe-{i}"))
            .build()
            .map_err(|e| format!("cannot start {n} threads: {e}"))?,
    );
    pools.push((n, pool.clone()));
    Ok(pool)
}

/// The default pool (`pool(0)`). Panics only if the system refuses to start
/// its threads.
fn default_pool() -> Arc<rayon::ThreadPool> {
    pool(0).unwrap_or_else(|e| panic!("{e}"))
}

/// Runs `f` where parallel iterators inside it use a pool of this
/// process's: the current one if this thread is a pool's worker already,
/// else the default pool. (Outside any pool, rayon would use its global
/// pool, which a forked child cannot use.)
pub fn install<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    if rayon::current_thread_index().is_some() {
        f()
    } else {
        default_pool().install(f)
    }
}

/// The number of threads `install` would run on.
pub fn current_num_threads() -> usize {
    if rayon::current_thread_index().is_some() {
        rayon::current_num_threads()
    } else {
        default_pool().current_num_threads()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fork_local_is_made_once_per_generation() {
        let made = std::sync::atomic::AtomicUsize::new(0);
        let local: ForkLocal<Vec<u8>> = ForkLocal::new();
        let make = |_: Option<&Vec<u8>>| {
            made.fetch_add(1, Ordering::Relaxed);
            vec![1, 2, 3]
        };
        assert_eq!(local.get_or(make), &[1, 2, 3]);
        assert_eq!(local.get_or(make), &[1, 2, 3]);
        assert_eq!(made.load(Ordering::Relaxed), 1);
        // As in a child: a later generation makes it again.
        GENERATION.fetch_add(1, Ordering::Relaxed);
        assert_eq!(local.get_or(|old| [old.unwrap().clone(), vec![4]].concat()), &[1, 2, 3, 4]);
        assert_eq!(local.get_or(|_| vec![5]), &[1, 2, 3, 4]);
        GENERATION.fetch_sub(1, Ordering::Relaxed);
    }

    #[test]
    fn threads_racing_to_make_it_share_one() {
        let local: ForkLocal<Box<u64>> = ForkLocal::new();
        let local = &local;
        let seen: Vec<usize> = std::thread::scope(|s| {
            let handles: Vec<_> =
                (0..8).map(|i| s.spawn(move || &**local.get_or(|_| Box::new(i)) as *const u64 as usize)).collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(seen.iter().all(|&p| p == seen[0]));
    }

    #[test]
    fn install_uses_the_callers_pool_inside_one() {
        let three = rayon::ThreadPoolBuilder::new().num_threads(3).build().unwrap();
        assert_eq!(three.install(current_num_threads), 3);
        assert_eq!(three.install(|| install(rayon::current_num_threads)), 3);
        assert_eq!(current_num_threads(), default_pool().current_num_threads());
    }

    /// A real fork: the child runs parallel work in a fresh pool, while the
    /// parent's pool (used just before) has no threads in the child. (Not
    /// under ThreadSanitizer, which cannot start threads after a fork.)
    #[test]
    #[cfg_attr(any(miri, bpe_sanitize), ignore)]
    fn a_forked_child_runs_parallel_work() {
        use rayon::prelude::*;
        let sum = |n: u64| install(|| (0..n).into_par_iter().sum::<u64>());
        assert_eq!(sum(1000), 499_500);
        // SAFETY: the child only runs Rust code of this crate and `_exit`s.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            // Stops the child if it hangs; the parent sees the signal.
            // SAFETY: sets this process's timer; touches no memory.
            unsafe { libc::alarm(20) };
            let ok = generation() >= 1 && sum(1000) == 499_500 && pool(2).unwrap().install(|| sum(10)) == 45;
            // SAFETY: ends the child at once, without running the parent's
            // exit handlers or destructors in it.
            unsafe { libc::_exit(if ok { 0 } else { 1 }) };
        }
        let mut status = 0;
        // SAFETY: waits for the child made above.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "child status {status:#x}");
    }
}
