//! Python `str` to UTF-8 for the encoder, faster than CPython's own encoder.
//!
//! **Why:** a `str` holds its text as one, two or four bytes per character
//! (latin-1, UCS-2, UCS-4), and the UTF-8 the encoder reads is made by
//! CPython on first request, in a loop of ~500 MB/s: 19 ms for 10 MB of
//! English books (a UCS-2 `str`: one curly quote is enough), about a quarter
//! of encoding it. `encoding_rs` converts latin-1 and UTF-16 with SIMD, ASCII
//! runs a block at a time (see docs/performance.md, "str to UTF-8").
//!
//! **Exactness:** the bytes are the UTF-8 of the same code points. A `str`
//! with a surrogate code point has no UTF-8; for those (and for a `str`
//! whose UTF-8 CPython has made already, or an ASCII one, whose bytes are
//! their own UTF-8) we ask CPython, as before, which raises
//! `UnicodeEncodeError` for surrogates: the Python side's fallback then
//! replaces them as tiktoken does.

use std::borrow::Cow;

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyString;

/// Below this many characters CPython's encoder is as good (and caches).
const MIN_CHARS: usize = 1 << 12;

/// The UTF-8 of `s`: borrowed where CPython has it at hand, else converted.
pub(super) fn utf8<'a>(s: &'a Bound<'_, PyString>) -> PyResult<Cow<'a, str>> {
    let p = s.as_ptr();
    // SAFETY: `p` is a live str (held by `s`); these read its header. Only
    // a non-ASCII str has the `utf8` field (a compact ASCII one is shorter).
    let (ascii, kind, len, data) = unsafe {
        (ffi::PyUnicode_IS_ASCII(p) != 0, ffi::PyUnicode_KIND(p), ffi::PyUnicode_GET_LENGTH(p) as usize, ffi::PyUnicode_DATA(p))
    };
    let cached = !ascii && unsafe { !(*p.cast::<ffi::PyCompactUnicodeObject>()).utf8.is_null() };
    if ascii || cached || len < MIN_CHARS {
        return s.to_str().map(Cow::Borrowed);
    }
    // SAFETY: a str's data is `len` units of its kind, immutable while `s`
    // lives (and we hold the GIL).
    let converted = unsafe {
        match kind {
            ffi::PyUnicode_1BYTE_KIND => Some(latin1(std::slice::from_raw_parts(data.cast::<u8>(), len))),
            ffi::PyUnicode_2BYTE_KIND => ucs2(std::slice::from_raw_parts(data.cast::<u16>(), len)),
            _ => ucs4(std::slice::from_raw_parts(data.cast::<u32>(), len)),
        }
    };
    match converted {
        Some(text) => Ok(Cow::Owned(text)),
        None => s.to_str().map(Cow::Borrowed), // surrogates: CPython raises
    }
}

fn latin1(units: &[u8]) -> String {
    let mut out = vec![0u8; units.len() * 2];
    let n = encoding_rs::mem::convert_latin1_to_utf8(units, &mut out);
    out.truncate(n);
    // SAFETY: encoding_rs wrote the UTF-8 of latin-1 text.
    unsafe { String::from_utf8_unchecked(out) }
}

/// None if a surrogate is present (UCS-2 data never holds a valid pair:
/// a str with characters past U+FFFF is UCS-4).
fn ucs2(units: &[u16]) -> Option<String> {
    if units.iter().fold(false, |any, &u| any | (u & 0xF800 == 0xD800)) {
        return None;
    }
    let mut out = vec![0u8; units.len() * 3];
    let n = encoding_rs::mem::convert_utf16_to_utf8(units, &mut out);
    out.truncate(n);
    // SAFETY: encoding_rs wrote the UTF-8 of surrogate-free UTF-16.
    Some(unsafe { String::from_utf8_unchecked(out) })
}

/// None if a surrogate is present.
fn ucs4(units: &[u32]) -> Option<String> {
    let mut out = String::with_capacity(units.len() * 2);
    for &u in units {
        out.push(char::from_u32(u)?);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions_equal_std() {
        let text = "plain ascii, café ßü ÿ, Ж日本 \u{2019}quote\u{2019} 🙂 \u{10ffff}";
        let latin: String = text.chars().filter(|&c| (c as u32) < 256).collect();
        assert_eq!(latin1(&latin.chars().map(|c| c as u8).collect::<Vec<_>>()), latin);
        let bmp: String = text.chars().filter(|&c| (c as u32) < 0x10000).collect();
        assert_eq!(ucs2(&bmp.encode_utf16().collect::<Vec<_>>()).unwrap(), bmp);
        assert_eq!(ucs4(&text.chars().map(|c| c as u32).collect::<Vec<_>>()).unwrap(), text);
        assert_eq!(ucs2(&[0x61, 0xD83D, 0xDE42]), None);
        assert_eq!(ucs4(&[0x61, 0xDC00]), None);
    }
}
