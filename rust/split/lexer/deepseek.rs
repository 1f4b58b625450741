//! DeepSeek-V3's third split step by hand (`split/patterns.rs`,
//! `DEEPSEEK_V3_WORDS`), alternative by alternative:
//!
//! - A `[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+`: one ASCII
//!   punctuation character and the ASCII letters after it;
//! - B `[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+`: letters and marks, with one
//!   character before them that is no newline, letter, punctuation or symbol;
//! - C ` ?[\p{P}\p{S}]+[\r\n]*`: punctuation and symbols, a space before them,
//!   the newlines after them;
//! - D `\s*[\r\n]+`, E `\s+(?!\S)`, F `\s+`: white space, as GPT-4o's.
//!
//! Unlike the tiktoken patterns this one does not match every character (a
//! digit, a control or format character before no letter): as a step of a
//! sequence (an HF `Split`, behavior "isolated") the text between two matches
//! is a piece too, so the lexer hands out both, and the pieces tile the text.
//!
//! Why by hand: on fancy-regex (the look-ahead of E needs its backtracking
//! engine) this step ran at about a tenth of the lexers' speed; and it is the
//! step that sees nearly all of a text. `split/steps/tests.rs` compares it
//! with fancy-regex.

use super::{Text, L, M, P, S, SY};
use crate::split::ascii;

/// Calls `f` on each piece of `text`: the matches of `DEEPSEEK_V3_WORDS`
/// and the text between them.
pub(crate) fn deepseek_v3_words<'t>(text: &'t str, f: impl FnMut(&'t str)) {
    Text::new(text).tile(
        f,
        #[inline(always)]
        |t, i| t.deepseek_v3(i),
    )
}

/// ASCII punctuation and symbols: A's first character (every ASCII
/// character that is no letter, digit, white space or control).
#[inline(always)]
fn ascii_punct(b: u8) -> bool {
    b.is_ascii_punctuation()
}

impl<'a> Text<'a> {
    /// The end of the piece at `i`: the match there, else the text up to
    /// the next place where one starts.
    #[inline(always)]
    fn deepseek_v3(&self, i: usize) -> usize {
        let b0 = self.b[i];
        if b0 < 0x80 {
            let k1 = ascii::class_at(self.b, i + 1);
            match ascii::CLASS[b0 as usize] {
                // B: the letter run (ASCII letters 8 at a time, then the
                // general run of letters and marks).
                ascii::LOWER | ascii::UPPER => return self.ascii_then(ascii::letters_end(self.b, i + 1), L | M),
                // A (a control is no ASCII punctuation: it falls through).
                ascii::PUNCT if ascii_punct(b0) && k1 & ascii::LETTER != 0 => {
                    return ascii::letters_end(self.b, i + 2);
                }
                _ => {}
            }
        }
        self.deepseek_v3_any(i)
    }

    #[inline(never)]
    fn deepseek_v3_any(&self, i: usize) -> usize {
        self.deepseek_v3_match(i).unwrap_or_else(|| self.deepseek_v3_gap(i))
    }

    /// The match at `i`, if one starts there.
    fn deepseek_v3_match(&self, i: usize) -> Option<usize> {
        let (c, len) = self.at(i)?;
        let f = self.class(c);
        // A.
        if c.is_ascii() && ascii_punct(c as u8) && ascii::class_at(self.b, i + 1) & ascii::LETTER != 0 {
            return Some(ascii::letters_end(self.b, i + 2));
        }
        // B. With the optional prefix taken the letters must follow it; given
        // back, `c` must start them. A mark can be both: either way the run of
        // letters and marks from `c` is the match.
        if f & (L | M) != 0 {
            return Some(self.run_of(i, L | M));
        }
        if c != '\r' && c != '\n' && f & (P | SY) == 0 && self.class_at(i + len).is_some_and(|g| g & (L | M) != 0) {
            return Some(self.run_of(i + len, L | M));
        }
        // C: the optional space is greedy; without it a space is no
        // punctuation.
        let start = if c == ' ' && self.class_at(i + 1).is_some_and(|g| g & (P | SY) != 0) {
            Some(i + 1)
        } else if f & (P | SY) != 0 {
            Some(i)
        } else {
            None
        };
        if let Some(start) = start {
            return Some(self.newlines(self.run_of(start, P | SY), false));
        }
        // D, E, F.
        (f & S != 0).then(|| self.spaces4o(i))
    }

    /// Whether a match starts at `i` (a char boundary before the end).
    fn deepseek_v3_starts(&self, i: usize) -> bool {
        let Some((c, len)) = self.at(i) else { return false };
        let f = self.class(c);
        // B, C (a space before punctuation is also a prefix, as in B), D-F;
        // A's first character is punctuation (C).
        f & (L | M | P | SY | S) != 0
            || (c != '\r' && c != '\n' && self.class_at(i + len).is_some_and(|g| g & (L | M) != 0))
    }

    /// The text from `i` (where no match starts) up to where one does.
    #[cold]
    fn deepseek_v3_gap(&self, i: usize) -> usize {
        let mut e = i + self.at(i).expect("i < len").1;
        while e < self.b.len() && !self.deepseek_v3_starts(e) {
            e += self.at(e).expect("a char boundary").1;
        }
        e
    }
}
