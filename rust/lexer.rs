//! Hand-written lexers for the three built-in split patterns.
//!
//! Why: fancy-regex runs these patterns with a backtracking VM at about
//! 5 MB/s per core, which is most of the time of both training and encoding;
//! and on GPT-4o's pattern it gives up on long white-space runs ("max stack
//! size exceeded"), where tiktoken panics. Each pattern is a short list of
//! alternatives tried in order, and each alternative is a simple scan over
//! character classes, so we can write the match out by hand: one pass, no
//! backtracking, no stack.
//!
//! Exactness: every function below states the alternative it implements and
//! resolves backtracking explicitly. The tests compare these lexers with
//! fancy-regex (Rust unit tests, random strings of tricky characters), and with
//! Python's `regex` and tiktoken (Python tests, hypothesis and real corpora).
//! The character classes come from `regex-syntax`, the tables behind the
//! `regex` crate that fancy-regex and tiktoken use, so `\p{L}` means exactly
//! what it means there (same Unicode version).

use std::sync::OnceLock;

use crate::patterns::{GPT2_PATTERN, GPT4O_PATTERN, GPT4_PATTERN};

// Character class bits.
const L: u16 = 1 << 0; // \p{L}
const N: u16 = 1 << 1; // \p{N}
const S: u16 = 1 << 2; // \s (Unicode White_Space)
const LU: u16 = 1 << 3;
const LL: u16 = 1 << 4;
const LT: u16 = 1 << 5;
const LM: u16 = 1 << 6;
const LO: u16 = 1 << 7;
const M: u16 = 1 << 8; // \p{M}
/// GPT-4o's "upper-ish" class `[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]`.
const UP: u16 = LU | LT | LM | LO | M;
/// GPT-4o's "lower-ish" class `[\p{Ll}\p{Lm}\p{Lo}\p{M}]`.
const LOW: u16 = LL | LM | LO | M;

/// Class bits for every code point (2.2 MB, built once from regex-syntax's
/// tables; a few milliseconds).
fn table() -> &'static [u16] {
    static TABLE: OnceLock<Vec<u16>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut t = vec![0u16; 0x110000];
        for (bit, class) in [
            (L, r"\p{L}"),
            (N, r"\p{N}"),
            (S, r"\s"),
            (LU, r"\p{Lu}"),
            (LL, r"\p{Ll}"),
            (LT, r"\p{Lt}"),
            (LM, r"\p{Lm}"),
            (LO, r"\p{Lo}"),
            (M, r"\p{M}"),
        ] {
            let hir = regex_syntax::parse(class).expect("a valid class");
            let regex_syntax::hir::HirKind::Class(regex_syntax::hir::Class::Unicode(cls)) = hir.kind() else {
                unreachable!("{class} parses to a Unicode class")
            };
            for r in cls.ranges() {
                for c in r.start() as usize..=r.end() as usize {
                    t[c] |= bit;
                }
            }
        }
        t
    })
}

/// `\p{L}` (for the word cut rule of `pretokenize.rs`).
pub(crate) fn is_letter(c: char) -> bool {
    table()[c as usize] & L != 0
}

/// `\p{L}` or `\p{M}` (for the word cut rule of `pretokenize.rs`).
pub(crate) fn is_letter_or_mark(c: char) -> bool {
    table()[c as usize] & (L | M) != 0
}

/// The three lexers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lexer {
    Gpt2,
    Gpt4,
    Gpt4o,
}

impl Lexer {
    pub fn for_pattern(pattern: &str) -> Option<Lexer> {
        match pattern {
            p if p == GPT2_PATTERN => Some(Lexer::Gpt2),
            p if p == GPT4_PATTERN => Some(Lexer::Gpt4),
            p if p == GPT4O_PATTERN => Some(Lexer::Gpt4o),
            _ => None,
        }
    }

    /// Calls `f` on every chunk of `text`, left to right. Every position
    /// starts a match for these patterns, so the chunks tile the text.
    pub fn for_each_chunk<'t>(self, text: &'t str, mut f: impl FnMut(&'t str)) {
        let t = Text { s: text, b: text.as_bytes(), classes: table() };
        let mut i = 0;
        while i < text.len() {
            let end = match self {
                Lexer::Gpt2 => t.gpt2(i),
                Lexer::Gpt4 => t.gpt4(i),
                Lexer::Gpt4o => t.gpt4o(i),
            };
            debug_assert!(end > i);
            f(&text[i..end]);
            i = end;
        }
    }
}

struct Text<'a> {
    s: &'a str,
    b: &'a [u8],
    classes: &'a [u16],
}

/// A white-space run: where it ends, where its last character starts, how
/// many characters it has, and the end of its last '\r' or '\n' (if any).
struct SpaceRun {
    end: usize,
    last_start: usize,
    chars: usize,
    after_last_newline: Option<usize>,
}

impl<'a> Text<'a> {
    /// The character at byte `i` (a char boundary) and its length; None at the end.
    #[inline]
    fn at(&self, i: usize) -> Option<(char, usize)> {
        let &b0 = self.b.get(i)?;
        if b0 < 0x80 {
            return Some((b0 as char, 1));
        }
        // Decoded here rather than by `self.s[i..].chars()`, which checks that
        // i is a char boundary and decodes with more branches, and then
        // `len_utf8` takes more: lexing FLORES-200 went 7-10% faster (350 to
        // 376-386 MB/s). Every caller passes a char boundary; a byte that starts no
        // character (a bug) takes the checked path, which panics.
        if b0 < 0xC0 {
            let c = self.s[i..].chars().next()?;
            return Some((c, c.len_utf8()));
        }
        // SAFETY: b0 (>= 0xC0) starts a character of a str, so its
        // continuation bytes follow, in bounds, and they encode a char.
        unsafe {
            let b = self.b.as_ptr().add(i);
            let c1 = (*b.add(1) & 0x3F) as u32;
            if b0 < 0xE0 {
                return Some((char::from_u32_unchecked((b0 as u32 & 0x1F) << 6 | c1), 2));
            }
            let c2 = (*b.add(2) & 0x3F) as u32;
            if b0 < 0xF0 {
                return Some((char::from_u32_unchecked((b0 as u32 & 0x0F) << 12 | c1 << 6 | c2), 3));
            }
            let c3 = (*b.add(3) & 0x3F) as u32;
            Some((char::from_u32_unchecked((b0 as u32 & 0x07) << 18 | c1 << 12 | c2 << 6 | c3), 4))
        }
    }

    #[inline]
    fn class(&self, c: char) -> u16 {
        self.classes[c as usize]
    }

    /// Class bits of the character at `i`, None at the end of the text.
    #[inline]
    fn class_at(&self, i: usize) -> Option<u16> {
        self.at(i).map(|(c, _)| self.class(c))
    }

    /// End of the run of characters from `i` whose class satisfies `pred`, at
    /// most `max` characters.
    #[inline]
    fn run(&self, mut i: usize, max: usize, pred: impl Fn(u16) -> bool) -> usize {
        let mut n = 0;
        while n < max {
            match self.at(i) {
                Some((c, len)) if pred(self.class(c)) => {
                    i += len;
                    n += 1;
                }
                _ => break,
            }
        }
        i
    }

    #[inline]
    fn run_of(&self, mut i: usize, bits: u16) -> usize {
        // The hot loop of every lexer (letter runs are most of any text):
        // ASCII bytes are looked up directly, without decoding a char; other
        // characters take the general path. This halved the lexing time.
        loop {
            while let Some(&b) = self.b.get(i) {
                if b >= 0x80 {
                    break;
                }
                if self.classes[b as usize] & bits == 0 {
                    return i;
                }
                i += 1;
            }
            match self.at(i) {
                Some((c, len)) if self.class(c) & bits != 0 => i += len,
                _ => return i,
            }
        }
    }

    /// `[^\s\p{L}\p{N}]`: "punctuation" (symbols, marks, controls, ...).
    #[inline]
    fn is_punct(f: u16) -> bool {
        f & (S | L | N) == 0
    }

    fn space_run(&self, i: usize) -> SpaceRun {
        let mut r = SpaceRun { end: i, last_start: i, chars: 0, after_last_newline: None };
        while let Some((c, len)) = self.at(r.end) {
            if self.class(c) & S == 0 {
                break;
            }
            r.last_start = r.end;
            r.end += len;
            r.chars += 1;
            if c == '\r' || c == '\n' {
                r.after_last_newline = Some(r.end);
            }
        }
        r
    }

    /// The contraction after an apostrophe at `i`: `'s 't 'd 'm 'll 've 're`,
    /// case-insensitively if `ci`. Unicode case folding makes U+017F (long s)
    /// match `s` too, as it does in the regex engines.
    ///
    /// Every letter run (GPT-4o) and every chunk (GPT-2, GPT-4) asks, and
    /// the answer is nearly always "no apostrophe": that test is inlined, the
    /// rest is a call. (A call for the test too was 2.6% of encoding
    /// FLORES-200 with o200k.)
    #[inline(always)]
    fn contraction(&self, i: usize, ci: bool) -> Option<usize> {
        if self.b.get(i) != Some(&b'\'') {
            return None;
        }
        self.contraction_after_apostrophe(i, ci)
    }

    #[inline(never)]
    fn contraction_after_apostrophe(&self, i: usize, ci: bool) -> Option<usize> {
        let (c1, l1) = self.at(i + 1)?;
        let fold = |c: char| if ci { if c == '\u{17f}' { 's' } else { c.to_ascii_lowercase() } } else { c };
        match fold(c1) {
            's' | 't' | 'd' | 'm' => Some(i + 1 + l1),
            'l' | 'v' | 'r' => {
                let want = match fold(c1) {
                    'l' => 'l',
                    'v' | 'r' => 'e',
                    _ => unreachable!(),
                };
                let (c2, l2) = self.at(i + 1 + l1)?;
                (fold(c2) == want).then_some(i + 1 + l1 + l2)
            }
            _ => None,
        }
    }

    /// GPT-2: `'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s`
    fn gpt2(&self, i: usize) -> usize {
        let (c, len) = self.at(i).expect("i < len");
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
                return self.run(start, usize::MAX, Self::is_punct);
            }
        }
        // `\s++$|\s+(?!\S)|\s`
        let r = self.space_run(i);
        if r.end == self.b.len() {
            return r.end;
        }
        self.space_tail(&r, i + len)
    }

    /// `\s+(?!\S)` on a white-space run not at the end of the text: the run
    /// minus its last character, if that leaves one (the last one stays for
    /// the next chunk, which it starts: " world"); else a single `\s`.
    #[inline]
    fn space_tail(&self, r: &SpaceRun, one: usize) -> usize {
        if r.chars >= 2 {
            r.last_start
        } else {
            one
        }
    }

    /// GPT-4: `'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+|
    ///         ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s`
    fn gpt4(&self, i: usize) -> usize {
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
            return self.run(i, 3, |g| g & N != 0);
        }
        if let Some(e) = self.punctuation(i, c, f, false) {
            return e;
        }
        // `\s++$`: a run that ends the text; `\s*[\r\n]`: the greedy `\s*`
        // backs off to the run's last newline; then `\s+(?!\S)|\s`.
        let r = self.space_run(i);
        if r.end == self.b.len() {
            return r.end;
        }
        if let Some(e) = r.after_last_newline {
            return e;
        }
        self.space_tail(&r, i + len)
    }

    /// ` ?[^\s\p{L}\p{N}]+` followed by `[\r\n]*` (GPT-4) or `[\r\n/]*`
    /// (GPT-4o, `slash`): an optional space, a punctuation run, the newlines
    /// after it. None if no punctuation starts at `i` (or after its space).
    fn punctuation(&self, i: usize, c: char, f: u16, slash: bool) -> Option<usize> {
        let start = if c == ' ' && self.class_at(i + 1).is_some_and(Self::is_punct) {
            i + 1
        } else if Self::is_punct(f) {
            i
        } else {
            return None;
        };
        let e = self.run(start, usize::MAX, Self::is_punct);
        Some(self.newlines(e, slash))
    }

    /// `[\r\n]*` (or `[\r\n/]*` for GPT-4o) after a punctuation run.
    fn newlines(&self, mut e: usize, slash: bool) -> usize {
        while let Some(&b) = self.b.get(e) {
            if b == b'\r' || b == b'\n' || (slash && b == b'/') {
                e += 1;
            } else {
                break;
            }
        }
        e
    }

    /// GPT-4o:
    ///   A `[^\r\n\p{L}\p{N}]?[UP]*[LOW]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?`
    ///   B `[^\r\n\p{L}\p{N}]?[UP]+[LOW]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?`
    ///   C `\p{N}{1,3}`
    ///   D ` ?[^\s\p{L}\p{N}]+[\r\n/]*`
    ///   E `\s*[\r\n]+`, F `\s+(?!\S)`, G `\s+`
    /// with UP = `[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]`, LOW = `[\p{Ll}\p{Lm}\p{Lo}\p{M}]`.
    fn gpt4o(&self, i: usize) -> usize {
        // Fast path for the most common chunk of all, ` ?[a-z]...`: an ASCII
        // lower-case letter is LOW and not UP, so alternative A matches at
        // once (with the space as its prefix, if any): the LOW run and an
        // optional contraction. Skipping the general search below made
        // GPT-4o lexing about 1.5× faster.
        let s = if self.b[i] == b' ' { i + 1 } else { i };
        if self.b.get(s).is_some_and(u8::is_ascii_lowercase) {
            let e = self.run_of(s, LOW);
            return self.contraction(e, true).unwrap_or(e);
        }
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
        // E (up to the run's last newline), then F (which takes a run that
        // ends the text whole), then G (a run of one before a non-space).
        let r = self.space_run(i);
        if let Some(e) = r.after_last_newline {
            return e;
        }
        if r.end == self.b.len() {
            return r.end;
        }
        self.space_tail(&r, i + len)
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

#[cfg(test)]
mod tests;
