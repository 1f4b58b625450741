//! Split steps that isolate runs of one character class: digits (one by one,
//! in threes from the left or from the right, whole runs) and DeepSeek-V3's
//! CJK runs. Each is the hand-written form of one regex used as a HuggingFace
//! `Split` with behavior "isolated" (`split/steps/mod.rs`): the regex's
//! matches are pieces, and so is the text between them.
//!
//! Why by hand: the digit rules are the first step of a sequence and so read
//! every byte of the text before the pattern's own lexer does; on
//! fancy-regex that step alone ran at a fraction of the lexers' speed (and
//! "threes from the right" needs a look-ahead, so the backtracking engine).
//! Here a step is a scan: ASCII 8 bytes at a time for a digit or a longer
//! character, the class table for longer characters.
//!
//! Exactness: `split/steps/tests.rs` compares every step with its regex on
//! fancy-regex (random texts, the corpora).

use super::{Text, N};
use crate::split::ascii;
use crate::split::patterns::{DEEPSEEK_V3_CJK, DEEPSEEK_V3_DIGITS, DIGITS_R2L3, DIGITS_RUNS, DIGITS_SINGLE};

/// A class-run step, by the regex it implements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Runs {
    /// `\p{N}`: each digit a piece.
    Single,
    /// `\p{N}{1,3}`: digits in threes from the left (DeepSeek-V3's first step).
    Left3,
    /// `\p{N}{1,3}(?=(?:\p{N}{3})*(?!\p{N}))`: in threes from the right.
    Right3,
    /// `\p{N}+`: whole runs of digits.
    Digits,
    /// `[一-龥぀-ゟ゠-ヿ]+`: runs of CJK ideographs, hiragana and katakana.
    Cjk,
}

impl Runs {
    /// The step for a regex, if it is one of these (byte for byte).
    pub fn for_regex(regex: &str) -> Option<Runs> {
        match regex {
            r if r == DIGITS_SINGLE => Some(Runs::Single),
            r if r == DEEPSEEK_V3_DIGITS => Some(Runs::Left3),
            r if r == DIGITS_R2L3 => Some(Runs::Right3),
            r if r == DIGITS_RUNS => Some(Runs::Digits),
            r if r == DEEPSEEK_V3_CJK => Some(Runs::Cjk),
            _ => None,
        }
    }

    /// Whether the step is a digit rule (which keeps safe cuts safe: see
    /// `Splitter::cuttable`).
    pub fn is_digits(self) -> bool {
        self != Runs::Cjk
    }

    /// Calls `f` on each piece of `text`, left to right: the runs (cut into
    /// groups) and the text between them. The pieces tile the text.
    pub fn for_each_piece<'t>(self, text: &'t str, f: impl FnMut(&'t str)) {
        let t = Text::new(text);
        let digits = |t: &Text, i| t.is_digit(i);
        let skip = ascii::non_digits_end;
        match self {
            Runs::Cjk => t.class_runs(f, is_cjk, skip_to_cjk, |_, _| usize::MAX),
            Runs::Digits => t.class_runs(f, digits, skip, |_, _| usize::MAX),
            Runs::Single => t.class_runs(f, digits, skip, |_, _| 1),
            Runs::Left3 => t.class_runs(f, digits, skip, |_, _| 3),
            // The first group holds what is left over after the threes.
            Runs::Right3 => t.class_runs(f, digits, skip, |n, first| if first { (n - 1) % 3 + 1 } else { 3 }),
        }
    }
}

/// The first byte from `i` that may start a character of [`is_cjk`]: all
/// of them are 3 bytes long and start with 0xE3 (U+3040..=U+30FF) or
/// 0xE4..=0xE9 (U+4E00..=U+9FA5); no other byte of a character is in that
/// range.
fn skip_to_cjk(b: &[u8], i: usize) -> usize {
    b[i..].iter().position(|c| (0xE3..=0xE9).contains(c)).map_or(b.len(), |k| i + k)
}

/// `[一-龥぀-ゟ゠-ヿ]`, by the character at byte `i` (a char boundary).
#[inline]
fn is_cjk(t: &Text, i: usize) -> bool {
    // All three ranges are 3-byte characters, starting with 0xE3 (U+3040..)
    // or 0xE4..=0xE9 (U+4E00..).
    match t.b[i] {
        0xE3..=0xE9 => {
            matches!(t.at(i), Some((c, _)) if matches!(c, '\u{4e00}'..='\u{9fa5}' | '\u{3040}'..='\u{30ff}'))
        }
        _ => false,
    }
}

impl<'a> Text<'a> {
    /// `\p{N}` at byte `i` (a char boundary in the text).
    #[inline]
    fn is_digit(&self, i: usize) -> bool {
        match self.b[i] {
            b'0'..=b'9' => true,
            0..=0x7F => false,
            _ => self.class_at(i).is_some_and(|g| g & N != 0),
        }
    }

    /// The end of the text between runs from `i`: the first character that
    /// `is_in` (or the end). `skip(b, i)` skips bytes that start no such
    /// character (to a char boundary).
    #[inline(always)]
    fn gap_end(&self, mut i: usize, is_in: impl Fn(&Self, usize) -> bool, skip: fn(&[u8], usize) -> usize) -> usize {
        loop {
            i = skip(self.b, i);
            if i == self.b.len() || is_in(self, i) {
                return i;
            }
            i += self.at(i).expect("a char boundary in the text").1;
        }
    }

    /// Hands `f` the pieces: text between runs whole, and each run of
    /// characters that `is_in` cut into groups; `group(n, first)` is the
    /// length in characters of the next group of a run of `n` characters
    /// (`first`: the run's first group). `skip` as for `gap_end`.
    #[inline(always)]
    fn class_runs(
        &self,
        mut f: impl FnMut(&'a str),
        is_in: impl Fn(&Self, usize) -> bool + Copy,
        skip: fn(&[u8], usize) -> usize,
        group: impl Fn(usize, bool) -> usize,
    ) {
        let mut i = 0;
        let n = self.b.len();
        while i < n {
            if !is_in(self, i) {
                let end = self.gap_end(i, is_in, skip);
                f(&self.s[i..end]);
                i = end;
                continue;
            }
            // The run: its end, and its length in characters.
            let (mut end, mut count) = (i, 0);
            while end < n && is_in(self, end) {
                end += if self.b[end] < 0x80 { 1 } else { self.at(end).expect("a char boundary").1 };
                count += 1;
            }
            let mut first = true;
            while i < end {
                let k = group(count, first).min(count);
                let mut e = i;
                for _ in 0..k {
                    e += if self.b[e] < 0x80 { 1 } else { self.at(e).expect("a char boundary").1 };
                }
                f(&self.s[i..e]);
                count -= k;
                first = false;
                i = e;
            }
        }
    }
}
