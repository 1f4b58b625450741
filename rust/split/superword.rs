//! A hand-written lexer for SuperBPE's second-stage pattern
//! (`bpe/_tokenizer/superbpe.py`, `STAGE2_PATTERN`): fancy-regex runs it at
//! ~4 MB/s a core (its look-aheads), which was a third of a SuperBPE
//! training's time, and every SuperBPE encoding splits with it.
//!
//! The pattern, in `findall` form (every position starts a match, so the
//! chunks tile the text), alternatives tried in order:
//!
//! 1. `\p{N}{1,3}`: one to three numbers;
//! 2. ` ?[^\s\p{L}\p{N}]{2,}[\r\n/]*`: an optional space, two or more
//!    punctuation marks (neither white space, letter nor number: "P" below),
//!    then any `\r`, `\n` and `/` (a `/` right after the marks is one of
//!    them; after a newline it is the tail's);
//! 3. ` +(?!\S)`: spaces that white space or the end follows; on spaces that
//!    a non-space follows, backtracking gives back the last space, which
//!    leaves a match only if the run had two or more;
//! 4. `(?:(?!1|2|3)[\s\S])+`: the characters from here up to the next place
//!    where one of the three starts (look-aheads of 1 and 2 without their
//!    tails, which do not change whether they start).
//!
//! Classes come from the same tables as the other lexers (`lexer/mod.rs`), so
//! `\p{L}`, `\p{N}` and `\s` mean what they mean to the `regex` crate.
//! Tested against fancy-regex (unit tests below: random text of tricky
//! characters, the corpora) and Python's `regex` (`tests/tokenizer/test_superbpe.py`).

use crate::split::lexer::{is_letter, is_number, is_white_space};

/// The pattern this lexer implements, byte for byte as Python passes it.
pub const STAGE2_PATTERN: &str = concat!(
    r"\p{N}{1,3}| ?[^\s\p{L}\p{N}]{2,}[\r\n/]*| +(?!\S)",
    r"|(?:(?!\p{N}| ?[^\s\p{L}\p{N}]{2,}| +(?!\S))[\s\S])+"
);

const NUM: u8 = 1;
const SPACE: u8 = 2; // \s
const PUNCT: u8 = 3; // [^\s\p{L}\p{N}]
const LETTER: u8 = 4;

/// Classes of the ASCII bytes.
const ASCII: [u8; 128] = {
    let mut t = [PUNCT; 128];
    let mut b = 0;
    while b < 128 {
        let c = b as u8;
        if c.is_ascii_digit() {
            t[b] = NUM;
        } else if c.is_ascii_alphabetic() {
            t[b] = LETTER;
        } else if matches!(c, b'\t' | b'\n' | 0x0b | 0x0c | b'\r' | b' ') {
            t[b] = SPACE;
        }
        b += 1;
    }
    t
};

/// The class of the character at `i` and its length; `None` at the end.
#[inline(always)]
fn at(text: &str, i: usize) -> Option<(u8, usize)> {
    let b = *text.as_bytes().get(i)?;
    if b < 0x80 {
        return Some((ASCII[b as usize], 1));
    }
    let c = text[i..].chars().next().expect("i is on a character boundary");
    let class = if is_number(c) {
        NUM
    } else if is_white_space(c) {
        SPACE
    } else if is_letter(c) {
        LETTER
    } else {
        PUNCT
    };
    Some((class, c.len_utf8()))
}

/// Where a run of class `class` that starts at `i` ends.
#[inline]
fn run_end(text: &str, mut i: usize, class: u8) -> usize {
    while let Some((c, n)) = at(text, i) {
        if c != class {
            break;
        }
        i += n;
    }
    i
}

/// Alternative 2 at `i`: its end, if it matches.
#[inline]
fn punct_run(text: &str, i: usize) -> Option<usize> {
    let b = text.as_bytes();
    let s = if b[i] == b' ' { i + 1 } else { i };
    let (c0, n0) = at(text, s)?;
    if c0 != PUNCT || at(text, s + n0)?.0 != PUNCT {
        return None;
    }
    let mut end = run_end(text, s, PUNCT);
    while end < b.len() && matches!(b[end], b'\r' | b'\n' | b'/') {
        end += 1;
    }
    Some(end)
}

/// Alternative 3 at `i` (a space): its end, if it matches.
#[inline]
fn spaces(text: &str, i: usize) -> Option<usize> {
    let b = text.as_bytes();
    let mut j = i;
    while j < b.len() && b[j] == b' ' {
        j += 1;
    }
    match at(text, j) {
        None | Some((SPACE, _)) => Some(j),
        Some(_) if j - i >= 2 => Some(j - 1),
        Some(_) => None,
    }
}

/// Alternatives 1 to 3 at `i`: the end of the match, if one starts there.
#[inline(always)]
fn starts(text: &str, i: usize) -> Option<usize> {
    let (c, n) = at(text, i)?;
    if c == NUM {
        let mut end = i + n;
        for _ in 0..2 {
            match at(text, end) {
                Some((NUM, m)) => end += m,
                _ => break,
            }
        }
        return Some(end);
    }
    if c == PUNCT || text.as_bytes()[i] == b' ' {
        if let Some(end) = punct_run(text, i) {
            return Some(end);
        }
    }
    if text.as_bytes()[i] == b' ' {
        return spaces(text, i);
    }
    None
}

/// The end of the chunk that starts at `i` (< `text.len()`).
#[inline]
pub fn chunk_end(text: &str, i: usize) -> usize {
    if let Some(end) = starts(text, i) {
        return end;
    }
    // Alternative 4: on to the next place where 1, 2 or 3 starts. Letters,
    // and white space that is not a space, start none of them.
    let b = text.as_bytes();
    let mut k = i + at(text, i).expect("i < len").1;
    while k < b.len() {
        let skip = skip_from(b, k);
        if skip != 0 {
            k += skip;
            continue;
        }
        let x = b[k];
        if x < 0x80 {
            let c = ASCII[x as usize];
            if c == LETTER || (c == SPACE && x != b' ') {
                k += 1;
                continue;
            }
            // The usual cases decided from two ASCII bytes, without `starts`
            // (its calls were most of this lexer's time): a space before a
            // letter starts neither 2 (a mark must follow the space) nor 3
            // (one space before a non-space), and the letter starts nothing;
            // a mark before a letter or white space starts no run of two marks.
            let next = b.get(k + 1).map_or(PUNCT, |&y| if y < 0x80 { ASCII[y as usize] } else { 0 });
            if x == b' ' && next == LETTER {
                k += 2;
                continue;
            }
            if c == PUNCT && (next == LETTER || next == SPACE) {
                k += 1;
                continue;
            }
        }
        if starts(text, k).is_some() {
            break;
        }
        k += at(text, k).expect("k < len").1;
    }
    k
}

/// How many bytes from `k` on start nothing, tested at once: sixteen
/// (`skippable16`), or eight near the end and off x86_64 (`skippable`); 0
/// where the byte at `k` must be looked at alone.
#[inline(always)]
fn skip_from(b: &[u8], k: usize) -> usize {
    #[cfg(target_arch = "x86_64")]
    if k + 17 <= b.len() {
        return skippable16(b, k);
    }
    b.get(k..k + 8).map_or(0, |word| skippable(u64::from_le_bytes(word.try_into().expect("8 bytes"))))
}

/// How many of the eight bytes of `word` (little-endian: the first byte
/// lowest) from the first on start none of alternatives 1 to 3, by the
/// tests of `chunk_end`'s loop done on all eight at once: ASCII letters,
/// ASCII white space other than the space, and a space before an ASCII
/// letter (the last byte's next byte is unknown here, so it counts only as
/// a letter or such white space). Each test leaves its verdict in the
/// high bit of each byte; the ranges are tested on the low seven bits,
/// `(x + 0x80 - c) & 0x80` being `x >= c`, which carries into no other byte.
#[inline(always)]
fn skippable(word: u64) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x80 * ONES;
    const LOW: u64 = 0x7f * ONES;
    let at_least = |x: u64, c: u64| x + (0x80 - c) * ONES;
    let ascii = !word & HIGH;
    let x = word & LOW;
    let folded = x | (0x20 * ONES); // (lower case, for letters)
    let letter = at_least(folded, b'a' as u64) & !at_least(folded, b'z' as u64 + 1) & ascii;
    let white = at_least(x, 0x09) & !at_least(x, 0x0e) & ascii; // \t \n \v \f \r
    let d = word ^ (b' ' as u64 * ONES);
    let space = !(((d & LOW) + LOW) | d | LOW); // (exact: a byte's high bit iff it is a space)
    let skip = (letter | white | (space & (letter >> 8))) & HIGH;
    ((!skip & HIGH).trailing_zeros() / 8) as usize
}

/// How many of the sixteen bytes from `k` on (`k + 17 <= b.len()`: the
/// byte after them is read too) start none of alternatives 1 to 3, by all of
/// `chunk_end`'s byte tests at once (SSE2, which every x86_64 CPU has):
/// ASCII letters, ASCII white space other than the space, a space before an
/// ASCII letter, and an ASCII mark (neither letter, number nor white space)
/// before an ASCII letter or white space. With the marks, one step crosses
/// the commas and full stops of prose, where `skippable` stopped at each.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn skippable16(b: &[u8], k: usize) -> usize {
    use std::arch::x86_64::*;
    assert!(k + 17 <= b.len());
    // SAFETY: SSE2 is part of x86_64; both loads read within `b` (asserted).
    unsafe {
        let v = _mm_loadu_si128(b.as_ptr().add(k) as *const __m128i);
        let n = _mm_loadu_si128(b.as_ptr().add(k + 1) as *const __m128i);
        // Signed compares: a byte >= 0x80 is negative, below every range.
        let within = |x: __m128i, lo: u8, hi: u8| {
            _mm_andnot_si128(_mm_cmpgt_epi8(x, _mm_set1_epi8(hi as i8)), _mm_cmpgt_epi8(x, _mm_set1_epi8(lo as i8 - 1)))
        };
        let letter = |x: __m128i| within(_mm_or_si128(x, _mm_set1_epi8(0x20)), b'a', b'z');
        let white = |x: __m128i| within(x, 0x09, 0x0d);
        let space = |x: __m128i| _mm_cmpeq_epi8(x, _mm_set1_epi8(b' ' as i8));
        let ascii = _mm_cmpgt_epi8(v, _mm_set1_epi8(-1));
        let (v_letter, v_white, v_space) = (letter(v), white(v), space(v));
        let not_mark = _mm_or_si128(_mm_or_si128(v_letter, v_white), _mm_or_si128(v_space, within(v, b'0', b'9')));
        let mark = _mm_andnot_si128(not_mark, ascii);
        let n_letter = letter(n);
        let n_white = _mm_or_si128(white(n), space(n));
        let skip = _mm_or_si128(
            _mm_or_si128(v_letter, v_white),
            _mm_or_si128(_mm_and_si128(v_space, n_letter), _mm_and_si128(mark, _mm_or_si128(n_letter, n_white))),
        );
        (!(_mm_movemask_epi8(skip) as u32)).trailing_zeros() as usize
    }
}

/// Calls `f` on every chunk of `text`, left to right.
pub fn for_each_chunk<'t>(text: &'t str, mut f: impl FnMut(&'t str)) {
    let mut i = 0;
    while i < text.len() {
        let end = chunk_end(text, i);
        f(&text[i..end]);
        i = end;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::split::lexer::tests::rng;

    fn regex_chunks(text: &str) -> Vec<&str> {
        let re = fancy_regex::Regex::new(STAGE2_PATTERN).unwrap();
        re.find_iter(text).map(|m| m.unwrap().as_str()).collect()
    }

    fn ours(text: &str) -> Vec<&str> {
        let mut v = Vec::new();
        for_each_chunk(text, |c| v.push(c));
        v
    }

    #[test]
    fn equals_the_regex_on_random_text() {
        let alphabet: Vec<char> = "ab Z1٣½  \t\n\r.,:;!?/-'\"()字é\u{a0}\u{2003}\u{300}😀x".chars().collect();
        let mut next = rng(0x9e3779b97f4a7c15);
        for _ in 0..20_000 {
            let mut text = String::new();
            let len = (next() % 24) as usize;
            for _ in 0..len {
                text.push(alphabet[(next() % alphabet.len() as u64) as usize]);
            }
            assert_eq!(ours(&text), regex_chunks(&text), "{text:?}");
        }
    }

    #[test]
    fn equals_the_regex_on_the_corpora() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("corpora");
        for name in ["tinyshakespeare.txt", "cpython_stdlib_sample.py.txt", "multilingual_udhr.txt"] {
            let text = std::fs::read_to_string(root.join(name)).unwrap();
            let cut = (0..=text.len().min(300_000)).rev().find(|&k| text.is_char_boundary(k)).unwrap();
            assert_eq!(ours(&text[..cut]), regex_chunks(&text[..cut]), "{name}");
        }
    }

    /// `skippable` counts as `chunk_end`'s loop tests byte by byte.
    #[test]
    fn skippable_counts_the_bytes_that_start_nothing() {
        let letterish = |x: u8| x.is_ascii_alphabetic() || matches!(x, 0x09..=0x0d);
        let mut next = rng(0x853c49e6748fea9b);
        let pool = b"aZz{`@[ \t\n\r\x0b\x0c\x0e\x08.1\x80\xc3\xa9\xff\x1fAq ";
        for _ in 0..200_000 {
            let mut w = [0u8; 8];
            for x in w.iter_mut() {
                *x = pool[(next() % pool.len() as u64) as usize];
            }
            let expected = (0..8)
                .take_while(|&j| letterish(w[j]) || (w[j] == b' ' && j < 7 && w[j + 1].is_ascii_alphabetic()))
                .count();
            assert_eq!(skippable(u64::from_le_bytes(w)), expected, "{w:?}");
        }
    }

    /// `skippable16` counts as `chunk_end`'s loop tests byte by byte.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn skippable16_counts_the_bytes_that_start_nothing() {
        let class = |x: u8| if x < 0x80 { ASCII[x as usize] } else { 0 };
        let starts_nothing = |x: u8, next: u8| match class(x) {
            LETTER => true,
            SPACE if x != b' ' => true,
            SPACE => class(next) == LETTER,
            PUNCT => class(next) == LETTER || class(next) == SPACE,
            _ => false,
        };
        let mut next = rng(0x853c49e6748fea9b);
        let pool = b"aZz{`@[ \t\n\r\x0b\x0c\x0e\x08.,1909/\x7f\x80\xc3\xa9\xff\x1fAq  ";
        for round in 0..200_000 {
            // Mostly skippable bytes, so that long runs are tested too.
            let mut w = [0u8; 17];
            for x in w.iter_mut() {
                let state = next();
                *x = if round % 2 == 0 && state % 8 != 0 {
                    b"ab .\n"[(state >> 8) as usize % 5]
                } else {
                    pool[(state % pool.len() as u64) as usize]
                };
            }
            let expected = (0..16).take_while(|&j| starts_nothing(w[j], w[j + 1])).count();
            assert_eq!(skippable16(&w, 0), expected, "{w:?}");
        }
    }

    #[test]
    fn examples() {
        assert_eq!(
            ours("by the way, 12345 !! ok  x \n"),
            ["by the way, ", "123", "45", " !!", " ok", " ", " x", " ", "\n"]
        );
        assert_eq!(ours("a  b"), ["a", " ", " b"]);
    }
}
