//! Hand-written lexers for the built-in split patterns (GPT-2, GPT-4,
//! GPT-4o, Llama 3, Qwen2), and for the split steps of sequences that we
//! recognise (`runs.rs`: digits and CJK; `deepseek.rs`: DeepSeek-V3's words).
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
//! fancy-regex (Rust unit tests in `split/lexer/tests.rs`: random strings of tricky
//! characters, of mostly ASCII and of mostly white space, adversarial texts,
//! the corpora), and with Python's `regex` and tiktoken (Python tests,
//! hypothesis and real corpora).
//! The character classes come from `regex-syntax`, the tables behind the
//! `regex` crate that fancy-regex and tiktoken use, so `\p{L}` means exactly
//! what it means there (same Unicode version).
//!
//! Speed: each lexer starts with ASCII fast paths (`split/lexer/gpt.rs`, with the
//! scans of `split/ascii.rs`) that decide most chunks of English and code from one
//! or two bytes and scan ASCII runs 8 bytes at a time; everything else takes
//! the general path here, character by character with the full table. See
//! docs/dev/performance.md, "Lexing, ASCII fast paths".
//!
//! On x86_64, `Lexer::for_each_chunk` runs the mask lexer
//! (`split/lexer/mask/mod.rs`) over them: it finds the chunk starts of 64 bytes at once with SIMD and
//! bit algebra wherever it can decide them (ASCII, and the commonest longer
//! characters of English), and hands everything else to these lexers, the
//! "exact lexers", chunk by chunk. The chunks are the same; 3-4 times
//! faster on English and code. See docs/dev/performance.md, "Lexing, mask
//! lexer".

use std::sync::OnceLock;

use crate::split::ascii;
use crate::split::patterns::{GPT2_PATTERN, GPT4O_PATTERN, GPT4_PATTERN, LLAMA3_PATTERN, QWEN2_PATTERN};

mod deepseek;
mod gpt;
mod mask;
mod runs;

pub(crate) use deepseek::deepseek_v3_words;
pub use runs::Runs;

pub(crate) use mask::Engine;

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
const P: u16 = 1 << 9; // \p{P}
const SY: u16 = 1 << 10; // \p{S}
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
            (P, r"\p{P}"),
            (SY, r"\p{S}"),
        ] {
            let hir = regex_syntax::parse(class).expect("a valid class");
            let regex_syntax::hir::HirKind::Class(regex_syntax::hir::Class::Unicode(cls)) = hir.kind() else {
                unreachable!("{class} parses to a Unicode class")
            };
            for r in cls.ranges() {
                for x in &mut t[r.start() as usize..=r.end() as usize] {
                    *x |= bit;
                }
            }
        }
        t
    })
}

/// Makes the class table now if it is not made yet: before a `fork`
/// (`threads.rs`), so that no thread can be half-way through making it.
pub(crate) fn warm() {
    table();
}

/// `\p{L}` (for the word cut rule of `split/pretokenize.rs`).
pub(crate) fn is_letter(c: char) -> bool {
    table()[c as usize] & L != 0
}

/// `\p{N}` (for `split/superword.rs`).
pub(crate) fn is_number(c: char) -> bool {
    table()[c as usize] & N != 0
}

/// `\s`, Unicode's White_Space (for `split/superword.rs`).
pub(crate) fn is_white_space(c: char) -> bool {
    table()[c as usize] & S != 0
}

/// `\p{L}` or `\p{M}` (for the word cut rule of `split/pretokenize.rs`).
pub(crate) fn is_letter_or_mark(c: char) -> bool {
    table()[c as usize] & (L | M) != 0
}

/// The lexers of the single-regex patterns (`split/patterns.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lexer {
    Gpt2,
    Gpt4,
    Gpt4o,
    /// GPT-4's lexer with the white space of cl100k's first form at the end
    /// of the text.
    Llama3,
    /// Llama 3's lexer with one digit per chunk.
    Qwen2,
}

impl Lexer {
    pub fn for_pattern(pattern: &str) -> Option<Lexer> {
        match pattern {
            p if p == GPT2_PATTERN => Some(Lexer::Gpt2),
            p if p == GPT4_PATTERN => Some(Lexer::Gpt4),
            p if p == GPT4O_PATTERN => Some(Lexer::Gpt4o),
            p if p == LLAMA3_PATTERN => Some(Lexer::Llama3),
            p if p == QWEN2_PATTERN => Some(Lexer::Qwen2),
            _ => None,
        }
    }

    /// Calls `f` on every chunk of `text`, left to right. Every position
    /// starts a match for these patterns, so the chunks tile the text.
    ///
    /// The mask lexer (`split/lexer/mask/mod.rs`) where the CPU has SIMD (x86_64),
    /// else the exact lexers alone; the chunks are the same.
    #[inline]
    pub fn for_each_chunk<'t>(self, text: &'t str, f: impl FnMut(&'t str)) {
        self.for_each_chunk_with(Engine::best(), text, f)
    }

    /// [`Lexer::for_each_chunk`] with a given engine (tests, measurements).
    #[inline]
    pub(crate) fn for_each_chunk_with<'t>(self, engine: Engine, text: &'t str, f: impl FnMut(&'t str)) {
        let t = Text::new(text);
        // One loop per lexer: the lexer is chosen once, not at every chunk.
        match self {
            Lexer::Gpt2 => t.tile_with::<mask::Gpt2>(
                engine,
                f,
                #[inline(always)]
                |t, i| t.gpt2(i),
            ),
            Lexer::Gpt4 => t.tile_with::<mask::Gpt4>(
                engine,
                f,
                #[inline(always)]
                |t, i| t.gpt4(i),
            ),
            Lexer::Gpt4o => t.tile_with::<mask::Gpt4o>(
                engine,
                f,
                #[inline(always)]
                |t, i| t.gpt4o(i),
            ),
            // Inside a text GPT-4's rules are Llama 3's (they differ only
            // where a text ends, which the masks never see).
            Lexer::Llama3 => t.tile_with::<mask::Gpt4>(
                engine,
                f,
                #[inline(always)]
                |t, i| t.llama3(i),
            ),
            Lexer::Qwen2 => t.tile_with::<mask::Qwen2>(
                engine,
                f,
                #[inline(always)]
                |t, i| t.qwen2(i),
            ),
        }
    }
}

struct Text<'a> {
    s: &'a str,
    b: &'a [u8],
    classes: &'a [u16],
}

impl<'a> Text<'a> {
    fn new(s: &'a str) -> Self {
        Text { s, b: s.as_bytes(), classes: table() }
    }
}

/// A white-space run: where it starts and ends, where its last character
/// starts, and the end of its last '\r' or '\n' (if any).
struct SpaceRun {
    start: usize,
    end: usize,
    last_start: usize,
    after_last_newline: Option<usize>,
}

impl SpaceRun {
    /// `\s+(?!\S)|\s` on a run not at the end of the text: the run minus its
    /// last character, if that leaves one (the last one stays for the next
    /// chunk, which it starts: " world"); else the run's single `\s`.
    #[inline]
    fn tail(&self) -> usize {
        if self.last_start > self.start {
            self.last_start
        } else {
            self.end
        }
    }
}

impl<'a> Text<'a> {
    /// Calls `f` on each chunk; `next` gives the end of the chunk at `i`.
    #[inline(always)]
    fn tile(&self, mut f: impl FnMut(&'a str), next: impl Fn(&Self, usize) -> usize) {
        let mut i = 0;
        while i < self.b.len() {
            let end = next(self, i);
            debug_assert!(i < end && end <= self.b.len() && self.s.is_char_boundary(end));
            // SAFETY: every lexer advances by whole characters (an ASCII
            // scan stops at a byte >= 0x80 only right after an ASCII byte,
            // so at a character's first byte): `end` is a char boundary
            // after `i` (as is `i`, 0 or the last `end`), in the text. (A
            // checked slice tested both at every chunk: ~4% of lexing.)
            f(unsafe { self.s.get_unchecked(i..end) });
            i = end;
        }
    }

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
        // The hot loop of non-ASCII text: ASCII bytes are looked up directly,
        // without decoding a char; other characters take the general path.
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

    /// After an ASCII run of characters of class `bits` that stops at `e`:
    /// if a longer character is next, the general run of `bits` goes on from
    /// there; else the run ends at `e` (the scans stop only at bytes of other
    /// classes, and no ASCII character outside the scanned class is in `bits`).
    #[inline(always)]
    fn ascii_then(&self, e: usize, bits: u16) -> usize {
        if ascii::class_at(self.b, e) == ascii::HIGH {
            self.run_of(e, bits)
        } else {
            e
        }
    }

    /// `\p{L}++` from `i`: the ASCII letters 8 bytes at a time, then the rest.
    #[inline(always)]
    fn letters(&self, i: usize) -> usize {
        self.ascii_then(ascii::letters_end(self.b, i), L)
    }

    /// `\p{N}{1,3}+` from an ASCII digit at `i`: ASCII digits, and the
    /// general run for the rest of the three if a longer character follows.
    #[inline]
    fn digits3(&self, i: usize) -> usize {
        let mut e = i + 1;
        while e < i + 3 {
            match ascii::class_at(self.b, e) {
                ascii::DIGIT => e += 1,
                ascii::HIGH => return self.run(e, i + 3 - e, |g| g & N != 0),
                _ => break,
            }
        }
        e
    }

    /// `[^\s\p{L}\p{N}]++` from `i`: ASCII punctuation byte by byte, then the
    /// general run if a longer character follows (which may be punctuation:
    /// `“`, `…`, a mark).
    #[inline]
    fn punct_run(&self, i: usize) -> usize {
        let e = ascii::class_end(self.b, i, ascii::PUNCT);
        if ascii::class_at(self.b, e) == ascii::HIGH {
            self.run(e, usize::MAX, Self::is_punct)
        } else {
            e
        }
    }

    /// `[^\s\p{L}\p{N}]`: "punctuation" (symbols, marks, controls, ...).
    #[inline]
    fn is_punct(f: u16) -> bool {
        f & (S | L | N) == 0
    }

    /// The white-space run from `i`.
    #[inline(always)]
    fn space_run(&self, i: usize) -> SpaceRun {
        let mut r = SpaceRun { start: i, end: i, last_start: i, after_last_newline: None };
        loop {
            let k = ascii::class_at(self.b, r.end);
            if k & (ascii::SPACE | ascii::NEWLINE) != 0 {
                // ASCII white space: one byte, one character.
                r.last_start = r.end;
                r.end += 1;
                if k == ascii::NEWLINE {
                    r.after_last_newline = Some(r.end);
                }
                if r.end == r.start + 2 {
                    // A run this long may be indentation: the rest of its
                    // ASCII white space 8 bytes at a time. (Only here: on
                    // short runs the word scan costs more than it saves.)
                    let (e, newline) = ascii::white_words(self.b, r.end);
                    if e > r.end {
                        r.last_start = e - 1;
                        r.end = e;
                        r.after_last_newline = newline.or(r.after_last_newline);
                    }
                }
                continue;
            }
            if k != ascii::HIGH {
                return r;
            }
            // A longer character (none is '\r' or '\n').
            match self.at(r.end) {
                Some((c, len)) if self.class(c) & S != 0 => {
                    r.last_start = r.end;
                    r.end += len;
                }
                _ => return r,
            }
        }
    }

    /// The contraction after an apostrophe at `i`: `'s 't 'd 'm 'll 've 're`,
    /// case-insensitively if `ci`. Unicode case folding makes U+017F (long s)
    /// match `s` too, as it does in the regex engines.
    ///
    /// Every letter run (GPT-4o) asks, and the answer is nearly always "no
    /// apostrophe": that test is inlined, the rest is a call. (A call for the
    /// test too was 2.6% of encoding FLORES-200 with o200k.)
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
        let fold = |c: char| {
            if ci {
                if c == '\u{17f}' {
                    's'
                } else {
                    c.to_ascii_lowercase()
                }
            } else {
                c
            }
        };
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

    /// `[\r\n]*` (or `[\r\n/]*` for GPT-4o) after a punctuation run.
    #[inline]
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
        Some(self.newlines(self.punct_run(start), slash))
    }
}

#[cfg(test)]
pub(crate) mod tests;
