//! Bindings of Arrow string arrays (`input/arrow.rs`): the records of a
//! Parquet shard, a pyarrow Table or a HF dataset, counted for training
//! (`Trainer.feed_arrow`) or encoded into a file descriptor
//! (`encode_arrow_to_fd`), read where pyarrow keeps them: no copy, no
//! Python `str` per record. `bpe/arrow_sources.py` hands over one array (a
//! batch of rows) per call.
//!
//! An array arrives as its parts, `Parts`: the three buffers
//! (`arr.buffers()`, lent through the buffer protocol), the offsets' width
//! and the array's offset and length. Each record is one document: records
//! are never joined, so no chunk crosses two. A record that cannot be
//! read (null, not UTF-8, or holding disallowed special-token text) is an
//! error naming the source and its row, or with `skip_bad` is skipped and
//! counted.

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use rayon::prelude::*;
use rustc_hash::FxHashSet;

use super::encoder::{call_workers, CoreBPE};
use super::errors::{check_interrupt, guard};
use super::stream::Output;
use crate::input::arrow::{Bad, Strings, Width};
use crate::run::batch::{largest_first, run_batch, runs};
use crate::run::bulk::Sink;

use crate::threads::pool as thread_pool;
use crate::train::{self, ChunkCounts};
use crate::vocab::Rank;

/// An array's parts as Python passes them: `(validity, offsets, data,
/// offset_width, offset, length)`; a buffer may be None (no nulls, or an
/// empty array).
pub(super) type Parts<'py> =
    (Option<Bound<'py, PyAny>>, Option<Bound<'py, PyAny>>, Option<Bound<'py, PyAny>>, usize, usize, usize);

/// Where the rows come from, for messages, and what to do with bad ones.
pub(super) struct Rows<'a> {
    /// The source's name (a Parquet file, "the table").
    pub name: &'a str,
    /// The row number of the array's first record in the source.
    pub first_row: u64,
    pub skip_bad: bool,
}

/// The bad records skipped: how many, and a description of the first.
#[derive(Default)]
pub(super) struct Skipped {
    pub count: u64,
    pub first: Option<String>,
}

impl Skipped {
    fn note(&mut self, message: String) {
        self.count += 1;
        self.first.get_or_insert(message);
    }
}

impl Rows<'_> {
    /// The error, or the note, for record `i` of the array.
    fn bad(&self, i: usize, what: &str, skipped: &mut Skipped) -> Result<(), String> {
        let message = format!("{}, row {}: the record {what}", self.name, self.first_row + i as u64);
        if !self.skip_bad {
            return Err(format!("{message}; fix or drop that row, or pass skip_bad=True to skip bad records"));
        }
        skipped.note(message);
        Ok(())
    }
}

/// A buffer's bytes, borrowed (pyarrow lends `int8` bytes, a `bytes` or
/// `memoryview` lends `uint8`).
enum Lent {
    U8(PyBuffer<u8>),
    I8(PyBuffer<i8>),
}

impl Lent {
    fn new(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Lent> {
        let lent = match PyBuffer::<u8>::get(obj) {
            Ok(b) => Lent::U8(b),
            Err(_) => Lent::I8(PyBuffer::<i8>::get(obj).map_err(|e| {
                PyValueError::new_err(format!("the array's {what} buffer cannot be read as bytes: {e}"))
            })?),
        };
        let contiguous = match &lent {
            Lent::U8(b) => b.is_c_contiguous(),
            Lent::I8(b) => b.is_c_contiguous(),
        };
        if !contiguous {
            return Err(PyValueError::new_err(format!("the array's {what} buffer is not contiguous")));
        }
        Ok(lent)
    }

    fn bytes(&self) -> &[u8] {
        let (ptr, len) = match self {
            Lent::U8(b) => (b.buf_ptr(), b.len_bytes()),
            Lent::I8(b) => (b.buf_ptr(), b.len_bytes()),
        };
        if len == 0 {
            return &[];
        }
        // SAFETY: the buffer is contiguous (checked in `new`), `len` bytes
        // from `ptr`, and stays valid while `self` holds the view. Arrow
        // buffers are immutable once the array is built (the Arrow format's
        // contract, which every reader sharing them relies on), so nothing
        // writes them while this slice lives. And all we do with the bytes
        // is bounds-checked (`Strings`), so even a buffer that lied about its
        // content could give wrong text, never a read outside it.
        unsafe { std::slice::from_raw_parts(ptr as *const u8, len) }
    }
}

/// An array's buffers, borrowed for the length of a call.
struct Array {
    validity: Option<Lent>,
    offsets: Option<Lent>,
    data: Option<Lent>,
    width: Width,
    offset: usize,
    len: usize,
}

impl Array {
    fn new(parts: &Parts<'_>) -> PyResult<Array> {
        let (validity, offsets, data, width, offset, len) = parts;
        let lend = |b: &Option<Bound<'_, PyAny>>, what| b.as_ref().map(|b| Lent::new(b, what)).transpose();
        Ok(Array {
            validity: lend(validity, "validity")?,
            offsets: lend(offsets, "offsets")?,
            data: lend(data, "data")?,
            width: guard(|| Width::from_bytes(*width))?,
            offset: *offset,
            len: *len,
        })
    }

    /// The checked view; errors name the source.
    fn strings(&self, rows: &Rows) -> Result<Strings<'_>, String> {
        fn bytes(b: &Option<Lent>) -> &[u8] {
            b.as_ref().map_or(&[], Lent::bytes)
        }
        let validity = self.validity.as_ref().map(Lent::bytes);
        Strings::new(validity, bytes(&self.offsets), self.width, bytes(&self.data), self.offset, self.len)
            .map_err(|e| format!("{}, rows {}..: {e}", rows.name, rows.first_row))
    }
}

/// Counts the records of `parts`, each one document, into a new map, on
/// the rayon pool's threads without the GIL (as `Trainer.feed_texts` counts
/// texts: the same counts for the same records).
///
/// In one call, not in groups with a check for Ctrl-C between them as
/// `feed_texts` does: a batch is a few MB (Ctrl-C is seen between batches,
/// in Python), and each group's map merged into the total on one thread
/// left the other cores idle (a quarter more time than reading a text file).
pub(super) fn count_records(
    py: Python<'_>,
    splitter: &dyn train::Chunker,
    parts: &Parts<'_>,
    rows: &Rows,
) -> PyResult<(ChunkCounts, Skipped)> {
    let array = Array::new(parts)?;
    py.allow_threads(|| {
        let _free = crate::ReturnFreedMemory::new();
        guard(|| {
            let strings = array.strings(rows)?;
            // Checking UTF-8 is a pass over every byte: shared by the threads.
            let records: Vec<Result<&str, Bad>> =
                crate::threads::install(|| (0..strings.len()).into_par_iter().map(|i| strings.get(i)).collect());
            let mut skipped = Skipped::default();
            let mut docs = Vec::with_capacity(records.len());
            for (i, record) in records.into_iter().enumerate() {
                match record {
                    Ok(text) => docs.push(text),
                    Err(bad) => rows.bad(i, &bad.describe(), &mut skipped)?,
                }
            }
            let counts = train::count_documents(splitter, &docs)?;
            Ok((counts, skipped))
        })
    })
}

/// Encodes the records of `array` and writes their ids to descriptor `out`
/// in `format`, as `encode_to_fd` (`stream.rs`) does for files: `"ids"` or
/// `"json"` (a line of text per record), `"binary"` (`width`-byte
/// little-endian ids, `separator` before every record but the first; and
/// before the first too when `follows`: it follows an earlier batch's), or
/// `"count"` (nothing written). Bad records are an error naming `name` and
/// the row (`first_row` + index), or with `skip_bad` skipped (no line).
/// Returns the ids of each record (a separator counts to the record after
/// it; a skipped record has 0), the number skipped and the first one's
/// description.
#[pyfunction]
#[pyo3(signature = (
    core, array, out, format, allowed_special, disallowed_special, separator, num_threads, width,
    name, first_row, skip_bad, follows
))]
#[allow(clippy::too_many_arguments)]
pub(super) fn encode_arrow_to_fd(
    py: Python<'_>,
    core: &Bound<'_, CoreBPE>,
    array: Parts<'_>,
    out: i32,
    format: &str,
    allowed_special: Vec<String>,
    disallowed_special: Vec<String>,
    separator: Option<Rank>,
    num_threads: usize,
    width: usize,
    name: &str,
    first_row: u64,
    skip_bad: bool,
    follows: bool,
) -> PyResult<(Vec<u64>, u64, Option<String>)> {
    let enc = &core.get().enc;
    let output = Output::new(format, out, separator)?;
    let array = Array::new(&array)?;
    let rows = Rows { name, first_row, skip_bad };
    let allowed: FxHashSet<String> = allowed_special.into_iter().collect();
    py.allow_threads(|| {
        guard(|| {
            let strings = array.strings(&rows)?;
            let pool = thread_pool(num_threads)?;
            let encoded = encode_records(enc, &strings, &allowed, &disallowed_special, &pool)?;
            // The first bad record stops the batch before anything of it is written.
            let mut skipped = Skipped::default();
            for (i, record) in encoded.iter().enumerate() {
                if let Err(what) = record {
                    rows.bad(i, what, &mut skipped)?;
                }
            }
            let mut sink = output.sink(width);
            let mut first = !follows;
            for (i, record) in encoded.iter().enumerate() {
                let Ok(ids) = record else { continue };
                sink.start(i)?;
                if let Some(sep) = output.separator.filter(|_| !first) {
                    sink.ids(0, &[sep])?;
                }
                first = false;
                sink.ids(0, ids)?;
            }
            let mut counts = sink.finish()?;
            counts.resize(strings.len(), 0);
            Ok((counts, skipped.count, skipped.first))
        })
    })
}

/// Each record's ids, or what is wrong with it: encoded by the calling
/// thread and the rest of `pool`'s in runs of neighbouring records, one memo
/// per thread (as `CoreBPE.encode_batch` encodes a list of texts).
fn encode_records(
    enc: &crate::encode::Encoder,
    strings: &Strings,
    allowed: &FxHashSet<String>,
    disallowed: &[String],
    pool: &rayon::ThreadPool,
) -> Result<Vec<Result<Vec<Rank>, String>>, String> {
    let threads = pool.current_num_threads();
    let workers = call_workers(enc, threads)?;
    let sizes: Vec<usize> = (0..strings.len()).map(|i| strings.span_bytes(i..i + 1)).collect();
    let runs = runs(&sizes, threads);
    let order = largest_first(&runs, &sizes);
    // Ok(Err(what)): a bad record; Err: the encoder failed (stops the batch).
    let encode_one = |i: usize, memo: &mut crate::encode::Memo| -> Result<Result<Vec<Rank>, String>, String> {
        let text = match strings.get(i) {
            Ok(text) => text,
            Err(bad) => return Ok(Err(bad.describe())),
        };
        if let Some(found) = (!disallowed.is_empty()).then(|| enc.find_special(text, disallowed)).flatten() {
            return Ok(Err(format!(
                "holds the special token {found:?}; to encode such text as ordinary text pass \
                 disallowed_special=() (CLI: --special-as-text), to encode it as the special token \
                 pass allowed_special (CLI: --allow-special)"
            )));
        }
        let mut ids = crate::encode::ids_buffer(text.len());
        enc.encode_into(text, allowed, memo, &mut ids)?;
        Ok(Ok(ids))
    };
    let done = run_batch(
        &order,
        workers.as_deref(),
        || enc.memo(),
        || Ok(()),
        check_interrupt,
        |k, memo| runs[k].clone().map(|i| encode_one(i, memo)).collect::<Result<Vec<_>, String>>(),
    )?;
    Ok(done.into_iter().flatten().collect())
}
