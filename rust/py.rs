//! Python bindings: type conversion, GIL release, progress bars and error
//! mapping only. The algorithms live in the other files.
//!
//! Every entry point runs its Rust work inside `guard`, which turns a panic into
//! a Python `RuntimeError` instead of pyo3's `PanicException` (a
//! `BaseException` that `except Exception` does not catch), so a bug in the
//! core can never take the Python process down.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use pyo3::exceptions::{PyKeyboardInterrupt, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use pyo3::types::{PyByteArray, PyBytes, PyDict, PyList, PyString, PyTuple};
use rustc_hash::{FxHashMap, FxHashSet};

use crate::encode::{Encoder, Memo};
use crate::vocab::Rank;
use crate::pieces;
use crate::pretokenize::{self, Splitter};
use crate::train::{self, ChunkCounts};

/// The marker error a progress callback returns when Ctrl-C was pressed.
const INTERRUPTED: &str = "\u{0}interrupted";

/// Runs `f`, mapping a panic to `RuntimeError` and an error string to `ValueError`.
fn guard<T>(f: impl FnOnce() -> Result<T, String>) -> PyResult<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) if e == INTERRUPTED => Err(PyKeyboardInterrupt::new_err("interrupted")),
        Ok(Err(e)) => Err(PyValueError::new_err(e)),
        Err(panic) => {
            let msg = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "unknown panic".into());
            Err(PyRuntimeError::new_err(format!(
                "internal error in the bpe Rust core: {msg} (please report this)"
            )))
        }
    }
}

/// Texts are counted in groups of about this many bytes, with a check for
/// Ctrl-C between groups.
const GROUP_BYTES: usize = 8 << 20;

/// Checks for Ctrl-C from a thread that released the GIL.
fn check_interrupt() -> Result<(), String> {
    Python::with_gil(|py| py.check_signals()).map_err(|_| INTERRUPTED.to_string())
}

/// A progress bar on stderr, or a hidden one when `show` is false. indicatif
/// also hides it by itself when stderr is not a terminal.
fn bar(show: bool, len: Option<u64>, template: &str, msg: &str) -> ProgressBar {
    let pb = match len {
        Some(n) => ProgressBar::with_draw_target(Some(n), ProgressDrawTarget::stderr()),
        None => ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr()),
    };
    if !show {
        pb.set_draw_target(ProgressDrawTarget::hidden());
    }
    pb.set_style(ProgressStyle::with_template(template).unwrap());
    pb.set_message(msg.to_string());
    pb.enable_steady_tick(Duration::from_millis(200));
    pb
}

/// Splits text with a pattern: `regex.findall`, in Rust.
#[pyclass(module = "bpe._core", frozen)]
struct Pretokenizer {
    splitter: Splitter,
}

#[pymethods]
impl Pretokenizer {
    #[new]
    fn new(pattern: &str) -> PyResult<Self> {
        Ok(Pretokenizer { splitter: guard(|| Splitter::new(pattern))? })
    }

    fn findall(&self, py: Python<'_>, text: &str) -> PyResult<Vec<String>> {
        py.allow_threads(|| {
            guard(|| Ok(self.splitter.findall(text)?.into_iter().map(String::from).collect()))
        })
    }
}

/// Accumulates chunk counts from texts and files, then learns merges.
#[pyclass(module = "bpe._core")]
struct Trainer {
    splitter: Splitter,
    counts: ChunkCounts,
    /// Every ordinary token's bytes, by id, once `train` has run.
    tokens: Vec<Vec<u8>>,
    /// The encoder `train` built, and the special tokens it was given (see
    /// `encoder`).
    built: Option<(FxHashMap<String, Rank>, Encoder)>,
}

/// What `Trainer::train` makes from the merges as they come: the Python
/// dicts' entries, and the tokens and the encoder's vocabulary in Rust.
struct Made<'py> {
    /// Every ordinary token's bytes, by id.
    tokens: Vec<Vec<u8>>,
    /// One Python int per id, shared by every key and value of the dicts.
    ints: Vec<Bound<'py, PyAny>>,
    encoder_vocab: crate::vocab::Vocab,
}

impl<'py> Made<'py> {
    /// The 256 byte tokens, in `vocab` too.
    fn new(py: Python<'py>, vocab: &Bound<'py, PyDict>) -> PyResult<Self> {
        let mut made = Made { tokens: Vec::new(), ints: Vec::new(), encoder_vocab: Default::default() };
        for b in 0..=255u8 {
            made.token(py, vocab, vec![b])?;
        }
        Ok(made)
    }

    /// A new token: the next id.
    fn token(&mut self, py: Python<'py>, vocab: &Bound<'py, PyDict>, bytes: Vec<u8>) -> PyResult<()> {
        let id = self.tokens.len() as Rank;
        let int = id.into_pyobject(py)?.into_any();
        vocab.set_item(&int, PyBytes::new(py, &bytes))?;
        self.encoder_vocab.insert(&bytes, id);
        self.ints.push(int);
        self.tokens.push(bytes);
        Ok(())
    }

    /// `merges` in `pairs`, and the tokens they make in `vocab` (a merge
    /// whose bytes are a token already reuses its id: see `train.rs`).
    fn add(
        &mut self,
        py: Python<'py>,
        pairs: &Bound<'py, PyDict>,
        vocab: &Bound<'py, PyDict>,
        merges: &[train::Merge],
    ) -> PyResult<()> {
        for m in merges {
            if m.new as usize == self.tokens.len() {
                let bytes = [&self.tokens[m.left as usize][..], &self.tokens[m.right as usize][..]].concat();
                self.token(py, vocab, bytes)?;
            }
            let key = PyTuple::new(py, [&self.ints[m.left as usize], &self.ints[m.right as usize]])?;
            pairs.set_item(key, &self.ints[m.new as usize])?;
        }
        Ok(())
    }
}

#[pymethods]
impl Trainer {
    #[new]
    fn new(pattern: &str) -> PyResult<Self> {
        let splitter = guard(|| Splitter::new(pattern))?;
        Ok(Trainer { splitter, counts: ChunkCounts::default(), tokens: Vec::new(), built: None })
    }

    /// Counts a batch of documents (each str is one document), all cores, GIL released.
    fn feed_texts(&mut self, py: Python<'_>, texts: Vec<String>) -> PyResult<()> {
        let splitter = &self.splitter;
        let counts = &mut self.counts;
        py.allow_threads(|| {
            let _free = crate::ReturnFreedMemory::new();
            guard(|| {
                let docs: Vec<&str> = texts.iter().map(String::as_str).collect();
                let batch = pieces::count_documents_interruptibly(splitter, &docs, GROUP_BYTES, check_interrupt)?;
                *counts = train::merge_counts(std::mem::take(counts), batch);
                Ok(())
            })
        })
    }

    /// Streams UTF-8 files and counts their chunks, with a progress bar.
    fn feed_files(&mut self, py: Python<'_>, paths: Vec<PathBuf>, progress: bool) -> PyResult<()> {
        let total: u64 = paths.iter().filter_map(|p| std::fs::metadata(p).ok()).map(|m| m.len()).sum();
        let splitter = &self.splitter;
        let counts = &mut self.counts;
        py.allow_threads(|| {
            let _free = crate::ReturnFreedMemory::new();
            guard(|| {
                let pb = bar(
                    progress,
                    Some(total),
                    "{msg:>10} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
                    "counting",
                );
                let batch = train::count_files(splitter, &paths, |n| {
                    pb.inc(n);
                    check_interrupt()
                })?;
                pb.finish_and_clear();
                *counts = train::merge_counts(std::mem::take(counts), batch);
                Ok(())
            })
        })
    }

    /// Number of distinct chunks counted so far.
    fn n_chunks(&self) -> usize {
        self.counts.len()
    }

    /// Learns merges up to `target` ordinary tokens; the counts are consumed.
    /// Returns the tokenizer's Python state, `(merges, vocab)`: the merges as
    /// `{(left, right): new}` in learning order, and `{id: bytes}` for the 256
    /// bytes and every new token, which Python would otherwise rebuild by
    /// replaying the merges (a third of a small training's time).
    ///
    /// Both dicts are made here, with one int object per id shared by all
    /// their keys and values. Returning lists of `((left, right), new)` and
    /// of new tokens for Python's `dict()` made ~250k objects for 50k merges
    /// where this makes ~100k (key tuples and bytes), and the collections
    /// they set off traversed them again and again: this call and the two
    /// `dict()`s took 139-146 ms on 10 MB of English to 50k (12-20 ms of it
    /// the collector's, `gc.disable()` as the control), against 119-121 ms
    /// then (medians of 9; the merge loop itself is ~100 ms).
    ///
    /// The merge loop runs on one core, so it runs in a thread of its own,
    /// and this thread (which holds the GIL) makes the dicts from its merges
    /// in batches as they come, with the encoder's vocabulary for
    /// `specials`, the special tokens the tokenizer will have (at the ids
    /// after the ordinary ones; `encoder` hands that encoder over). Made
    /// after the loop, the dicts and the encoder added ~15 ms to a 10 MB
    /// training's ~100 ms of merging: `Tokenizer.train` on 10 MB of English
    /// to 50k took 143-155 ms with the encoder built in another thread after
    /// the loop, and 134-140 ms this way (medians of 15, six alternations).
    /// The price is memory: the dicts (~10 MB for 50k merges) now grow while
    /// the merge loop still holds its own, so the peak of training rose from
    /// 70 to 84 MB on FLORES-200 and from 48 to 57 MB on 100 MB of English
    /// (`Tokenizer.train` to 50k, one run each; the 1 GB scale run 106 ->
    /// 114 MB in the benchmark), far below the other trainers' 500+ MB.
    #[pyo3(signature = (target, progress, specials = Vec::new()))]
    fn train<'py>(
        &mut self,
        py: Python<'py>,
        target: usize,
        progress: bool,
        specials: Vec<String>,
    ) -> PyResult<(Bound<'py, PyDict>, Bound<'py, PyDict>)> {
        use std::sync::atomic::{AtomicBool, Ordering};
        let counts = std::mem::take(&mut self.counts);
        let (pairs, vocab) = (PyDict::new(py), PyDict::new(py));
        let mut made = Made::new(py, &vocab)?;
        // Merges go over in batches: a send per merge would cost the loop more.
        const BATCH: usize = 512;
        let (send, batches) = std::sync::mpsc::channel::<Vec<train::Merge>>();
        let batches = Mutex::new(batches); // (a `Receiver` cannot be shared with `allow_threads` as it is)
        let stop = AtomicBool::new(false); // Ctrl-C, or an error here
        let learnt = std::thread::scope(|scope| -> PyResult<()> {
            let learner = scope.spawn(|| {
                let _free = crate::ReturnFreedMemory::new();
                let pb = bar(
                    progress,
                    Some(target.saturating_sub(256) as u64),
                    "{msg:>10} [{bar:30}] {pos}/{len} merges {per_sec} eta {eta}",
                    "merging",
                );
                let mut batch = Vec::with_capacity(BATCH);
                let learnt = train::learn_merges(counts, target, |merge, size| {
                    pb.set_position((size - 256) as u64);
                    batch.push(*merge);
                    if batch.len() == BATCH {
                        let _ = send.send(std::mem::replace(&mut batch, Vec::with_capacity(BATCH)));
                    }
                    if stop.load(Ordering::Relaxed) {
                        return Err(INTERRUPTED.to_string());
                    }
                    Ok(())
                });
                let _ = send.send(batch);
                drop(send); // the last batch: this thread's loop below ends
                pb.finish_and_clear();
                learnt.map(|_| ())
            });
            // Each wait ends at least every 50 ms to check for Ctrl-C (early
            // merges of a large corpus can each rewrite a million words).
            let mut make_all = || -> PyResult<()> {
                loop {
                    let wait = Duration::from_millis(50);
                    match py.allow_threads(|| batches.lock().unwrap_or_else(|e| e.into_inner()).recv_timeout(wait)) {
                        Ok(batch) => made.add(py, &pairs, &vocab, &batch)?,
                        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return Ok(()),
                    }
                    py.check_signals()?;
                }
            };
            let made_all = make_all();
            if made_all.is_err() {
                stop.store(true, Ordering::Relaxed);
            }
            let learnt = py.allow_threads(|| learner.join());
            // An error here comes first (Ctrl-C stops the loop with its own).
            made_all?;
            guard(|| learnt.unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
        });
        learnt?;
        let special_ids: FxHashMap<String, Rank> =
            specials.into_iter().enumerate().map(|(i, s)| (s, (made.tokens.len() + i) as Rank)).collect();
        let (tokens, splitter) = (made.tokens, self.splitter.clone());
        let enc = guard(|| Encoder::from_vocab(made.encoder_vocab, &tokens, special_ids.clone(), splitter))?;
        self.tokens = tokens;
        self.built = Some((special_ids, enc));
        Ok((pairs, vocab))
    }

    /// The encoder for the vocabulary `train` learnt, built from the tokens
    /// held here (building it from a Python dict of bytes -> id meant making
    /// that dict and converting it back: ~8% of training on 10 MB): the one
    /// `train` started if it was given these special tokens, else a new one.
    fn encoder(&mut self, py: Python<'_>, special_tokens: FxHashMap<String, Rank>) -> PyResult<CoreBPE> {
        let enc = match self.built.take() {
            Some((specials, enc)) if specials == special_tokens => enc,
            _ => {
                let (tokens, splitter) = (&self.tokens, self.splitter.clone());
                py.allow_threads(|| guard(|| encoder_of(tokens, special_tokens, splitter)))?
            }
        };
        Ok(CoreBPE { enc, ints: GILOnceCell::new() })
    }
}

/// An encoder for ordinary tokens `tokens` (id = index) and `specials`.
fn encoder_of(tokens: &[Vec<u8>], specials: FxHashMap<String, Rank>, splitter: Splitter) -> Result<Encoder, String> {
    let ranks = tokens.iter().enumerate().map(|(id, b)| (b.clone(), id as Rank)).collect();
    Encoder::with_splitter(ranks, specials, splitter)
}

/// An encoder: vocabulary (bytes -> rank), special tokens and split pattern.
#[pyclass(module = "bpe._core", frozen)]
struct CoreBPE {
    enc: Encoder,
    /// One Python int per id, made on first use and shared by every list we
    /// return. Making a fresh int per token (an allocation, and a free when
    /// the list dies) took ~45% of `encode` on 10 MB of English, more than
    /// the encoding; a shared one costs a reference count (`encode_batch`
    /// counts those per id, not per item: see there). Memory: ~8 MB for
    /// o200k's 200k ids, once per tokenizer; a big list of ids then takes
    /// 8 bytes per token instead of ~40. (Python itself shares ints -5..256.)
    ints: GILOnceCell<Box<[Py<PyAny>]>>,
}

/// Python's `allowed_special` arrives as a set of str.
fn allowed_set(allowed: Vec<String>) -> FxHashSet<String> {
    allowed.into_iter().collect()
}

/// Token ids from Python. A list (what `encode` returns) is read item by
/// item through borrowed references: pyo3's generic `Vec<u32>` extraction
/// iterates it (a new reference, so a reference-count write, per item) and
/// that made decoding our own lists, whose ints are the shared ones spread
/// over `CoreBPE::ints`, ~30% slower than the lookups themselves. Anything
/// else goes through the generic path. Errors are pyo3's (OverflowError for a
/// negative or too large int, TypeError for a non-int); Python names the id.
fn ids_of(ids: &Bound<'_, PyAny>) -> PyResult<Vec<Rank>> {
    let Ok(list) = ids.downcast::<PyList>() else { return ids.extract() };
    let n = list.len();
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        // SAFETY: i < n = the list's length, and the GIL is held with no
        // Python code running in between, so the list cannot change under us;
        // the item is borrowed from the list, which outlives this loop.
        let item = unsafe { pyo3::ffi::PyList_GetItem(list.as_ptr(), i as pyo3::ffi::Py_ssize_t) };
        if item.is_null() {
            return Err(PyErr::fetch(ids.py()));
        }
        // PyLong_AsLong (not AsUnsignedLong) accepts what `__index__` accepts
        // (numpy ints), as the generic path does.
        let v = unsafe { pyo3::ffi::PyLong_AsLong(item) };
        if v == -1 {
            if let Some(e) = PyErr::take(ids.py()) {
                return Err(e);
            }
        }
        out.push(Rank::try_from(v).map_err(|e| pyo3::exceptions::PyOverflowError::new_err(e.to_string()))?);
    }
    Ok(out)
}

impl CoreBPE {
    /// The shared ints, one per id (made on first use).
    fn ints(&self, py: Python<'_>) -> PyResult<&[Py<PyAny>]> {
        let ints = self.ints.get_or_try_init(py, || -> PyResult<_> {
            (0..self.enc.n_vocab() as Rank).map(|i| Ok(i.into_pyobject(py)?.into_any().unbind())).collect()
        })?;
        Ok(ints)
    }

    /// `ids` as a Python list, of the shared ints, untracked (see `untracked`).
    ///
    /// Made as `encode_batch` makes its lists (`give_room`, then the items,
    /// and past one id per vocabulary entry, the references counted from a
    /// tally), not with `PyList::new`, which raised each int's count once per
    /// item: each item a visit to an int somewhere in 6.4 MB of them, where
    /// the tally is one counter per id in one array. On FLORES-200 with o200k
    /// (7.9M ids, a list of 63 MB) the list took 36-48 ms, now 29-31 (of
    /// ~460 for the whole call; timed inside the benchmark's worker). Most of
    /// what is left is page faults: the array is fresh memory every call.
    ///
    /// (Rejected: asking for transparent huge pages for the array, which
    /// cut its page faults from 15k to 31 and the list to 13 ms in a fresh
    /// process, but in the benchmark's worker, where other big lists had
    /// come and gone, the kernel's compaction to find huge pages made it
    /// 30-160 ms.)
    fn list<'py>(&self, py: Python<'py>, ids: &[Rank]) -> PyResult<Bound<'py, PyList>> {
        let ints = self.ints(py)?;
        let list = empty_list(py)?;
        let items = give_room(&list, ids.len())?;
        if ids.len() < ints.len() {
            // (Fewer ids than the vocabulary has: zeroing and reading the
            // tally would cost more than it saves.)
            // SAFETY: the list has room for ids.len() items.
            unsafe { write_counted_items(py, &items, ids, ints) };
        } else {
            let mut tally = vec![0usize; ints.len()];
            // SAFETY: the list has room for ids.len() items.
            unsafe { write_items(&items, ids, ints, &mut tally) };
            count_references(py, ints, &tally);
        }
        // SAFETY: the GIL is held; every item is written and counted.
        unsafe { set_len(&list, ids.len()) };
        Ok(list.into_bound(py))
    }

    /// Encodes in pieces (checking for Ctrl-C between them), without the GIL
    /// for all but short texts.
    fn ids(&self, py: Python<'_>, text: &str, allowed: &FxHashSet<String>) -> PyResult<Vec<Rank>> {
        let work = || guard(|| pieces::encode(&self.enc, text, allowed, check_interrupt));
        // Releasing and re-taking the GIL costs about as much as encoding 64
        // bytes, and no other thread could do much in the microsecond it
        // would be free.
        if text.len() < GIL_RELEASE_BYTES {
            work()
        } else {
            py.allow_threads(work)
        }
    }
}

/// `list`, hidden from Python's cyclic garbage collector, for good: every
/// list of ids this module returns (`encode*`, `encode_batch`) is untracked.
///
/// Why: every tracked list is traversed, item by item, by the collections
/// it lives through, and a caller that keeps its results (`ids = encode(...)`
/// in a loop keeps the last result alive during the next call; a pipeline
/// gathering ids keeps them all) has the collector read every id again and
/// again. A thousand new lists set off a collection of young objects, so
/// `encode_batch` paid for it: tracked, its lists cost it 10 ms of 86 on one
/// thread (10 MB of English, the last result kept; 76 ms with
/// `gc.disable()`), and the ids of a whole-text `encode` kept beside it cost
/// it as much again. Two threads went from 1.45-1.74x one whole-text call
/// to 1.79-1.89x (both kept, timed in alternation, as the benchmark does).
/// A list of ints can be part of no cycle, so the collector has nothing to
/// find in it. CPython untracks its tuples and dicts of atomic items for the
/// same reason; it cannot do it for lists, which may later get anything.
///
/// The price: a cycle that a caller makes *through* one of these lists (by
/// putting into it an object that refers back to it) is not collected; the
/// list and what it holds are then freed only by reference counting, so
/// never. Nothing is freed early: the collector counts references from
/// untracked objects as references from outside, which keep objects alive.
/// `list(ids)` gives an ordinary tracked copy.
fn untracked(list: Bound<'_, PyList>) -> Py<PyList> {
    // SAFETY: the list is new and tracked (`PyList_New` tracks it); an
    // untracked list is valid (list_dealloc untracks only what is tracked).
    unsafe { pyo3::ffi::PyObject_GC_UnTrack(list.as_ptr().cast()) };
    list.unbind()
}

/// A new empty list for `encode_batch`, hidden from the garbage collector
/// (see `untracked`). Then `give_room` makes room for its items, the caller
/// writes them, and `set_len` gives it its length; until then it holds
/// nothing, so it can be freed at any point.
fn empty_list(py: Python<'_>) -> PyResult<Py<PyList>> {
    // SAFETY: PyList_New returns a new reference or NULL with an exception set.
    let p = unsafe { pyo3::ffi::PyList_New(0) };
    if p.is_null() {
        return Err(PyErr::fetch(py));
    }
    Ok(untracked(unsafe { Bound::from_owned_ptr(py, p).downcast_into_unchecked() }))
}

/// Room for `n` items in a list from `empty_list`, not initialised: the
/// threads that write the items also take the page faults of fresh memory,
/// where `PyList_New(n)` would zero it all on the calling thread first
/// (calloc; 0.6 ms of 18 MB for 10 MB of English when the memory is reused,
/// more when it is fresh). Needs the GIL (PyMem_Malloc); returns where the
/// items go.
fn give_room(list: &Py<PyList>, n: usize) -> PyResult<Items> {
    if n == 0 {
        return Ok(Items(std::ptr::null_mut()));
    }
    // SAFETY: the GIL is held by the caller; the array comes from
    // PyMem_Malloc, as list_dealloc frees it with PyMem_Free; the list is
    // empty, so nothing of its own is replaced; its length stays 0.
    unsafe {
        let items = pyo3::ffi::PyMem_Malloc(n * std::mem::size_of::<*mut pyo3::ffi::PyObject>());
        if items.is_null() {
            return Err(pyo3::exceptions::PyMemoryError::new_err(format!("no memory for a list of {n} ids")));
        }
        let l = list.as_ptr().cast::<pyo3::ffi::PyListObject>();
        (*l).ob_item = items.cast();
        (*l).allocated = n as pyo3::ffi::Py_ssize_t;
        Ok(Items(items.cast()))
    }
}

/// Writes `ids` as items, pointers to the shared ints, and counts in `tally`
/// how often each id is named. Needs no GIL: the references are counted
/// after, with it (`count_references`).
///
/// SAFETY: `items` has room for `ids.len()` items (`give_room`), which no
/// other thread writes meanwhile.
unsafe fn write_items(items: &Items, ids: &[Rank], ints: &[Py<PyAny>], tally: &mut [usize]) {
    for (i, &id) in ids.iter().enumerate() {
        *items.0.add(i) = ints[id as usize].as_ptr();
        tally[id as usize] += 1;
    }
}

/// Writes `ids` as items, pointers to the shared ints, each a reference
/// counted as it is written (with the GIL, for lists too short for a tally).
///
/// SAFETY: `items` has room for `ids.len()` items (`give_room`).
unsafe fn write_counted_items(py: Python<'_>, items: &Items, ids: &[Rank], ints: &[Py<PyAny>]) {
    for (i, &id) in ids.iter().enumerate() {
        *items.0.add(i) = ints[id as usize].clone_ref(py).into_ptr();
    }
}

/// Raises each shared int's reference count by its tally: one reference for
/// each item `write_items` wrote that names it.
fn count_references(_: Python<'_>, ints: &[Py<PyAny>], tally: &[usize]) {
    for (int, &n) in ints.iter().zip(tally) {
        let p = int.as_ptr();
        for _ in 0..n {
            // SAFETY: the GIL is held (`Python`). (A loop, not one
            // addition: Python 3.12's immortal small ints must not have
            // their count changed, which Py_INCREF knows; the compiler keeps
            // the count in a register, so the loop costs about what one
            // addition would.)
            unsafe { pyo3::ffi::Py_INCREF(p) };
        }
    }
}

/// Gives a list its `n` items, once they are written and counted.
///
/// SAFETY: the GIL is held, the list has room for `n` items (`give_room`),
/// and its first `n` items are written, each a counted reference.
unsafe fn set_len(list: &Py<PyList>, n: usize) {
    (*list.as_ptr().cast::<pyo3::ffi::PyVarObject>()).ob_size = n as pyo3::ffi::Py_ssize_t;
}

/// A list's item array, written by one pool thread while the GIL is free.
struct Items(*mut *mut pyo3::ffi::PyObject);
// SAFETY: each array is written by one thread only, and read by Python only
// after the threads are done (see `encode_batch`).
unsafe impl Send for Items {}
unsafe impl Sync for Items {}

/// `0..lists.len()` cut into `parts` consecutive ranges (some maybe empty)
/// holding about as many ids each.
fn shares(lists: &[Vec<Rank>], parts: usize) -> Vec<std::ops::Range<usize>> {
    let total: usize = lists.iter().map(Vec::len).sum();
    let mut out = Vec::with_capacity(parts);
    let (mut start, mut seen) = (0, 0);
    for (d, l) in lists.iter().enumerate() {
        seen += l.len();
        // Close share k once it holds its (k + 1) / parts of the ids.
        while out.len() + 1 < parts && seen * parts >= (out.len() + 1) * total {
            out.push(start..d + 1);
            start = d + 1;
        }
    }
    while out.len() < parts {
        out.push(start..lists.len());
        start = lists.len();
    }
    out
}

/// Texts shorter than this are encoded without releasing the GIL.
const GIL_RELEASE_BYTES: usize = 4096;

/// A rayon pool of `n` threads (0: one per core), built once per size and
/// kept: building one spawns its threads, which costs more than encoding a
/// small batch.
fn thread_pool(n: usize) -> Result<Arc<rayon::ThreadPool>, String> {
    static POOLS: Mutex<Vec<(usize, Arc<rayon::ThreadPool>)>> = Mutex::new(Vec::new());
    let mut pools = POOLS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, p)) = pools.iter().find(|(k, _)| *k == n) {
        return Ok(p.clone());
    }
    let pool = Arc::new(rayon::ThreadPoolBuilder::new().num_threads(n).build().map_err(|e| e.to_string())?);
    pools.push((n, pool.clone()));
    Ok(pool)
}

#[pymethods]
impl CoreBPE {
    #[new]
    fn new(ranks: &Bound<'_, PyDict>, special_tokens: FxHashMap<String, Rank>, pattern: &str) -> PyResult<Self> {
        let mut r: FxHashMap<Vec<u8>, Rank> = FxHashMap::default();
        r.reserve(ranks.len());
        for (k, v) in ranks.iter() {
            r.insert(k.downcast::<PyBytes>()?.as_bytes().to_vec(), v.extract::<Rank>()?);
        }
        Ok(CoreBPE { enc: guard(|| Encoder::new(r, special_tokens, pattern))?, ints: GILOnceCell::new() })
    }

    fn encode_ordinary<'py>(&self, py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyList>> {
        let ids = self.ids(py, text, &FxHashSet::default())?;
        self.list(py, &ids)
    }

    fn encode<'py>(&self, py: Python<'py>, text: &str, allowed_special: Vec<String>) -> PyResult<Bound<'py, PyList>> {
        let ids = self.ids(py, text, &allowed_set(allowed_special))?;
        self.list(py, &ids)
    }

    /// The default policy of `Tokenizer.encode` in one call: the ids of
    /// `text` encoded as ordinary text, or, if it holds any special token,
    /// that token's text (a `str`, for Python to raise its error). One call
    /// instead of a search and an encode halves the cost for short strings.
    fn encode_unless_special(&self, py: Python<'_>, text: &str) -> PyResult<PyObject> {
        if let Some(found) = self.enc.find_any_special(text) {
            return Ok(found.into_pyobject(py)?.into_any().unbind());
        }
        let ids = self.ids(py, text, &FxHashSet::default())?;
        Ok(self.list(py, &ids)?.into_any().unbind())
    }

    /// `encode` as little-endian u32 bytes, for `numpy.frombuffer`: no Python
    /// list at all (for datasets: 4 bytes per token).
    fn encode_u32<'py>(
        &self,
        py: Python<'py>,
        text: &str,
        allowed_special: Vec<String>,
    ) -> PyResult<Bound<'py, PyByteArray>> {
        let ids = self.ids(py, text, &allowed_set(allowed_special))?;
        let n = ids.len() * 4;
        // Made uninitialised and written once, from `ids`: `PyByteArray::new`
        // would take the bytes from a second buffer, and `new_with` would
        // zero them first: each pass over fresh memory costs its page faults
        // (~1.5 µs per 4 KB page on this project's VM, ~12 ms for FLORES-200's
        // 32 MB of ids).
        // SAFETY: a NULL source asks for an uninitialised array of n bytes;
        // the result is a new reference, or NULL with an exception set.
        let p = unsafe { pyo3::ffi::PyByteArray_FromStringAndSize(std::ptr::null(), n as pyo3::ffi::Py_ssize_t) };
        if p.is_null() {
            return Err(PyErr::fetch(py));
        }
        // SAFETY: p is a new bytearray.
        let array = unsafe { Bound::from_owned_ptr(py, p).downcast_into_unchecked::<PyByteArray>() };
        // SAFETY: the array's n bytes, ours alone until it is returned.
        let out = unsafe { std::slice::from_raw_parts_mut(pyo3::ffi::PyByteArray_AsString(p).cast::<u8>(), n) };
        for (o, id) in out.chunks_exact_mut(4).zip(&ids) {
            o.copy_from_slice(&id.to_le_bytes());
        }
        Ok(array)
    }

    /// Encodes many texts in parallel on `num_threads` threads (0: all cores).
    /// If a text holds one of `disallowed`, encodes nothing and returns
    /// `(index of the first such text, the token)` for Python to raise its
    /// error; else the lists of ids.
    fn encode_batch(
        &self,
        py: Python<'_>,
        texts: Vec<Bound<'_, PyString>>,
        allowed_special: Vec<String>,
        disallowed_special: Vec<String>,
        num_threads: usize,
    ) -> PyResult<PyObject> {
        use rayon::prelude::*;
        // Each text's UTF-8 as Python keeps it (made once per str object, then
        // cached in it), borrowed, not copied: `texts` keeps the objects alive
        // until this call returns. Copying them into Rust strings first took
        // ~9 ms of a 140 ms batch of 10 MB, on this thread alone.
        let texts: Vec<&str> = texts.iter().map(|t| t.to_str()).collect::<PyResult<_>>()?;
        let allowed = allowed_set(allowed_special);
        let pool = guard(|| thread_pool(num_threads))?;
        if !disallowed_special.is_empty() {
            // One parallel pass over the batch (memmem runs at GB/s), not a
            // call per text from Python, which was 15% of the batch's time.
            let found = py.allow_threads(|| {
                guard(|| {
                    Ok(pool.install(|| {
                        texts.par_iter().enumerate().find_map_first(|(k, t)| {
                            self.enc.find_special(t, &disallowed_special).map(|s| (k, s.to_string()))
                        })
                    }))
                })
            })?;
            if let Some(found) = found {
                return Ok(found.into_pyobject(py)?.into_any().unbind());
            }
        }
        // Four steps, so that the Python side of the work is shared by the
        // threads as far as it can be:
        // 1. Encode, without the GIL: this thread and `threads - 1` pool
        //    threads take runs of neighbouring documents in turn. This thread
        //    first makes the batch's lists, empty (see `empty_list`), and
        //    checks for Ctrl-C between its runs.
        // 2. With the GIL, give each list room for its items (`give_room`).
        // 3. Without the GIL, the threads write the items: pointers to the
        //    shared ints. Each thread tallies how often it names each id.
        // 4. With the GIL, raise each shared int's reference count by the
        //    tallies (once per id, not once per item) and set the lengths.
        // Why: the items are 2.3M ids for 10 MB of English. When this thread
        // alone wrote them, counting each reference under the GIL (a pipeline
        // that listed each run as it finished), 2 threads ran 1.4x one from
        // Python against 1.8x for the Rust part alone. And making the lists
        // before encoding: a thousand new objects set off a collection of
        // young objects (whatever the caller made since the last one), and
        // made first, they set it off while the other threads encode. When
        // the lists were tracked (see `untracked`), that collection traversed
        // every id of the caller's last batch: 12 ms of a 60 ms batch of
        // 10 MB on 2 threads; made first, it overlapped the encoding.
        // Writing items without the GIL is sound because a list is ours alone
        // until we return it: new, untracked by the garbage collector (see
        // `untracked`), known to no other code, of length 0 until written;
        // and the ints it names cannot die meanwhile: `self.ints` holds a
        // reference to each.
        let threads = pool.current_num_threads();
        let workers = if threads > 1 { Some(guard(|| thread_pool(threads - 1))?) } else { None };
        let sizes: Vec<usize> = texts.iter().map(|t| t.len()).collect();
        let total: usize = sizes.iter().sum();
        // Each thread keeps one memo of merged chunks for all the runs it
        // takes (documents encoded one by one, each with its own memo, went
        // at half the speed of one whole text; a memo per run, 5% slower than
        // one per thread on English). Runs of at most 1 MB, so the last
        // runs leave little for one thread alone, and at least four per
        // thread, to even out the threads' loads.
        let run_bytes = (total / (4 * threads)).clamp(1, 1 << 20);
        let runs = pieces::groups(&sizes, run_bytes);
        let next_run = std::sync::atomic::AtomicUsize::new(0);
        let stop = std::sync::atomic::AtomicBool::new(false);
        let (texts, allowed, runs, next_run, stop) = (&texts, &allowed, &runs, &next_run, &stop);
        // The next run nobody has taken; none after an error or Ctrl-C.
        let take = move || {
            use std::sync::atomic::Ordering::Relaxed;
            let k = next_run.fetch_add(1, Relaxed);
            (k < runs.len() && !stop.load(Relaxed)).then_some(k)
        };
        // (`&mut _`, not `&mut Memo<'_>`: a written lifetime would make the
        // closure accept memos of any lifetime, which the borrowed texts
        // cannot outlive.)
        let encode_run = move |k: usize, memo: &mut _| {
            let ids = guard(|| self.enc.encode_each(&texts[runs[k].clone()], allowed, memo));
            // Stops the batch at once, before `keep` sees a worker's error.
            if ids.is_err() {
                stop.store(true, std::sync::atomic::Ordering::Relaxed);
            }
            ids
        };
        // 1. Encode (and make the lists).
        let (ids, lists) = py.allow_threads(|| -> PyResult<_> {
            let (tx, rx) = std::sync::mpsc::channel();
            let mut done: Vec<Vec<Vec<Rank>>> = runs.iter().map(|_| Vec::new()).collect();
            let mut lists = Vec::new();
            let mut outcome = Ok(());
            // A run's ids, or the batch's first error (which stops it).
            let mut keep = |k: usize, ids: PyResult<Vec<Vec<Rank>>>| match ids {
                Ok(ids) => done[k] = ids,
                Err(e) => {
                    stop.store(true, std::sync::atomic::Ordering::Relaxed);
                    if outcome.is_ok() {
                        outcome = Err(e);
                    }
                }
            };
            let mut this_thread = |rx: std::sync::mpsc::Receiver<(usize, PyResult<Vec<Vec<Rank>>>)>| {
                match Python::with_gil(|py| (0..texts.len()).map(|_| empty_list(py)).collect()) {
                    Ok(made) => lists = made,
                    Err(e) => keep(0, Err(e)),
                }
                let mut memo = Memo::default();
                while let Some(k) = take() {
                    // Ctrl-C is seen on the calling thread only: here.
                    if let Err(e) = Python::with_gil(|py| py.check_signals()) {
                        keep(k, Err(e));
                        break;
                    }
                    keep(k, encode_run(k, &mut memo));
                }
                for (k, ids) in rx {
                    keep(k, ids);
                }
            };
            match &workers {
                None => {
                    drop(tx);
                    this_thread(rx);
                }
                Some(workers) => workers.in_place_scope(|scope| {
                    for _ in 0..workers.current_num_threads() {
                        let tx = tx.clone();
                        scope.spawn(move |_| {
                            let mut memo = Memo::default();
                            while let Some(k) = take() {
                                let _ = tx.send((k, encode_run(k, &mut memo)));
                            }
                        });
                    }
                    drop(tx);
                    this_thread(rx);
                }),
            }
            outcome.map(|()| (done.into_iter().flatten().collect::<Vec<Vec<Rank>>>(), lists))
        })?;
        let ints = self.ints(py)?;
        // 2. Room for the items.
        let items = lists.iter().zip(&ids).map(|(l, v)| give_room(l, v.len())).collect::<PyResult<Vec<_>>>()?;
        let n_ids: usize = ids.iter().map(Vec::len).sum();
        if n_ids < ints.len() {
            // Fewer ids than the vocabulary has: the tallies (a counter per
            // id and thread, zeroed, then read) would cost more than the
            // items, which are written here, a reference counted for each.
            for (v, items) in ids.iter().zip(&items) {
                // SAFETY: the list has room for v.len() items.
                unsafe { write_counted_items(py, items, v, ints) };
            }
        } else {
            // 3. The items, the documents shared out so each thread writes
            // about as many ids.
            let shares = shares(&ids, threads);
            let (ids, items, shares) = (&ids, &items, &shares);
            let tallies = py.allow_threads(|| {
                guard(|| {
                    Ok(pool.broadcast(|ctx| {
                        // usize: a u32 could wrap on a batch of 4G tokens, and
                        // a count too low frees an int still in use.
                        let mut tally = vec![0usize; ints.len()];
                        for d in shares[ctx.index()].clone() {
                            // SAFETY: list d has room for ids[d].len()
                            // items, written here by this thread alone.
                            unsafe { write_items(&items[d], &ids[d], ints, &mut tally) };
                        }
                        tally
                    }))
                })
            })?;
            // (A panic part way leaves lists of length 0: freed as they are.)
            // 4. The counts.
            for tally in &tallies {
                count_references(py, ints, tally);
            }
        }
        // The lengths, now that every item is written and counted.
        for (list, v) in lists.iter().zip(&ids) {
            // SAFETY: the GIL is held; every item is written and counted.
            unsafe { set_len(list, v.len()) };
        }
        // The lists stay untracked (see `untracked`).
        Ok(PyList::new(py, &lists)?.into_any().unbind())
    }

    /// The first of `tokens` found in `text` (leftmost), or None.
    fn find_special(&self, py: Python<'_>, text: &str, tokens: Vec<String>) -> PyResult<Option<String>> {
        py.allow_threads(|| guard(|| Ok(self.enc.find_special(text, &tokens).map(String::from))))
    }

    fn decode_bytes<'py>(&self, py: Python<'py>, ids: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyBytes>> {
        let ids = ids_of(ids)?;
        let bytes = py.allow_threads(|| {
            guard(|| {
                self.enc.decode_bytes(&ids).map_err(|id| {
                    format!("unknown token id {id}: this vocabulary has ids 0..{}", self.enc.n_vocab().saturating_sub(1))
                })
            })
        })?;
        Ok(PyBytes::new(py, &bytes))
    }

    /// The merges of this vocabulary, recovered from its ranks: `(left, right,
    /// rank)` triples in rank order. Raises ValueError naming the first token
    /// that is not the merge of two lower-ranked tokens.
    fn recover_merges(&self, py: Python<'_>) -> PyResult<Vec<(Rank, Rank, Rank)>> {
        py.allow_threads(|| {
            guard(|| {
                self.enc.recover_merges().map_err(|rank| {
                    format!(
                        "token {rank} ({:?}) is not the merge of two tokens of lower rank, so this \
                         vocabulary has no merge list",
                        String::from_utf8_lossy(self.enc.token_bytes(rank).unwrap_or_default())
                    )
                })
            })
        })
    }

    fn token_bytes<'py>(&self, py: Python<'py>, id: Rank) -> PyResult<Bound<'py, PyBytes>> {
        let bytes = guard(|| {
            self.enc.token_bytes(id).map(<[u8]>::to_vec).ok_or_else(|| {
                format!("unknown token id {id}: this vocabulary has ids 0..{}", self.enc.n_vocab().saturating_sub(1))
            })
        })?;
        Ok(PyBytes::new(py, &bytes))
    }
}

/// The last safe cut point in `data` (see `pretokenize.rs`), or None: where
/// a block of a streamed file may end without changing any built-in pattern's
/// chunks. Used by the dataset writer, which streams files in blocks too.
#[pyfunction]
fn last_safe_cut(data: &[u8]) -> Option<usize> {
    pretokenize::last_safe_cut(data)
}

/// Deliberately panics inside the core, to test that a panic surfaces as a
/// Python exception (tests only): in this thread, or with `threads` > 0 in
/// worker threads of a rayon pool with the GIL released, as the real entry
/// points run.
#[pyfunction]
#[pyo3(signature = (threads=0))]
fn _panic_for_tests(py: Python<'_>, threads: usize) -> PyResult<()> {
    if threads == 0 {
        return guard(|| -> Result<(), String> { panic!("provoked panic") });
    }
    py.allow_threads(|| {
        guard(|| {
            use rayon::prelude::*;
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().map_err(|e| e.to_string())?;
            pool.install(|| {
                (0..threads * 4).into_par_iter().for_each(|i| {
                    if i == threads * 2 {
                        panic!("provoked panic in a worker thread")
                    }
                })
            });
            Ok(())
        })
    })
}

#[pymodule]
#[pyo3(name = "_core")]
fn core_module(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("GPT2_PATTERN", crate::patterns::GPT2_PATTERN)?;
    m.add("GPT4_PATTERN", crate::patterns::GPT4_PATTERN)?;
    m.add("GPT4O_PATTERN", crate::patterns::GPT4O_PATTERN)?;
    m.add_class::<Pretokenizer>()?;
    m.add_class::<Trainer>()?;
    m.add_class::<CoreBPE>()?;
    m.add_function(wrap_pyfunction!(last_safe_cut, m)?)?;
    m.add_function(wrap_pyfunction!(_panic_for_tests, m)?)?;
    Ok(())
}
