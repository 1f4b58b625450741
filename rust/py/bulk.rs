//! Bindings of bulk encoding (`bulk.rs`): files into one array of ids
//! (`Tokenizer.encode_files`), or into the `.bin` files of a dataset
//! (`bpe encode --out`). The work runs without the GIL; the GIL is taken
//! between blocks only, to see Ctrl-C and report progress.

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::PathBuf;

use pyo3::prelude::*;
use pyo3::types::PyByteArray;
use rustc_hash::FxHashSet;

use super::buffers::{check_width, ids_array};
use super::encoder::CoreBPE;
use super::errors::{guard, INTERRUPTED};
use super::lists::bytearray_of_width;
use crate::encode::ids_room;
use crate::input::Range;
use crate::run::bulk::{encode_segments, Collect, Options, Segment, Sink, BLOCK_BYTES};
use crate::threads::pool as thread_pool;
use crate::vocab::Rank;

/// Checks for Ctrl-C and calls `progress(bytes)` if given (with the GIL).
pub(super) fn between(progress: &Option<PyObject>) -> impl FnMut(u64) -> Result<(), String> + '_ {
    move |done| {
        Python::with_gil(|py| {
            py.check_signals().map_err(|_| INTERRUPTED.to_string())?;
            match progress {
                Some(f) => f.call1(py, (done,)).map(|_| ()).map_err(|e| format!("progress callback failed: {e}")),
                None => Ok(()),
            }
        })
    }
}

/// The ids of `paths` (each one document) in one array of `width`-byte
/// little-endian ids, `separator` between documents, and the offsets: each
/// file's first id, then the number of ids (u64 each).
#[pyfunction]
#[pyo3(signature = (core, paths, allowed_special, disallowed_special, separator, num_threads, width, progress=None))]
#[allow(clippy::too_many_arguments)]
pub(super) fn encode_files<'py>(
    py: Python<'py>,
    core: &Bound<'py, CoreBPE>,
    paths: Vec<PathBuf>,
    allowed_special: Vec<String>,
    disallowed_special: Vec<String>,
    separator: Option<Rank>,
    num_threads: usize,
    width: usize,
    progress: Option<PyObject>,
) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyByteArray>)> {
    let enc = &core.get().enc;
    let segments: Vec<Segment> = paths
        .into_iter()
        .map(|path| Segment { range: Range { path, start: 0, end: None }, sink: 0, doc_start: true })
        .collect();
    let allowed: FxHashSet<String> = allowed_special.into_iter().collect();
    let opts = Options { allowed: &allowed, disallowed: &disallowed_special, separator };
    // Room for the ids as `ids_buffer` gives one text (`ids_room`).
    let bytes: u64 = segments.iter().filter_map(|s| std::fs::metadata(&s.range.path).ok()).map(|m| m.len()).sum();
    let (ids, offsets) = py.allow_threads(|| {
        guard(|| {
            let pool = thread_pool(num_threads)?;
            let mut out = Collect { ids: Vec::with_capacity(ids_room(bytes as usize)), starts: Vec::new() };
            encode_segments(enc, &segments, &opts, &pool, BLOCK_BYTES, between(&progress), &mut out)?;
            Ok(out.finish(segments.len()))
        })
    })?;
    Ok((ids_array(py, ids, width)?, bytearray_of_width(py, &offsets, 8)?))
}

/// Encodes byte ranges of files into the files `outputs` (appending
/// `width`-byte little-endian ids): `segments` are `(path, start, end,
/// output, doc_start)`, read in blocks of about `block_bytes`; text of
/// `disallowed_special` is an error. Returns the
/// number of ids written to each output.
#[pyfunction]
#[pyo3(signature = (core, segments, outputs, allowed_special, separator, num_threads, width, block_bytes=BLOCK_BYTES, progress=None, disallowed_special=Vec::new()))]
#[allow(clippy::too_many_arguments)]
pub(super) fn write_ids(
    py: Python<'_>,
    core: &Bound<'_, CoreBPE>,
    segments: Vec<(PathBuf, u64, Option<u64>, usize, bool)>,
    outputs: Vec<PathBuf>,
    allowed_special: Vec<String>,
    separator: Option<Rank>,
    num_threads: usize,
    width: usize,
    block_bytes: usize,
    progress: Option<PyObject>,
    disallowed_special: Vec<String>,
) -> PyResult<Vec<u64>> {
    let enc = &core.get().enc;
    let segments: Vec<Segment> = segments
        .into_iter()
        .map(|(path, start, end, sink, doc_start)| Segment { range: Range { path, start, end }, sink, doc_start })
        .collect();
    let allowed: FxHashSet<String> = allowed_special.into_iter().collect();
    let opts = Options { allowed: &allowed, disallowed: &disallowed_special, separator };
    py.allow_threads(|| {
        guard(|| {
            let pool = thread_pool(num_threads)?;
            let mut out = Files::open(&outputs, width)?;
            encode_segments(enc, &segments, &opts, &pool, block_bytes, between(&progress), &mut out)?;
            out.finish()
        })
    })
}

/// A sink appending ids to files.
struct Files {
    files: Vec<(PathBuf, BufWriter<File>, u64)>,
    width: usize,
    bytes: Vec<u8>,
}

impl Files {
    fn open(paths: &[PathBuf], width: usize) -> Result<Files, String> {
        let files = paths
            .iter()
            .map(|p| {
                let f = OpenOptions::new()
                    .append(true)
                    .open(p)
                    .map_err(|e| format!("cannot write {}: {e}", p.display()))?;
                Ok((p.clone(), BufWriter::with_capacity(1 << 20, f), 0))
            })
            .collect::<Result<_, String>>()?;
        Ok(Files { files, width, bytes: Vec::new() })
    }

    fn finish(self) -> Result<Vec<u64>, String> {
        self.files
            .into_iter()
            .map(|(p, w, n)| {
                let f = w.into_inner().map_err(|e| format!("cannot write {}: {}", p.display(), e.error()))?;
                f.sync_all().map_err(|e| format!("cannot write {}: {e}", p.display()))?;
                Ok(n)
            })
            .collect()
    }
}

impl Sink for Files {
    fn start(&mut self, _segment: usize) -> Result<(), String> {
        Ok(())
    }

    fn ids(&mut self, sink: usize, ids: &[Rank]) -> Result<(), String> {
        check_width(ids, self.width)?;
        self.bytes.clear();
        for &id in ids {
            self.bytes.extend_from_slice(&id.to_le_bytes()[..self.width]);
        }
        let (path, w, n) = &mut self.files[sink];
        w.write_all(&self.bytes).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        *n += ids.len() as u64;
        Ok(())
    }
}
