//! bpe: byte-level BPE tokenization — training and tiktoken-exact encoding.
//!
//! The modules, in a strict one-way order: each uses only modules above it
//! (no import circles, no upward arrows). Read top to bottom:
//! - [`limits`]: limits on input, and the errors past them;
//! - [`pages`]: mapping a fresh buffer's pages in one call;
//! - [`vocab`]: `Rank`, `NONE`, `MAX_ID`, the `Vocab` (token bytes -> rank) and `pack`/`pack_small`;
//! - [`split`]: splitting text into chunks: the patterns, their lexers, the `Splitter` and safe cuts;
//! - [`threads`]: thread pools and shared state owned per process, safe across `fork`;
//! - [`input`]: reading byte ranges of text files in blocks that end at safe cut points;
//! - [`encode`]: turning text into ids with a vocabulary, and back (the merges, whole characters and pairs);
//! - [`decode`]: ids as text, and decoding a stream of ids (text or binary) to bytes, piece by piece;
//! - [`train`]: counting chunks and learning merges (one file per idea, see `train/mod.rs`);
//! - [`run`]: long inputs in pieces, batches on several threads, files in bulk on all cores;
//! - [`progress`]: what progress bars say (rates, ETA), as plain functions;
//! - `py` (feature `python`): the Python bindings only, thin (see `py/mod.rs`);
//! - `fuzzing` (feature `fuzzing`, and tests): the fuzz targets' logic.
//!
//! Why the code is laid out as it is, with measurements: docs/dev/performance.md.

// `n % k == 0` is kept over `n.is_multiple_of(k)`, which needs Rust 1.87.
#![allow(clippy::manual_is_multiple_of)]

pub mod limits;
pub mod pages;
pub mod vocab;
pub mod split;
pub mod threads;
pub mod input;
pub mod encode;
pub mod decode;
pub mod train;
pub mod run;
pub mod progress;

#[cfg(feature = "python")]
mod py;

#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub mod fuzzing;

/// mimalloc, not the system allocator, for everything Rust allocates here
/// (Python's objects keep Python's allocator). Training makes and frees
/// millions of small blocks of many sizes (per-pair word lists, maps of
/// deltas); on 200 languages (FLORES) glibc's malloc then held ~95 MB of
/// freed but unreturned memory at the peak, and its merge loop ran ~25%
/// slower than with mimalloc. Not under Miri (which cannot run its C code),
/// the fuzzers or ThreadSanitizer (`--cfg bpe_sanitize`), whose sanitizers
/// watch the system allocator: mimalloc's reuse of a block freed by another
/// thread is invisible to them and looks like a data race.
///
/// Built with the `no_thp` feature: by default mimalloc asks Linux for
/// transparent huge pages (2 MB) for its memory, and a huge page stays
/// resident whole while any of it is in use, so memory freed in small
/// pieces was not given back. Training on FLORES-200 peaked at 164 MB with
/// them and 146 MB without (`examples/profile.rs`); training and encoding
/// speed did not change measurably (A/B in one process, within this
/// machine's noise). Only mimalloc's own request is dropped: the system's
/// THP setting and Python's memory are left alone.
#[cfg(not(any(miri, feature = "fuzzing", bpe_sanitize)))]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// While a value of this type lives, mimalloc returns freed memory to the
/// system at once instead of after its default delay: training frees large
/// structures phase by phase (chunk maps, then dead word lists), and with the
/// delay those stayed in the process's peak memory (FLORES: 288 MB instead of
/// 215 MB) for no measurable speed.
///
/// Only while training: for encoding, giving memory back at once made every
/// call fault its buffers in afresh (each call allocates and frees its id
/// vectors and memo), which cost 2% of encoding one 10 MB text
/// and ~8% of `encode_batch` on 2 threads (A/B in one process). Trainings on
/// several threads share the setting: the first to start sets it, the last
/// to end restores mimalloc's own.
pub struct ReturnFreedMemory(());

#[cfg(not(any(miri, feature = "fuzzing", bpe_sanitize)))]
mod purge {
    use std::os::raw::{c_int, c_long};
    use std::sync::atomic::{AtomicI64, Ordering::Relaxed};
    use std::sync::Mutex;

    use crate::threads::ForkLocal;

    // `mi_option_purge_delay` is 15 in mimalloc v2's and v3's `mi_option_t`
    // (the -sys crate does not name it); Cargo.lock pins the version.
    const MI_OPTION_PURGE_DELAY: c_int = 15;
    extern "C" {
        fn mi_option_get(option: c_int) -> c_long;
        fn mi_option_set(option: c_int, value: c_long);
    }

    /// Trainings running, per process: a child forked while a training
    /// held the lock makes its own (`threads.rs`).
    static ACTIVE: ForkLocal<Mutex<usize>> = ForkLocal::new();
    /// mimalloc's delay as it was before the first training; kept across
    /// forks, so that a child forked while a training ran (the delay 0)
    /// still restores the real one.
    static DELAY: AtomicI64 = AtomicI64::new(i64::MIN);

    fn active() -> std::sync::MutexGuard<'static, usize> {
        ACTIVE.get_or(|_| Mutex::new(0)).lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn enter() {
        let mut a = active();
        if *a == 0 {
            if DELAY.load(Relaxed) == i64::MIN {
                // SAFETY: reads a plain integer option; mimalloc allows it at
                // any time, from any thread.
                DELAY.store(unsafe { mi_option_get(MI_OPTION_PURGE_DELAY) } as i64, Relaxed);
            }
            // SAFETY: sets a plain integer option, as above.
            unsafe { mi_option_set(MI_OPTION_PURGE_DELAY, 0) };
        }
        *a += 1;
    }

    pub fn leave() {
        let mut a = active();
        *a = a.saturating_sub(1);
        if *a == 0 {
            // SAFETY: as in `enter`.
            unsafe { mi_option_set(MI_OPTION_PURGE_DELAY, DELAY.load(Relaxed) as c_long) };
        }
    }
}

#[cfg(any(miri, feature = "fuzzing", bpe_sanitize))]
mod purge {
    pub fn enter() {}
    pub fn leave() {}
}

impl ReturnFreedMemory {
    pub fn new() -> Self {
        purge::enter();
        ReturnFreedMemory(())
    }
}

impl Default for ReturnFreedMemory {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for ReturnFreedMemory {
    fn drop(&mut self) {
        purge::leave();
    }
}
