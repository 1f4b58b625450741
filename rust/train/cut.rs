//! Training on top of a base vocabulary (SuperBPE's second stage): the words
//! cut where no merge can reach, and the identical pieces counted as one.
//!
//! Why: stage 2's words are whole sentences encoded by the base (on 1 GB of
//! English, 3.6M words of 165M symbols, nearly the corpus), and every step
//! before and in the merge loop costs in proportion to their symbols. Yet
//! the stage makes a few tens of thousands of merges, each counted hundreds
//! of times or more, and most places between two symbols, say between
//! " quantum" and " mechanics", hold a pair too rare ever to be merged.
//!
//! The rule. Let `T` be a count, and cut every word at each place whose pair
//! of base tokens `(u, v)` occurs fewer than `T` times in all words (its
//! "initial count"). Train on the pieces (those of two symbols or more),
//! identical pieces as one word with their counts summed. If every merge
//! this training makes counts at least `T` occurrences, and none reuses an
//! existing id (a duplicate, see `train/mod.rs`), then the merges are those
//! of training on the whole words.
//!
//! Why it is exact. Until a duplicate, each token has one spelling in base
//! tokens, so each occurrence of a pair `(X, Y)` joins the last base token of
//! `X` to the first of `Y`, a place whose pair `(u, v)` is the same for every
//! occurrence, each a different place: the pair counts at most `(u, v)`'s
//! initial count. If `(u, v)` was cut, every occurrence of `(X, Y)` is at a
//! cut, so the whole words count it fewer than `T` times and the pieces not
//! at all; if not, no occurrence is at a cut, and both count it the same.
//! So where the pieces' winner counts `T` or more, it is the whole words'
//! winner too (ties go by bytes in both), none of its occurrences is at a
//! cut, and merging it changes both the same way. By induction, the merges
//! are the same, step by step.
//!
//! `T` is not known before the training (it is the count of its last merge,
//! or lower), so it is guessed (see [`guess`]); a training whose merges fall
//! below it, or that meets a duplicate, or runs out of pairs, is done again
//! with a lower `T`, and at last on the whole words (`train/mod.rs`).
//!
//! The counts that decide the cuts come from a sketch: one counter per hash
//! of the pair, so that each counter holds the sum of every pair that falls
//! on it: never less than a pair's count. A place is cut only where its
//! counter is below `T`: some rare pairs are not cut (they share a counter
//! with a frequent one), none is cut that should not be.

use rustc_hash::FxHashMap;

use super::count::add_bound;
use super::stretches::{in_stretches, STRETCHES};
use super::words::{Pair, Symbol, Words};

/// Counters in the sketch: at most 2^24, of 16 bits, 32 MB (a few tens of
/// millions of distinct pairs leave most counters to one pair or none;
/// `u32`s, 64 MB, took 1.84 s to fill on 1 GB against 1.67 s), and no more
/// than the words' symbols (rounded up to a power of two): there are no
/// more distinct pairs than that.
const BITS: u32 = 24;

/// The sketch's counters are sorted into parts by their top bits, 64 parts
/// of 512 KB (at most), which the L2 cache holds.
const PART_BITS: u32 = 6;

/// The bits of a weight in the sketch's buckets, beside the at most
/// `BITS - PART_BITS` bits of a counter within its part: a word counted
/// more often adds `WEIGHT` (see [`Sketch::at_least`]).
const WEIGHT_BITS: u32 = 14;
const WEIGHT: u32 = (1 << WEIGHT_BITS) - 1;
const _: () = assert!(BITS - PART_BITS + WEIGHT_BITS <= 32);

/// About how many symbols of words the sketch takes a block at a time: its
/// buckets hold 4 bytes an occurrence, 64 MB, and each block's counting
/// goes once through all the counters, part by part (on 1 GB of English,
/// blocks of 2^22 symbols took 0.57-0.61 s, 2^23 0.50-0.53 s, 2^24
/// 0.46-0.47 s).
const SKETCH_BLOCK: usize = 1 << 24;

/// Counts of the pairs of words, by a hash of the pair (see the module's
/// comment): each counter is at least the count of every pair on it (or
/// `WEIGHT`, if less: see [`Sketch::at_least`]).
pub(super) struct Sketch {
    /// Saturating at `u16::MAX`: a full counter says "that many or more",
    /// which cuts nothing it should not (see [`Sketch::at_least`]).
    counters: Vec<u16>,
    /// log2 of the number of counters.
    bits: u32,
}

impl Sketch {
    /// The sketch of every pair occurrence of `words`, weighted by the
    /// words' counts (each weight at most [`WEIGHT`], each counter at most
    /// `u16::MAX`). `between` runs on the calling thread between blocks of
    /// words: an error from it (Ctrl-C) is returned.
    ///
    /// Two steps a block, each on all threads, as the cut gathers its
    /// pieces: the block is cut into stretches of words, and each stretch's
    /// pair occurrences are sorted by their counter's part (its top 6 bits)
    /// into buckets of their own, a slot and a weight in 32 bits; then each
    /// part adds its buckets into its 64th of the counters, which the L2
    /// cache holds. (Adding each occurrence straight into the 32 MB of
    /// counters was a load and a store at random, a cache miss each: 1.1 s
    /// on 1 GB of English, on two threads that each read every word and
    /// counted half the counters.)
    pub(super) fn of<S: Symbol>(
        words: &Words<S>,
        between: &mut impl FnMut() -> Result<(), String>,
    ) -> Result<Sketch, String> {
        use rayon::prelude::*;
        let bits = words.live.next_power_of_two().trailing_zeros().clamp(10, BITS);
        // The bits of a counter within its part, and its part (the rest).
        let local = bits - PART_BITS;
        let mut counters = vec![0u16; 1 << bits];
        let mut stretches: Vec<Vec<Vec<u32>>> =
            (0..STRETCHES).map(|_| (0..1 << PART_BITS).map(|_| Vec::new()).collect()).collect();
        let scan = |i: usize, buckets: &mut Vec<Vec<u32>>| {
            let weight = words.meta[i].freq.min(WEIGHT);
            for p in words.word(i).windows(2) {
                let at = slot((p[0], p[1]), bits);
                let within = (at & ((1 << local) - 1)) as u32;
                buckets[at >> local].push(within << WEIGHT_BITS | weight);
            }
        };
        in_stretches(
            words,
            SKETCH_BLOCK,
            |len| len,
            &mut stretches,
            between,
            scan,
            |stretches| {
                crate::threads::install(|| {
                    counters.par_chunks_mut(1 << local).enumerate().for_each(|(part, mine)| {
                        for buckets in stretches.iter() {
                            for &e in &buckets[part] {
                                let c = &mut mine[(e >> WEIGHT_BITS) as usize];
                                *c = c.saturating_add((e & WEIGHT) as u16);
                            }
                        }
                    })
                });
                stretches.iter_mut().flatten().for_each(Vec::clear);
            },
        )?;
        Ok(Sketch { counters, bits })
    }

    /// At least the count of `pair` (and at most the sum of the pairs that
    /// share its counter). (The cut asks [`Sketch::at_least`]'s bits.)
    #[cfg(test)]
    pub(super) fn get<S: Symbol>(&self, pair: Pair<S>) -> u32 {
        self.counters[slot(pair, self.bits)].into()
    }

    /// Which counters hold `least` or more, one bit each: what the cut asks
    /// of each place, in 2 MB (a look-up in the counters is a cache miss:
    /// 1.9 s of the cut's time on 1 GB with `u32` counters). A threshold
    /// above [`WEIGHT`] asks for `WEIGHT`: a counter holds at least the
    /// smaller of its pair's count and `WEIGHT` (a weight cut to `WEIGHT`
    /// alone makes it `WEIGHT`), so a place cut, its counter below the
    /// smaller of the threshold and `WEIGHT`, has a pair counted fewer times
    /// than the threshold.
    fn at_least(&self, least: u32) -> AtLeast {
        let least = least.min(WEIGHT) as u16;
        let mut bits = vec![0u64; self.counters.len().div_ceil(64)];
        for (i, &c) in self.counters.iter().enumerate() {
            bits[i / 64] |= u64::from(c >= least) << (i % 64);
        }
        AtLeast { bits, shift: self.bits }
    }
}

/// [`Sketch::at_least`]: a bit per counter.
struct AtLeast {
    bits: Vec<u64>,
    shift: u32,
}

impl AtLeast {
    /// Whether `pair`'s counter holds the threshold or more (so the pair
    /// may: a place with it is not cut).
    #[inline]
    fn get<S: Symbol>(&self, pair: Pair<S>) -> bool {
        let i = slot(pair, self.shift);
        self.bits[i / 64] >> (i % 64) & 1 != 0
    }
}

/// The counter of `pair` among 2^`bits`: a multiplicative hash, its top bits.
#[inline]
fn slot<S: Symbol>(pair: Pair<S>, bits: u32) -> usize {
    let key = (pair.0.id() as u64) << 32 | pair.1.id() as u64;
    (key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - bits)) as usize
}

/// A first `T` for a training of `merges` merges: two fifths of the count
/// of the `merges`-th most frequent pair (its counter, in the sketch).
///
/// Why: the merges draw first from the frequent pairs, so the last of
/// `merges` merges counts less than the `merges`-th pair; how much less
/// depends on the text: 0.51-0.55 of it on English (transition 180k to
/// 200k: the 20,000th pair counted 92 and the last merge 47 on 100 MB),
/// 0.69-0.80 on code and FLORES-200 (docs/dev/superbpe.md, "Memory of stage
/// 2"). Too high a guess costs a second training; too low, fewer cuts, and
/// more pieces to train on: on 1 GB of English, a third (`T` 280) left
/// 34.5M symbols in pieces, two fifths (336) 31.2M, and the cut, the first
/// pairs and the merge loop took 0.5 s less. Half would leave no margin:
/// on 100 MB of English it cuts at 46, and the last merge counts 47.
pub(super) fn guess(sketch: &Sketch, merges: usize) -> u32 {
    let mut counts: Vec<u16> = sketch.counters.iter().copied().filter(|&c| c > 0).collect();
    if merges == 0 || counts.len() < merges {
        return 0;
    }
    let (_, &mut kth, _) = counts.select_nth_unstable_by(merges - 1, |a, b| b.cmp(a));
    u32::from(kth) * 2 / 5
}

/// How many parts the pieces are gathered in, by a hash: each part's maps
/// hold a 64th of the distinct pieces, small enough to stay in the CPU's
/// caches while a bucket of pieces goes through them, and the parts go on
/// all cores (as the first pairs do: `initial_pairs` in `merging.rs`).
const PIECE_BITS: u32 = 6;
const PARTS: usize = 1 << PIECE_BITS;

/// About how many symbols of words are cut before the parts' maps take
/// their pieces (a few tens of MB of buckets).
const BLOCK: usize = 1 << 22;

/// The part of a hash (its top 6 bits; not the bits the maps use).
#[inline]
fn part(h: u64) -> usize {
    (h.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - PIECE_BITS)) as usize
}

/// The pieces of `words` cut at every place whose pair counts fewer than
/// `least` occurrences in `sketch`, those of two symbols or more, each
/// distinct piece one word (counted as often as all its copies); `None` if
/// they are too many (see [`Words::of_pieces`]). The words come in the
/// order of the maps that gather them (the same on every run, on any
/// number of threads). `between` runs on the calling thread between blocks:
/// an error from it (Ctrl-C) is returned.
///
/// Pieces of up to ten symbols (nearly all of them) are keyed by their
/// symbols packed in one `u128` (up to five) or two, so that finding one
/// reads no symbols elsewhere (keyed by a slice of the words, a piece found
/// again was compared with its first copy, a cache miss in the words: a
/// sixth of the cut's time); the others by their symbols in `words`.
pub(super) fn cut<'w, S: Symbol>(
    words: &'w Words<S>,
    sketch: &Sketch,
    least: u32,
    between: &mut impl FnMut() -> Result<(), String>,
) -> Result<Option<Words<S>>, String> {
    use rayon::prelude::*;
    type Parts<K> = Vec<FxHashMap<K, u64>>;
    type Buckets<K> = Vec<Vec<(K, u64)>>;
    fn parts<K>() -> Parts<K> {
        (0..PARTS).map(|_| FxHashMap::default()).collect()
    }
    fn buckets<K>() -> Buckets<K> {
        (0..PARTS).map(|_| Vec::new()).collect()
    }
    let mut short: Parts<u128> = parts();
    let mut medium: Parts<(u128, u128)> = parts();
    let mut long: Parts<&'w [S]> = parts();
    struct Stretch<'w, S> {
        short: Buckets<u128>,
        medium: Buckets<(u128, u128)>,
        long: Buckets<&'w [S]>,
    }
    let mut stretches: Vec<Stretch<S>> =
        (0..STRETCHES).map(|_| Stretch { short: buckets(), medium: buckets(), long: buckets() }).collect();
    let frequent = sketch.at_least(least);
    // Word `i`'s pieces into the buckets of their parts.
    let scan = |i: usize, to: &mut Stretch<'w, S>| {
        let (word, f) = (words.word(i), u64::from(words.meta[i].freq));
        let mut start = 0;
        for k in 1..=word.len() {
            if k < word.len() && frequent.get((word[k - 1], word[k])) {
                continue;
            }
            let piece = &word[start..k];
            start = k;
            if piece.len() < 2 {
                continue;
            }
            if piece.len() <= PACKED {
                let key = pack(piece);
                to.short[part(fold(key))].push((key, f));
            } else if piece.len() <= 2 * PACKED {
                let key = (pack(&piece[..PACKED]), pack(&piece[PACKED..]));
                to.medium[part(fold(key.0) ^ fold(key.1).rotate_left(32))].push((key, f));
            } else {
                let h = piece.iter().fold(0u64, |h, s| (h ^ s.id() as u64).wrapping_mul(0x100_0000_01b3));
                to.long[part(h)].push((piece, f));
            }
        }
    };
    in_stretches(
        words,
        BLOCK,
        |len| len,
        &mut stretches,
        between,
        scan,
        |stretches| {
            // Each part takes its pieces from the stretches in order.
            crate::threads::install(|| {
                short.par_iter_mut().zip(medium.par_iter_mut()).zip(long.par_iter_mut()).enumerate().for_each(
                    |(p, ((short, medium), long))| {
                        for to in stretches.iter() {
                            for &(key, f) in &to.short[p] {
                                *short.entry(key).or_insert(0) += f;
                            }
                            for &(key, f) in &to.medium[p] {
                                *medium.entry(key).or_insert(0) += f;
                            }
                            for &(piece, f) in &to.long[p] {
                                *long.entry(piece).or_insert(0) += f;
                            }
                        }
                    },
                )
            });
            for to in stretches.iter_mut() {
                to.short.iter_mut().for_each(Vec::clear);
                to.medium.iter_mut().for_each(Vec::clear);
                to.long.iter_mut().for_each(Vec::clear);
            }
        },
    )?;
    drop(stretches);
    // The words' size first; then each map is emptied into them, its memory
    // given back before the next one's pieces are copied.
    let mut size = (0, 0);
    short.iter().flatten().for_each(|(&key, &f)| add_bound(&mut size, packed_len(key), f));
    medium.iter().flatten().for_each(|(&(lo, hi), &f)| add_bound(&mut size, packed_len(lo) + packed_len(hi), f));
    long.iter().flatten().for_each(|(piece, &f)| add_bound(&mut size, piece.len(), f));
    Ok(Words::of_pieces(size, |f| {
        let mut s = [S::from_id(0); 2 * PACKED];
        for m in short {
            for (key, n) in m {
                let len = unpack(key, &mut s);
                f(&s[..len], n);
            }
        }
        for m in medium {
            for ((lo, hi), n) in m {
                let len = unpack(lo, &mut s);
                let len = len + unpack(hi, &mut s[PACKED..]);
                f(&s[..len], n);
            }
        }
        for m in long {
            for (piece, n) in m {
                f(piece, n);
            }
        }
    }))
}

/// Symbols in one packed key (24 bits each: ids are below 2^24,
/// `vocab::MAX_ID`; the length in the top byte).
const PACKED: usize = 5;

/// Up to [`PACKED`] symbols as a `u128`: 24 bits a symbol, the length in
/// the top byte.
#[inline]
fn pack<S: Symbol>(piece: &[S]) -> u128 {
    debug_assert!(piece.len() <= PACKED);
    let mut key = (piece.len() as u128) << 120;
    for (k, s) in piece.iter().enumerate() {
        key |= (s.id() as u128) << (24 * k);
    }
    key
}

/// A packed key's two halves folded into one hash input.
#[inline]
fn fold(key: u128) -> u64 {
    key as u64 ^ (key >> 64) as u64
}

/// How many symbols [`pack`] packed in `key`.
#[inline]
fn packed_len(key: u128) -> usize {
    (key >> 120) as usize
}

/// Writes the symbols [`pack`] packed into `out` and returns how many.
fn unpack<S: Symbol>(key: u128, out: &mut [S]) -> usize {
    let n = packed_len(key);
    debug_assert!(n <= PACKED);
    for (k, x) in out.iter_mut().enumerate().take(n) {
        *x = S::from_id((key >> (24 * k)) as u32 & 0xff_ffff);
    }
    n
}

#[cfg(test)]
#[path = "cut_tests.rs"]
mod tests;
