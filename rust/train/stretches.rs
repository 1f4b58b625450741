//! The words a block at a time, each block cut into stretches scanned on all
//! threads into state of their own, then handed over on the calling thread:
//! the shape of every pass that sorts the words' pairs or pieces into parts
//! (the first pairs in `merging.rs`, the sketch and the cut in `cut.rs`).
//!
//! Why a fixed number of stretches, not one per thread: each part reads the
//! stretches in order, so it sees its items in word order, and what it
//! builds is the same on any number of threads.

use rayon::prelude::*;

use super::words::{Symbol, Words};

/// Stretches a block of words is cut into.
pub(super) const STRETCHES: usize = 16;

/// Visits `words` in blocks of about `block` (each word weighs `weight` of
/// its length): `scan(i, state)` for each word `i` of a block, a stretch's
/// words in order into its own `states[k]` (of [`STRETCHES`]), the
/// stretches on all threads; then `each(states)` on the calling thread.
/// `between` runs before each block; an error from it (Ctrl-C) stops the
/// visit and is returned.
pub(super) fn in_stretches<S: Symbol, T: Send>(
    words: &Words<S>,
    block: usize,
    weight: impl Fn(usize) -> usize,
    states: &mut [T],
    between: &mut impl FnMut() -> Result<(), String>,
    scan: impl Fn(usize, &mut T) + Sync,
    mut each: impl FnMut(&mut [T]),
) -> Result<(), String> {
    debug_assert_eq!(states.len(), STRETCHES);
    let mut first = 0;
    while first < words.count() {
        between()?;
        let (mut last, mut held) = (first, 0);
        while last < words.count() && held < block {
            held += weight(words.meta[last].len as usize);
            last += 1;
        }
        let per = (last - first).div_ceil(STRETCHES);
        crate::threads::install(|| {
            states.par_iter_mut().enumerate().for_each(|(r, state)| {
                let from = (first + r * per).min(last);
                for i in from..(from + per).min(last) {
                    scan(i, state);
                }
            })
        });
        each(states);
        first = last;
    }
    Ok(())
}
