//! Reading an Arrow string array in place: the records of a Parquet shard,
//! a pyarrow Table or a HF `datasets` column, without a copy and without a
//! Python `str` per record. Nothing here knows about Python or tokens: the
//! bindings (`py/arrow.rs`) lend the array's three buffers as byte slices.
//!
//! An Arrow `string` (or `binary`) array of `len` records, starting at
//! record `offset` of its buffers (a slice of a bigger array), is:
//! - a validity bitmap (or none: no nulls), bit `offset + i` set when record
//!   `i` is not null, least significant bit first;
//! - `offset + len + 1` offsets, little-endian `i32` (`string`) or `i64`
//!   (`large_string`): record `i`'s bytes are `data[offsets[offset + i] ..
//!   offsets[offset + i + 1]]`;
//! - the data: every record's bytes, back to back.
//!
//! The buffers come from outside (a file someone wrote, a buffer someone
//! built), so nothing in them is trusted: `Strings::new` checks that the
//! buffers are long enough and the offsets rise and stay within the data,
//! and every access is bounds-checked anyway. A broken array is an error,
//! never a wrong slice. Each record is checked to be UTF-8 when it is read:
//! a null or non-UTF-8 record is a bad record (`Bad`), which the caller
//! reports by its row or skips.

/// Why a record cannot be read as text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bad {
    /// The record is null.
    Null,
    /// Its bytes are not UTF-8 from this byte on.
    NotUtf8 { at: usize },
}

impl Bad {
    /// What is wrong, for a message naming the record.
    pub fn describe(&self) -> String {
        match self {
            Bad::Null => "is null, not a text".to_string(),
            Bad::NotUtf8 { at } => format!("is not valid UTF-8 at byte {at}"),
        }
    }
}

/// The width of the offsets: 4 bytes (`string`, `binary`) or 8 (`large_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Width {
    I32,
    I64,
}

impl Width {
    pub fn from_bytes(bytes: usize) -> Result<Width, String> {
        match bytes {
            4 => Ok(Width::I32),
            8 => Ok(Width::I64),
            n => Err(format!("Arrow string offsets are 4 or 8 bytes wide, not {n}")),
        }
    }

    fn bytes(self) -> usize {
        match self {
            Width::I32 => 4,
            Width::I64 => 8,
        }
    }
}

/// A checked view of an Arrow string array's buffers.
#[derive(Clone, Copy, Debug)]
pub struct Strings<'a> {
    validity: Option<&'a [u8]>,
    offsets: &'a [u8],
    width: Width,
    data: &'a [u8],
    offset: usize,
    len: usize,
}

impl<'a> Strings<'a> {
    /// Views `len` records from record `offset` of the buffers. Errors: a
    /// buffer too short for them, or offsets that fall or point outside
    /// the data (a corrupt array).
    pub fn new(
        validity: Option<&'a [u8]>,
        offsets: &'a [u8],
        width: Width,
        data: &'a [u8],
        offset: usize,
        len: usize,
    ) -> Result<Strings<'a>, String> {
        let end = offset.checked_add(len).ok_or("the array's offset and length overflow")?;
        if let Some(bits) = validity {
            if bits.len() < end.div_ceil(8) {
                return Err(format!("the array's validity bitmap has {} bytes, too few for {end} records", bits.len()));
            }
        }
        // An empty array may have no offsets at all.
        let s = Strings { validity, offsets, width, data, offset, len };
        if len == 0 {
            return Ok(s);
        }
        let needed = (end + 1).checked_mul(width.bytes()).ok_or("the array's length overflows")?;
        if offsets.len() < needed {
            return Err(format!(
                "the array's offsets buffer has {} bytes, too few for {} offsets of {} bytes",
                offsets.len(),
                end + 1,
                width.bytes()
            ));
        }
        // One pass over the offsets this view uses: each at least the one
        // before it, the first at least 0, the last within the data.
        let mut previous = s.raw_offset(offset);
        if previous < 0 {
            return Err(format!("the array's offsets are corrupt: record {offset} starts at {previous}"));
        }
        for k in offset + 1..=end {
            let next = s.raw_offset(k);
            if next < previous {
                return Err(format!(
                    "the array's offsets are corrupt: they fall from {previous} to {next} at record {}",
                    k - 1
                ));
            }
            previous = next;
        }
        if previous as u64 > data.len() as u64 {
            return Err(format!(
                "the array's offsets are corrupt: its records end at byte {previous}, past its {} bytes of data",
                data.len()
            ));
        }
        Ok(s)
    }

    /// The number of records.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The `k`-th offset of the buffer (counting from the buffer's start,
    /// not the view's), as stored.
    fn raw_offset(&self, k: usize) -> i64 {
        let w = self.width.bytes();
        let b = &self.offsets[k * w..(k + 1) * w];
        match self.width {
            Width::I32 => i32::from_le_bytes(b.try_into().expect("4 bytes")) as i64,
            Width::I64 => i64::from_le_bytes(b.try_into().expect("8 bytes")),
        }
    }

    /// Is record `i` null?
    pub fn is_null(&self, i: usize) -> bool {
        let bit = self.offset + i;
        self.validity.is_some_and(|bits| bits[bit / 8] >> (bit % 8) & 1 == 0)
    }

    /// The bytes of record `i` (< `len`), null or not.
    pub fn bytes(&self, i: usize) -> &'a [u8] {
        assert!(i < self.len, "record {i} of {}", self.len);
        let (start, end) = (self.raw_offset(self.offset + i), self.raw_offset(self.offset + i + 1));
        // Checked by `new`: 0 <= start <= end <= data.len().
        &self.data[start as usize..end as usize]
    }

    /// Record `i` as text, or why it is not.
    pub fn get(&self, i: usize) -> Result<&'a str, Bad> {
        if self.is_null(i) {
            return Err(Bad::Null);
        }
        super::utf8(self.bytes(i)).map_err(|e| Bad::NotUtf8 { at: e.valid_up_to() })
    }

    /// Records `range` (of this view), each as text or why it is not.
    pub fn records(&self, range: std::ops::Range<usize>) -> impl Iterator<Item = Result<&'a str, Bad>> + '_ {
        range.map(move |i| self.get(i))
    }

    /// The bytes of data records `range` span (null ones included), for
    /// sizing work.
    pub fn span_bytes(&self, range: std::ops::Range<usize>) -> usize {
        if range.is_empty() {
            return 0;
        }
        (self.raw_offset(self.offset + range.end) - self.raw_offset(self.offset + range.start)) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The buffers of an array of `records` (None: null) as Arrow lays them
    /// out, with `width`-byte offsets.
    fn buffers(records: &[Option<&[u8]>], width: Width) -> (Vec<u8>, Vec<u8>, Vec<u8>) {
        let mut validity = vec![0u8; records.len().div_ceil(8)];
        let mut offsets = Vec::new();
        let mut data = Vec::new();
        let mut push = |n: usize| match width {
            Width::I32 => offsets.extend_from_slice(&(n as i32).to_le_bytes()),
            Width::I64 => offsets.extend_from_slice(&(n as i64).to_le_bytes()),
        };
        push(0);
        for (i, r) in records.iter().enumerate() {
            if let Some(r) = r {
                validity[i / 8] |= 1 << (i % 8);
                data.extend_from_slice(r);
            }
            push(data.len());
        }
        (validity, offsets, data)
    }

    fn read(s: &Strings) -> Vec<Result<String, Bad>> {
        s.records(0..s.len()).map(|r| r.map(String::from)).collect()
    }

    #[test]
    fn records_nulls_and_bad_bytes() {
        let records: [Option<&[u8]>; 5] =
            [Some(b"hello"), None, Some(b""), Some(b"h\xc3\xa9\xff!"), Some("日本".as_bytes())];
        for width in [Width::I32, Width::I64] {
            let (validity, offsets, data) = buffers(&records, width);
            let s = Strings::new(Some(&validity), &offsets, width, &data, 0, 5).unwrap();
            let want = vec![
                Ok("hello".to_string()),
                Err(Bad::Null),
                Ok(String::new()),
                Err(Bad::NotUtf8 { at: 3 }),
                Ok("日本".to_string()),
            ];
            assert_eq!(read(&s), want);
            // No bitmap: nothing is null (a null's bytes are then read, here none).
            let s = Strings::new(None, &offsets, width, &data, 0, 5).unwrap();
            assert_eq!(s.get(1), Ok(""));
            assert_eq!(s.span_bytes(0..5), data.len());
        }
    }

    /// A slice of an array (offset != 0) reads the records from there, and
    /// its nulls from the same bit of the bitmap.
    #[test]
    fn a_slice_honours_the_offset() {
        let texts: Vec<String> = (0..20).map(|i| format!("record {i}")).collect();
        let records: Vec<Option<&[u8]>> =
            texts.iter().enumerate().map(|(i, t)| (i % 3 != 0).then_some(t.as_bytes())).collect();
        let (validity, offsets, data) = buffers(&records, Width::I32);
        for (offset, len) in [(0, 20), (5, 10), (9, 11), (19, 1), (20, 0), (7, 0)] {
            let s = Strings::new(Some(&validity), &offsets, Width::I32, &data, offset, len).unwrap();
            for i in 0..len {
                let want = if (offset + i) % 3 == 0 { Err(Bad::Null) } else { Ok(texts[offset + i].as_str()) };
                assert_eq!(s.get(i), want, "offset {offset} record {i}");
            }
        }
    }

    /// Buffers that do not hold what they claim are errors, never a panic
    /// or a read outside them.
    #[test]
    fn corrupt_buffers_are_errors() {
        let records: [Option<&[u8]>; 3] = [Some(b"ab"), Some(b"cde"), Some(b"f")];
        let (validity, offsets, data) = buffers(&records, Width::I32);
        let new = |validity: Option<&[u8]>, offsets: &[u8], data: &[u8], offset, len| {
            Strings::new(validity, offsets, Width::I32, data, offset, len).map(|_| ()).unwrap_err()
        };
        // Too few offsets for the records, or a record past the end.
        assert!(new(None, &offsets[..12], &data, 0, 3).contains("too few for 4 offsets"));
        assert!(new(None, &offsets, &data, 1, 3).contains("too few"));
        // The data cut short: the last record would end past it.
        assert!(new(None, &offsets, &data[..5], 0, 3).contains("past its 5 bytes of data"));
        // Offsets that fall, or start below 0.
        let mut falling = offsets.clone();
        falling[8..12].copy_from_slice(&1i32.to_le_bytes());
        assert!(new(None, &falling, &data, 0, 3).contains("fall from 2 to 1 at record 1"));
        let mut negative = offsets.clone();
        negative[..4].copy_from_slice(&(-4i32).to_le_bytes());
        assert!(new(None, &negative, &data, 0, 3).contains("starts at -4"));
        // A bitmap too short for the records.
        assert!(new(Some(&validity[..0]), &offsets, &data, 0, 3).contains("validity bitmap"));
        // Huge claims overflow nothing.
        assert!(Strings::new(None, &offsets, Width::I64, &data, usize::MAX, 2).is_err());
        assert!(Strings::new(None, &offsets, Width::I64, &data, usize::MAX / 4, 1).is_err());
        assert!(Width::from_bytes(2).is_err());
        // An empty array needs no offsets.
        assert!(Strings::new(None, &[], Width::I32, &[], 0, 0).unwrap().is_empty());
    }

    /// Any bytes at all as buffers: `new` either refuses them or gives a
    /// view whose every record reads without a panic.
    #[test]
    fn arbitrary_buffers_never_panic() {
        let mut next = crate::split::lexer::tests::rng(0x9e3779b97f4a7c15);
        for _ in 0..20_000 {
            let bytes: Vec<u8> = (0..next() % 40).map(|_| (next() % 12) as u8).collect();
            let data: Vec<u8> = (0..next() % 16).map(|_| next() as u8).collect();
            let width = if next() % 2 == 0 { Width::I32 } else { Width::I64 };
            let validity = (next() % 2 == 0).then_some(&bytes[..bytes.len().min(2)]);
            let (offset, len) = ((next() % 5) as usize, (next() % 8) as usize);
            if let Ok(s) = Strings::new(validity, &bytes, width, &data, offset, len) {
                for i in 0..s.len() {
                    let _ = s.get(i);
                }
            }
        }
    }
}
