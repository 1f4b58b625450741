//! Decoding a stream of ids (`bpe decode`): ids read in pieces from a file
//! or standard input, as text (`idtext.rs`) or as fixed-width binary (the
//! `.bin` files of a dataset, a `.npy` array's data), turned into their bytes
//! and written out, piece by piece. Memory is one piece, whatever the size of
//! the input.
//!
//! The bytes of a token need not be whole characters (a character may be
//! split between two tokens), so a piece's bytes may end mid-character: up
//! to three bytes are carried over into the next piece before they are
//! checked. What is done with bytes that are not UTF-8 is the caller's
//! choice (`Utf8`): an error naming the token, U+FFFD for each bad sequence
//! (as Python's `bytes.decode(errors="replace")` does: one for each maximal
//! invalid subpart, the Unicode standard's recommended practice, which
//! Rust's `Utf8Error::error_len` follows too), or the bytes as they are.

use std::io::{Read, Write};

use super::idtext::IdReader;
use crate::encode::Encoder;
use crate::vocab::Rank;

/// Bytes of input read at once.
pub const PIECE_BYTES: usize = 1 << 20;

/// How the ids are stored.
#[derive(Clone, Copy, Debug)]
pub enum Ids {
    /// Decimal numbers (`idtext.rs`).
    Text,
    /// Little-endian integers of `width` bytes (2, 4 or 8), signed or not.
    Binary { width: usize, signed: bool },
}

/// What to do with decoded bytes that are not UTF-8.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Utf8 {
    /// Stop with an error naming the token.
    Strict,
    /// Write U+FFFD for each invalid sequence.
    Replace,
    /// Write the bytes as they are.
    Bytes,
}

const REPLACEMENT: &[u8] = "\u{FFFD}".as_bytes();

/// Decodes the ids read from `input` and writes their bytes to `out`;
/// returns the number of ids. `between(ids so far)` runs between pieces (to
/// see Ctrl-C). Errors name a position (the caller adds the file's name).
pub fn decode_stream(
    enc: &Encoder,
    input: &mut dyn Read,
    ids: Ids,
    utf8: Utf8,
    out: &mut dyn Write,
    mut between: impl FnMut(u64) -> Result<(), String>,
) -> Result<u64, String> {
    let max = (enc.n_vocab() - 1) as Rank;
    let mut piece = vec![0u8; PIECE_BYTES];
    let mut reader = IdReader::default();
    let mut binary_carry: Vec<u8> = Vec::new();
    let mut checker = Utf8Checker::new(utf8);
    let mut batch: Vec<Rank> = Vec::new();
    let mut bytes: Vec<u8> = Vec::new();
    let mut written: Vec<u8> = Vec::new();
    let mut count = 0u64;
    loop {
        between(count)?;
        let n = read_some(input, &mut piece)?;
        batch.clear();
        match ids {
            Ids::Text if n == 0 => reader.finish(max, &mut batch)?,
            Ids::Text => reader.read(&piece[..n], max, &mut batch)?,
            Ids::Binary { width, signed } => {
                binary_carry.extend_from_slice(&piece[..n]);
                let whole = binary_carry.len() / width * width;
                for (k, raw) in binary_carry[..whole].chunks_exact(width).enumerate() {
                    batch
                        .push(binary_id(raw, signed, max).map_err(|e| format!("id number {}: {e}", count + k as u64))?);
                }
                binary_carry.drain(..whole);
                if n == 0 && !binary_carry.is_empty() {
                    return Err(format!(
                        "the input ends with {} stray bytes: its length is not a multiple of {width} bytes \
                         (the id width); is the dtype right?",
                        binary_carry.len()
                    ));
                }
            }
        }
        bytes.clear();
        for (k, &id) in batch.iter().enumerate() {
            let token = enc
                .token_bytes(id)
                .ok_or_else(|| format!("id number {}: no token of this tokenizer has the id {id}", count + k as u64))?;
            checker.token_end(bytes.len());
            bytes.extend_from_slice(token);
        }
        written.clear();
        checker.check(&bytes, n == 0, &mut written).map_err(|(byte, token)| {
            format!(
                "the ids decode to bytes that are not UTF-8 at byte offset {byte} of the output (id number \
                 {token}); use --errors replace to write U+FFFD for them, or --bytes for the raw bytes"
            )
        })?;
        out.write_all(&written).map_err(write_error)?;
        count += batch.len() as u64;
        if n == 0 {
            out.flush().map_err(write_error)?;
            return Ok(count);
        }
    }
}

/// A write error; `BROKEN_PIPE` when the reader went away (`| head`).
pub fn write_error(e: std::io::Error) -> String {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        BROKEN_PIPE.to_string()
    } else {
        format!("cannot write the output: {e}")
    }
}

/// The error a write gives when the reader of a pipe has gone: not the
/// user's problem (`bpe decode ... | head`); the CLI ends quietly.
pub const BROKEN_PIPE: &str = "\u{0}broken pipe";

/// Reads into `buf` until it is full or the input ends (a pipe gives a few
/// KiB per read); 0 only at the end.
fn read_some(input: &mut dyn Read, buf: &mut [u8]) -> Result<usize, String> {
    let mut n = 0;
    while n < buf.len() {
        match input.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(format!("cannot read the input: {e}")),
        }
    }
    Ok(n)
}

fn binary_id(raw: &[u8], signed: bool, max: Rank) -> Result<Rank, String> {
    let mut le = [0u8; 8];
    le[..raw.len()].copy_from_slice(raw);
    let value = u64::from_le_bytes(le);
    if signed && raw[raw.len() - 1] & 0x80 != 0 {
        // Sign-extend to show the negative number as it is.
        let shift = 64 - 8 * raw.len() as u32;
        let negative = ((value << shift) as i64) >> shift;
        return Err(format!("{negative} is negative, not a token id: ids are 0..{max}"));
    }
    if value > u64::from(max) {
        return Err(format!("{value} is not a token id: ids are 0..{max}"));
    }
    Ok(value as Rank)
}

/// Checks decoded bytes for UTF-8 across pieces: carries an unfinished
/// character over, and knows which token each byte came from (for errors).
struct Utf8Checker {
    mode: Utf8,
    /// Bytes of an unfinished character from the last piece.
    carry: Vec<u8>,
    /// Where each token of the current piece starts in its bytes.
    starts: Vec<usize>,
    /// Tokens and bytes of the pieces before this one (for positions).
    tokens_before: u64,
    bytes_before: u64,
    /// The token the carried bytes came from.
    carry_token: u64,
}

impl Utf8Checker {
    fn new(mode: Utf8) -> Self {
        Utf8Checker { mode, carry: Vec::new(), starts: Vec::new(), tokens_before: 0, bytes_before: 0, carry_token: 0 }
    }

    /// The next token starts at byte `at` of the piece's bytes.
    fn token_end(&mut self, at: usize) {
        self.starts.push(at);
    }

    /// Appends to `out` what to write for `bytes` (the next piece's), the
    /// carried bytes first; `last`: no more will come. Error: (byte offset
    /// in the whole output, token number) of the first invalid byte.
    fn check(&mut self, bytes: &[u8], last: bool, out: &mut Vec<u8>) -> Result<(), (u64, u64)> {
        let result = self.check_inner(bytes, last, out);
        self.tokens_before += self.starts.len() as u64;
        self.starts.clear();
        result
    }

    fn check_inner(&mut self, bytes: &[u8], last: bool, out: &mut Vec<u8>) -> Result<(), (u64, u64)> {
        if self.mode == Utf8::Bytes {
            out.extend_from_slice(bytes);
            return Ok(());
        }
        let carried = self.carry.len();
        let mut all = std::mem::take(&mut self.carry);
        all.extend_from_slice(bytes);
        // Positions in `all`: the carried bytes came before the piece.
        let start_offset = self.bytes_before - carried as u64;
        let token_at = |k: usize, s: &Self| -> u64 {
            if k < carried {
                s.carry_token
            } else {
                // The last token starting at or before byte k - carried.
                let i = s.starts.partition_point(|&st| st <= k - carried);
                s.tokens_before + i.saturating_sub(1) as u64
            }
        };
        let mut rest = &all[..];
        let mut at = 0usize;
        loop {
            match std::str::from_utf8(rest) {
                Ok(_) => {
                    out.extend_from_slice(rest);
                    break;
                }
                Err(e) => {
                    let good = e.valid_up_to();
                    out.extend_from_slice(&rest[..good]);
                    match e.error_len() {
                        None if !last => {
                            // An unfinished character: wait for the next piece.
                            self.carry_token = token_at(at + good, self);
                            self.carry.extend_from_slice(&rest[good..]);
                            break;
                        }
                        bad => {
                            if self.mode == Utf8::Strict {
                                return Err((start_offset + (at + good) as u64, token_at(at + good, self)));
                            }
                            out.extend_from_slice(REPLACEMENT);
                            let skip = good + bad.unwrap_or(rest.len() - good);
                            rest = &rest[skip..];
                            at += skip;
                        }
                    }
                }
            }
        }
        self.bytes_before += bytes.len() as u64;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::split::patterns::GPT4_PATTERN;
    use crate::vocab::byte_ranks;
    use rustc_hash::FxHashMap;

    fn encoder() -> Encoder {
        let specials: FxHashMap<String, Rank> = [("<|end|>".to_string(), 300)].into_iter().collect();
        Encoder::new(byte_ranks(&["th", "he", "é"]), specials, GPT4_PATTERN).unwrap()
    }

    fn run(enc: &Encoder, input: &[u8], ids: Ids, utf8: Utf8) -> Result<Vec<u8>, String> {
        let mut out = Vec::new();
        decode_stream(enc, &mut &input[..], ids, utf8, &mut out, |_| Ok(()))?;
        Ok(out)
    }

    #[test]
    fn text_and_binary_ids_decode_alike() {
        let enc = encoder();
        let text = "thé<|end|>";
        let ids = enc.encode(text, &["<|end|>".to_string()].into_iter().collect()).unwrap();
        let as_text: String = ids.iter().map(|i| format!("{i} ")).collect();
        assert_eq!(run(&enc, as_text.as_bytes(), Ids::Text, Utf8::Strict).unwrap(), text.as_bytes());
        for width in [2, 4, 8] {
            let raw: Vec<u8> = ids.iter().flat_map(|&i| u64::from(i).to_le_bytes()[..width].to_vec()).collect();
            for signed in [false, true] {
                assert_eq!(run(&enc, &raw, Ids::Binary { width, signed }, Utf8::Strict).unwrap(), text.as_bytes());
            }
        }
        let err = run(&enc, &[1, 0, 2], Ids::Binary { width: 2, signed: false }, Utf8::Strict).unwrap_err();
        assert!(err.contains("1 stray bytes"), "{err}");
        let err = run(&enc, &[0xff, 0xff], Ids::Binary { width: 2, signed: true }, Utf8::Strict).unwrap_err();
        assert!(err.contains("id number 0: -1 is negative"), "{err}");
        let err = run(&enc, b"104 299", Ids::Text, Utf8::Strict).unwrap_err();
        assert!(err.contains("id number 1: no token of this tokenizer has the id 299"), "{err}");
    }

    /// Bad UTF-8 is an error naming the byte and the token, U+FFFD as
    /// `from_utf8_lossy` (the same rule as Python's) gives it, or raw bytes;
    /// the same in any piece size, since a character may span pieces.
    #[test]
    fn invalid_utf8_across_pieces() {
        let enc = encoder();
        // "é" is 0xC3 0xA9: ids 195, 169 are its two bytes as two tokens.
        let ids: Vec<Rank> = vec![104, 195, 169, 105, 195, 104, 0xE2, 0x82, 0xAC, 0xF0, 0x9F];
        let raw: Vec<u8> = ids.iter().map(|&i| i as u8).collect();
        let lossy = String::from_utf8_lossy(&raw).into_owned();
        let mut checker_runs = vec![];
        for piece in [1usize, 2, 3, 100] {
            // Feed the checker directly, `piece` tokens at a time.
            for mode in [Utf8::Replace, Utf8::Bytes, Utf8::Strict] {
                let mut c = Utf8Checker::new(mode);
                let mut out = Vec::new();
                let mut result = Ok(());
                let chunks: Vec<_> = ids.chunks(piece).collect();
                for (k, chunk) in chunks.iter().enumerate() {
                    let mut bytes = Vec::new();
                    for &id in *chunk {
                        c.token_end(bytes.len());
                        bytes.extend_from_slice(enc.token_bytes(id).unwrap());
                    }
                    result = c.check(&bytes, false, &mut out);
                    if result.is_err() {
                        break;
                    }
                    if k == chunks.len() - 1 {
                        result = c.check(&[], true, &mut out);
                    }
                }
                match mode {
                    Utf8::Replace => assert_eq!(String::from_utf8(out).unwrap(), lossy, "piece {piece}"),
                    Utf8::Bytes => assert_eq!(out, raw),
                    Utf8::Strict => checker_runs.push(result.unwrap_err()),
                }
            }
        }
        // The lone 0xC3 is byte 4 of the output and token 4.
        assert!(checker_runs.iter().all(|&e| e == (4, 4)), "{checker_runs:?}");
        // Through the stream: the unfinished character at the very end.
        let text: String = ids[..3].iter().chain(&ids[9..]).map(|i| format!("{i}\n")).collect();
        let err = run(&enc, text.as_bytes(), Ids::Text, Utf8::Strict).unwrap_err();
        assert!(err.contains("byte offset 3 of the output (id number 3)"), "{err}");
    }
}
