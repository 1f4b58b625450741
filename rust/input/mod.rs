//! Reading text files: byte ranges of files read in blocks that end at safe
//! cut points (`split/pretokenize.rs`), checked to be UTF-8, for the bulk encoder
//! (`run/bulk/mod.rs`). Nothing here knows about tokens.
//!
//! A block ends where a cutter says (the last cut point it accepts in the
//! bytes read so far); the bytes after it are carried into the next block.
//! So the blocks of a range concatenate to the range, and every block holds
//! whole characters. Memory: one block and its carry; a stretch with no cut
//! point longer than `MAX_UNCUT_BYTES` is an error, not an ever-growing
//! buffer.
//!
//! A path of `-` is standard input, and a pipe or a device (`<(zcat c.gz)`)
//! is read once, to its end, like stdin: such a range must start at 0 and
//! has no end but the end of its data.

pub mod arrow;

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use crate::limits::{uncut_error, MAX_UNCUT_BYTES};

mod json_fast;
mod json_serde;
pub mod parquet;
pub mod records;

/// A byte range of a file: `start..end` (`end: None`: to the end of the file).
#[derive(Clone, Debug)]
pub struct Range {
    pub path: PathBuf,
    pub start: u64,
    pub end: Option<u64>,
}

/// The path that stands for standard input.
pub const STDIN: &str = "-";

/// How a path is named in messages: `<stdin>` for `-`.
pub fn name(path: &Path) -> std::path::Display<'_> {
    if path.as_os_str() == STDIN {
        Path::new("<stdin>").display()
    } else {
        path.display()
    }
}

/// Opens `path` for reading (`-`: standard input); true if it is a regular
/// file (which can be sized, sought and read again for a line number).
pub fn open_file(path: &Path) -> Result<(File, bool), String> {
    let real = if path.as_os_str() == STDIN { Path::new("/dev/stdin") } else { path };
    let file = File::open(real).map_err(|e| format!("cannot read {}: {e}", name(path)))?;
    let regular = file.metadata().map_err(|e| format!("cannot read {}: {e}", name(path)))?.is_file();
    Ok((file, regular && path.as_os_str() != STDIN))
}

/// How a file is compressed, by its name's last extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
    Zstd,
    Xz,
    Bzip2,
}

impl Compression {
    pub fn of(path: &Path) -> Compression {
        match path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase).as_deref() {
            Some("gz") => Compression::Gzip,
            Some("zst" | "zstd") => Compression::Zstd,
            Some("xz") => Compression::Xz,
            Some("bz2") => Compression::Bzip2,
            _ => Compression::None,
        }
    }
}

/// A file's bytes: decompressed if its name says it is compressed. The
/// decoders are the crates made for each format; a damaged or truncated
/// stream is a read error, reported with the file's name.
pub type Reader = Box<dyn Read + Send + 'static>;

/// Opens `path` (`-`: stdin) decompressing by its extension; the bool is
/// true if it is a regular, uncompressed file (it can be sized and sought).
pub fn open(path: &Path) -> Result<(Reader, bool), String> {
    let (file, regular) = open_file(path)?;
    decompressed(path, file, regular)
}

/// `open`, adding the bytes read from the file (before decompression) to
/// `read`: progress over compressed files is measured in what they take on
/// disk, which is what their total size is known in.
pub fn open_counted<'a>(
    path: &Path,
    read: &'a std::sync::atomic::AtomicU64,
) -> Result<Box<dyn Read + Send + 'a>, String> {
    let (file, regular) = open_file(path)?;
    let counted = Counted { inner: file, read };
    let (reader, _) = decompressed(path, counted, regular)?;
    Ok(reader)
}

/// A reader that adds what it reads to a shared count.
struct Counted<'a, R> {
    inner: R,
    read: &'a std::sync::atomic::AtomicU64,
}

impl<R: Read> Read for Counted<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read.fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed);
        Ok(n)
    }
}

/// `file` (already open: see `open`) decompressed as its name says.
pub fn decompressed<'a, R: Read + Send + 'a>(
    path: &Path,
    file: R,
    regular: bool,
) -> Result<(Box<dyn Read + Send + 'a>, bool), String> {
    // Decoders read in small pieces: a buffer under them saves a system call each.
    let compression = Compression::of(path);
    if compression == Compression::None {
        return Ok((Box::new(file), regular));
    }
    let buffered = || std::io::BufReader::with_capacity(1 << 20, file);
    Ok(match compression {
        Compression::None => unreachable!("returned above"),
        Compression::Gzip => (Box::new(flate2::bufread::MultiGzDecoder::new(buffered())), false),
        Compression::Zstd => {
            let d = zstd::stream::read::Decoder::with_buffer(buffered())
                .map_err(|e| format!("cannot read {}: {e}", name(path)))?;
            (Box::new(d), false)
        }
        Compression::Xz => (Box::new(xz2::bufread::XzDecoder::new_multi_decoder(buffered())), false),
        Compression::Bzip2 => (Box::new(bzip2::bufread::MultiBzDecoder::new(buffered())), false),
    })
}

/// A file whose first this-many bytes hold a NUL byte is refused as binary
/// (as git and grep decide; `bpe/files.py` checks regular files the same way
/// before reading them).
pub const BINARY_SNIFF_BYTES: usize = 64 << 10;

/// The error for a NUL byte at `at` in the first bytes of a file.
pub(crate) fn binary_error(path: &Path, at: u64) -> String {
    format!(
        "{} looks like a binary file, not text: it has a NUL byte at byte offset {at}{}; give UTF-8 text files",
        name(path),
        crate::limits::line_suffix(path, at)
    )
}

/// One block of text read from range `range` (an index into the ranges),
/// starting at byte `offset` of its file.
pub struct Block {
    pub range: usize,
    pub offset: u64,
    pub text: String,
}

/// The last cut point a block may end at, in the bytes read so far.
pub type Cutter<'a> = &'a (dyn Fn(&[u8]) -> Option<usize> + Sync);

/// Reads `ranges` one after the other, in blocks of about `block_bytes`.
pub struct Blocks<'a> {
    ranges: &'a [Range],
    block_bytes: usize,
    cut: Cutter<'a>,
    /// The range being read, its file, its offset of the next block's first
    /// byte, and the bytes of it left to read.
    current: usize,
    file: Option<Reader>,
    offset: u64,
    left: u64,
    /// The file is a stream (stdin, a pipe): read to its end, `left` unknown.
    stream: bool,
    carry: Vec<u8>,
}

impl<'a> Blocks<'a> {
    /// `cut: None`: each range is one block (for patterns whose chunks a cut
    /// could change; memory then grows with the range).
    pub fn new(ranges: &'a [Range], block_bytes: usize, cut: Cutter<'a>) -> Blocks<'a> {
        Blocks {
            ranges,
            block_bytes,
            cut,
            current: 0,
            file: None,
            offset: 0,
            left: 0,
            stream: false,
            carry: Vec::new(),
        }
    }

    /// The next block, in order; `None` after the last. An empty range
    /// gives one empty block (so that every range is seen).
    pub fn next_block(&mut self) -> Result<Option<Block>, String> {
        if self.file.is_none() {
            let Some(range) = self.ranges.get(self.current) else { return Ok(None) };
            let (mut file, regular) = open_file(&range.path)?;
            let name = name(&range.path);
            let compressed = Compression::of(&range.path) != Compression::None;
            if regular && !compressed {
                let size = file.metadata().map_err(|e| format!("cannot read {name}: {e}"))?.len();
                let end = range.end.unwrap_or(size).min(size);
                file.seek(SeekFrom::Start(range.start)).map_err(|e| format!("cannot read {name}: {e}"))?;
                self.left = end.saturating_sub(range.start);
                self.file = Some(Box::new(file));
            } else if range.start != 0 || range.end.is_some() {
                return Err(format!("{name} is compressed or not a regular file: it can only be read whole, once"));
            } else {
                self.left = u64::MAX;
                // The file already open, never opened again: a pipe opened a
                // second time waits for a writer that may have gone.
                self.file = Some(decompressed(&range.path, file, false)?.0);
            }
            self.stream = !regular || compressed;
            self.offset = range.start;
            self.carry.clear();
        }
        let path = &self.ranges[self.current].path;
        let file = self.file.as_mut().expect("opened above");
        let room = (self.block_bytes as u64).min(self.left) as usize;
        let mut buf = Vec::with_capacity(room + self.carry.len() + (64 << 10));
        buf.append(&mut self.carry);
        let cut = loop {
            // `read_to_end` on a `Take` reads into the spare capacity without
            // zeroing it first.
            let want = (self.block_bytes as u64).min(self.left);
            let n = file
                .by_ref()
                .take(want)
                .read_to_end(&mut buf)
                .map_err(|e| format!("cannot read {}: {e}", name(path)))?;
            if self.stream {
                if (n as u64) < want {
                    self.left = 0; // the end of the stream
                }
            } else {
                self.left -= n as u64;
                if n as u64 != want {
                    return Err(format!("cannot read {}: it became shorter while being read", name(path)));
                }
            }
            if self.left == 0 {
                break buf.len();
            }
            if let Some(cut) = (self.cut)(&buf) {
                break cut;
            }
            if buf.len() >= MAX_UNCUT_BYTES {
                // Bad bytes leave no cut point either: name them first.
                return Err(match std::str::from_utf8(&buf) {
                    Err(e) if e.error_len().is_some() => not_utf8(path, self.offset, e),
                    _ => uncut_error(path, self.offset, buf.len()),
                });
            }
            // No cut point yet (one huge line): read more.
        };
        if self.offset < BINARY_SNIFF_BYTES as u64 {
            let head = &buf[..buf.len().min(BINARY_SNIFF_BYTES - self.offset as usize)];
            if let Some(at) = memchr::memchr(0, head) {
                return Err(binary_error(path, self.offset + at as u64));
            }
        }
        self.carry.extend_from_slice(&buf[cut..]);
        buf.truncate(cut);
        let text = utf8_string(buf).map_err(|e| not_utf8(path, self.offset, e))?;
        let block = Block { range: self.current, offset: self.offset, text };
        self.offset += cut as u64;
        if self.left == 0 && self.carry.is_empty() {
            self.file = None;
            self.current += 1;
        }
        Ok(Some(block))
    }
}

/// `std::str::from_utf8`, the check done by `simdutf8` (SIMD, ~4x std's on
/// text); std's check, which says where the bad byte is, only once that one
/// has failed. (Counting 1 GB of text spent 3% of its CPU in std's check;
/// training from Parquet 2.3%.)
pub fn utf8(bytes: &[u8]) -> Result<&str, std::str::Utf8Error> {
    simdutf8::basic::from_utf8(bytes).map_err(|_| std::str::from_utf8(bytes).expect_err("simdutf8 and std disagree"))
}

/// `String::from_utf8` as [`utf8`] checks.
pub fn utf8_string(bytes: Vec<u8>) -> Result<String, std::str::Utf8Error> {
    utf8(&bytes)?;
    // SAFETY: just checked to be UTF-8.
    Ok(unsafe { String::from_utf8_unchecked(bytes) })
}

/// The error for bytes that are not UTF-8, `e` found in the text read from
/// byte `offset` of the file at `path`.
pub fn not_utf8(path: &Path, offset: u64, e: std::str::Utf8Error) -> String {
    let at = offset + e.valid_up_to() as u64;
    format!(
        "{} is not valid UTF-8 at byte offset {at}{}; convert it to UTF-8 \
         (e.g. `iconv -f latin1 -t utf-8`) or remove the bad bytes",
        name(path),
        crate::limits::line_suffix(path, at)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::split::pretokenize::last_safe_cut;

    fn temp(name: &str, bytes: &[u8]) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("bpe-input-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, bytes).unwrap();
        path
    }

    fn read_all(ranges: &[Range], block: usize) -> Result<Vec<(usize, u64, String)>, String> {
        let mut blocks = Blocks::new(ranges, block, &last_safe_cut);
        let mut out = vec![];
        while let Some(b) = blocks.next_block()? {
            out.push((b.range, b.offset, b.text));
        }
        Ok(out)
    }

    #[test]
    fn blocks_tile_the_ranges() {
        let text = "Hello world, héllo.\nSecond line 12345\n".repeat(50);
        let a = temp("a.txt", text.as_bytes());
        let b = temp("b.txt", b"");
        let ranges = [
            Range { path: a.clone(), start: 0, end: None },
            Range { path: b, start: 0, end: None },
            Range { path: a.clone(), start: 20, end: Some(500) },
        ];
        for block in [1, 7, 64, 1 << 20] {
            let got = read_all(&ranges, block).unwrap();
            for (k, want) in [(0, &text[..]), (1, ""), (2, &text[20..500])] {
                let parts: Vec<_> = got.iter().filter(|g| g.0 == k).collect();
                assert!(!parts.is_empty());
                let joined: String = parts.iter().map(|g| g.2.as_str()).collect();
                assert_eq!(joined, want, "block {block} range {k}");
                let start = if k == 2 { 20 } else { 0 };
                let mut at = start;
                for p in parts {
                    assert_eq!(p.1, at);
                    at += p.2.len() as u64;
                }
            }
        }
    }

    #[test]
    fn bad_bytes_are_named_by_offset() {
        let mut bytes = b"good text\nmore good text\n".repeat(10);
        bytes[103] = 0xff;
        let p = temp("bad.txt", &bytes);
        let err = read_all(&[Range { path: p.clone(), start: 0, end: None }], 16).unwrap_err();
        assert!(err.contains("not valid UTF-8 at byte offset 103"), "{err}");
        let err = read_all(&[Range { path: p.with_extension("missing"), start: 0, end: None }], 16).unwrap_err();
        assert!(err.starts_with("cannot read"), "{err}");
    }
}
