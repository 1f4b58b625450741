//! bpe: byte-level BPE tokenization — training and tiktoken-exact encoding.
//!
//! Read in this order:
//! - [`pretokenize`]: the split patterns and where a text may be cut;
//! - [`train`]: counting chunks and learning merges;
//! - [`encode`]: turning text into ids with a vocabulary, and back.
//!
//! `py.rs` (feature `python`) holds the Python bindings only.

pub mod encode;
pub mod lexer;
pub mod limits;
pub mod pieces;
pub mod pretokenize;
pub mod train;

#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub mod fuzzing;

#[cfg(feature = "python")]
mod py;

/// mimalloc, not the system allocator, for everything Rust allocates here
/// (Python's objects keep Python's allocator). Training makes and frees
/// millions of small blocks of many sizes (per-pair word lists, maps of
/// deltas); on 200 languages (FLORES) glibc's malloc then held ~95 MB of
/// freed but unreturned memory at the peak, and its merge loop ran ~25%
/// slower than with mimalloc. Not under Miri (which cannot run its C code)
/// or the fuzzers (whose sanitizers watch the system allocator).
///
/// Built with the `no_thp` feature: by default mimalloc asks Linux for
/// transparent huge pages (2 MB) for its memory, and a huge page stays
/// resident whole while any of it is in use, so memory freed in small
/// pieces was not given back. Training on FLORES-200 peaked at 164 MB with
/// them and 146 MB without (`examples/profile.rs`); training and encoding
/// speed did not change measurably (A/B in one process, within this
/// machine's noise). Only mimalloc's own request is dropped: the system's
/// THP setting and Python's memory are left alone.
#[cfg(not(any(miri, feature = "fuzzing")))]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Makes mimalloc return freed memory to the system at once instead of after
/// its default delay of a second: training frees large structures phase by
/// phase (chunk maps, then dead word lists), and with the delay those stayed
/// in the process's peak memory (FLORES: 288 MB instead of 215 MB) for no
/// measurable speed. Called when the Python module loads.
pub fn return_freed_memory_at_once() {
    #[cfg(not(any(miri, feature = "fuzzing")))]
    {
        // `mi_option_purge_delay` is 15 in mimalloc v2's and v3's `mi_option_t`
        // (the -sys crate does not name it); Cargo.lock pins the version.
        const MI_OPTION_PURGE_DELAY: std::os::raw::c_int = 15;
        extern "C" {
            fn mi_option_set(option: std::os::raw::c_int, value: std::os::raw::c_long);
        }
        // SAFETY: sets a plain integer option; mimalloc allows it at any time.
        unsafe { mi_option_set(MI_OPTION_PURGE_DELAY, 0) };
    }
}
