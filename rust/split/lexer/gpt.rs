//! The single-regex patterns, alternative by alternative (the `Text`
//! helpers they use are in `split/lexer/mod.rs`). Llama 3's and Qwen2's are
//! GPT-4's with two switches (`Text::cl100k`).
//!
//! Each lexer first looks at the ASCII byte that starts the chunk (and at
//! most the one after it): for most chunks of English and code that decides
//! which alternative matches, and the match is an ASCII scan (`split/ascii.rs`)
//! that hands over to the general run at the first longer character. Every
//! other case takes the general lexer (`*_any`), which is exact on any text.
//! Each fast case says why it equals the pattern.

use super::{Text, L, LOW, N, UP};
use crate::split::ascii;

impl<'a> Text<'a> {
    /// GPT-2: `'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s`
    #[inline(always)]
    pub(super) fn gpt2(&self, i: usize) -> usize {
        let b0 = self.b[i];
        if b0 == b'\'' {
            if let Some(e) = self.contraction_after_apostrophe(i, false) {
                return e;
            }
        }
        // ` ?X++`: the class of the byte after the optional space decides
        // the alternative, and a run of it follows. A white-space byte there
        // is in no X, and then `b0` is white space too (a space, or that byte).
        let s = if b0 == b' ' { i + 1 } else { i };
        match ascii::class_at(self.b, s) {
            ascii::LOWER | ascii::UPPER => self.letters(s + 1),
            ascii::DIGIT => self.ascii_then(ascii::digits_end(self.b, s + 1), N),
            ascii::PUNCT => self.punct_run(s),
            ascii::SPACE | ascii::NEWLINE => self.spaces2(i),
            // A longer character, or a space that ends the text.
            _ => self.gpt2_any(i),
        }
    }

    /// GPT-2 at any character.
    #[inline(never)]
    fn gpt2_any(&self, i: usize) -> usize {
        let (c, _) = self.at(i).expect("i < len");
        if let Some(e) = self.contraction(i, false) {
            return e;
        }
        // ` ?X++` for X = letters, numbers, punctuation: a space followed by
        // an X joins it. (Without the space, a space is no X: it is \s.)
        let start = if c == ' ' { i + 1 } else { i };
        if let Some((d, _)) = self.at(start) {
            let g = self.class(d);
            if g & L != 0 {
                return self.run_of(start, L);
            }
            if g & N != 0 {
                return self.run_of(start, N);
            }
            if Self::is_punct(g) {
                return self.punct_run(start);
            }
        }
        self.spaces2(i)
    }

    /// GPT-2's `\s++$|\s+(?!\S)|\s` at white space.
    fn spaces2(&self, i: usize) -> usize {
        let r = self.space_run(i);
        if r.end == self.b.len() {
            return r.end;
        }
        r.tail()
    }

    /// GPT-4: `'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+|
    ///         ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s`
    #[inline(always)]
    pub(super) fn gpt4(&self, i: usize) -> usize {
        self.cl100k::<false, false>(i)
    }

    /// Llama 3: `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
    ///  ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`: GPT-4's
    /// alternatives, each matching the same (the possessive quantifiers
    /// change nothing where they stand: no alternative can give back what
    /// they keep and still match), but for the white space: `\s*[\r\n]+`
    /// comes before any rule for a run that ends the text (`spaces4o`).
    #[inline(always)]
    pub(super) fn llama3(&self, i: usize) -> usize {
        self.cl100k::<false, true>(i)
    }

    /// Qwen2: Llama 3's pattern with `\p{N}` for `\p{N}{1,3}`.
    #[inline(always)]
    pub(super) fn qwen2(&self, i: usize) -> usize {
        self.cl100k::<true, true>(i)
    }

    /// GPT-4's lexer; `ONE_DIGIT`: digits one by one (Qwen2); `LAST_NEWLINE`:
    /// Llama 3's white space (`\s*[\r\n]+|\s+(?!\S)|\s+`, which is GPT-4o's).
    #[inline(always)]
    fn cl100k<const ONE_DIGIT: bool, const LAST_NEWLINE: bool>(&self, i: usize) -> usize {
        let b0 = self.b[i];
        match ascii::CLASS[b0 as usize] {
            // A letter is no prefix (and no apostrophe): `\p{L}++` from here.
            ascii::LOWER | ascii::UPPER => self.letters(i + 1),
            // No letter run starts at a digit (a digit is no prefix either).
            ascii::DIGIT if ONE_DIGIT => i + 1,
            ascii::DIGIT => self.digits3(i),
            // A newline is no prefix, no punctuation, no space: only the
            // white-space alternatives can match.
            ascii::NEWLINE => self.cl100k_spaces::<LAST_NEWLINE>(i),
            ascii::PUNCT | ascii::SPACE => self.gpt4_prefix::<ONE_DIGIT, LAST_NEWLINE>(i, b0),
            _ => self.gpt4_any::<ONE_DIGIT, LAST_NEWLINE>(i),
        }
    }

    /// GPT-4 at ASCII punctuation or non-newline white space: a character
    /// that may prefix a letter run.
    #[inline(always)]
    fn gpt4_prefix<const ONE_DIGIT: bool, const LAST_NEWLINE: bool>(&self, i: usize, b0: u8) -> usize {
        if b0 == b'\'' {
            if let Some(e) = self.contraction_after_apostrophe(i, true) {
                return e;
            }
        }
        let k1 = ascii::class_at(self.b, i + 1);
        if k1 & ascii::LETTER != 0 {
            return self.letters(i + 2);
        }
        if k1 == ascii::HIGH {
            return self.gpt4_any::<ONE_DIGIT, LAST_NEWLINE>(i);
        }
        // An ASCII non-letter (or the end) next: the possessive prefix, once
        // taken, has no letter after it, and without it `b0` is no letter:
        // no letter run. Then ` ?[^\s\p{L}\p{N}]++[\r\n]*+` if there is
        // punctuation at `b0` or after a space, else the white-space ones.
        if ascii::CLASS[b0 as usize] == ascii::PUNCT {
            return self.newlines(self.punct_run(i), false);
        }
        if b0 == b' ' && k1 == ascii::PUNCT {
            return self.newlines(self.punct_run(i + 1), false);
        }
        self.cl100k_spaces::<LAST_NEWLINE>(i)
    }

    /// GPT-4 at any character.
    #[inline(never)]
    fn gpt4_any<const ONE_DIGIT: bool, const LAST_NEWLINE: bool>(&self, i: usize) -> usize {
        let (c, len) = self.at(i).expect("i < len");
        let f = self.class(c);
        if let Some(e) = self.contraction(i, true) {
            return e;
        }
        // `[^\r\n\p{L}\p{N}]?+\p{L}++`: the possessive `?+` keeps a prefix
        // character once taken, so with a prefix the letters must follow it.
        if f & L != 0 {
            return self.run_of(i, L);
        }
        if c != '\r' && c != '\n' && f & N == 0 && self.class_at(i + len).is_some_and(|g| g & L != 0) {
            return self.run_of(i + len, L);
        }
        if f & N != 0 {
            return self.run(i, if ONE_DIGIT { 1 } else { 3 }, |g| g & N != 0);
        }
        if let Some(e) = self.punctuation(i, c, f, false) {
            return e;
        }
        self.cl100k_spaces::<LAST_NEWLINE>(i)
    }

    /// The white-space alternatives of GPT-4 (`spaces4`) or Llama 3 (`spaces4o`).
    #[inline(always)]
    fn cl100k_spaces<const LAST_NEWLINE: bool>(&self, i: usize) -> usize {
        if LAST_NEWLINE {
            self.spaces4o(i)
        } else {
            self.spaces4(i)
        }
    }

    /// GPT-4's `\s++$|\s*[\r\n]|\s+(?!\S)|\s` at white space: a run that
    /// ends the text; else the greedy `\s*` backs off to the run's last
    /// newline; else `\s+(?!\S)|\s`.
    fn spaces4(&self, i: usize) -> usize {
        let r = self.space_run(i);
        if r.end == self.b.len() {
            return r.end;
        }
        r.after_last_newline.unwrap_or_else(|| r.tail())
    }

    /// GPT-4o:
    ///   A `[^\r\n\p{L}\p{N}]?[UP]*[LOW]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?`
    ///   B `[^\r\n\p{L}\p{N}]?[UP]+[LOW]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?`
    ///   C `\p{N}{1,3}`
    ///   D ` ?[^\s\p{L}\p{N}]+[\r\n/]*`
    ///   E `\s*[\r\n]+`, F `\s+(?!\S)`, G `\s+`
    /// with UP = `[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]`, LOW = `[\p{Ll}\p{Lm}\p{Lo}\p{M}]`.
    ///
    /// No ASCII character is in both UP and LOW (only letters are in either,
    /// `A`-`Z` in UP, `a`-`z` in LOW): at ASCII, A and B can only start
    /// at a letter, or after an ASCII prefix at a letter.
    #[inline(always)]
    pub(super) fn gpt4o(&self, i: usize) -> usize {
        let b0 = self.b[i];
        let k0 = ascii::CLASS[b0 as usize];
        if k0 & ascii::LETTER != 0 {
            return self.gpt4o_word(i, i, k0);
        }
        let k1 = ascii::class_at(self.b, i + 1);
        match k0 {
            // The greedy prefix is tried first, and with a letter after it
            // A or B matches.
            ascii::PUNCT | ascii::SPACE if k1 & ascii::LETTER != 0 => self.gpt4o_word(i, i + 1, k1),
            ascii::DIGIT => self.digits3(i),
            // No prefix, no UP or LOW, no punctuation: only E, F, G.
            ascii::NEWLINE => self.spaces4o(i),
            ascii::PUNCT | ascii::SPACE if k1 != ascii::HIGH => {
                // An ASCII non-letter (or the end) after `b0`: neither A nor
                // B matches, with or without the prefix. Then D, if there is
                // punctuation at `b0` or after a space; else E, F, G.
                if k0 == ascii::PUNCT {
                    self.newlines(self.punct_run(i), true)
                } else if b0 == b' ' && k1 == ascii::PUNCT {
                    self.newlines(self.punct_run(i + 1), true)
                } else {
                    self.spaces4o(i)
                }
            }
            _ => self.gpt4o_any(i),
        }
    }

    /// GPT-4o's A or B with its letters starting at an ASCII letter at `s`
    /// (`i`, or after an ASCII prefix at `i`), then the optional contraction.
    #[inline(always)]
    fn gpt4o_word(&self, i: usize, s: usize, ks: u8) -> usize {
        // The greedy `[UP]*` takes the capitals (none if `b[s]` is `a`-`z`),
        // and A's `[LOW]+` the small letters after them (no backing off:
        // no ASCII letter is both).
        let (u, e) = if ks == ascii::LOWER {
            (s, ascii::lower_end(self.b, s + 1))
        } else {
            ascii::upper_then_lower_end(self.b, s)
        };
        let e = match ascii::class_at(self.b, e) {
            // Right after capitals, a longer character may be UP, LOW, both
            // or neither: the general path decides.
            ascii::HIGH if e == u => return self.gpt4o_any(i),
            // After small letters, A's LOW run may go on through it.
            ascii::HIGH => self.run_of(e, LOW),
            // A; or, with no small letters, B (there is no LOW character
            // for A), whose `[UP]+` is the capitals (`u > s` then, as `b[s]`
            // is a letter and not `a`-`z`).
            _ => e,
        };
        self.contraction(e, true).unwrap_or(e)
    }

    /// GPT-4o at any character.
    #[inline(never)]
    fn gpt4o_any(&self, i: usize) -> usize {
        let (c, len) = self.at(i).expect("i < len");
        let f = self.class(c);
        // The optional prefix is greedy: tried with it first, then without.
        // (Marks are not \p{L}, so a mark can be the prefix *and* start UP/LOW.)
        let prefix = c != '\r' && c != '\n' && f & (L | N) == 0;
        for alt_a in [true, false] {
            for with_prefix in [true, false] {
                if with_prefix && !prefix {
                    continue;
                }
                let p = if with_prefix { i + len } else { i };
                let end = if alt_a { self.up_star_low_plus(p) } else { self.up_plus_low_star(p) };
                if let Some(e) = end {
                    return self.contraction(e, true).unwrap_or(e);
                }
            }
        }
        if f & N != 0 {
            return self.run(i, 3, |g| g & N != 0);
        }
        if let Some(e) = self.punctuation(i, c, f, true) {
            return e;
        }
        self.spaces4o(i)
    }

    /// GPT-4o's E (up to the run's last newline), then F (which takes a run
    /// that ends the text whole), then G (a run of one before a non-space).
    pub(super) fn spaces4o(&self, i: usize) -> usize {
        let r = self.space_run(i);
        if let Some(e) = r.after_last_newline {
            return e;
        }
        if r.end == self.b.len() {
            return r.end;
        }
        r.tail()
    }

    /// `[UP]*[LOW]+` from `p`: the greedy `[UP]*` takes the whole UP run and
    /// backs off one character at a time until a LOW character follows; the
    /// LOW run then extends as far as it can.
    fn up_star_low_plus(&self, p: usize) -> Option<usize> {
        // Scan the UP run, remembering the end of its last character that is
        // also LOW (the place the backtracking would settle on).
        let mut u = p;
        let mut last_low_end = None;
        while let Some((c, len)) = self.at(u) {
            let g = self.class(c);
            if g & UP == 0 {
                // A LOW character after the UP run: the LOW run goes on from it.
                if g & LOW != 0 {
                    return Some(self.run_of(u + len, LOW));
                }
                break;
            }
            u += len;
            if g & LOW != 0 {
                last_low_end = Some(u);
            }
        }
        last_low_end
    }

    /// `[UP]+[LOW]*` from `p`.
    fn up_plus_low_star(&self, p: usize) -> Option<usize> {
        let u = self.run_of(p, UP);
        (u > p).then(|| self.run_of(u, LOW))
    }
}
