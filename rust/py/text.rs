//! Python `str` to UTF-8 for the encoder, faster than CPython's own encoder.
//!
//! **Why:** a `str` holds its text as one, two or four bytes per character
//! (latin-1, UCS-2, UCS-4), and the UTF-8 the encoder reads is made by
//! CPython on first request, in a loop of ~500 MB/s: 19 ms for 10 MB of
//! English books (a UCS-2 `str`: one curly quote is enough), about a quarter
//! of encoding it. `simdutf` converts latin-1, UTF-16 and UTF-32 with the
//! widest SIMD the CPU has, non-ASCII text too (see docs/dev/performance.md,
//! "str to UTF-8").
//!
//! **Exactness:** the bytes are the UTF-8 of the same code points. A `str`
//! with a surrogate code point has no UTF-8; for those (and for a `str`
//! whose UTF-8 CPython has made already, or an ASCII one, whose bytes are
//! their own UTF-8) we ask CPython, as before, which raises
//! `UnicodeEncodeError` for surrogates: the Python side's fallback then
//! replaces them as tiktoken does. (Tested from Python, where the bindings
//! are built: `tests/test_parity.py`, long strings of every kind.)

use std::borrow::Cow;

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyString;

/// Below this many characters CPython's encoder is as good (and caches).
const MIN_CHARS: usize = 1 << 12;

/// Where a str's UTF-8 comes from: CPython (an ASCII str is its own UTF-8,
/// CPython may have made it already, and short strings are not worth it),
/// or its units, converted by `convert`.
enum Source {
    CPython,
    /// The str's kind, data and length (valid while the str lives).
    Units(u32, usize, usize),
}

fn source(s: &Bound<'_, PyString>) -> Source {
    let p = s.as_ptr();
    // SAFETY: `p` is a live str (held by `s`); these read its header. Only
    // a non-ASCII str has the `utf8` field (a compact ASCII one is shorter).
    let (ascii, kind, len, data) = unsafe {
        (
            ffi::PyUnicode_IS_ASCII(p) != 0,
            ffi::PyUnicode_KIND(p),
            ffi::PyUnicode_GET_LENGTH(p) as usize,
            ffi::PyUnicode_DATA(p),
        )
    };
    // SAFETY: as above; read only for a str that is not ASCII, which is a
    // `PyCompactUnicodeObject` at least and so has the `utf8` field.
    let cached = !ascii && unsafe { !(*p.cast::<ffi::PyCompactUnicodeObject>()).utf8.is_null() };
    if ascii || cached || len < MIN_CHARS {
        Source::CPython
    } else {
        Source::Units(kind, data as usize, len)
    }
}

/// The UTF-8 of a str's units; None if it holds a surrogate.
///
/// # Safety
/// `(kind, data, len)` from [`source`] of a str that is alive (its data is
/// immutable), read with or without the GIL.
unsafe fn convert((kind, data, len): (u32, usize, usize)) -> Option<String> {
    // SAFETY: `data` holds `len` units of `kind`'s width, which stay alive
    // and unchanged while the str lives (the caller's promise).
    unsafe {
        match kind {
            ffi::PyUnicode_1BYTE_KIND => Some(latin1(std::slice::from_raw_parts(data as *const u8, len))),
            ffi::PyUnicode_2BYTE_KIND => ucs2(std::slice::from_raw_parts(data as *const u16, len)),
            _ => ucs4(std::slice::from_raw_parts(data as *const u32, len)),
        }
    }
}

/// The UTF-8 of `s`: borrowed where CPython has it at hand, else converted.
pub(super) fn utf8<'a>(s: &'a Bound<'_, PyString>) -> PyResult<Cow<'a, str>> {
    match source(s) {
        // SAFETY: `s` holds the str alive for the call.
        Source::Units(kind, data, len) => match unsafe { convert((kind, data, len)) } {
            Some(text) => Ok(Cow::Owned(text)),
            None => s.to_str().map(Cow::Borrowed), // surrogates: CPython raises
        },
        Source::CPython => s.to_str().map(Cow::Borrowed),
    }
}

/// [`utf8`] of many strs, the conversions done by `pool`'s threads without
/// the GIL (a batch's documents: CPython would make their UTF-8 one after
/// the other on this thread).
pub(super) fn utf8_all<'a>(
    py: Python<'_>,
    texts: &'a [Bound<'_, PyString>],
    pool: &rayon::ThreadPool,
) -> PyResult<Vec<Cow<'a, str>>> {
    use rayon::prelude::*;
    let sources: Vec<Option<(u32, usize, usize)>> = texts
        .iter()
        .map(|t| match source(t) {
            Source::Units(kind, data, len) => Some((kind, data, len)),
            Source::CPython => None,
        })
        .collect();
    // SAFETY: `texts` holds every str alive until this returns, and a str's
    // data never changes: reading it from other threads is safe.
    let converted: Vec<Option<String>> = py
        .allow_threads(|| pool.install(|| sources.par_iter().map(|s| s.and_then(|s| unsafe { convert(s) })).collect()));
    texts
        .iter()
        .zip(converted)
        .map(|(t, c)| match c {
            Some(text) => Ok(Cow::Owned(text)),
            None => t.to_str().map(Cow::Borrowed), // CPython's (or surrogates: it raises)
        })
        .collect()
}

/// The UTF-8 of latin-1 text (every unit is a character).
fn latin1(units: &[u8]) -> String {
    let len = simdutf::utf8_length_from_latin1(units);
    // SAFETY: simdutf writes the UTF-8 of `units`: `len` bytes.
    let text = unsafe { written(len, |out| simdutf::convert_latin1_to_utf8(units.as_ptr(), units.len(), out)) };
    assert_eq!(text.len(), len, "latin-1 to UTF-8: length");
    text
}

/// None if a surrogate is present (UCS-2 data never holds a valid pair:
/// a str with characters past U+FFFF is UCS-4).
///
/// A block of units at a time, small enough to stay in the L1 cache: its
/// surrogates looked for by a loop of our own (simdutf's check would accept
/// a high surrogate followed by a low one as a pair, where in a str they
/// are two code points, which have no UTF-8; 16-bit masks, so that it is
/// vectorised), then the block converted while it is still in the cache,
/// into room for the worst case (3 bytes a unit; only the bytes written are
/// ever touched). A pass over the whole str that looked for surrogates and
/// counted the exact length, then the conversion, read the units from
/// memory twice (docs/dev/performance.md, "str to UTF-8").
fn ucs2(units: &[u16]) -> Option<String> {
    let mut surrogate = false;
    // SAFETY: every block converted is surrogate-free UCS-2, which is valid
    // UTF-16 (native byte order, as the str holds it) and never cut inside
    // a pair (it has none); its UTF-8 takes at most 3 bytes a unit, so the
    // blocks' UTF-8 fits the room, one after the other.
    let text = unsafe {
        written(3 * units.len(), |out| {
            let mut n = 0;
            for block in units.chunks(UCS2_BLOCK) {
                let mut s = 0u16;
                for &u in block {
                    s |= (u & 0xF800 == 0xD800) as u16;
                }
                if s != 0 {
                    surrogate = true;
                    return 0;
                }
                n += simdutf::convert_valid_utf16_to_utf8(block.as_ptr(), block.len(), out.add(n));
            }
            n
        })
    };
    (!surrogate).then_some(text)
}

/// Units a block of [`ucs2`] (16 KiB of them, and at most 24 KiB of UTF-8).
const UCS2_BLOCK: usize = 1 << 13;

/// None if a surrogate is present (simdutf's conversion refuses them).
///
/// One pass, checking as it converts, into room for the worst case (4
/// bytes a character: the size of the str's own data; only the bytes
/// written are ever touched). A check and a count before an unchecked
/// conversion read the 4-byte units three times: 2.5x slower on 10 MB of
/// code.
fn ucs4(units: &[u32]) -> Option<String> {
    // SAFETY: UTF-8 takes at most 4 bytes a code point; simdutf writes the
    // UTF-8 of valid UTF-32, or returns 0 for invalid (a surrogate).
    let text =
        unsafe { written(4 * units.len(), |out| simdutf::convert_utf32_to_utf8(units.as_ptr(), units.len(), out)) };
    (units.is_empty() || !text.is_empty()).then_some(text)
}

/// A string of the bytes `write` writes, given room for `room` of them; it
/// returns how many it wrote.
///
/// The buffer is not zeroed first: zeroing it cost 4% of `encode_to_numpy`
/// on 10 MB of English when the memory was reused.
///
/// # Safety
/// `write` must write valid UTF-8 to the first bytes of its room, at most
/// `room` of them, and return their number.
unsafe fn written(room: usize, write: impl FnOnce(*mut u8) -> usize) -> String {
    let mut out: Vec<u8> = Vec::with_capacity(room);
    let n = write(out.as_mut_ptr());
    assert!(n <= room, "str to UTF-8: wrote {n} bytes into room for {room}");
    // SAFETY: `write` initialised `n` bytes of UTF-8 (the caller's promise).
    unsafe {
        out.set_len(n);
        String::from_utf8_unchecked(out)
    }
}
