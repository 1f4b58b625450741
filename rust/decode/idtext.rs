//! Token ids as text, both ways: written as decimal numbers (`bpe encode`'s
//! `ids` and `json` formats), and read back from such text (`bpe decode`).
//!
//! Text, one document per line:
//! - `ids`:  `464 3290 318\n` (numbers separated by one space);
//! - `json`: `[464, 3290, 318]\n` (a JSON array per line, as Python's
//!   `json.dumps` writes a list: JSON Lines).
//!
//! The reader takes either, and any mix: numbers separated by ASCII white
//! space, commas and square brackets. It reads from a stream in pieces, so a
//! number may be split between two pieces (`IdReader` carries it over).

use crate::vocab::Rank;

/// How `bpe encode` writes ids as text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Ids,
    Json,
}

impl Format {
    pub fn parse(name: &str) -> Result<Format, String> {
        match name {
            "ids" => Ok(Format::Ids),
            "json" => Ok(Format::Json),
            _ => Err(format!("unknown text format {name:?}: use \"ids\" or \"json\"")),
        }
    }
}

/// Writes a document's ids as text, in parts: `start`, then `ids` as often
/// as they come, then `end`. `first` remembers whether the next id is the
/// document's first (no separator before it).
pub struct Writer {
    format: Format,
    first: bool,
}

impl Writer {
    pub fn new(format: Format) -> Writer {
        Writer { format, first: true }
    }

    /// A document starts.
    pub fn start(&mut self, out: &mut Vec<u8>) {
        self.first = true;
        if self.format == Format::Json {
            out.push(b'[');
        }
    }

    /// The next ids of the current document.
    pub fn ids(&mut self, ids: &[Rank], out: &mut Vec<u8>) {
        let sep: &[u8] = if self.format == Format::Json { b", " } else { b" " };
        // At most 10 digits and a 2-byte separator per id.
        out.reserve(ids.len() * 12);
        let mut digits = itoa::Buffer::new();
        for &id in ids {
            if !self.first {
                out.extend_from_slice(sep);
            }
            self.first = false;
            out.extend_from_slice(digits.format(id).as_bytes());
        }
    }

    /// The document ends: its line ends.
    pub fn end(&mut self, out: &mut Vec<u8>) {
        if self.format == Format::Json {
            out.push(b']');
        }
        out.push(b'\n');
    }
}

/// Reads ids from text that comes in pieces. Positions in errors are byte
/// offsets in the whole text.
#[derive(Default)]
pub struct IdReader {
    /// The number being read (it may continue in the next piece): its value
    /// (saturated at `u64::MAX`), where it started, and its digits.
    number: Option<(u64, u64, usize)>,
    /// Bytes of text seen before the current piece.
    offset: u64,
}

impl IdReader {
    /// Appends the ids of `piece` to `out`; a number at its end is kept
    /// until the next piece (or `finish`) shows where it ends. Errors: a
    /// byte that is neither a digit nor a separator, a number over `max`.
    pub fn read(&mut self, piece: &[u8], max: Rank, out: &mut Vec<Rank>) -> Result<(), String> {
        for (k, &b) in piece.iter().enumerate() {
            let at = self.offset + k as u64;
            match b {
                b'0'..=b'9' => {
                    let (value, start, digits) = self.number.unwrap_or((0, at, 0));
                    let value = value.saturating_mul(10).saturating_add(u64::from(b - b'0'));
                    self.number = Some((value, start, digits + 1));
                }
                b' ' | b'\t' | b'\n' | b'\r' | b'\x0b' | b'\x0c' | b',' | b'[' | b']' => self.flush(max, out)?,
                b'-' => return Err(format!("byte offset {at} holds a negative number: token ids are 0..{max}")),
                _ => {
                    let what = if b.is_ascii_graphic() {
                        format!("{:?}", char::from(b))
                    } else {
                        format!("the byte 0x{b:02x}")
                    };
                    return Err(format!(
                        "byte offset {at} holds {what}, which is not part of a token id: the input must be \
                         token ids as text (numbers separated by spaces, commas or brackets)"
                    ));
                }
            }
        }
        self.offset += piece.len() as u64;
        Ok(())
    }

    /// The end of the text: the last number, if any, is complete.
    pub fn finish(&mut self, max: Rank, out: &mut Vec<Rank>) -> Result<(), String> {
        self.flush(max, out)
    }

    fn flush(&mut self, max: Rank, out: &mut Vec<Rank>) -> Result<(), String> {
        match self.number.take() {
            Some((value, _, _)) if value <= u64::from(max) => out.push(value as Rank),
            Some((value, start, digits)) => {
                let number =
                    if value == u64::MAX { format!("{digits}-digit number") } else { format!("number {value}") };
                return Err(format!("the {number} at byte offset {start} is not a token id: ids are 0..{max}"));
            }
            None => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(format: Format, docs: &[&[Rank]]) -> String {
        let mut w = Writer::new(format);
        let mut out = Vec::new();
        for doc in docs {
            w.start(&mut out);
            // In two parts, as a sink receives them.
            let half = doc.len() / 2;
            w.ids(&doc[..half], &mut out);
            w.ids(&doc[half..], &mut out);
            w.end(&mut out);
        }
        String::from_utf8(out).unwrap()
    }

    fn read_in_pieces(text: &str, piece: usize) -> Result<Vec<Rank>, String> {
        let mut r = IdReader::default();
        let mut ids = Vec::new();
        for part in text.as_bytes().chunks(piece) {
            r.read(part, u32::MAX, &mut ids)?;
        }
        r.finish(u32::MAX, &mut ids)?;
        Ok(ids)
    }

    #[test]
    fn written_as_json_and_python_write_them() {
        let docs: [&[Rank]; 3] = [&[464, 0, 4294967295], &[], &[7]];
        assert_eq!(write(Format::Ids, &docs), "464 0 4294967295\n\n7\n");
        assert_eq!(write(Format::Json, &docs), "[464, 0, 4294967295]\n[]\n[7]\n");
    }

    #[test]
    fn read_back_whatever_the_pieces() {
        let docs: [&[Rank]; 3] = [&[464, 0, 4294967295, 12], &[], &[7, 99999]];
        let all: Vec<Rank> = docs.concat();
        for format in [Format::Ids, Format::Json] {
            let text = write(format, &docs);
            for piece in [1, 2, 3, 7, 1000] {
                assert_eq!(read_in_pieces(&text, piece).unwrap(), all, "{format:?} piece {piece}");
            }
        }
        assert_eq!(read_in_pieces(" 1,2\t[3]\r\n4", 2).unwrap(), vec![1, 2, 3, 4]);
    }

    #[test]
    fn bad_text_is_named_by_offset() {
        let err = read_in_pieces("1 2 x3", 2).unwrap_err();
        assert!(err.starts_with("byte offset 4 holds 'x'"), "{err}");
        let err = read_in_pieces("1 -2", 3).unwrap_err();
        assert_eq!(err, format!("byte offset 2 holds a negative number: token ids are 0..{}", u32::MAX));
        let mut r = IdReader::default();
        let mut ids = Vec::new();
        r.read(b"5 100000", 99_999, &mut ids).unwrap();
        let err = r.finish(99_999, &mut ids).unwrap_err();
        assert_eq!(err, "the number 100000 at byte offset 2 is not a token id: ids are 0..99999");
        // Many digits never overflow.
        let err = read_in_pieces(&"9".repeat(40), 5).unwrap_err();
        assert!(err.starts_with("the 40-digit number at byte offset 0"), "{err}");
    }
}
