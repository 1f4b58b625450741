//! ASCII byte classes and word-at-a-time scans of ASCII runs: the pieces of
//! the lexers' fast paths (`split/lexer/mod.rs`).
//!
//! Most chunks of English and of code are ASCII, and for an ASCII byte the
//! classes of the split patterns are fixed: a letter is `\p{L}` (and
//! `\p{Lu}` or `\p{Ll}`), a digit `\p{N}`, `\t \n \v \f \r` and the space are
//! `\s` (exactly these: regex-syntax's White_Space has no other ASCII
//! character; 0x1C..0x1F are not in it), and everything else is
//! `[^\s\p{L}\p{N}]`. No ASCII byte is a mark, `\p{Lt}`, `\p{Lm}` or `\p{Lo}`.
//! A test (`split/lexer/tests.rs`) checks [`CLASS`] against the full Unicode table.
//!
//! Every scan here stops at the first byte outside its class, and in
//! particular at the first byte >= 0x80, where a lexer goes on with its exact
//! general path: a run that starts in ASCII and goes on past it (`café`) is
//! one run there.

/// `a`-`z`.
pub(crate) const LOWER: u8 = 1 << 0;
/// `A`-`Z`.
pub(crate) const UPPER: u8 = 1 << 1;
/// `0`-`9`.
pub(crate) const DIGIT: u8 = 1 << 2;
/// ASCII `[^\s\p{L}\p{N}]`: punctuation, symbols, controls.
pub(crate) const PUNCT: u8 = 1 << 3;
/// `\t`, `\v`, `\f`, ` `: white space that is not a newline.
pub(crate) const SPACE: u8 = 1 << 4;
/// `\r`, `\n`.
pub(crate) const NEWLINE: u8 = 1 << 5;
/// A byte >= 0x80: part of a longer character, for the general path.
pub(crate) const HIGH: u8 = 1 << 6;

pub(crate) const LETTER: u8 = LOWER | UPPER;

/// The class of every byte (exactly one bit each).
pub(crate) static CLASS: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut b = 0;
    while b < 256 {
        t[b] = match b as u8 {
            b'a'..=b'z' => LOWER,
            b'A'..=b'Z' => UPPER,
            b'0'..=b'9' => DIGIT,
            b'\r' | b'\n' => NEWLINE,
            b'\t' | 0x0B | 0x0C | b' ' => SPACE,
            0x80..=0xFF => HIGH,
            _ => PUNCT,
        };
        b += 1;
    }
    t
};

/// The class of byte `i` of `b`; 0 (no class) past the end.
#[inline(always)]
pub(crate) fn class_at(b: &[u8], i: usize) -> u8 {
    b.get(i).map_or(0, |&c| CLASS[c as usize])
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// The high bit of each byte of `w` that is in `lo..=hi` (ASCII bounds).
///
/// With the high bits cleared every byte is below 0x80, so adding at most
/// 0x7F to each cannot carry into the next: `x + (0x80 - lo)` has its high
/// bit set exactly when `x >= lo`, and `x + (0x7F - hi)` exactly when
/// `x > hi`. Bytes >= 0x80 are then excluded by their own high bit.
#[inline(always)]
const fn in_range(w: u64, lo: u8, hi: u8) -> u64 {
    let low7 = w & !HIGHS;
    let at_least_lo = low7 + ONES * (0x80 - lo as u64);
    let above_hi = low7 + ONES * (0x7F - hi as u64);
    at_least_lo & !above_hi & !w & HIGHS
}

/// The high bit of each byte of `w` that is `a`-`z`.
#[inline(always)]
const fn lower_bits(w: u64) -> u64 {
    in_range(w, b'a', b'z')
}

/// The high bit of each byte of `w` that is `A`-`Z`.
#[inline(always)]
const fn upper_bits(w: u64) -> u64 {
    in_range(w, b'A', b'Z')
}

/// The high bit of each byte of `w` that is an ASCII letter. (`x | 0x20`
/// maps `A`-`Z` onto `a`-`z` and no other byte into that range.)
#[inline(always)]
const fn letter_bits(w: u64) -> u64 {
    in_range(w | (ONES * 0x20), b'a', b'z')
}

/// The high bit of each byte of `w` that is `0`-`9`.
#[inline(always)]
const fn digit_bits(w: u64) -> u64 {
    in_range(w, b'0', b'9')
}

/// The high bit of each byte of `w` that is ASCII white space (`\t`-`\r`,
/// ` `).
#[inline(always)]
const fn white_bits(w: u64) -> u64 {
    in_range(w, b'\t', b'\r') | in_range(w, b' ', b' ')
}

/// The high bit of each byte of `w` that is `\r` or `\n`.
#[inline(always)]
const fn newline_bits(w: u64) -> u64 {
    in_range(w, b'\n', b'\n') | in_range(w, b'\r', b'\r')
}

/// The 8 bytes of `b` from `i` as a little-endian word (byte `i` lowest),
/// if the text has them.
#[inline(always)]
fn word_at(b: &[u8], i: usize) -> Option<u64> {
    b.get(i..i + 8).map(|bytes| u64::from_le_bytes(bytes.try_into().expect("8 bytes")))
}

/// The first byte of a word, from byte `from` (< 8) on, whose high bit
/// `bits` leaves clear; 8 if none. (Little-endian: the lowest set bit
/// belongs to the first such byte.)
#[inline(always)]
fn first_clear(bits: u64, from: usize) -> usize {
    let out = !bits & HIGHS & (u64::MAX << (8 * from));
    (out.trailing_zeros() / 8) as usize
}

/// The end of the run from `i` of bytes whose high bits `bits` sets
/// (8 bytes at a time; `is_in`, the same test on one byte, for the last
/// few bytes of the text).
#[inline(always)]
fn run_end(b: &[u8], mut i: usize, bits: impl Fn(u64) -> u64, is_in: impl Fn(u8) -> bool) -> usize {
    while let Some(w) = word_at(b, i) {
        let k = first_clear(bits(w), 0);
        if k < 8 {
            return i + k;
        }
        i += 8;
    }
    while b.get(i).is_some_and(|&c| is_in(c)) {
        i += 1;
    }
    i
}

/// The run of ASCII white space from `i`, 8 bytes at a time, as far as the
/// text has 8 bytes: where it stops (at a byte that is no ASCII white space,
/// or with fewer than 8 bytes left), and the end of its last newline (`\r`
/// or `\n`), if it has one.
#[inline]
pub(crate) fn white_words(b: &[u8], mut i: usize) -> (usize, Option<usize>) {
    let mut after_newline = None;
    while let Some(w) = word_at(b, i) {
        let out = !white_bits(w) & HIGHS;
        // The bytes before the first one out (all 8 if none is).
        let run = (out & out.wrapping_neg()).wrapping_sub(1);
        let newlines = newline_bits(w) & run;
        if newlines != 0 {
            after_newline = Some(i + (63 - newlines.leading_zeros() as usize) / 8 + 1);
        }
        if out != 0 {
            return (i + (out.trailing_zeros() / 8) as usize, after_newline);
        }
        i += 8;
    }
    (i, after_newline)
}

/// End of the run of ASCII letters from `i`.
#[inline]
pub(crate) fn letters_end(b: &[u8], i: usize) -> usize {
    run_end(b, i, letter_bits, |c| c.is_ascii_alphabetic())
}

/// End of the run of `a`-`z` from `i`.
#[inline]
pub(crate) fn lower_end(b: &[u8], i: usize) -> usize {
    run_end(b, i, lower_bits, |c| c.is_ascii_lowercase())
}

/// End of the run of `A`-`Z` from `i`.
#[inline]
pub(crate) fn upper_end(b: &[u8], i: usize) -> usize {
    run_end(b, i, upper_bits, |c| c.is_ascii_uppercase())
}

/// From `i`: the end of the run of `A`-`Z`, and the end of the run of
/// `a`-`z` after it (one 8-byte word for both, if it holds them).
#[inline(always)]
pub(crate) fn upper_then_lower_end(b: &[u8], i: usize) -> (usize, usize) {
    if let Some(w) = word_at(b, i) {
        let u = first_clear(upper_bits(w), 0);
        if u < 8 {
            let e = first_clear(lower_bits(w), u);
            return (i + u, if e < 8 { i + e } else { lower_end(b, i + 8) });
        }
    }
    let u = upper_end(b, i);
    (u, lower_end(b, u))
}

/// End of the run of `0`-`9` from `i`.
#[inline]
pub(crate) fn digits_end(b: &[u8], i: usize) -> usize {
    run_end(b, i, digit_bits, |c| c.is_ascii_digit())
}

/// End of the run of ASCII bytes that are no digit from `i`: where a digit
/// or a byte >= 0x80 is (or the end).
#[inline]
pub(crate) fn non_digits_end(b: &[u8], i: usize) -> usize {
    run_end(b, i, |w| !digit_bits(w) & !w & HIGHS, |c| c < 0x80 && !c.is_ascii_digit())
}

/// End of the run of bytes of class `class` (a set of bits) from `i`, one
/// byte at a time (for runs that are short: punctuation, white space).
#[inline]
pub(crate) fn class_end(b: &[u8], mut i: usize, class: u8) -> usize {
    while class_at(b, i) & class != 0 {
        i += 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn white_space_scan_equals_byte_scan() {
        // Random texts of white space (3 bytes in 4), and bytes that end a
        // run: a letter, a control that is no \s, a longer character.
        let bytes = [b' ', b'\t', b'\n', b'\r', 0x0B, 0x0C, b'x', 0x1C, 0xC2, 0xA0];
        let mut next = crate::split::lexer::tests::rng(0x9e3779b97f4a7c15);
        let mut rand = move || next() as usize;
        for _ in 0..100_000 {
            let n = rand() % 24;
            let text: Vec<u8> =
                (0..n).map(|_| if rand() % 4 != 0 { bytes[rand() % 6] } else { bytes[6 + rand() % 4] }).collect();
            for i in 0..text.len() {
                let (stop, newline) = white_words(&text, i);
                let end =
                    (i..text.len()).find(|&j| CLASS[text[j] as usize] & (SPACE | NEWLINE) == 0).unwrap_or(text.len());
                // At the run's end, or short of it within 8 bytes of the text's end.
                assert!(stop == end || (stop < end && stop + 8 > text.len()), "{text:?} from {i}");
                let want = (i..stop).rev().find(|&j| CLASS[text[j] as usize] == NEWLINE).map(|j| j + 1);
                assert_eq!(newline, want, "{text:?} from {i}");
            }
        }
    }

    #[test]
    fn word_scans_equal_byte_scans() {
        // Every byte value at every offset of a window, and runs crossing
        // the 8-byte steps and the text's end.
        type Scan = (fn(&[u8], usize) -> usize, fn(u8) -> bool);
        let scans: [Scan; 5] = [
            (non_digits_end, |c| c < 0x80 && !c.is_ascii_digit()),
            (letters_end, |c| c.is_ascii_alphabetic()),
            (lower_end, |c| c.is_ascii_lowercase()),
            (upper_end, |c| c.is_ascii_uppercase()),
            (digits_end, |c| c.is_ascii_digit()),
        ];
        for (scan, is_in) in scans {
            for fill in [b'a', b'Z', b'5'] {
                for len in 0..20 {
                    for stop in 0..=255u8 {
                        let mut text = vec![fill; len];
                        text.push(stop);
                        text.extend_from_slice(b"abcXYZ0123456789");
                        for i in 0..text.len() {
                            let want = (i..text.len()).find(|&j| !is_in(text[j])).unwrap_or(text.len());
                            assert_eq!(scan(&text, i), want, "{text:?} from {i}");
                            let u = upper_end(&text, i);
                            assert_eq!(upper_then_lower_end(&text, i), (u, lower_end(&text, u)), "{text:?} from {i}");
                        }
                    }
                }
            }
        }
    }
}
