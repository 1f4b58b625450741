//! Count tables: chunk counts in a file (`.bpec`), the whole input of the
//! merge loop, to save, merge and train from later.
//!
//! A table holds the distinct chunks of a corpus, each with its count, and
//! the split pattern that cut them. Its entries are sorted by chunk bytes,
//! so that any number of tables merge into one in a single streaming pass
//! (a k-way merge, as in `sort -m`), holding one entry per table in memory.
//! The same files serve as the sorted runs that bounded-memory counting
//! spills to disk (`spill.rs`).
//!
//! The format, version 1 (`varint` is unsigned LEB128: 7 bits a byte, low
//! bits first, the top bit set on every byte but the last):
//!
//! ```text
//! bpe-counts v1\n
//! pattern <n> <the pattern: n bytes of UTF-8>\n
//! entries, in strictly increasing order of chunk bytes, each:
//!     varint count          how often the chunk occurred (1 or more)
//!     varint shared         bytes it shares with the previous chunk's start
//!     varint rest           how many bytes follow
//!     rest bytes            the chunk is previous[..shared] + these
//! 0x00                      (a count of 0: the entries end)
//! varint entries            how many entries there were
//! varint total              the sum of their counts
//! 8 bytes                   FNV-1a (64-bit) of every byte above, little-endian
//! ```
//!
//! Sorted chunks share long prefixes (" the", " their", " them"), so the
//! shared-prefix coding makes a table about half the size of its chunks'
//! bytes. The checksum is FNV-1a rather than SHA-256 (which `.bpe` files
//! use): it needs no dependency, and each step of it is a bijection of the
//! hash, so any one changed byte changes it for sure; it guards against
//! torn copies and flipped bits, not against tampering. Every error names
//! the file and the byte offset where reading stopped.

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};

/// The first line of every table.
pub const MAGIC: &str = "bpe-counts";
/// The version this code writes and reads.
pub const VERSION: u32 = 1;

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

fn fnv1a(mut hash: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        hash = (hash ^ b as u64).wrapping_mul(FNV_PRIME);
    }
    hash
}

/// How many bytes `a` and `b` share at their start (8 at a time).
fn shared_prefix(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let mut i = 0;
    while i + 8 <= n {
        let x = u64::from_le_bytes(a[i..i + 8].try_into().expect("8 bytes"));
        let y = u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        if x != y {
            return i + ((x ^ y).trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    i + a[i..n].iter().zip(&b[i..n]).take_while(|(x, y)| x == y).count()
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Writes a table, entry by entry, into `W` (a file, buffered here).
pub struct TableWriter<W: Write> {
    out: BufWriter<W>,
    /// Where errors say the table goes.
    name: String,
    hash: u64,
    /// Whether the checksum is computed (see [`TableWriter::create_run`]).
    checked: bool,
    previous: Vec<u8>,
    entries: u64,
    total: u64,
    /// One entry's bytes, reused.
    buf: Vec<u8>,
}

impl TableWriter<File> {
    /// A new table at `path` (created or truncated).
    pub fn create(path: &Path, pattern: &str) -> Result<Self, String> {
        let file = File::create(path).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        TableWriter::new(file, &path.display().to_string(), pattern)
    }

    /// A run of counts spilled to disk (`spill.rs`): a table whose checksum
    /// is left as FNV-1a's offset basis, not computed. A run lives in a
    /// private directory for the length of one counting and is read back by
    /// [`TableReader::open_run`]; the checksum guards tables that are copied
    /// and kept, and computing it byte by byte took a quarter of the time of
    /// counting under a cap when the chunks are long (SuperBPE's stage 2).
    pub fn create_run(path: &Path, pattern: &str) -> Result<Self, String> {
        let mut w = TableWriter::create(path, pattern)?;
        w.checked = false;
        Ok(w)
    }
}

impl<W: Write> TableWriter<W> {
    /// Writes the header of a table of chunks cut by `pattern`.
    pub fn new(out: W, name: &str, pattern: &str) -> Result<Self, String> {
        let mut w = TableWriter {
            out: BufWriter::with_capacity(1 << 16, out),
            name: name.to_string(),
            hash: FNV_OFFSET,
            checked: true,
            previous: Vec::new(),
            entries: 0,
            total: 0,
            buf: Vec::new(),
        };
        let header = format!("{MAGIC} v{VERSION}\npattern {} {pattern}\n", pattern.len());
        w.put(header.into_bytes())?;
        Ok(w)
    }

    fn put(&mut self, bytes: Vec<u8>) -> Result<(), String> {
        if self.checked {
            self.hash = fnv1a(self.hash, &bytes);
        }
        let put = self.out.write_all(&bytes);
        self.buf = bytes;
        put.map_err(|e| format!("cannot write {}: {e}", self.name))
    }

    /// Adds an entry. Chunks must come in strictly increasing byte order
    /// and counts be at least 1 (a bug of the caller otherwise).
    pub fn add(&mut self, chunk: &[u8], count: u64) -> Result<(), String> {
        assert!(count > 0, "a count table entry of count 0");
        assert!(self.entries == 0 || chunk > &self.previous[..], "count table entries out of order");
        let shared = shared_prefix(chunk, &self.previous);
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
        put_varint(&mut buf, count);
        put_varint(&mut buf, shared as u64);
        put_varint(&mut buf, (chunk.len() - shared) as u64);
        buf.extend_from_slice(&chunk[shared..]);
        self.put(buf)?;
        self.previous.truncate(shared);
        self.previous.extend_from_slice(&chunk[shared..]);
        self.entries += 1;
        self.total = self.total.checked_add(count).ok_or_else(|| {
            format!("cannot write {}: the counts add up past 2^64, more than any corpus holds", self.name)
        })?;
        Ok(())
    }

    /// Writes the end and the checksum; returns (entries, total) and the
    /// writer, flushed.
    pub fn finish(mut self) -> Result<(u64, u64, W), String> {
        let mut end = vec![0];
        put_varint(&mut end, self.entries);
        put_varint(&mut end, self.total);
        self.put(end)?;
        let sum = self.hash.to_le_bytes().to_vec();
        self.put(sum)?;
        let name = self.name;
        let out = self.out.into_inner().map_err(|e| format!("cannot write {name}: {}", e.error()))?;
        Ok((self.entries, self.total, out))
    }
}

/// Reads a table entry by entry, checking it as it goes: `next` gives each
/// chunk and count in order, then checks the end and the checksum.
pub struct TableReader {
    input: BufReader<File>,
    path: PathBuf,
    pattern: String,
    /// Bytes read so far: the offset errors name.
    offset: u64,
    hash: u64,
    /// Whether the checksum is checked (see [`TableReader::open_run`]).
    checked: bool,
    /// The current chunk, and the one before it (for the order check).
    chunk: Vec<u8>,
    previous: Vec<u8>,
    entries: u64,
    total: u64,
    done: bool,
}

impl TableReader {
    /// Opens `path` and reads its header.
    pub fn open(path: &Path) -> Result<Self, String> {
        let file = File::open(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let mut r = TableReader {
            input: BufReader::with_capacity(1 << 16, file),
            path: path.to_path_buf(),
            pattern: String::new(),
            offset: 0,
            hash: FNV_OFFSET,
            checked: true,
            chunk: Vec::new(),
            previous: Vec::new(),
            entries: 0,
            total: 0,
            done: false,
        };
        let first = r.until(b'\n', 64)?;
        let Some(version) = first.strip_prefix(MAGIC.as_bytes()).and_then(|v| v.strip_prefix(b" v")) else {
            return Err(format!(
                "{} is not a bpe count table (byte offset 0 is not \"{MAGIC} v{VERSION}\"); make one with `bpe count`",
                path.display()
            ));
        };
        if version != VERSION.to_string().as_bytes() {
            return Err(format!(
                "{} is a bpe count table of version v{} (byte offset {}), which this bpe cannot read (it reads \
                 v{VERSION}): count the corpus again with this bpe, or use the bpe that wrote it",
                path.display(),
                String::from_utf8_lossy(version),
                MAGIC.len() + 2,
            ));
        }
        let at = r.offset;
        let word = r.until(b' ', 8)?;
        let digits = r.until(b' ', 20)?;
        let n = (word == b"pattern")
            .then(|| std::str::from_utf8(&digits).ok()?.parse::<usize>().ok())
            .flatten()
            .ok_or_else(|| r.corrupt(at, "no pattern line"))?;
        let mut pattern = Vec::new();
        r.exact(n as u64 + 1, &mut pattern)?;
        if pattern.pop() != Some(b'\n') {
            return Err(r.corrupt(at, "the pattern line is not as long as it says"));
        }
        r.pattern = String::from_utf8(pattern).map_err(|_| r.corrupt(at, "the pattern is not UTF-8"))?;
        Ok(r)
    }

    /// A run written by [`TableWriter::create_run`]: read as any table,
    /// every check made but the checksum's.
    pub fn open_run(path: &Path) -> Result<Self, String> {
        let mut r = TableReader::open(path)?;
        r.checked = false;
        Ok(r)
    }

    /// The split pattern the table's chunks were cut with.
    pub fn pattern(&self) -> &str {
        &self.pattern
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The next chunk and its count, or `None` after the last one (once the
    /// end and the checksum are checked).
    pub fn next_entry(&mut self) -> Result<Option<(&[u8], u64)>, String> {
        if self.done {
            return Ok(None);
        }
        let at = self.offset;
        let count = self.varint()?;
        if count == 0 {
            self.finish()?;
            return Ok(None);
        }
        let shared = self.varint()?;
        let rest = self.varint()?;
        if shared > self.chunk.len() as u64 {
            return Err(self.corrupt(at, "an entry shares more bytes than the previous chunk has"));
        }
        // The new chunk is built in `previous`'s buffer, then the two swap.
        let mut chunk = std::mem::take(&mut self.previous);
        chunk.clear();
        chunk.extend_from_slice(&self.chunk[..shared as usize]);
        // Read as it comes: a corrupted length must not allocate gigabytes.
        let got = self.exact(rest, &mut chunk);
        self.previous = std::mem::replace(&mut self.chunk, chunk);
        got?;
        if self.entries > 0 && self.chunk <= self.previous {
            return Err(self.corrupt(at, "the chunks are out of order"));
        }
        self.entries += 1;
        self.total = self.total.wrapping_add(count);
        Ok(Some((&self.chunk, count)))
    }

    /// Reads the end: the number of entries and their total, which must be
    /// those read, the checksum, which must be that of every byte before
    /// it, and nothing after it.
    fn finish(&mut self) -> Result<(), String> {
        let at = self.offset;
        let (entries, total) = (self.varint()?, self.varint()?);
        if (entries, total) != (self.entries, self.total) {
            return Err(self.corrupt(at, "the entries do not add up to what the end of the table says"));
        }
        let expected = self.hash.to_le_bytes();
        let at = self.offset;
        let mut sum = Vec::new();
        self.exact(8, &mut sum)?;
        if self.checked && sum != expected {
            return Err(self.corrupt(at, "the checksum does not match"));
        }
        let (path, offset) = (&self.path, self.offset);
        if !self.input.fill_buf().map_err(|e| io_error(path, offset, e))?.is_empty() {
            return Err(self.corrupt(self.offset, "there are bytes after the checksum"));
        }
        self.done = true;
        Ok(())
    }

    /// The number of entries and their total so far (all of them once
    /// `next_entry` has returned `None`).
    pub fn entries_and_total(&self) -> (u64, u64) {
        (self.entries, self.total)
    }

    /// One byte, counted and hashed; `None` at the end of the file.
    fn byte(&mut self) -> Result<Option<u8>, String> {
        let (path, offset) = (&self.path, self.offset);
        let buf = self.input.fill_buf().map_err(|e| io_error(path, offset, e))?;
        let Some(&b) = buf.first() else { return Ok(None) };
        self.input.consume(1);
        self.offset += 1;
        if self.checked {
            self.hash = fnv1a(self.hash, &[b]);
        }
        Ok(Some(b))
    }

    fn varint(&mut self) -> Result<u64, String> {
        let at = self.offset;
        let mut v: u64 = 0;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?.ok_or_else(|| self.truncated())?;
            if shift == 63 && b > 1 {
                break;
            }
            v |= u64::from(b & 0x7f) << shift;
            if b < 0x80 {
                return Ok(v);
            }
        }
        Err(self.corrupt(at, "a number is longer than 64 bits"))
    }

    /// The bytes up to `end` (which is read, not returned), at most `max` of them.
    fn until(&mut self, end: u8, max: usize) -> Result<Vec<u8>, String> {
        let mut line = Vec::new();
        while line.len() <= max {
            match self.byte()? {
                Some(b) if b == end => return Ok(line),
                Some(b) => line.push(b),
                None if line.is_empty() && self.offset == 0 => {
                    return Err(format!("{} is empty, not a bpe count table", self.path.display()))
                }
                None => return Err(self.truncated()),
            }
        }
        // Too long for a header line: not a table at all, or not one we know.
        Ok(line)
    }

    /// Appends exactly `n` bytes to `out`, counted and hashed.
    fn exact(&mut self, n: u64, out: &mut Vec<u8>) -> Result<(), String> {
        // From the buffer as it comes (a corrupted length must not allocate gigabytes).
        let mut left = n;
        while left > 0 {
            let (path, offset) = (&self.path, self.offset);
            let buf = self.input.fill_buf().map_err(|e| io_error(path, offset, e))?;
            if buf.is_empty() {
                return Err(self.truncated());
            }
            let take = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
            out.extend_from_slice(&buf[..take]);
            if self.checked {
                self.hash = fnv1a(self.hash, &buf[..take]);
            }
            self.input.consume(take);
            self.offset += take as u64;
            left -= take as u64;
        }
        Ok(())
    }

    fn truncated(&self) -> String {
        format!(
            "{} is truncated: it ends at byte offset {} inside the table; copy it again in full, or count again",
            self.path.display(),
            self.offset
        )
    }

    fn corrupt(&self, at: u64, what: &str) -> String {
        format!("{} is corrupted at byte offset {at}: {what}; copy it again, or count again", self.path.display())
    }
}

fn io_error(path: &Path, offset: u64, e: std::io::Error) -> String {
    format!("cannot read {} (at byte offset {offset}): {e}", path.display())
}

/// Opens `paths` as tables, refusing them unless all were cut with one
/// pattern (counts of different chunkings do not add up to anything).
pub fn open_all(paths: &[PathBuf]) -> Result<Vec<TableReader>, String> {
    same_pattern(paths.iter().map(|p| TableReader::open(p)).collect::<Result<Vec<_>, _>>()?)
}

/// [`open_all`] for runs (`spill.rs`; [`TableReader::open_run`]).
pub fn open_runs(paths: &[PathBuf]) -> Result<Vec<TableReader>, String> {
    same_pattern(paths.iter().map(|p| TableReader::open_run(p)).collect::<Result<Vec<_>, _>>()?)
}

fn same_pattern(tables: Vec<TableReader>) -> Result<Vec<TableReader>, String> {
    if let Some(first) = tables.first() {
        if let Some(other) = tables.iter().find(|t| t.pattern != first.pattern) {
            return Err(format!(
                "cannot merge {} and {}: they were counted with different split patterns ({} and {}); \
                 count them with the same --pattern",
                first.path.display(),
                other.path.display(),
                shown(&first.pattern),
                shown(&other.pattern),
            ));
        }
    }
    Ok(tables)
}

/// A pattern in a message: its name if it is a built-in one, else quoted.
fn shown(pattern: &str) -> String {
    use crate::split::patterns::{GPT2_PATTERN, GPT4O_PATTERN, GPT4_PATTERN};
    match pattern {
        GPT2_PATTERN => "gpt2".into(),
        GPT4_PATTERN => "gpt4".into(),
        GPT4O_PATTERN => "gpt4o".into(),
        _ => format!("{pattern:?}"),
    }
}

/// Merges sorted tables into `out` in one pass: chunks in more than one
/// table get the sum of their counts, and chunks counted fewer than
/// `min_count` times in all are left out. Memory: one entry per table.
pub fn merge(
    tables: Vec<TableReader>,
    mut out: impl FnMut(&[u8], u64) -> Result<(), String>,
    min_count: u64,
) -> Result<(), String> {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    let mut tables = tables;
    // (chunk, table) of each table's current entry, smallest first; a
    // popped entry's buffer is reused for that table's next one.
    let mut heap = BinaryHeap::with_capacity(tables.len());
    let mut counts = vec![0u64; tables.len()];
    for (i, t) in tables.iter_mut().enumerate() {
        if let Some((chunk, n)) = t.next_entry()? {
            counts[i] = n;
            heap.push(Reverse((chunk.to_vec(), i)));
        }
    }
    let mut current: Vec<u8> = Vec::new();
    let mut sum: u64 = 0;
    let mut any = false;
    while let Some(Reverse((mut chunk, i))) = heap.pop() {
        if !any || chunk != current {
            if any && sum >= min_count {
                out(&current, sum)?;
            }
            std::mem::swap(&mut current, &mut chunk);
            sum = 0;
            any = true;
        }
        sum = sum.checked_add(counts[i]).ok_or("the counts add up past 2^64, more than any corpus holds")?;
        if let Some((next, n)) = tables[i].next_entry()? {
            chunk.clear();
            chunk.extend_from_slice(next);
            counts[i] = n;
            heap.push(Reverse((chunk, i)));
        }
    }
    if any && sum >= min_count {
        out(&current, sum)?;
    }
    Ok(())
}

#[cfg(test)]
#[path = "table_tests.rs"]
mod tests;
