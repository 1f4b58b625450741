//! Bindings of streaming: files (or stdin) encoded into an open file
//! descriptor (stdout, or the temporary file of `-o FILE`) as text or
//! binary ids, or only counted; a stream of ids decoded into one. This is
//! `bpe encode`, `bpe decode` and `bpe info FILE`: memory is a few blocks,
//! whatever the size of the input. The GIL is taken between blocks only.
//!
//! The descriptor stays the caller's: it is written through a `File` that is
//! never dropped (so never closed), and flushed before returning.

use std::fs::File;
use std::io::{BufWriter, Read, Seek, SeekFrom, Write};
use std::mem::ManuallyDrop;
use std::os::fd::FromRawFd;
use std::path::PathBuf;

use pyo3::prelude::*;
use rustc_hash::FxHashSet;

use super::buffers::check_width;
use super::bulk::between;
use super::encoder::CoreBPE;
use super::errors::guard;
use crate::decode::idtext::{self, Format};
use crate::decode::stream::{decode_stream, write_error, Ids, Utf8, BROKEN_PIPE};
use crate::input::records;
use crate::input::{self, Range};
use crate::run::bulk::{encode_segments, Options, Segment, Sink, BLOCK_BYTES};
use crate::run::pieces::encode_pieces;
use crate::threads::pool as thread_pool;
use crate::vocab::Rank;

/// The caller's descriptor as a `File` that is never closed here; `None`
/// for a negative one (no output).
pub(super) fn borrowed(fd: i32) -> Option<ManuallyDrop<File>> {
    // SAFETY: the caller (Python) keeps `fd` open for the whole call, and
    // the `File` is never dropped, so it never closes a descriptor it does
    // not own.
    (fd >= 0).then(|| ManuallyDrop::new(unsafe { File::from_raw_fd(fd) }))
}

/// Where encoded ids go: text lines, fixed-width binary, or nowhere (only
/// counted), and how many each file gave. (`arrow.rs` writes records
/// through it too: a record is a segment.)
pub(super) struct Out<'f> {
    writer: Option<BufWriter<&'f File>>,
    text: Option<idtext::Writer>,
    width: usize,
    counts: Vec<u64>,
    started: bool,
    bytes: Vec<u8>,
}

impl<'f> Out<'f> {
    /// Writes to `file` (`None`: only counts) as text in `text` format, or
    /// as binary ids of `width` bytes when `text` is `None`.
    pub(super) fn new(file: Option<&'f File>, text: Option<Format>, width: usize) -> Out<'f> {
        let writer = file.map(|f| BufWriter::with_capacity(1 << 20, f));
        Out {
            writer,
            text: text.map(idtext::Writer::new),
            width,
            counts: Vec::new(),
            started: false,
            bytes: Vec::new(),
        }
    }

    fn write(&mut self) -> Result<(), String> {
        if let Some(w) = self.writer.as_mut() {
            w.write_all(&self.bytes).map_err(write_error)?;
        }
        self.bytes.clear();
        Ok(())
    }

    /// Ends the last line and flushes; the number of ids of each segment.
    pub(super) fn finish(mut self) -> Result<Vec<u64>, String> {
        if let (Some(t), true) = (self.text.as_mut(), self.started) {
            t.end(&mut self.bytes);
        }
        self.write()?;
        if let Some(w) = self.writer.as_mut() {
            w.flush().map_err(write_error)?;
        }
        Ok(self.counts)
    }
}

impl Sink for Out<'_> {
    fn start(&mut self, segment: usize) -> Result<(), String> {
        if let Some(t) = self.text.as_mut() {
            if self.started {
                t.end(&mut self.bytes);
            }
            t.start(&mut self.bytes);
        }
        self.started = true;
        self.counts.resize(segment + 1, 0);
        Ok(())
    }

    fn ids(&mut self, _sink: usize, ids: &[Rank]) -> Result<(), String> {
        if let Some(n) = self.counts.last_mut() {
            *n += ids.len() as u64;
        }
        if self.writer.is_none() {
            return Ok(());
        }
        match self.text.as_mut() {
            Some(t) => t.ids(ids, &mut self.bytes),
            None => {
                check_width(ids, self.width)?;
                self.bytes.reserve(ids.len() * self.width);
                for &id in ids {
                    self.bytes.extend_from_slice(&id.to_le_bytes()[..self.width]);
                }
            }
        }
        self.write()
    }
}

/// The output settings the `*_to_fd` functions share: `format` (`"ids"`,
/// `"json"`: lines of text; `"binary"`: fixed-width ids with `separator`
/// between documents; `"count"`: nothing written) and descriptor `out`,
/// borrowed (Python closes it).
pub(super) struct Output {
    pub(super) text: Option<Format>,
    pub(super) separator: Option<Rank>,
    pub(super) file: Option<ManuallyDrop<File>>,
}

impl Output {
    pub(super) fn new(format: &str, out: i32, separator: Option<Rank>) -> PyResult<Output> {
        let text = match format {
            "binary" | "count" => None,
            other => Some(guard(|| Format::parse(other))?),
        };
        // Text output has a line per document: no separator id.
        let separator = if text.is_some() { None } else { separator };
        let file = borrowed(out).filter(|_| format != "count");
        if file.is_none() && format != "count" {
            return guard(|| Err(format!("no file descriptor to write the {format} output to")));
        }
        Ok(Output { text, separator, file })
    }

    /// The sink writing there, for ids of `width` bytes.
    pub(super) fn sink(&self, width: usize) -> Out<'_> {
        Out::new(self.file.as_deref(), self.text, width)
    }
}

/// Encodes `paths` (each one document; `-` is stdin) and writes the ids to
/// descriptor `out` in `format`: `"ids"` or `"json"` (a line of text per
/// file), `"binary"` (`width`-byte little-endian ids, `separator` between
/// files), or `"count"` (nothing written; `out` is ignored). Returns the
/// number of ids of each file (a separator counts to the file before it).
#[pyfunction]
#[pyo3(signature = (core, paths, out, format, allowed_special, disallowed_special, separator, num_threads, width, progress=None))]
#[allow(clippy::too_many_arguments)]
pub(super) fn encode_to_fd(
    py: Python<'_>,
    core: &Bound<'_, CoreBPE>,
    paths: Vec<PathBuf>,
    out: i32,
    format: &str,
    allowed_special: Vec<String>,
    disallowed_special: Vec<String>,
    separator: Option<Rank>,
    num_threads: usize,
    width: usize,
    progress: Option<PyObject>,
) -> PyResult<Vec<u64>> {
    let enc = &core.get().enc;
    let output = Output::new(format, out, separator)?;
    let segments: Vec<Segment> = paths
        .into_iter()
        .map(|path| Segment { range: Range { path, start: 0, end: None }, sink: 0, doc_start: true })
        .collect();
    let n = segments.len();
    let allowed: FxHashSet<String> = allowed_special.into_iter().collect();
    let opts = Options { allowed: &allowed, disallowed: &disallowed_special, separator: output.separator };
    py.allow_threads(|| {
        guard(|| {
            let pool = thread_pool(num_threads)?;
            let mut sink = output.sink(width);
            encode_segments(enc, &segments, &opts, &pool, BLOCK_BYTES, between(&progress), &mut sink)?;
            let mut counts = sink.finish()?;
            counts.resize(n, 0);
            Ok(counts)
        })
    })
}

/// Decodes the ids in the file at `path` (`-`: stdin) from byte `skip` on
/// (a `.npy` header), stored as `ids` (`"text"`, or `"binary"` of `width`
/// bytes, `signed` or not), and writes their bytes to descriptor `out`;
/// `errors`: `"strict"`, `"replace"` or `"bytes"` (see `decode/stream.rs`).
/// Returns the number of ids.
#[pyfunction]
#[pyo3(signature = (core, path, skip, ids, width, signed, errors, out))]
#[allow(clippy::too_many_arguments)]
pub(super) fn decode_to_fd(
    py: Python<'_>,
    core: &Bound<'_, CoreBPE>,
    path: PathBuf,
    skip: u64,
    ids: &str,
    width: usize,
    signed: bool,
    errors: &str,
    out: i32,
) -> PyResult<u64> {
    let enc = &core.get().enc;
    let ids = match ids {
        "text" => Ids::Text,
        "binary" if matches!(width, 2 | 4 | 8) => Ids::Binary { width, signed },
        other => return guard(|| Err(format!("cannot read ids stored as {other:?} of width {width}"))),
    };
    let utf8 = match errors {
        "strict" => Utf8::Strict,
        "replace" => Utf8::Replace,
        "bytes" => Utf8::Bytes,
        other => return guard(|| Err(format!("errors must be \"strict\", \"replace\" or \"bytes\", not {other:?}"))),
    };
    let Some(file) = borrowed(out) else {
        return guard(|| Err("no file descriptor to write the decoded text to".to_string()));
    };
    py.allow_threads(|| {
        guard(|| {
            let name = input::name(&path).to_string();
            let (mut src, regular) = input::open_file(&path)?;
            let mut input: input::Reader = if regular && input::Compression::of(&path) == input::Compression::None {
                src.seek(SeekFrom::Start(skip)).map_err(|e| format!("cannot read {name}: {e}"))?;
                Box::new(src)
            } else {
                // Stdin, a pipe, a compressed file: read past the header (from
                // the file already open: a pipe is never opened twice).
                let mut r = input::decompressed(&path, src, false)?.0;
                std::io::copy(&mut (&mut r).take(skip), &mut std::io::sink())
                    .map_err(|e| format!("cannot read {name}: {e}"))?;
                r
            };
            let mut writer = BufWriter::with_capacity(1 << 20, &*file);
            let progress = None;
            decode_stream(enc, &mut input, ids, utf8, &mut writer, between(&progress)).map_err(|e| {
                if e == BROKEN_PIPE || e.starts_with('\u{0}') || e.starts_with("cannot write") {
                    e
                } else {
                    format!("{name}: {e}")
                }
            })
        })
    })
}

/// Per file: (records, ids) written; and the bad records skipped.
type RecordCounts = (Vec<(u64, u64)>, Vec<u64>);

/// `encode_to_fd` for JSON Lines files (compressed or not; `-` is stdin):
/// each record's text field is one document (a line of ids each in the text
/// formats; `separator` between records in `"binary"`). Returns the number
/// of records and ids of each file, and the bad records skipped in each.
#[pyfunction]
#[pyo3(signature = (core, paths, field, skip_bad, out, format, allowed_special, disallowed_special, separator, num_threads, width, progress=None))]
#[allow(clippy::too_many_arguments)]
pub(super) fn encode_records_to_fd(
    py: Python<'_>,
    core: &Bound<'_, CoreBPE>,
    paths: Vec<PathBuf>,
    field: Vec<String>,
    skip_bad: bool,
    out: i32,
    format: &str,
    allowed_special: Vec<String>,
    disallowed_special: Vec<String>,
    separator: Option<Rank>,
    num_threads: usize,
    width: usize,
    progress: Option<PyObject>,
) -> PyResult<RecordCounts> {
    let enc = &core.get().enc;
    let output = Output::new(format, out, separator)?;
    let separator = output.separator;
    let allowed: FxHashSet<String> = allowed_special.into_iter().collect();
    let n = paths.len();
    py.allow_threads(|| {
        guard(|| {
            let pool = thread_pool(num_threads)?;
            let mut sink = output.sink(width);
            let mut per_file = vec![(0u64, 0u64); n];
            let mut progress_at = between(&progress);
            let read = std::sync::atomic::AtomicU64::new(0);
            let mut records_so_far = 0usize;
            let skipped = records::for_each_batch(&paths, &field, skip_bad, records::BATCH_BYTES, &read, |batch| {
                progress_at(read.load(std::sync::atomic::Ordering::Relaxed))?;
                let docs: Vec<&str> = batch.docs().collect();
                if !disallowed_special.is_empty() {
                    for (k, doc) in docs.iter().enumerate() {
                        if let Some(found) = enc.find_special(doc, &disallowed_special) {
                            let path = &paths[batch.file];
                            return Err(format!(
                                "{}: {} {} holds the special token {found:?}; to encode such text as ordinary text \
                                 pass --special-as-text (disallowed_special=()), as the special token --allow-special",
                                input::name(path),
                                if input::parquet::is_parquet(path) { "row" } else { "line" },
                                batch.lines[k]
                            ));
                        }
                    }
                }
                let ids = pool.install(|| encode_pieces(enc, &docs, &allowed))?;
                for doc_ids in &ids {
                    if let (Some(sep), true) = (separator, records_so_far > 0) {
                        sink.ids(0, &[sep])?;
                        per_file[batch.file].1 += 1;
                    }
                    sink.start(0)?; // one count for all: memory must not grow with the records
                    sink.ids(0, doc_ids)?;
                    records_so_far += 1;
                    per_file[batch.file].0 += 1;
                    per_file[batch.file].1 += doc_ids.len() as u64;
                }
                Ok(())
            })?;
            progress_at(read.load(std::sync::atomic::Ordering::Relaxed))?;
            sink.finish()?;
            Ok((per_file, skipped))
        })
    })
}
