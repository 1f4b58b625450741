//! The byte classes of a 64-byte window as bitmasks (bit `i` = byte `i`),
//! with SIMD: every byte compared at once, `movemask` gathering one bit per
//! byte. Two versions of the same function: SSE2 (four 16-byte loads; part
//! of x86_64 itself, always there) and AVX2 (two 32-byte loads; half the
//! instructions, chosen at run time where the CPU has it); and a plain one,
//! byte by byte, that the tests hold them to.
//!
//! The ASCII classes are those of `split/ascii.rs` (a test checks them against the
//! full Unicode table): for an ASCII byte each split pattern's class is
//! fixed. Bytes >= 0x80 are `high`, for the exact lexer to read, but for
//! the longer characters that English text has most (see `known_high`).

/// One bit per byte of the window for each class the rules (`rules.rs`) ask
/// about. Punctuation (`[^\s\p{L}\p{N}]`) is what is none of letter, digit,
/// white or high, so it needs no compare of its own.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Masks {
    /// `A`-`Z`, `a`-`z`; and both bytes of the letters of Latin-1.
    pub letter: u64,
    /// `A`-`Z` and Latin-1's capitals (GPT-4o's case classes; the others
    /// leave it unused).
    pub upper: u64,
    /// `0`-`9`.
    pub digit: u64,
    /// `' '`.
    pub space: u64,
    /// `\r`, `\n`.
    pub newline: u64,
    /// `\t \n \v \f \r` and `' '`: ASCII `\s`.
    pub white: u64,
    /// Bytes >= 0x80 of characters the masks do not know (undecided).
    pub high: u64,
    /// `'`.
    pub apostrophe: u64,
    /// `/` (GPT-4o's `[\r\n/]*`).
    pub slash: u64,
    /// The second and third bytes of the punctuation `known_high` knows (a
    /// punctuation character that is a letter's prefix is one character,
    /// three bytes).
    pub punct_tail: u64,
}

/// Bytes >= 0x80 that `known_high` looks at, one mask each.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct HighBytes {
    /// 0xC3: the first byte of U+00C0..=U+00FF.
    c3: u64,
    /// 0x80..=0x9E but 0x97: after 0xC3, the capitals À..Þ but ×.
    upper_tail: u64,
    /// 0x9F..=0xBF but 0xB7: after 0xC3, the small letters ß..ÿ but ÷.
    lower_tail: u64,
    /// 0xE2: the first byte of U+2000..=U+2FFF.
    e2: u64,
    /// 0x80.
    x80: u64,
    /// 0x90..=0xA7, 0xB0..=0xBF: after 0xE2 0x80, U+2010..=U+2027 (dashes,
    /// quotes, `…`, `•`) and U+2030..=U+203F (`‰ ′ ″ ‹ › ‼`...).
    punct_tail: u64,
}

/// The masks with the longer characters that English text has most taken
/// out of `high`: the letters of Latin-1 (`é`, `æ`: U+00C0..=U+00FF but `×`
/// and `÷`; `\p{L}`, capitals `\p{Lu}` up to U+00DE, the rest `\p{Ll}`) and
/// the punctuation of U+2010..=U+2027 and U+2030..=U+203F (`“ ” ‘ ’ — …`:
/// none is a letter, number, mark or white space). Their bytes take the
/// class of the character, so the rules treat a letter as a run of letter
/// bytes and a punctuation character as a run of punctuation bytes; the
/// one rule that counts characters, a punctuation prefix, uses
/// `punct_tail`. A character is known only if all its bytes are in the
/// window (the shifts bring in nothing from past byte 63). A test checks
/// these classes against the Unicode table.
#[inline(always)]
pub(crate) fn known_high(m: &mut Masks, h: HighBytes) {
    let up = h.c3 & h.upper_tail >> 1;
    let low = h.c3 & h.lower_tail >> 1;
    let latin = up | low;
    let lead3 = h.e2 & h.x80 >> 1 & h.punct_tail >> 2;
    let tail3 = lead3 << 1 | lead3 << 2;
    m.letter |= latin | latin << 1;
    m.upper |= up | up << 1;
    m.punct_tail = tail3;
    m.high &= !(latin | latin << 1 | lead3 | tail3);
}

/// The end of the run of ASCII white space in `b` from `from`, and the end
/// of its last newline (`\r`, `\n`) if it has one; None if the run reaches
/// a byte >= 0x80, or the last `(b.len() - from) % 16` bytes. Byte by byte:
/// the reference for `white_run_sse2` (and the version for other CPUs).
#[cfg_attr(all(target_arch = "x86_64", not(test)), allow(dead_code))]
pub(crate) fn white_run(b: &[u8], from: usize) -> Option<(usize, Option<usize>)> {
    // As far as whole 16-byte blocks from `from` go, as `white_run_sse2`.
    let limit = from + (b.len() - from) / 16 * 16;
    let mut newline = None;
    for (i, &c) in b.iter().enumerate().take(limit).skip(from) {
        match c {
            b'\n' | b'\r' => newline = Some(i + 1),
            b'\t' | 0x0B | 0x0C | b' ' => {}
            0x80.. => return None,
            _ => return Some((i, newline)),
        }
    }
    None
}

/// `white_run`, 16 bytes at a time (SSE2). (A safe function: SSE2 is part
/// of x86_64, and every load is bounds-checked first.)
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(crate) fn white_run_sse2(b: &[u8], mut i: usize) -> Option<(usize, Option<usize>)> {
    use std::arch::x86_64::*;
    let mut newline = None;
    while i + 16 <= b.len() {
        // SAFETY: the load reads the 16 bytes of `b` from `i` (`i + 16 <=
        // b.len()`); SSE2, all that these use, is part of x86_64.
        let (white, newlines) = unsafe {
            let v = _mm_loadu_si128(b.as_ptr().add(i) as *const __m128i);
            let eq = |c: u8| _mm_cmpeq_epi8(v, _mm_set1_epi8(c as i8));
            // `\t`..=`\r` (9..=13): see `bias` below.
            let controls = _mm_cmplt_epi8(_mm_add_epi8(v, _mm_set1_epi8(0x77)), _mm_set1_epi8(-123));
            let white = _mm_movemask_epi8(_mm_or_si128(controls, eq(b' '))) as u32;
            let newlines = _mm_movemask_epi8(_mm_or_si128(eq(b'\n'), eq(b'\r'))) as u32;
            (white, newlines)
        };
        let stop = !white & 0xFFFF;
        if stop == 0 {
            if newlines != 0 {
                newline = Some(i + 32 - newlines.leading_zeros() as usize);
            }
            i += 16;
            continue;
        }
        // The newlines before the first byte that is no white space.
        let newlines = newlines & ((stop & stop.wrapping_neg()) - 1);
        if newlines != 0 {
            newline = Some(i + 32 - newlines.leading_zeros() as usize);
        }
        let end = i + stop.trailing_zeros() as usize;
        return if b[end] >= 0x80 { None } else { Some((end, newline)) };
    }
    None
}

/// `ascii::letters_end` (the end of the run of ASCII letters from `i`), 16
/// bytes at a time (SSE2), then byte by byte for the last few. (Safe, as
/// `white_run_sse2`.)
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(crate) fn letter_run_sse2(b: &[u8], mut i: usize) -> usize {
    use std::arch::x86_64::*;
    while i + 16 <= b.len() {
        // SAFETY: the load reads the 16 bytes of `b` from `i` (`i + 16 <=
        // b.len()`); SSE2, all that these use, is part of x86_64.
        let letters = unsafe {
            let v = _mm_loadu_si128(b.as_ptr().add(i) as *const __m128i);
            // `| 0x20` maps `A`-`Z` onto `a`-`z` (and no other byte there);
            // then `a`..=`z` as in `x86::bias`.
            let folded = _mm_or_si128(v, _mm_set1_epi8(0x20));
            let letters = _mm_cmplt_epi8(_mm_add_epi8(folded, _mm_set1_epi8(0x1F)), _mm_set1_epi8(-102));
            _mm_movemask_epi8(letters) as u32
        };
        let stop = !letters & 0xFFFF;
        if stop != 0 {
            return i + stop.trailing_zeros() as usize;
        }
        i += 16;
    }
    crate::split::ascii::letters_end(b, i)
}

/// A way to classify 64 bytes: reads `w[0..64]` only.
pub(crate) trait Classify {
    /// The ASCII classes, and `high` for all bytes >= 0x80.
    ///
    /// # Safety
    /// The CPU must have the instructions the implementation uses (always
    /// true for SSE2 on x86_64; AVX2 only where detected).
    unsafe fn classify(w: &[u8; 64]) -> Masks;

    /// The bytes >= 0x80 that `known_high` needs (asked only when the window
    /// has some).
    ///
    /// # Safety
    /// As for `classify`.
    unsafe fn high_bytes(w: &[u8; 64]) -> HighBytes;
}

/// Plain Rust, one byte at a time: the reference the SIMD versions are
/// tested against.
#[cfg(test)]
pub(crate) struct Bytewise;

#[cfg(test)]
impl Classify for Bytewise {
    unsafe fn classify(w: &[u8; 64]) -> Masks {
        let mut m = Masks::default();
        for (i, &c) in w.iter().enumerate() {
            let bit = 1u64 << i;
            let set = |mask: &mut u64, yes: bool| {
                if yes {
                    *mask |= bit
                }
            };
            set(&mut m.letter, c.is_ascii_alphabetic());
            set(&mut m.upper, c.is_ascii_uppercase());
            set(&mut m.digit, c.is_ascii_digit());
            set(&mut m.space, c == b' ');
            set(&mut m.newline, c == b'\r' || c == b'\n');
            set(&mut m.white, matches!(c, b'\t' | b'\n' | 0x0B | 0x0C | b'\r' | b' '));
            set(&mut m.high, c >= 0x80);
            set(&mut m.apostrophe, c == b'\'');
            set(&mut m.slash, c == b'/');
        }
        m
    }

    unsafe fn high_bytes(w: &[u8; 64]) -> HighBytes {
        let mut h = HighBytes::default();
        for (i, &c) in w.iter().enumerate() {
            let bit = 1u64 << i;
            let set = |mask: &mut u64, yes: bool| {
                if yes {
                    *mask |= bit
                }
            };
            set(&mut h.c3, c == 0xC3);
            set(&mut h.upper_tail, (0x80..=0x9E).contains(&c) && c != 0x97);
            set(&mut h.lower_tail, (0x9F..=0xBF).contains(&c) && c != 0xB7);
            set(&mut h.e2, c == 0xE2);
            set(&mut h.x80, c == 0x80);
            set(&mut h.punct_tail, (0x90..=0xA7).contains(&c) || (0xB0..=0xBF).contains(&c));
        }
        h
    }
}

#[cfg(target_arch = "x86_64")]
pub(crate) use x86::{Avx2, Sse2};

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{Classify, HighBytes, Masks};
    use std::arch::x86_64::*;

    /// The bias that maps the bytes `lo..lo + n` onto the lowest signed
    /// bytes, -128..-128 + n: `x + (0x80 - lo)` (wrapping) is
    /// `(x - lo) mod 256` moved down by 128, so one signed compare with
    /// `-128 + n` tests `lo <= x < lo + n` (for any `lo`, `n <= 128`).
    #[inline(always)]
    const fn bias(lo: u8) -> i8 {
        0x80u8.wrapping_sub(lo) as i8
    }

    #[inline(always)]
    const fn limit(n: u8) -> i8 {
        (-128i16 + n as i16) as i8
    }

    /// Joins four 16-bit or two 32-bit movemasks into one 64-bit mask.
    /// (Written out: as a loop over the parts, LLVM vectorised the joins
    /// of all the classes together into byte inserts and extracts, which
    /// made GPT-4o's lexing 60% slower.)
    macro_rules! join {
        ($parts:expr, $field:tt, 16) => {
            $parts[0].$field as u64
                | ($parts[1].$field as u64) << 16
                | ($parts[2].$field as u64) << 32
                | ($parts[3].$field as u64) << 48
        };
        ($parts:expr, $field:tt, 32) => {
            $parts[0].$field as u64 | ($parts[1].$field as u64) << 32
        };
    }

    /// 16 or 32 bytes' ASCII classes (a bit per byte, in order).
    #[derive(Clone, Copy)]
    struct Part {
        letter: u32,
        upper: u32,
        digit: u32,
        space: u32,
        newline: u32,
        white: u32,
        high: u32,
        apostrophe: u32,
        slash: u32,
    }

    /// 16 or 32 bytes' `HighBytes`.
    #[derive(Clone, Copy)]
    struct HighPart {
        c3: u32,
        upper_tail: u32,
        lower_tail: u32,
        e2: u32,
        x80: u32,
        punct_tail: u32,
    }

    /// `x`, hidden from the optimiser. The masks are plain numbers from
    /// here on: left to it, LLVM joined the masks of two classes by joining
    /// their compare vectors (`movemask(a) | movemask(b)` as
    /// `movemask(a | b)`), which kept the vectors alive across the branch
    /// to `known_high`, spilled byte by byte: GPT-4o's lexing took 60% more
    /// instructions.
    #[inline(always)]
    fn opaque(mut x: u64) -> u64 {
        // SAFETY: an empty asm statement (a comment naming the register):
        // it reads and writes nothing.
        unsafe { std::arch::asm!("/* {0} */", inout(reg) x, options(pure, nomem, nostack, preserves_flags)) };
        x
    }

    macro_rules! masks {
        ($parts:expr, $width:tt) => {
            Masks {
                letter: opaque(join!($parts, letter, $width)),
                upper: opaque(join!($parts, upper, $width)),
                digit: opaque(join!($parts, digit, $width)),
                space: opaque(join!($parts, space, $width)),
                newline: opaque(join!($parts, newline, $width)),
                white: opaque(join!($parts, white, $width)),
                high: opaque(join!($parts, high, $width)),
                apostrophe: opaque(join!($parts, apostrophe, $width)),
                slash: opaque(join!($parts, slash, $width)),
                punct_tail: 0,
            }
        };
    }

    macro_rules! high_bytes {
        ($parts:expr, $width:tt) => {
            HighBytes {
                c3: join!($parts, c3, $width),
                upper_tail: join!($parts, upper_tail, $width),
                lower_tail: join!($parts, lower_tail, $width),
                e2: join!($parts, e2, $width),
                x80: join!($parts, x80, $width),
                punct_tail: join!($parts, punct_tail, $width),
            }
        };
    }

    /// The classifiers for one vector width: the same code for SSE2's 16
    /// bytes and AVX2's 32, from that width's intrinsics; a window is the
    /// vectors `$k` (`0, 1, 2, 3` of 16 bytes, `0, 1` of 32). The parts are
    /// an array written out, not `[0, 1, 2, 3].map(..)`: that was a call
    /// per part.
    macro_rules! classifier {
        ($name:ident, $vec:ty, $width:tt, [$($k:expr),+], $load:ident, $set1:ident, $add:ident, $or:ident,
         $andnot:ident, $cmpeq:ident, $cmpgt:ident, $movemask:ident) => {
            // Every function here is unsafe with `Classify`'s contract: the
            // CPU has the instructions of this width (SSE2 always on x86_64,
            // AVX2 where `Engine::best` found it); that is all their unsafe
            // blocks rely on, and `load` reads inside the window too.
            impl Classify for $name {
                #[inline(always)]
                unsafe fn classify(w: &[u8; 64]) -> Masks {
                    // SAFETY: the CPU has this width's instructions (the caller's promise).
                    let parts = unsafe { [$(Self::part(Self::load(w, $k))),+] };
                    masks!(parts, $width)
                }

                #[inline(always)]
                unsafe fn high_bytes(w: &[u8; 64]) -> HighBytes {
                    // SAFETY: the CPU has this width's instructions (the caller's promise).
                    let parts = unsafe { [$(Self::high_part(Self::load(w, $k))),+] };
                    high_bytes!(parts, $width)
                }
            }

            impl $name {
                /// Bytes in `lo..lo + n`.
                #[inline(always)]
                unsafe fn in_range(x: $vec, lo: u8, n: u8) -> $vec {
                    // SAFETY: the CPU has this width's instructions (the caller's promise).
                    unsafe { $cmpgt($set1(limit(n)), $add(x, $set1(bias(lo)))) }
                }

                #[inline(always)]
                unsafe fn eq(v: $vec, c: u8) -> $vec {
                    // SAFETY: the CPU has this width's instructions (the caller's promise).
                    unsafe { $cmpeq(v, $set1(c as i8)) }
                }

                #[inline(always)]
                unsafe fn bits(x: $vec) -> u32 {
                    // SAFETY: the CPU has this width's instructions (the caller's promise).
                    unsafe { $movemask(x) as u32 }
                }

                #[inline(always)]
                unsafe fn part(v: $vec) -> Part {
                    // SAFETY: the CPU has this width's instructions (the caller's promise).
                    unsafe {
                        let space = Self::eq(v, b' ');
                        Part {
                            // `| 0x20` maps `A`-`Z` onto `a`-`z` and no other
                            // byte into that range.
                            letter: Self::bits(Self::in_range($or(v, $set1(0x20)), b'a', 26)),
                            upper: Self::bits(Self::in_range(v, b'A', 26)),
                            digit: Self::bits(Self::in_range(v, b'0', 10)),
                            space: Self::bits(space),
                            newline: Self::bits($or(Self::eq(v, b'\n'), Self::eq(v, b'\r'))),
                            // `\t \n \v \f \r`: 9..=13.
                            white: Self::bits($or(Self::in_range(v, b'\t', 5), space)),
                            high: Self::bits(v),
                            apostrophe: Self::bits(Self::eq(v, b'\'')),
                            slash: Self::bits(Self::eq(v, b'/')),
                        }
                    }
                }

                #[inline(always)]
                unsafe fn high_part(v: $vec) -> HighPart {
                    // SAFETY: the CPU has this width's instructions (the caller's promise).
                    unsafe {
                        HighPart {
                            c3: Self::bits(Self::eq(v, 0xC3)),
                            upper_tail: Self::bits($andnot(Self::eq(v, 0x97), Self::in_range(v, 0x80, 0x1F))),
                            lower_tail: Self::bits($andnot(Self::eq(v, 0xB7), Self::in_range(v, 0x9F, 0x21))),
                            e2: Self::bits(Self::eq(v, 0xE2)),
                            x80: Self::bits(Self::eq(v, 0x80)),
                            punct_tail: Self::bits($or(Self::in_range(v, 0x90, 0x18), Self::in_range(v, 0xB0, 0x10))),
                        }
                    }
                }

                /// The window's vectors (unaligned loads of `w[0..64]`).
                #[inline(always)]
                unsafe fn load(w: &[u8; 64], k: usize) -> $vec {
                    // SAFETY: k < 64 / width: the vector lies inside `w`; the
                    // CPU has this width's instructions (the caller's promise).
                    unsafe { $load((w.as_ptr() as *const $vec).add(k)) }
                }
            }
        };
    }

    /// SSE2: four 16-byte loads. (SAFETY of the intrinsics: SSE2 is part
    /// of x86_64.)
    pub(crate) struct Sse2;
    classifier! {
        Sse2, __m128i, 16, [0, 1, 2, 3], _mm_loadu_si128, _mm_set1_epi8, _mm_add_epi8, _mm_or_si128,
        _mm_andnot_si128, _mm_cmpeq_epi8, _mm_cmpgt_epi8, _mm_movemask_epi8
    }

    /// AVX2: two 32-byte loads.
    ///
    /// (Always inlined, not `#[target_feature(enable = "avx2")]` functions:
    /// those are only inlined into functions with the feature, and LLVM did
    /// not inline them into the AVX2 lexing loop, reached through the
    /// generic `tile_masks`. Always inlined, they put the intrinsics' calls
    /// into that loop, which has the feature, and there the intrinsics are
    /// inlined. SAFETY of the intrinsics: the caller's, `Classify`.)
    pub(crate) struct Avx2;
    classifier! {
        Avx2, __m256i, 32, [0, 1], _mm256_loadu_si256, _mm256_set1_epi8, _mm256_add_epi8, _mm256_or_si256,
        _mm256_andnot_si256, _mm256_cmpeq_epi8, _mm256_cmpgt_epi8, _mm256_movemask_epi8
    }
}
