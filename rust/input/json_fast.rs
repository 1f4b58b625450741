//! The fast path of reading a JSON Lines record's text field: one pass over
//! the line that checks it and copies the field's string, unescaped,
//! straight into the batch.
//!
//! Why: serde_json (`records.rs`) copies a string with escapes twice (into
//! its scratch buffer, then into the batch), and the line was checked as
//! UTF-8 by a separate pass before it; every newline of a document is an
//! escape (`\n`), so nearly every text takes the slow copy. Reading the
//! 1 GB benchmark of `.jsonl.zst` shards spent about as much CPU parsing
//! JSON as decompressing it.
//!
//! It only ever says yes when serde_json would give the same text: on
//! anything it does not check exactly as serde_json does (a key with an
//! escape, a `\u` surrogate, nesting past `MAX_DEPTH`, the field missing or
//! not a string, any error) it gives up, leaving `out` as it was, and the
//! caller asks serde_json, whose answer (text or error message) stands.
//! A differential test compares the two on random and broken lines.

/// Deeper than this, the slow path decides (serde_json stops at 128).
const MAX_DEPTH: usize = 64;

/// Appends the string at `field` (a path of keys) of the JSON object `line`
/// to `out` and returns true; or returns false with `out` unchanged (the
/// slow path decides).
pub fn field_text(line: &str, field: &[String], out: &mut String) -> bool {
    let before = out.len();
    let mut p = Parser { s: line, b: line.as_bytes(), at: 0, out };
    let ok = p.object_field(field, 0).is_some() && {
        p.ws();
        p.at == p.b.len()
    };
    if !ok {
        out.truncate(before);
    }
    ok
}

struct Parser<'a, 'o> {
    s: &'a str,
    b: &'a [u8],
    at: usize,
    out: &'o mut String,
}

/// `None`: give up (not an error of the record: the slow path decides).
type Step = Option<()>;

impl<'a> Parser<'a, '_> {
    #[inline]
    fn peek(&self) -> Option<u8> {
        self.b.get(self.at).copied()
    }

    #[inline]
    fn eat(&mut self, c: u8) -> Step {
        (self.peek()? == c).then(|| self.at += 1)
    }

    #[inline]
    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\n' | b'\t' | b'\r')) {
            self.at += 1;
        }
    }

    /// After an entry of an object or array that ends with `close`: true
    /// at a `,` (another entry follows), false at `close` (eaten both).
    #[inline]
    fn more(&mut self, close: u8) -> Option<bool> {
        self.ws();
        let c = self.peek()?;
        if c == b',' || c == close {
            self.at += 1;
            Some(c == b',')
        } else {
            None
        }
    }

    /// An object (after white space), following the entry named `path[0]`
    /// (the first such entry, as the slow path does) and skipping the rest.
    fn object_field(&mut self, path: &[String], depth: usize) -> Step {
        self.ws();
        self.eat(b'{')?;
        let mut found = false;
        self.ws();
        if self.eat(b'}').is_some() {
            return None; // no field
        }
        loop {
            self.ws();
            let key = self.key()?;
            self.ws();
            self.eat(b':')?;
            self.ws();
            if !found && key == path[0].as_bytes() {
                found = true;
                if path.len() == 1 {
                    self.eat(b'"')?;
                    self.string(true)?;
                } else {
                    self.object_field(&path[1..], depth + 1)?;
                }
            } else {
                self.value(depth + 1)?;
            }
            if !self.more(b'}')? {
                return found.then_some(());
            }
        }
    }

    /// A key without escapes (with one, the slow path compares it unescaped).
    fn key(&mut self) -> Option<&'a [u8]> {
        self.eat(b'"')?;
        let start = self.at;
        let end = start + next_special(&self.b[start..])?;
        if self.b[end] != b'"' {
            return None;
        }
        self.at = end + 1;
        let b: &'a [u8] = self.b;
        Some(&b[start..end])
    }

    /// Any value, checked and skipped.
    fn value(&mut self, depth: usize) -> Step {
        if depth > MAX_DEPTH {
            return None;
        }
        match self.peek()? {
            b'"' => {
                self.at += 1;
                self.string(false)
            }
            b'{' => {
                self.at += 1;
                self.ws();
                if self.eat(b'}').is_some() {
                    return Some(());
                }
                loop {
                    self.ws();
                    self.eat(b'"')?;
                    self.string(false)?;
                    self.ws();
                    self.eat(b':')?;
                    self.ws();
                    self.value(depth + 1)?;
                    if !self.more(b'}')? {
                        return Some(());
                    }
                }
            }
            b'[' => {
                self.at += 1;
                self.ws();
                if self.eat(b']').is_some() {
                    return Some(());
                }
                loop {
                    self.ws();
                    self.value(depth + 1)?;
                    if !self.more(b']')? {
                        return Some(());
                    }
                }
            }
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            b'-' | b'0'..=b'9' => self.number(),
            _ => None,
        }
    }

    fn literal(&mut self, word: &[u8]) -> Step {
        self.b[self.at..].starts_with(word).then(|| self.at += word.len())
    }

    /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`
    fn number(&mut self) -> Step {
        let _ = self.eat(b'-');
        match self.peek()? {
            b'0' => {
                self.at += 1;
                if self.peek().is_some_and(|c| c.is_ascii_digit()) {
                    return None; // a leading zero
                }
            }
            b'1'..=b'9' => self.digits(),
            _ => return None,
        }
        if self.eat(b'.').is_some() {
            self.peek().filter(u8::is_ascii_digit)?;
            self.digits();
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.at += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.at += 1;
            }
            self.peek().filter(u8::is_ascii_digit)?;
            self.digits();
        }
        Some(())
    }

    fn digits(&mut self) {
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.at += 1;
        }
    }

    /// The rest of a string (its `"` eaten), appended unescaped to `out`
    /// when `keep`.
    fn string(&mut self, keep: bool) -> Step {
        loop {
            let start = self.at;
            let end = start + next_special(&self.b[start..])?;
            if keep {
                // Between ASCII bytes (or the `"` before): whole characters.
                self.out.push_str(&self.s[start..end]);
            }
            self.at = end + 1;
            match self.b[end] {
                b'"' => return Some(()),
                b'\\' => {
                    let c = match self.peek()? {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => {
                            let hex = self.b.get(self.at + 1..self.at + 5)?;
                            if !hex.iter().all(u8::is_ascii_hexdigit) {
                                return None;
                            }
                            let hex = &self.s[self.at + 1..self.at + 5];
                            self.at += 4;
                            // A surrogate (half of a pair, or a lone one): the slow path.
                            char::from_u32(u32::from_str_radix(hex, 16).ok()?)?
                        }
                        _ => return None,
                    };
                    self.at += 1;
                    if keep {
                        self.out.push(c);
                    }
                }
                _ => return None, // a control character
            }
        }
    }
}

/// The offset of the first `"`, `\` or control character (below 0x20) in
/// `b`: sixteen bytes at a time with SSE2 (every x86-64 has it), then eight
/// at a time. Text with a newline in every line of 70 bytes (`\n` escapes)
/// has a special byte every ~70 bytes: SSE2 took parsing from 5.2% to ~3.5%
/// of counting `.jsonl.zst` shards (docs/dev/performance.md, "Reading records").
#[inline]
fn next_special(b: &[u8]) -> Option<usize> {
    let mut i = 0;
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::*;
        // SAFETY: SSE2 is part of x86-64; each load reads 16 bytes at `i`,
        // and `i + 16 <= b.len()`.
        unsafe {
            let quote = _mm_set1_epi8(b'"' as i8);
            let backslash = _mm_set1_epi8(b'\\' as i8);
            let below = _mm_set1_epi8(0x1f);
            while i + 16 <= b.len() {
                let v = _mm_loadu_si128(b.as_ptr().add(i).cast());
                // A byte is at most 0x1f when the unsigned minimum leaves it as it is.
                let control = _mm_cmpeq_epi8(_mm_min_epu8(v, below), v);
                let hit = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash)), control);
                let mask = _mm_movemask_epi8(hit) as u32;
                if mask != 0 {
                    return Some(i + mask.trailing_zeros() as usize);
                }
                i += 16;
            }
        }
    }
    next_special_swar(&b[i..]).map(|k| i + k)
}

/// `next_special`, eight bytes at a time in a `u64` (the rest of a block,
/// and machines without SSE2).
#[inline]
fn next_special_swar(b: &[u8]) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // The high bit of each byte of `x` that is zero (and perhaps of bytes
    // above the first: only the lowest set bit is used).
    let zero = |x: u64| x.wrapping_sub(ONES) & !x & HIGH;
    let mut i = 0;
    while i + 8 <= b.len() {
        let w = u64::from_le_bytes(b[i..i + 8].try_into().unwrap());
        // Bytes below 0x20: subtracting 0x20 borrows from them (bytes of 0x80
        // and up are excluded by `!w`).
        let below = w.wrapping_sub(ONES * 0x20) & !w & HIGH;
        let hit = below | zero(w ^ (ONES * b'"' as u64)) | zero(w ^ (ONES * b'\\' as u64));
        if hit != 0 {
            return Some(i + (hit.trailing_zeros() / 8) as usize);
        }
        i += 8;
    }
    b[i..].iter().position(|&c| c == b'"' || c == b'\\' || c < 0x20).map(|k| i + k)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_special_finds_the_first() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..20_000 {
            crate::split::lexer::tests::next_random(&mut x);
            let n = (x % 80) as usize;
            // Specials one byte in 23, or (half the time) one in 230: past the
            // first block of 16 bytes too.
            let odds = if x & 1 == 0 { 23 } else { 230 };
            let b: Vec<u8> = (0..n)
                .map(|i| {
                    let r = (x >> (i % 56)) as u16 ^ (i as u16).wrapping_mul(29);
                    // Mostly ordinary bytes, sometimes a special one.
                    let r = (r as u8, r % odds);
                    match r.1 {
                        0 => b'"',
                        1 => b'\\',
                        2 => r.0 % 0x20,
                        _ => 0x20 + r.0 % 0xe0,
                    }
                })
                .collect();
            let want = b.iter().position(|&c| c == b'"' || c == b'\\' || c < 0x20);
            assert_eq!(next_special(&b), want, "{b:?}");
            assert_eq!(next_special_swar(&b), want, "{b:?}");
        }
    }
}
