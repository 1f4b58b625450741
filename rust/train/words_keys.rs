//! The words of counts by ids (`ids.rs`): each distinct key read back into
//! its ids, on all threads where the counts are in memory.

use super::super::count::{add_bound, Source};
use super::super::{ids, long};
use super::{Symbol, Word, Words};

impl<S: Symbol> Words<S> {
    /// The words of counts by ids (`ids.rs`), each its key read back (see
    /// [`Words::of_keys_in`]). `between` runs every 2^16 words, or every
    /// group of blocks (Ctrl-C).
    pub(in crate::train) fn of_keys(
        counts: impl Source,
        between: impl FnMut() -> Result<(), String>,
    ) -> Result<Words<S>, String> {
        Words::of_keys_in(counts, KEY_GROUP, between)
    }

    /// [`Words::of_keys`], the long keys' blocks read `group` at a time.
    ///
    /// Counts in memory (`Source::in_memory`) are read on all threads: the
    /// keys of up to 15 bytes first, on this thread, then the long keys'
    /// blocks in groups, each block's words and symbols counted first so
    /// that each thread writes its blocks' words straight into their place
    /// (the words of 1 GB took 0.9 s on one thread; most of the time is
    /// reading the keys and faulting in 620 MB of symbols). Spilled runs,
    /// merged as they are read, are read on this thread. The words come in
    /// the same order either way: the order the counts drain in.
    pub(in crate::train) fn of_keys_in(
        counts: impl Source,
        group: usize,
        mut between: impl FnMut() -> Result<(), String>,
    ) -> Result<Words<S>, String> {
        let counts = match counts.in_memory() {
            Ok(counts) => {
                let (short, mut blocks) = counts.split_long();
                // (Sized from the blocks' words and symbols, counted on all
                // threads, not from `Source::bound`: one pass over every
                // record on this thread.)
                let sizes = key_block_sizes(&blocks);
                let (mut n, mut total) = short.bound();
                for &(words, symbols) in &sizes {
                    (n, total) = (n + words, total + symbols);
                }
                let mut w = Words::sized((n, total))?;
                w.add_keys(short, &mut between)?;
                let group = group.max(1);
                for from in (0..blocks.len()).step_by(group) {
                    between()?;
                    let to = (from + group).min(blocks.len());
                    w.add_key_blocks(&blocks[from..to], &sizes[from..to]);
                    // Each group's keys freed once read.
                    blocks[from..to].iter_mut().for_each(|b| *b = Vec::new());
                }
                w.live = w.symbols.len();
                return Ok(w);
            }
            Err(counts) => counts,
        };
        let mut w = Words::sized(counts.bound())?;
        w.add_keys(counts, &mut between)?;
        w.live = w.symbols.len();
        Ok(w)
    }

    /// Adds the words of `counts`' keys, on this thread: reading a key costs
    /// less than handing it to a pool.
    fn add_keys(
        &mut self,
        counts: impl Source,
        between: &mut impl FnMut() -> Result<(), String>,
    ) -> Result<(), String> {
        let (mut ids, mut n) = (Vec::new(), 0u32);
        counts.drain_into(&mut |key, freq| {
            if key.len() >= 2 {
                ids.clear();
                ids::read_key(key, &mut ids);
                let first = self.symbols.len();
                self.symbols.extend(ids.iter().map(|&i| S::from_id(i)));
                self.push(first, freq);
                n = n.wrapping_add(1);
                if n % (1 << 16) == 0 {
                    between()?;
                }
            }
            Ok(())
        })
    }

    /// Adds the words of blocks of long keys (`long::records`), in order, on
    /// all threads (see [`Words::of_keys_in`]).
    fn add_key_blocks(&mut self, blocks: &[Vec<u8>], sizes: &[(usize, usize)]) {
        use rayon::prelude::*;
        use std::mem::take;
        let (words, symbols) = sizes.iter().fold((0, 0), |(a, b), &(c, d)| (a + c, b + d));
        let (w0, s0) = (self.meta.len(), self.symbols.len());
        // `sized` made room for every block's words and symbols.
        let (mut meta, mut spare) =
            (&mut self.meta.spare_capacity_mut()[..words], &mut self.symbols.spare_capacity_mut()[..symbols]);
        let mut jobs = Vec::with_capacity(blocks.len());
        let mut at = s0;
        for (block, &(n, m)) in blocks.iter().zip(sizes) {
            let (mine, rest) = take(&mut meta).split_at_mut(n);
            meta = rest;
            let (mine_symbols, rest) = take(&mut spare).split_at_mut(m);
            spare = rest;
            jobs.push((block, mine, mine_symbols, at));
            at += m;
        }
        crate::threads::install(|| {
            jobs.into_par_iter().for_each(|(block, meta, symbols, at)| fill_from_keys(block, meta, symbols, at))
        });
        // SAFETY: `fill_from_keys` wrote every record and symbol of each
        // block's share (it asserts so), and the shares tile the first
        // `words` and `symbols` places of the spare room.
        unsafe {
            self.meta.set_len(w0 + words);
            self.symbols.set_len(s0 + symbols);
        }
    }
}

/// Long keys' blocks read at a time by [`Words::of_keys`] (1 MB each).
const KEY_GROUP: usize = 64;

/// The words and symbols of each block of long keys (`long::records`), as
/// `fill_from_keys` writes them, counted on all threads.
fn key_block_sizes(blocks: &[Vec<u8>]) -> Vec<(usize, usize)> {
    use rayon::prelude::*;
    crate::threads::install(|| {
        blocks
            .par_iter()
            .map(|block| {
                let mut size = (0, 0);
                // Each key counted by its ids (an id's last byte has its
                // top bit clear), as a chunk of that many symbols.
                long::records(block, |key, freq| add_bound(&mut size, key.iter().filter(|&&b| b < 0x80).count(), freq));
                size
            })
            .collect()
    })
}

/// Writes the words of `block`'s keys (the same as `Words::push` of each
/// key read back) into `meta` and `symbols`, which it fills exactly; `at`:
/// where `symbols` starts in the whole buffer.
fn fill_from_keys<S: Symbol>(
    block: &[u8],
    meta: &mut [std::mem::MaybeUninit<Word>],
    symbols: &mut [std::mem::MaybeUninit<S>],
    at: usize,
) {
    let (mut wi, mut si, mut ids) = (0, 0, Vec::new());
    long::records(block, |key, mut freq| {
        ids.clear();
        ids::read_key(key, &mut ids);
        let len = ids.len();
        if len < 2 {
            return;
        }
        // A chunk counted more than a u32 holds: several words (see `Word`).
        while freq > 0 {
            let part = freq.min(u64::from(u32::MAX));
            freq -= part;
            for (slot, &id) in symbols[si..si + len].iter_mut().zip(&ids) {
                slot.write(S::from_id(id));
            }
            meta[wi].write(Word { freq: part as u32, start: (at + si) as u32, len: len as u32 });
            (wi, si) = (wi + 1, si + len);
        }
    });
    assert_eq!((wi, si), (meta.len(), symbols.len()), "a block's words as counted");
}
