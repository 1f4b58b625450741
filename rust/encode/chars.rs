//! Whole characters: which multi-byte characters the encoder may start as one
//! part instead of as their bytes, with the same result.
//!
//! Text in most scripts is 2 or 3 bytes per character, and BPE starts every
//! chunk from single bytes. On FLORES-200 with o200k, 43% of the merges that
//! encoding makes only rebuild one character from its bytes. Skipping them
//! is exact only where BPE is sure to rebuild that character before its
//! bytes merge with anything outside it, and that depends on the vocabulary
//! and on the character's neighbours. o200k has " \xd0" (a space and the
//! first byte of a Cyrillic letter) at rank 300, below most Cyrillic letters,
//! so BPE really does split "д" after a space. The same letter between two
//! other letters is safe.
//!
//! Why the rule below is exact. Take a character c of 2 or 3 bytes that is a
//! token and that BPE, run on c's bytes alone, makes into that one token. Let
//! `highest` be the highest rank of the merges it makes on the way.
//! - Until c is whole, some merge inside c is waiting, of rank <= `highest`.
//!   BPE always makes the lowest-ranked merge waiting anywhere in the chunk.
//!   So it makes no merge of rank > `highest` until c is whole.
//! - A merge that joins part of c to bytes outside c makes a token that holds
//!   a proper prefix of c after other bytes, or a proper suffix of c before
//!   other bytes. If every such token that could match here ranks above
//!   `highest`, none is made before c is whole, and after that none can be.
//! - Starting from c whole, c's neighbours can join it earlier than they
//!   would have. If every token that holds all of c and more ranks above
//!   `highest`, such a join waits, as it would have, until the merges of rank
//!   <= `highest` are done.
//!
//! Then the other merges happen in the same order either way, and the result
//! is the same. "Could match here" is judged from c's neighbours: the
//! token's byte next to c's bytes must equal the text's. To keep the table
//! small, a neighbour is known only by its class: none (the chunk starts or
//! ends there), ASCII, continuation byte, or other byte. A class stands for
//! all its bytes, so the rule only errs on the side of "not safe". Tokens are
//! scanned whatever their UTF-8 structure, so the rule holds for invalid
//! UTF-8 too.
//!
//! Inside a word (a continuation byte before c; a lead byte, or the end of
//! the chunk, after it) the classes refused 712k of the 2.78M characters
//! tested on FLORES-200 with o200k: "a continuation byte" stands for the
//! ends of every script's characters, and some token joins one of them to
//! nearly every lead byte at a low rank. There the exact neighbour bytes
//! are tested too (64 bits per side and character): 445k more characters
//! start whole, and encoding makes 13% fewer merges. This needs no test of
//! tokens that hold c and more on both sides: with c whole, the first merge
//! that takes c makes a token that starts or ends with it.
//!
//! Characters of 3 bytes that are no token, but that BPE on their bytes
//! alone makes into the token of their first two bytes and their last byte
//! (one merge: `highest` is its rank), start as those two parts by the same
//! rule: the argument above never uses c being one token, only that BPE on
//! c alone ends where the start begins, and that every token joining c's
//! bytes to others, or holding all of c and more, ranks above `highest` (c
//! itself is no token, so its two parts never join each other). With cl100k
//! a quarter of the characters of Chinese text are such, and encoding it
//! got 10-15% faster (docs/dev/performance.md, "Characters that start as two
//! tokens"). Characters that BPE makes into their first byte and the token
//! of their last two are left to merge (1% of them).
//!
//! The table is built with the encoder, from its vocabulary (~19 ms for
//! o200k, ~9 ms for cl100k, on a 2-core AMD EPYC). Characters of 4 bytes
//! (emoji, rare CJK) are left out, which costs only speed. On FLORES-200
//! with o200k, encoding got 5-11% faster (`examples/profile`), and 3-5% more
//! with the exact bytes inside words; text without such characters takes
//! the plain path.

use crate::vocab::{Rank, Vocab, NONE};

/// The class of the byte beside a character: 0 is reserved for "no byte"
/// (the chunk, or the token, starts or ends there).
#[inline(always)]
fn class(b: u8) -> usize {
    match b {
        0..=0x7F => 1,
        0x80..=0xBF => 2,
        _ => 3,
    }
}

/// The classes of the bytes before and after the character `chunk[i..i + k]`.
#[inline(always)]
fn neighbours(chunk: &[u8], i: usize, k: usize) -> (usize, usize) {
    let left = if i == 0 { 0 } else { class(chunk[i - 1]) };
    let right = if i + k == chunk.len() { 0 } else { class(chunk[i + k]) };
    (left, right)
}

/// The bit for a character with neighbours of classes `left` and `right`.
#[inline(always)]
fn bit(left: usize, right: usize) -> u16 {
    1 << (4 * left + right)
}

/// The code point and length of the 2- or 3-byte character at `b[i..]`, if
/// one is there whole (lead byte, continuation bytes, not overlong). Code
/// points index the table, so distinct byte strings must get distinct ones.
#[inline(always)]
fn char_at(b: &[u8], i: usize) -> Option<(usize, usize)> {
    let cont = |j: usize| b.get(j).copied().filter(|x| (0x80..0xC0).contains(x)).map(|x| (x & 0x3F) as usize);
    match b[i] {
        lead @ 0xC2..=0xDF => Some(((lead as usize & 0x1F) << 6 | cont(i + 1)?, 2)),
        lead @ 0xE0..=0xEF => {
            let cp = (lead as usize & 0x0F) << 12 | cont(i + 1)? << 6 | cont(i + 2)?;
            (cp >= 0x800).then_some((cp, 3))
        }
        _ => None,
    }
}

/// A character that may start whole somewhere (see `Chars::new`): its code
/// point and bytes, the rank its start part is stored with (`FIRST_TWO` set
/// for a character that starts as its first two bytes' token), the highest
/// rank BPE merges on its bytes alone, and the lowest ranks of tokens that
/// hold it and more.
struct Candidate {
    cp: usize,
    bytes: [u8; 3],
    len: usize,
    rank: Rank,
    highest: Rank,
    holds: [Rank; 16],
}

/// In a table entry's rank: the character starts as two parts, the token of
/// its first two bytes (the rank without this bit) and its last byte.
/// (Ranks are far below 2^31.)
const FIRST_TWO: Rank = 1 << 31;

/// Rows of 64 ranks (one per continuation or lead byte), for some of `n`
/// candidates: a candidate without one reads a row of `NONE`.
struct Rows {
    at: Vec<u32>,
    rows: Vec<[Rank; 64]>,
}

impl Rows {
    fn new(n: usize) -> Rows {
        Rows { at: vec![u32::MAX; n], rows: Vec::new() }
    }

    fn row_mut(&mut self, candidate: usize) -> &mut [Rank; 64] {
        if self.at[candidate] == u32::MAX {
            self.at[candidate] = self.rows.len() as u32;
            self.rows.push([NONE; 64]);
        }
        &mut self.rows[self.at[candidate] as usize]
    }

    fn row(&self, candidate: usize) -> &[Rank; 64] {
        const EMPTY: [Rank; 64] = [NONE; 64];
        self.rows.get(self.at[candidate] as usize).unwrap_or(&EMPTY)
    }
}

/// Proper prefixes of 2- and 3-byte characters: a lead byte (C2..EF), or an
/// E0..EF lead byte and a continuation byte.
const PREFIXES: usize = 256 + (16 << 6);

/// `p`'s index below `PREFIXES`, if `p` is one of those prefixes.
#[inline]
fn prefix_index(p: &[u8]) -> Option<usize> {
    match *p {
        [lead @ 0xC2..=0xEF] => Some(lead as usize),
        [lead @ 0xE0..=0xEF, cont @ 0x80..=0xBF] => Some(256 + ((lead as usize & 0x0F) << 6 | (cont as usize & 0x3F))),
        _ => None,
    }
}

/// Proper suffixes of 2- and 3-byte characters: one or two continuation bytes.
const SUFFIXES: usize = 64 + (64 << 6);

/// `s`'s index below `SUFFIXES` (`s` is one or two continuation bytes).
#[inline]
fn suffix_index(s: &[u8]) -> usize {
    match *s {
        [a] => a as usize & 0x3F,
        [a, b] => 64 + ((a as usize & 0x3F) << 6 | (b as usize & 0x3F)),
        _ => unreachable!("a suffix of a 2- or 3-byte character"),
    }
}

/// Which characters may start whole, and between which neighbours.
pub struct Chars {
    /// Code point -> (its token's rank, one `bit(left, right)` per pair of
    /// neighbour classes where it may start whole, its index in `inside`).
    /// Empty when no character may (a vocabulary of English only, say): the
    /// encoder then skips the test. 64k entries, 512 KB; the characters of
    /// one script are close together, so a text touches few of its cache
    /// lines.
    table: Box<[(Rank, u16, u16)]>,
    /// Inside a word, between two other characters of its script, the
    /// classes above refuse most characters (a continuation byte before
    /// and a lead byte after stand for every script's). There the exact
    /// bytes decide: per character, `(after, before)`, where bit x of
    /// `after` says the continuation byte `0x80 + x` may come before it and
    /// bit y of `before` that the lead byte `0xC0 + y` may come after it.
    /// Index 0 is "no entry" (no bit set).
    inside: Vec<(u64, u64)>,
}

impl Chars {
    /// The table for a vocabulary: `vocab` holds the tokens, and `tokens`
    /// lists them (token `i` has rank `i`; `None` for an id with no token).
    ///
    /// A pass over the tokens for the candidates, then one over the tokens
    /// that are not ASCII into small flat arrays: the prefixes and suffixes
    /// of 2- and 3-byte characters are few enough to index directly.
    pub fn new(vocab: &Vocab, tokens: &[Option<&[u8]>]) -> Chars {
        let all = || tokens.iter().enumerate().filter_map(|(r, t)| Some((t.filter(|t| !t.is_empty())?, r as Rank)));
        let is_cont = |x: &u8| (0x80..0xC0).contains(x);
        // The candidates: characters that are a token which BPE makes from
        // their bytes. `index[code point]` is their place in `cands`, and
        // `holds` gets, per candidate and per class before and after it (0
        // where the token starts or ends with it), the lowest rank of a token
        // that holds it and more.
        let mut index = vec![u32::MAX; 1 << 16];
        let mut cands: Vec<Candidate> = Vec::new();
        for (t, rank) in all() {
            let Some((cp, _)) = char_at(t, 0).filter(|&(_, k)| k == t.len()) else { continue };
            if let Some(highest) = highest_merge(vocab, t, rank) {
                index[cp] = cands.len() as u32;
                let mut bytes = [0; 3];
                bytes[..t.len()].copy_from_slice(t);
                cands.push(Candidate { cp, bytes, len: t.len(), rank, highest, holds: [NONE; 16] });
            }
        }
        // And 3-byte characters that are no token but that BPE makes, alone,
        // into the token of their first two bytes and their last byte: one
        // merge (of the first two, ranked below the last two if those are a
        // token). They start as those two parts where the same rule makes
        // that exact (the proof above holds with c's one merge as `highest`,
        // c not being a token): in Chinese text with cl100k, a quarter of
        // the characters, each a merge saved.
        // (A 2-byte token that is such a prefix: an E0..EF lead byte and a
        // continuation byte.)
        for (t, first) in all().filter(|&(t, _)| t.len() == 2 && prefix_index(t).is_some()) {
            for last in 0x80..0xC0u8 {
                let bytes = [t[0], t[1], last];
                let Some((cp, 3)) = char_at(&bytes, 0) else { continue };
                if index[cp] != u32::MAX || vocab.get(&bytes) != NONE || vocab.get(&bytes[1..]) <= first {
                    continue;
                }
                index[cp] = cands.len() as u32;
                cands.push(Candidate { cp, bytes, len: 3, rank: first | FIRST_TWO, highest: first, holds: [NONE; 16] });
            }
        }
        if cands.is_empty() {
            return Chars { table: Box::new([]), inside: Vec::new() };
        }
        // The lowest rank of a token that holds, after a byte of class c, a
        // proper prefix p of a character: prefix[4 * prefix_index(p) + c]; of
        // one that holds a proper suffix s before a byte of class c:
        // suffix[4 * suffix_index(s) + c].
        let mut prefix = vec![NONE; 4 * PREFIXES];
        let mut suffix = vec![NONE; 4 * SUFFIXES];
        // The same after the continuation byte 0x80 + x, exactly:
        // prefix_after[64 * prefix_index(p) + x]; before the lead byte
        // 0xC0 + y: suffix_before[64 * suffix_index(s) + y].
        let mut prefix_after = vec![NONE; 64 * PREFIXES];
        let mut suffix_before = vec![NONE; 64 * SUFFIXES];
        // Per candidate, the lowest rank of a token that ends with it after
        // the continuation byte 0x80 + x: ends_after.row(candidate)[x]; of
        // one that starts with it before the lead byte 0xC0 + y:
        // starts_before.row(candidate)[y]. (Rows only for the candidates
        // some token holds so: most are in no token.)
        let mut ends_after = Rows::new(cands.len());
        let mut starts_before = Rows::new(cands.len());
        let lower = |low: &mut Rank, r: Rank| *low = (*low).min(r);
        // (ASCII tokens, most of a vocabulary, hold no part of a character.)
        for (t, r) in all().filter(|(t, _)| !t.is_ascii()) {
            let n = t.len();
            // A prefix ends the token (it is 1 or 2 bytes), a suffix starts it.
            for j in n.saturating_sub(2).max(1)..n {
                if let Some(p) = prefix_index(&t[j..]) {
                    lower(&mut prefix[4 * p + class(t[j - 1])], r);
                    if class(t[j - 1]) == 2 {
                        lower(&mut prefix_after[64 * p + (t[j - 1] & 0x3F) as usize], r);
                    }
                }
            }
            for j in 1..n.min(3) {
                if t[..j].iter().all(is_cont) {
                    lower(&mut suffix[4 * suffix_index(&t[..j]) + class(t[j])], r);
                    if t[j] >= 0xC0 {
                        lower(&mut suffix_before[64 * suffix_index(&t[..j]) + (t[j] & 0x3F) as usize], r);
                    }
                }
            }
            for j in (0..n).filter(|&j| t[j] >= 0xC2) {
                if let Some((cp, k)) = char_at(t, j).filter(|&(_, k)| k < n) {
                    let at = index[cp] as usize;
                    if let Some(c) = cands.get_mut(at) {
                        let before = if j == 0 { 0 } else { class(t[j - 1]) };
                        let after = if j + k == n { 0 } else { class(t[j + k]) };
                        lower(&mut c.holds[4 * before + after], r);
                        if before == 2 && after == 0 {
                            lower(&mut ends_after.row_mut(at)[(t[j - 1] & 0x3F) as usize], r);
                        }
                        if before == 0 && after == 3 {
                            lower(&mut starts_before.row_mut(at)[(t[j + k] & 0x3F) as usize], r);
                        }
                    }
                }
            }
        }
        let mut table = vec![(NONE, 0, 0); 1 << 16];
        let mut inside = vec![(0, 0)];
        for (at, c) in cands.iter().enumerate() {
            let bytes = &c.bytes[..c.len];
            // Per class of the byte before (after) c, the lowest rank of a
            // token that holds a proper prefix (suffix) of c after (before) it.
            let (mut after_class, mut before_class) = ([NONE; 4], [NONE; 4]);
            for cut in 1..bytes.len() {
                for class in 1..4 {
                    let p = prefix_index(&bytes[..cut]).map_or(NONE, |p| prefix[4 * p + class]);
                    after_class[class] = after_class[class].min(p);
                    before_class[class] = before_class[class].min(suffix[4 * suffix_index(&bytes[cut..]) + class]);
                }
            }
            let mut bits = 0;
            for (left, &joins_left) in after_class.iter().enumerate() {
                for (right, &joins_right) in before_class.iter().enumerate() {
                    // Tokens that hold c and more and could match here: those
                    // that start (end) with c match whatever is before (after).
                    let mut low = joins_left.min(joins_right);
                    for before in [0, left] {
                        for after in [0, right] {
                            if (before, after) != (0, 0) {
                                low = low.min(c.holds[4 * before + after]);
                            }
                        }
                    }
                    if c.highest < low {
                        bits |= bit(left, right);
                    }
                }
            }
            // Inside a word: which exact neighbours let it start whole. (A
            // token with c and more on both sides needs no test there: with
            // c whole, the first merge that takes c makes a token that
            // starts or ends with it, and those are tested.)
            // (Row by row, 64 at a time: this loop over every candidate is
            // most of the table's making.)
            let (mut low_after, mut low_before) = (*ends_after.row(at), *starts_before.row(at));
            for cut in 1..bytes.len() {
                if let Some(p) = prefix_index(&bytes[..cut]) {
                    let row = &prefix_after[64 * p..64 * p + 64];
                    low_after.iter_mut().zip(row).for_each(|(low, &r)| *low = (*low).min(r));
                }
                let s = suffix_index(&bytes[cut..]);
                let row = &suffix_before[64 * s..64 * s + 64];
                low_before.iter_mut().zip(row).for_each(|(low, &r)| *low = (*low).min(r));
            }
            let bits_of = |low: &[Rank; 64]| (0..64).fold(0u64, |m, x| m | ((c.highest < low[x]) as u64) << x);
            let (after, before) = (bits_of(&low_after), bits_of(&low_before));
            let mut entry = 0;
            if after != 0 && inside.len() <= u16::MAX as usize {
                entry = inside.len() as u16;
                inside.push((after, before));
            }
            table[c.cp] = (c.rank, bits, entry);
        }
        Chars { table: table.into_boxed_slice(), inside }
    }

    /// Whether no character may start whole.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    /// If the character at `chunk[i..]` may start as one part: its rank and
    /// length. (Call only when `!self.is_empty()`.)
    #[inline(always)]
    pub fn whole(&self, chunk: &[u8], i: usize) -> Option<(Rank, usize)> {
        let (cp, k) = char_at(chunk, i)?;
        let (rank, bits, at) = self.table[cp];
        let (left, right) = neighbours(chunk, i, k);
        // (The start part: the whole character, or its first two bytes.)
        let part = (rank & !FIRST_TWO, k - (rank & FIRST_TWO != 0) as usize);
        if bits & bit(left, right) != 0 {
            return Some(part);
        }
        // Inside a word: a continuation byte before, and the end of the
        // chunk or a lead byte after.
        if left != 2 || at == 0 || !matches!(right, 0 | 3) {
            return None;
        }
        let (after, before) = self.inside[at as usize];
        let ok_before = after >> (chunk[i - 1] & 0x3F) & 1 != 0;
        let ok_after = right == 0 || before >> (chunk[i + k] & 0x3F) & 1 != 0;
        (ok_before && ok_after).then_some(part)
    }

    /// Whether the classes of its neighbours alone let the character at
    /// `chunk[i..]` start whole (for tests: the exact bytes inside a word
    /// let more start).
    #[cfg(test)]
    pub fn whole_by_class(&self, chunk: &[u8], i: usize) -> bool {
        let Some((cp, k)) = char_at(chunk, i) else { return false };
        let (left, right) = neighbours(chunk, i, k);
        self.table[cp].1 & bit(left, right) != 0
    }

    /// How many characters may start whole in some context (for tests).
    #[cfg(test)]
    pub fn count(&self) -> usize {
        self.table.iter().filter(|&&(_, bits, _)| bits != 0).count()
    }
}

/// If BPE on `bytes` alone (a token of 2 or 3 bytes, of rank `rank`) makes
/// that one token: the highest rank it merges on the way.
fn highest_merge(vocab: &Vocab, bytes: &[u8], rank: Rank) -> Option<Rank> {
    if vocab.get(bytes) != rank {
        return None;
    }
    match bytes.len() {
        // One merge: the token itself.
        2 => Some(rank),
        // The lower-ranked of the two pairs first (if either is a token),
        // then the whole.
        3 => {
            let first = vocab.get(&bytes[..2]).min(vocab.get(&bytes[1..]));
            (first != NONE).then(|| first.max(rank))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::bytes_then;

    #[test]
    fn char_at_reads_whole_characters_only() {
        assert_eq!(char_at("д".as_bytes(), 0), Some((0x434, 2)));
        assert_eq!(char_at("xक".as_bytes(), 1), Some((0x915, 3)));
        assert_eq!(char_at("a".as_bytes(), 0), None);
        assert_eq!(char_at(&"क".as_bytes()[..2], 0), None, "cut off");
        assert_eq!(char_at(b"\xe0\x82\x80", 0), None, "overlong");
        assert_eq!(char_at(b"\xd0 ", 0), None, "no continuation byte");
        assert_eq!(char_at("😀".as_bytes(), 0), None, "4 bytes: left out");
    }

    /// The table for the 256 bytes and then `extra`, ranked 256, 257, ...
    fn chars_for(extra: &[&[u8]]) -> Chars {
        let tokens = bytes_then(extra);
        let listed: Vec<Option<&[u8]>> = tokens.iter().copied().map(Some).collect();
        Chars::new(&Vocab::of(&tokens), &listed)
    }

    /// A vocabulary where "д" (d0 b4) is a token, and " \xd0" ranks below it:
    /// after a space, "д" must start as bytes; elsewhere it may start whole.
    #[test]
    fn a_low_ranked_token_across_a_boundary_makes_a_character_unsafe_there() {
        // " \xd0" 256, "д" 257, " д" 258.
        let chars = chars_for(&[b" \xd0", "д".as_bytes(), " д".as_bytes()]);
        assert_eq!(chars.count(), 1);
        assert_eq!(chars.whole(" д".as_bytes(), 1), None);
        assert_eq!(chars.whole("дд".as_bytes(), 0), Some((257, 2)));
        assert_eq!(chars.whole("дд".as_bytes(), 2), Some((257, 2)));
        // A class stands for all its bytes: "x" is ASCII, like the space.
        assert_eq!(chars.whole("xд".as_bytes(), 1), None);
        assert_eq!(chars.whole("дx".as_bytes(), 0), Some((257, 2)));
    }

    /// Inside a word the exact bytes decide: with "\xb0\xd0" (the end of
    /// "а", d0 b0, and the start of "д", d0 b4) ranked below "д", "д" after
    /// "а" must start as bytes, but after "к" (d0 ba) it may start whole,
    /// though both put a continuation byte before it.
    #[test]
    fn inside_a_word_the_exact_neighbour_bytes_decide() {
        // "\xb0\xd0" 256, "д" 257, "а" 258, "к" 259.
        let chars = chars_for(&[b"\xb0\xd0", "д".as_bytes(), "а".as_bytes(), "к".as_bytes()]);
        assert!(!chars.whole_by_class("кд".as_bytes(), 2), "the classes refuse both");
        assert_eq!(chars.whole("ад".as_bytes(), 2), None);
        assert_eq!(chars.whole("кд".as_bytes(), 2), Some((257, 2)));
        assert_eq!(chars.whole("кда".as_bytes(), 2), Some((257, 2)), "a lead byte after");
        // "а" before "д": its suffix b0 joins d0 in token 256, below "а".
        assert_eq!(chars.whole("кад".as_bytes(), 2), None);
    }
}
