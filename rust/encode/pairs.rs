//! Whole pairs: which pairs of ASCII bytes the encoder may start as one part
//! instead of two, with the same result. `chars.rs` does the same for
//! multi-byte characters; read it first.
//!
//! Why: on FLORES-200 with o200k, a third of the merging time went to chunks
//! of plain ASCII, words of the many languages written in Latin letters
//! that o200k has no single token for. BPE starts them from single bytes,
//! and its first merges are pairs such as "en", "an", "th" that nothing
//! around them could take first. Starting such pairs whole skips those
//! merges and the look-ups of the pairs they replace (the look-up of "xab"
//! when "ab" and "x" merge, say, where "x" and "ab" start whole).
//!
//! The rule. Let "ab" be a token of rank r (so BPE on "ab" alone makes it,
//! with one merge of rank r), with the byte x before it in the chunk and y
//! after it, where there are such bytes. It may start whole if every token
//! of these three kinds ranks above r:
//!   1. tokens that end with "xa" (they hold `a` and cross the left edge);
//!   2. tokens that start with "by" (they hold `b` and cross the right edge);
//!   3. tokens that end with "xab" or start with "aby" (they hold the pair
//!      and more on one side).
//!
//! Why it is exact (the argument of `chars.rs`, with `highest` = r). Until
//! "ab" is made, its merge is waiting, and BPE always makes the
//! lowest-ranked merge waiting in the chunk, so it makes no merge above r
//! before "ab". A merge that joined `a` or `b` to bytes outside the pair
//! would make a token of kind 1 or 2: above r, so none is made first, and
//! after "ab" is made its bytes never part. Starting from "ab" whole, the
//! first merge that joins it to a neighbour makes a token of kind 3: above
//! r, so it waits, as it would have, until the merges below r are done
//! (tokens with more on both sides come only after one of kind 3). So the
//! merges happen in the same order either way, less the pair's own.
//!
//! Neighbours are told apart by their exact byte when it is ASCII. DEL and
//! all bytes from 0x80 are one class (bit 127), standing for all of them:
//! the rule then errs only on the side of "not safe". Pairs that overlap
//! cannot both be safe (each would need to rank below the other), so
//! taking them left to right is well defined.
//!
//! On FLORES-200 with o200k the encoder makes 28% fewer merges (5.31M ->
//! 3.83M), and on English (Gutenberg) 48% fewer. `examples/profile.rs`
//! encode, FLORES-200, o200k, alternated with the build before: +4-8%
//! (medians of 9 runs, four rounds); English +1-7%; code (code_mix) within
//! noise. The table is 512 KB; a text touches the few lines of its letters.
//!
//! Tried and not kept: a copy of the pair's rank in this table (its own
//! cache line per test; 2-3% slower than reading the vocabulary's pair
//! table, which the scan reads anyway), and a 96 KB table of pairs of
//! letters only, with one class for every byte that is not a letter
//! (fewer pairs start whole; no faster than no pairs at all).

use crate::vocab::{Rank, Vocab, NONE};

/// The index of the pair "ab" (both ASCII) in the tables below.
#[inline(always)]
fn at(a: u8, b: u8) -> usize {
    (a as usize) << 7 | b as usize
}

/// A neighbour byte's bit: its value if ASCII; DEL and every byte from 0x80
/// share bit 127.
#[inline(always)]
fn bit(x: u8) -> u32 {
    x.min(127) as u32
}

/// Which ASCII pairs may start whole, and beside which bytes.
pub struct Pairs {
    /// Per pair: `(before, after)`, where bit `bit(x)` of `before` says the
    /// pair may start whole after the byte x, and bit `bit(y)` of `after`
    /// that it may before the byte y. (At the start or the end of a chunk
    /// there is no byte, and nothing to test on that side.)
    ok: Box<[(u128, u128)]>,
}

impl Pairs {
    /// The tables for a vocabulary: `vocab` holds the tokens, and `tokens`
    /// lists them (token `i` has rank `i`; `None` for an id with no token).
    /// One pass over the tokens and one over the 16k pairs (~3 ms for o200k).
    pub fn new(vocab: &Vocab, tokens: &[Option<&[u8]>]) -> Pairs {
        let lower = |low: &mut Rank, r: Rank| *low = (*low).min(r);
        // One pass over the tokens (their bytes lie scattered in memory).
        // The lowest rank of a token that ends with the bytes x, a (kind 1):
        // ends[at(bit(x), a)]; of one that starts with b, y (kind 2):
        // starts[at(b, bit(y))]. And
        // kind 3: `(before, after)` bits that a token ending with x, a, b
        // (starting with a, b, y) and ranking below "ab" rules out.
        let mut ends = vec![NONE; 1 << 14];
        let mut starts = vec![NONE; 1 << 14];
        let mut ruled_out = vec![(0u128, 0u128); 1 << 14];
        for (r, t) in tokens.iter().enumerate() {
            let (Some(t), r) = (t.filter(|t| t.len() >= 2), r as Rank) else { continue };
            let n = t.len();
            if t[n - 1] < 0x80 {
                lower(&mut ends[at(bit(t[n - 2]) as u8, t[n - 1])], r);
            }
            if t[0] < 0x80 {
                lower(&mut starts[at(t[0], bit(t[1]) as u8)], r);
            }
            if n >= 3 && t[n - 2..].is_ascii() && r < vocab.get(&t[n - 2..]) {
                ruled_out[at(t[n - 2], t[n - 1])].0 |= 1 << bit(t[n - 3]);
            }
            if n >= 3 && t[..2].is_ascii() && r < vocab.get(&t[..2]) {
                ruled_out[at(t[0], t[1])].1 |= 1 << bit(t[2]);
            }
        }
        let mut ok = vec![(0u128, 0u128); 1 << 14];
        for a in 0..0x80u8 {
            for b in 0..0x80u8 {
                let r = vocab.pair_rank(a, b);
                if r == NONE {
                    continue;
                }
                let (mut before, mut after) = (0u128, 0u128);
                for x in 0..0x80u8 {
                    before |= ((ends[at(x, a)] > r) as u128) << x;
                    after |= ((starts[at(b, x)] > r) as u128) << x;
                }
                let (no_before, no_after) = ruled_out[at(a, b)];
                ok[at(a, b)] = (before & !no_before, after & !no_after);
            }
        }
        Pairs { ok: ok.into_boxed_slice() }
    }

    /// If `chunk[i..i + 2]` is an ASCII pair that may start as one part
    /// there: its rank and length (2). The rank is read from `vocab`'s
    /// table of pairs, which the scan reads anyway (so it is in cache):
    /// a copy here made encoding FLORES-200 2-3% slower.
    #[inline(always)]
    pub fn whole(&self, vocab: &Vocab, chunk: &[u8], i: usize) -> Option<(Rank, usize)> {
        let (&a, &b) = (chunk.get(i)?, chunk.get(i + 1)?);
        if (a | b) >= 0x80 {
            return None;
        }
        let rank = vocab.pair_rank(a, b);
        if rank == NONE {
            return None;
        }
        let (before, after) = self.ok[at(a, b)];
        let left = i == 0 || before >> bit(chunk[i - 1]) & 1 != 0;
        let right = i + 2 == chunk.len() || after >> bit(chunk[i + 2]) & 1 != 0;
        (left && right).then_some((rank, 2))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::bytes_then;

    /// The tables for the 256 bytes and then `extra`, ranked 256, 257, ...
    fn pairs_for(extra: &[&[u8]]) -> (Pairs, Vocab) {
        let tokens = bytes_then(extra);
        let listed: Vec<Option<&[u8]>> = tokens.iter().copied().map(Some).collect();
        let vocab = Vocab::of(&tokens);
        (Pairs::new(&vocab, &listed), vocab)
    }

    #[test]
    fn a_pair_starts_whole_unless_a_lower_token_crosses_its_edge() {
        // "xa" 256, "ab" 257, "by" 258, "zab" 259 (below nothing: ab is 257).
        let (pairs, vocab) = pairs_for(&[b"xa", b"ab", b"by", b"zab"]);
        assert_eq!(pairs.whole(&vocab, b"ab", 0), Some((257, 2)), "no neighbours");
        assert_eq!(pairs.whole(&vocab, b"qabq", 1), Some((257, 2)));
        // Kind 1: "xa" (256) ranks below "ab" (257).
        assert_eq!(pairs.whole(&vocab, b"xab", 1), None);
        // Kind 2: "by" (258) ranks above it: no obstacle.
        assert_eq!(pairs.whole(&vocab, b"aby", 0), Some((257, 2)));
        // Kind 3 above it: "zab" (259) is made after "ab" either way.
        assert_eq!(pairs.whole(&vocab, b"zab", 1), Some((257, 2)));
        // Not a token, or not ASCII, or cut off.
        assert_eq!(pairs.whole(&vocab, b"ba", 0), None);
        assert_eq!(pairs.whole(&vocab, "aé".as_bytes(), 0), None);
        assert_eq!(pairs.whole(&vocab, b"a", 0), None);
    }

    #[test]
    fn tokens_that_hold_the_pair_and_more_count_when_they_rank_below_it() {
        // "zab" 256, "wz" 257, "ab" 258. From the bytes of "wzab", BPE makes
        // "wz" (257), then "ab" (258): [wz, ab]. From "ab" whole it would
        // make "zab" (256) first: [w, zab]. So "ab" after "z" starts as bytes.
        let (pairs, vocab) = pairs_for(&[b"zab", b"wz", b"ab", b"abq"]);
        assert_eq!(pairs.whole(&vocab, b"wzab", 2), None);
        // "abq" (259) ranks above "ab": no obstacle.
        assert_eq!(pairs.whole(&vocab, b"abq", 0), Some((258, 2)));
        // A byte from 0x80 is one class with DEL: a token ending "\x7fa" rules
        // out every such byte before "a...".
        let (pairs, vocab) = pairs_for(&[b"\x7fa", b"ab"]);
        assert_eq!(pairs.whole(&vocab, b"\x7fab", 1), None);
        assert_eq!(pairs.whole(&vocab, b"\xc3ab", 1), None);
        assert_eq!(pairs.whole(&vocab, b"cab", 1), Some((257, 2)));
    }
}
