//! The byte classes of a 64-byte window as bitmasks (bit `i` = byte `i`),
//! with SIMD: every byte compared at once, `movemask` gathering one bit per
//! byte. Two versions of the same function: SSE2 (four 16-byte loads; part
//! of x86_64 itself, always there) and AVX2 (two 32-byte loads; half the
//! instructions, chosen at run time where the CPU has it).
//!
//! The classes are those of `ascii.rs` (a test checks them against the full
//! Unicode table): for an ASCII byte each split pattern's class is fixed,
//! and every byte >= 0x80 is `high`, for the exact lexer to read.

/// One bit per byte of the window for each class the rules (`rules.rs`) ask
/// about. Punctuation (`[^\s\p{L}\p{N}]` in ASCII) is what is none of
/// letter, digit, white or high, so it needs no compare of its own.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Masks {
    /// `A`-`Z`, `a`-`z`.
    pub letter: u64,
    /// `A`-`Z` (GPT-4o's case classes; the others leave it unused).
    pub upper: u64,
    /// `0`-`9`.
    pub digit: u64,
    /// `' '`.
    pub space: u64,
    /// `\r`, `\n`.
    pub newline: u64,
    /// `\t \n \v \f \r` and `' '`: ASCII `\s`.
    pub white: u64,
    /// Bytes >= 0x80.
    pub high: u64,
    /// `'`.
    pub apostrophe: u64,
    /// `/` (GPT-4o's `[\r\n/]*`).
    pub slash: u64,
}

/// A way to classify 64 bytes. `classify` reads `w[0..64]` only.
pub(crate) trait Classify {
    /// # Safety
    /// The CPU must have the instructions the implementation uses (always
    /// true for SSE2 on x86_64; AVX2 only where detected).
    unsafe fn classify(w: &[u8; 64]) -> Masks;
}

/// Plain Rust, one byte at a time: the reference the SIMD versions are
/// tested against (and what a CPU without them would use, were the mask
/// lexer enabled there).
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) struct Bytewise;

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
}

#[cfg(target_arch = "x86_64")]
pub(crate) use x86::{Avx2, Sse2};

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{Classify, Masks};
    use std::arch::x86_64::*;

    /// The bias that maps the bytes `lo..lo + n` onto the lowest signed
    /// bytes, -128..-128 + n: `x + (0x80 - lo)` (wrapping) is
    /// `(x - lo) mod 256` moved down by 128, so one signed compare with
    /// `-128 + n` tests `lo <= x < lo + n` (bytes >= 0x80 included: they
    /// land above, as no range here reaches 0x80).
    #[inline(always)]
    const fn bias(lo: u8) -> i8 {
        0x80u8.wrapping_sub(lo) as i8
    }

    #[inline(always)]
    const fn limit(n: u8) -> i8 {
        (-128i16 + n as i16) as i8
    }

    /// 16 bytes' classes, one bit per byte in the low 16 bits of each.
    #[inline(always)]
    unsafe fn quarter(v: __m128i) -> [u32; 9] {
        // SAFETY (all intrinsics here): SSE2 is part of x86_64.
        let in_range = |x: __m128i, lo: u8, n: u8| {
            _mm_cmplt_epi8(_mm_add_epi8(x, _mm_set1_epi8(bias(lo))), _mm_set1_epi8(limit(n)))
        };
        let eq = |c: u8| _mm_cmpeq_epi8(v, _mm_set1_epi8(c as i8));
        let bits = |x: __m128i| _mm_movemask_epi8(x) as u32;
        let space = eq(b' ');
        [
            bits(in_range(_mm_or_si128(v, _mm_set1_epi8(0x20)), b'a', 26)),
            bits(in_range(v, b'A', 26)),
            bits(in_range(v, b'0', 10)),
            bits(space),
            bits(_mm_or_si128(eq(b'\n'), eq(b'\r'))),
            bits(_mm_or_si128(in_range(v, b'\t', 5), space)),
            bits(v),
            bits(eq(b'\'')),
            bits(eq(b'/')),
        ]
    }

    /// SSE2: four 16-byte loads.
    pub(crate) struct Sse2;

    impl Classify for Sse2 {
        #[inline(always)]
        unsafe fn classify(w: &[u8; 64]) -> Masks {
            let p = w.as_ptr() as *const __m128i;
            // SAFETY: the four unaligned loads read w[0..64].
            let q = [0, 1, 2, 3].map(|k| quarter(_mm_loadu_si128(p.add(k))));
            let join = |f: usize| {
                q[0][f] as u64 | (q[1][f] as u64) << 16 | (q[2][f] as u64) << 32 | (q[3][f] as u64) << 48
            };
            Masks {
                letter: join(0),
                upper: join(1),
                digit: join(2),
                space: join(3),
                newline: join(4),
                white: join(5),
                high: join(6),
                apostrophe: join(7),
                slash: join(8),
            }
        }
    }

    /// AVX2: two 32-byte loads.
    pub(crate) struct Avx2;

    impl Classify for Avx2 {
        #[inline(always)]
        unsafe fn classify(w: &[u8; 64]) -> Masks {
            classify_avx2(w)
        }
    }

    /// (Not `#[target_feature(enable = "avx2")]` functions: those are only
    /// inlined where they are called from a function with the feature, and
    /// LLVM did not inline this one into the AVX2 lexing loop, reached through
    /// the generic `tile_masks`. Always inlined instead, they put the
    /// intrinsics' calls into that loop, which has the feature, and there
    /// the intrinsics are inlined.)
    #[inline(always)]
    unsafe fn classify_avx2(w: &[u8; 64]) -> Masks {
        let p = w.as_ptr() as *const __m256i;
        // SAFETY: the two unaligned loads read w[0..64].
        let (lo, hi) = (half(_mm256_loadu_si256(p)), half(_mm256_loadu_si256(p.add(1))));
        let join = |f: usize| lo[f] as u64 | (hi[f] as u64) << 32;
        Masks {
            letter: join(0),
            upper: join(1),
            digit: join(2),
            space: join(3),
            newline: join(4),
            white: join(5),
            high: join(6),
            apostrophe: join(7),
            slash: join(8),
        }
    }

    /// 32 bytes' classes, one bit per byte.
    #[inline(always)]
    unsafe fn half(v: __m256i) -> [u32; 9] {
        let space = eq(v, b' ');
        [
            bits(in_range(_mm256_or_si256(v, _mm256_set1_epi8(0x20)), b'a', 26)),
            bits(in_range(v, b'A', 26)),
            bits(in_range(v, b'0', 10)),
            bits(space),
            bits(_mm256_or_si256(eq(v, b'\n'), eq(v, b'\r'))),
            bits(_mm256_or_si256(in_range(v, b'\t', 5), space)),
            bits(v),
            bits(eq(v, b'\'')),
            bits(eq(v, b'/')),
        ]
    }

    #[inline(always)]
    unsafe fn in_range(x: __m256i, lo: u8, n: u8) -> __m256i {
        _mm256_cmpgt_epi8(_mm256_set1_epi8(limit(n)), _mm256_add_epi8(x, _mm256_set1_epi8(bias(lo))))
    }

    #[inline(always)]
    unsafe fn eq(v: __m256i, c: u8) -> __m256i {
        _mm256_cmpeq_epi8(v, _mm256_set1_epi8(c as i8))
    }

    #[inline(always)]
    unsafe fn bits(x: __m256i) -> u32 {
        _mm256_movemask_epi8(x) as u32
    }
}
