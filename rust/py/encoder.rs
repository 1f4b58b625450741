//! The encoder's bindings (`CoreBPE`): each method converts its arguments,
//! runs the Rust encoder (without the GIL for all but short texts) and maps
//! its errors; the lists of ids it returns are made in `lists.rs`.

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use pyo3::types::{PyBytes, PyDict, PyList, PyString};
use rustc_hash::{FxHashMap, FxHashSet};

use super::buffers::{ids_array, IdBuffer};
use super::errors::{check_interrupt, guard};
use super::lists::{bytearray_of_width, empty_list, fill_lists, ids_of, list_of};
use super::text::{utf8, utf8_all};
use crate::encode::Encoder;
use crate::run::batch;
use crate::run::pieces;
use crate::split::pretokenize::Splitter;
use crate::vocab::Rank;

/// An encoder: vocabulary (bytes -> rank), special tokens and split pattern.
#[pyclass(module = "bpe._core", frozen)]
pub(super) struct CoreBPE {
    pub(super) enc: Encoder,
    /// One Python int per id, made on first use and shared by every list we
    /// return: a fresh int per token (an allocation, and a free when the list
    /// dies) cost more than the encoding (see docs/dev/performance.md, "Shared
    /// ints"). (Python itself shares ints -5..256.)
    ints: GILOnceCell<Box<[Py<PyAny>]>>,
}

/// Python's `allowed_special` arrives as a set of str.
fn allowed_set(allowed: Vec<String>) -> FxHashSet<String> {
    allowed.into_iter().collect()
}

/// Texts shorter than this are encoded without releasing the GIL.
const GIL_RELEASE_BYTES: usize = 4096;

impl CoreBPE {
    /// The binding of an encoder built in Rust (by the trainer).
    pub(super) fn of(enc: Encoder) -> CoreBPE {
        CoreBPE { enc, ints: GILOnceCell::new() }
    }

    /// The shared ints, one per id (made on first use).
    fn ints(&self, py: Python<'_>) -> PyResult<&[Py<PyAny>]> {
        let ints = self.ints.get_or_try_init(py, || -> PyResult<_> {
            (0..self.enc.n_vocab() as Rank).map(|i| Ok(i.into_pyobject(py)?.into_any().unbind())).collect()
        })?;
        Ok(ints)
    }

    /// `ids` as a Python list of the shared ints (see `lists::list_of`).
    fn list<'py>(&self, py: Python<'py>, ids: &[Rank]) -> PyResult<Bound<'py, PyList>> {
        list_of(py, ids, self.ints(py)?)
    }

    /// `ids` as a list whose items the threads of `pool` write (`encode`
    /// with `num_threads`: written by one thread, a long list took a third
    /// of such a call on 2 threads).
    fn list_on<'py>(&self, py: Python<'py>, ids: Vec<Rank>, pool: &rayon::ThreadPool) -> PyResult<Bound<'py, PyList>> {
        let list = empty_list(py)?;
        fill_lists(py, std::slice::from_ref(&list), std::slice::from_ref(&ids), self.ints(py)?, pool)?;
        Ok(list.into_bound(py))
    }

    /// The first text (index, token) holding one of `disallowed`, found in
    /// one parallel pass over the batch (memmem runs at GB/s), not a call per
    /// text from Python; None at once if none is disallowed.
    fn first_disallowed(
        &self,
        py: Python<'_>,
        texts: &[&str],
        disallowed: &[String],
        pool: &rayon::ThreadPool,
    ) -> PyResult<Option<(usize, String)>> {
        use rayon::prelude::*;
        if disallowed.is_empty() {
            return Ok(None);
        }
        py.allow_threads(|| {
            guard(|| {
                Ok(pool.install(|| {
                    texts
                        .par_iter()
                        .enumerate()
                        .find_map_first(|(k, t)| self.enc.find_special(t, disallowed).map(|s| (k, s.to_string())))
                }))
            })
        })
    }

    /// Encodes in pieces (checking for Ctrl-C between them), without the GIL
    /// for all but short texts.
    /// The ids of `text` with `allowed` special tokens, or the leftmost of
    /// `disallowed` in it. One UTF-8 of the text serves the search and the
    /// encoding: made twice (a search call, then an encode call) it was a
    /// tenth of `encode_to_numpy` on 10 MB of English (docs/dev/performance.md,
    /// "str to UTF-8").
    fn checked_ids(
        &self,
        py: Python<'_>,
        text: &Bound<'_, PyString>,
        allowed: Vec<String>,
        disallowed: &[String],
    ) -> PyResult<Result<Vec<Rank>, String>> {
        let text = utf8(text)?;
        let text = text.as_ref();
        if !disallowed.is_empty() {
            let search = || guard(|| Ok(self.enc.find_special(text, disallowed).map(String::from)));
            let found = if text.len() < GIL_RELEASE_BYTES { search() } else { py.allow_threads(search) }?;
            if let Some(found) = found {
                return Ok(Err(found));
            }
        }
        self.ids(py, text, &allowed_set(allowed)).map(Ok)
    }

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

/// SuperBPE's first stage, from Python: (its pattern, the transition, every
/// merge in order as `(left, right, new)`).
type Stages = (String, Rank, Vec<(Rank, Rank, Rank)>);

#[pymethods]
impl CoreBPE {
    /// An encoder for `ranks` (token bytes -> id), `special_tokens` and the
    /// split `pattern`. With `superbpe = (stage-1 pattern, transition,
    /// merges)`, a SuperBPE encoder (`encode/superword.rs`): `pattern` is the
    /// second stage's, `merges` every merge in order as `(left, right, new)`.
    #[new]
    /// With `picky = [(kind, ids)]`, a Picky BPE encoder (`encode/events.rs`):
    /// its events in order, `(0, [left, right, new])` for a merge and `(1,
    /// [token, parts...])` for a removal.
    #[pyo3(signature = (ranks, special_tokens, pattern, superbpe=None, picky=None))]
    fn new(
        py: Python<'_>,
        ranks: &Bound<'_, PyDict>,
        special_tokens: FxHashMap<String, Rank>,
        pattern: &str,
        superbpe: Option<Stages>,
        picky: Option<Vec<(u8, Vec<Rank>)>>,
    ) -> PyResult<Self> {
        let mut r: FxHashMap<Vec<u8>, Rank> = FxHashMap::default();
        r.reserve(ranks.len());
        for (k, v) in ranks.iter() {
            r.insert(k.downcast::<PyBytes>()?.as_bytes().to_vec(), v.extract::<Rank>()?);
        }
        if let Some(events) = picky {
            let enc = py.allow_threads(|| {
                guard(|| Encoder::picky(r, special_tokens, Splitter::new(pattern)?, &picky_events(events)?))
            })?;
            return Ok(CoreBPE { enc, ints: GILOnceCell::new() });
        }
        let enc = match superbpe {
            None => guard(|| Encoder::new(r, special_tokens, pattern))?,
            Some((stage1, transition, merges)) => py.allow_threads(|| {
                guard(|| {
                    let (p2, p1) = (Splitter::new(pattern)?, Splitter::new(&stage1)?);
                    Encoder::superbpe(r, special_tokens, &merges, p2, p1, transition)
                })
            })?,
        };
        Ok(CoreBPE { enc, ints: GILOnceCell::new() })
    }

    fn encode_ordinary<'py>(&self, py: Python<'py>, text: &Bound<'py, PyString>) -> PyResult<Bound<'py, PyList>> {
        let ids = self.ids(py, &utf8(text)?, &FxHashSet::default())?;
        self.list(py, &ids)
    }

    /// `text` encoded with `allowed_special`, as a list; or, if it holds
    /// one of `disallowed_special`, the leftmost such token (a `str`, for
    /// Python to raise its error). The check and the encoding share one
    /// UTF-8 of `text` (`checked_ids`).
    fn encode<'py>(
        &self,
        py: Python<'py>,
        text: &Bound<'py, PyString>,
        allowed_special: Vec<String>,
        disallowed_special: Vec<String>,
    ) -> PyResult<PyObject> {
        Ok(match self.checked_ids(py, text, allowed_special, &disallowed_special)? {
            Ok(ids) => self.list(py, &ids)?.into_any().unbind(),
            Err(found) => found.into_pyobject(py)?.into_any().unbind(),
        })
    }

    /// The default policy of `Tokenizer.encode` in one call: the ids of
    /// `text` encoded as ordinary text, or, if it holds any special token,
    /// that token's text (a `str`, for Python to raise its error). One call
    /// instead of a search and an encode halves the cost for short strings.
    fn encode_unless_special(&self, py: Python<'_>, text: &Bound<'_, PyString>) -> PyResult<PyObject> {
        let text = utf8(text)?;
        let text = text.as_ref();
        if let Some(found) = self.enc.find_any_special(text) {
            return Ok(found.into_pyobject(py)?.into_any().unbind());
        }
        let ids = self.ids(py, text, &FxHashSet::default())?;
        Ok(self.list(py, &ids)?.into_any().unbind())
    }

    /// `encode` as a buffer of little-endian u32 ids, for `numpy.frombuffer`:
    /// no Python list at all, and no copy (`buffers.rs`). (Or, as `encode`,
    /// the disallowed special token found.)
    fn encode_u32(
        &self,
        py: Python<'_>,
        text: &Bound<'_, PyString>,
        allowed_special: Vec<String>,
        disallowed_special: Vec<String>,
    ) -> PyResult<PyObject> {
        Ok(match self.checked_ids(py, text, allowed_special, &disallowed_special)? {
            Ok(ids) => IdBuffer::new(ids).into_pyobject(py)?.into_any().unbind(),
            Err(found) => found.into_pyobject(py)?.into_any().unbind(),
        })
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
        let allowed = allowed_set(allowed_special);
        let pool = guard(|| crate::threads::pool(num_threads))?;
        // Each text's UTF-8: borrowed where Python has it (ASCII, or made
        // already), else made by the pool (`text.rs`); `texts` keeps the
        // objects alive until this call returns.
        let owned = utf8_all(py, &texts, &pool)?;
        let texts: Vec<&str> = owned.iter().map(|t| t.as_ref()).collect();
        if let Some(found) = self.first_disallowed(py, &texts, &disallowed_special, &pool)? {
            return Ok(found.into_pyobject(py)?.into_any().unbind());
        }
        // Encoded without the GIL (`encode_texts`); this thread first makes
        // the batch's lists, empty, so that the collection of young objects
        // they may set off overlaps the other threads' encoding. Then the
        // lists are filled (`lists::fill_lists`). See docs/dev/performance.md,
        // "encode_batch".
        let threads = pool.current_num_threads();
        let (texts, allowed) = (&texts, &allowed);
        let (ids, lists) = py.allow_threads(|| -> PyResult<_> {
            let mut lists = Vec::new();
            let ids = encode_texts(&self.enc, texts, allowed, threads, || {
                lists = Python::with_gil(|py| (0..texts.len()).map(|_| empty_list(py)).collect::<PyResult<_>>())?;
                Ok(())
            })?;
            Ok((ids, lists))
        })?;
        fill_lists(py, &lists, &ids, self.ints(py)?, &pool)?;
        // The lists stay untracked (see `lists::untracked`).
        Ok(PyList::new(py, &lists)?.into_any().unbind())
    }

    /// `encode` on `num_threads` threads (0: all cores) for one large text
    /// (see `pieces::encode_parallel`); as a list, or with `width` (2 or 4)
    /// as a bytearray of ids of that width. (Or, as `encode`, the
    /// disallowed special token found.)
    #[pyo3(signature = (text, allowed_special, disallowed_special, num_threads, width=None))]
    fn encode_parallel<'py>(
        &self,
        py: Python<'py>,
        text: &Bound<'py, PyString>,
        allowed_special: Vec<String>,
        disallowed_special: Vec<String>,
        num_threads: usize,
        width: Option<usize>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let text = utf8(text)?;
        let text = text.as_ref();
        let allowed = allowed_set(allowed_special);
        let pool = guard(|| crate::threads::pool(num_threads))?;
        let ids = py.allow_threads(|| {
            guard(|| match self.enc.find_special(text, &disallowed_special) {
                Some(found) => Ok(Err(found.to_string())),
                None => pieces::encode_parallel(&self.enc, text, &allowed, &pool).map(Ok),
            })
        })?;
        let ids = match ids {
            Ok(ids) => ids,
            Err(found) => return Ok(found.into_pyobject(py)?.into_any()),
        };
        match width {
            Some(w) => ids_array(py, ids, w),
            None => Ok(self.list_on(py, ids, &pool)?.into_any()),
        }
    }

    /// `encode_batch` into one flat array: `(ids, offsets)`, ids as a
    /// bytearray of `width`-byte little-endian ids, offsets (u64) where
    /// each text's ids start, then their number. Or, as `encode_batch`,
    /// `(index, token)` of the first text holding a disallowed special token.
    fn encode_batch_flat<'py>(
        &self,
        py: Python<'py>,
        texts: Vec<Bound<'py, PyString>>,
        allowed_special: Vec<String>,
        disallowed_special: Vec<String>,
        num_threads: usize,
        width: usize,
    ) -> PyResult<Bound<'py, PyAny>> {
        let allowed = allowed_set(allowed_special);
        let pool = guard(|| crate::threads::pool(num_threads))?;
        let owned = utf8_all(py, &texts, &pool)?;
        let texts: Vec<&str> = owned.iter().map(|t| t.as_ref()).collect();
        if let Some(found) = self.first_disallowed(py, &texts, &disallowed_special, &pool)? {
            return Ok(found.into_pyobject(py)?.into_any());
        }
        let threads = pool.current_num_threads();
        let (texts, allowed) = (&texts, &allowed);
        let (ids, offsets) = py.allow_threads(|| -> PyResult<_> {
            let lists = encode_texts(&self.enc, texts, allowed, threads, || Ok(()))?;
            let mut offsets = Vec::with_capacity(texts.len() + 1);
            let mut n = 0u64;
            for l in &lists {
                offsets.push(n);
                n += l.len() as u64;
            }
            offsets.push(n);
            // (Copied by the pool's threads, as `encode` with `num_threads`
            // joins its pieces' ids.)
            Ok((pool.install(|| pieces::concat_parallel(&lists)), offsets))
        })?;
        Ok((ids_array(py, ids, width)?, bytearray_of_width(py, &offsets, 8)?).into_pyobject(py)?.into_any())
    }

    /// The number of ids `encode` returns for `text` (`Encoder::count`):
    /// no list, no id kept.
    fn count(&self, py: Python<'_>, text: &Bound<'_, PyString>, allowed_special: Vec<String>) -> PyResult<usize> {
        let text = utf8(text)?;
        let text = text.as_ref();
        let allowed = allowed_set(allowed_special);
        let work = || guard(|| self.enc.count(text, &allowed));
        if text.len() < GIL_RELEASE_BYTES {
            work()
        } else {
            py.allow_threads(work)
        }
    }

    /// `encode` with BPE-dropout `p` (in (0, 1)), reproducible from `seed`
    /// (`Encoder::encode_dropout`, a merge loop apart from encode's).
    fn encode_dropout<'py>(
        &self,
        py: Python<'py>,
        text: &Bound<'py, PyString>,
        allowed_special: Vec<String>,
        p: f64,
        seed: u64,
    ) -> PyResult<Bound<'py, PyList>> {
        let text = utf8(text)?;
        let text = text.as_ref();
        let allowed = allowed_set(allowed_special);
        let mut rng = crate::encode::SplitMix::new(seed);
        let ids = py.allow_threads(|| guard(|| self.enc.encode_dropout(text, &allowed, p, &mut rng)))?;
        self.list(py, &ids)
    }

    /// `encode`'s ids and where each token starts in the text: in bytes,
    /// or with `chars` in characters (`Encoder::offsets`). The ids as a
    /// list, or with `buffer` as a buffer of u32 for numpy; the offsets as
    /// a bytearray of little-endian u64.
    fn encode_with_offsets<'py>(
        &self,
        py: Python<'py>,
        text: &Bound<'py, PyString>,
        allowed_special: Vec<String>,
        chars: bool,
        buffer: bool,
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
        let text = utf8(text)?;
        let text = text.as_ref();
        let ids = self.ids(py, text, &allowed_set(allowed_special))?;
        let offsets = py.allow_threads(|| guard(|| self.enc.offsets(text.as_bytes(), &ids, chars)))?;
        let offsets = bytearray_of_width(py, &offsets, 8)?.into_any();
        let ids = if buffer { Bound::new(py, IdBuffer::new(ids))?.into_any() } else { self.list(py, &ids)?.into_any() };
        Ok((ids, offsets))
    }

    /// The chunk cache (see `encode/pool.rs`): its cap and size in bytes,
    /// the chunks and memos it holds, the calls that found a memo in it and
    /// those that did not, the chunks in its shared table and the look-ups
    /// that found one there.
    fn cache_info(&self) -> (usize, usize, usize, usize, usize, usize, usize, usize) {
        let i = self.enc.cache().info();
        (i.capacity, i.bytes, i.entries, i.memos, i.reused, i.fresh, i.shared, i.shared_hits)
    }

    /// Empties the chunk cache.
    fn clear_cache(&self) {
        self.enc.cache().clear();
    }

    /// Sets the chunk cache's cap in bytes (0: off), emptying it.
    fn set_cache_capacity(&self, capacity: usize) {
        self.enc.cache().set_capacity(capacity);
    }

    /// The first of `tokens` found in `text` (leftmost), or None.
    fn find_special(
        &self,
        py: Python<'_>,
        text: &Bound<'_, PyString>,
        tokens: Vec<String>,
    ) -> PyResult<Option<String>> {
        let text = utf8(text)?;
        let text = text.as_ref();
        py.allow_threads(|| guard(|| Ok(self.enc.find_special(text, &tokens).map(String::from))))
    }

    fn decode_bytes<'py>(&self, py: Python<'py>, ids: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyBytes>> {
        let ids = ids_of(ids)?;
        let bytes = py.allow_threads(|| {
            guard(|| {
                self.enc.decode_bytes(&ids).map_err(|id| {
                    format!(
                        "unknown token id {id}: this vocabulary has ids 0..{}",
                        self.enc.n_vocab().saturating_sub(1)
                    )
                })
            })
        })?;
        Ok(PyBytes::new(py, &bytes))
    }

    /// The bytes of each id list, decoded by `num_threads` threads (0: all
    /// cores) without the GIL; the first unknown id (in list order) is a
    /// ValueError naming it.
    fn decode_bytes_batch<'py>(
        &self,
        py: Python<'py>,
        batch: Vec<Bound<'py, PyAny>>,
        num_threads: usize,
    ) -> PyResult<Vec<Bound<'py, PyBytes>>> {
        use rayon::prelude::*;
        let lists = batch.iter().map(ids_of).collect::<PyResult<Vec<_>>>()?;
        let pool = guard(|| crate::threads::pool(num_threads))?;
        let decoded = py.allow_threads(|| {
            guard(|| {
                let all: Vec<Result<Vec<u8>, Rank>> =
                    pool.install(|| lists.par_iter().map(|ids| self.enc.decode_bytes(ids)).collect());
                all.into_iter().collect::<Result<Vec<_>, Rank>>().map_err(|id| {
                    format!("unknown token id {id}: this vocabulary has ids 0..{}", self.enc.n_vocab() - 1)
                })
            })
        })?;
        Ok(decoded.iter().map(|b| PyBytes::new(py, b)).collect())
    }

    /// BPE on `piece` as one chunk, without the split pattern (tiktoken's
    /// `_encode_single_piece`): its bytes need not be UTF-8.
    fn encode_single_piece(&self, py: Python<'_>, piece: &[u8]) -> PyResult<Vec<Rank>> {
        py.allow_threads(|| {
            guard(|| {
                let mut out = Vec::new();
                self.enc.encode_chunk(piece, &mut out)?;
                Ok(out)
            })
        })
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

/// Picky BPE's events as Python gives them (see `CoreBPE::new`).
fn picky_events(events: Vec<(u8, Vec<Rank>)>) -> Result<Vec<crate::encode::PickyEvent>, String> {
    use crate::encode::PickyEvent;
    events
        .into_iter()
        .map(|(kind, ids)| match (kind, &ids[..]) {
            (0, &[l, r, new]) => Ok(PickyEvent::Merge(l, r, new)),
            (1, [x, parts @ ..]) => Ok(PickyEvent::Remove(*x, parts.to_vec())),
            _ => Err(format!("not a Picky event: ({kind}, {ids:?})")),
        })
        .collect()
}

/// The pool threads of a call that encodes on `threads` threads, the calling
/// thread one of them: `threads - 1` (none for one thread). The chunk cache
/// is told to expect `threads` memos at once: the calling thread is no pool
/// thread, so `Encoder::memo`, which counts a pool's threads, cannot count
/// it, and the call's first memo would go without the shared table.
pub(super) fn call_workers(enc: &Encoder, threads: usize) -> Result<Option<Arc<rayon::ThreadPool>>, String> {
    let workers = if threads > 1 { Some(crate::threads::pool(threads - 1)?) } else { None };
    enc.cache().expect(threads);
    Ok(workers)
}

/// Each of `texts`' ids, encoded without the GIL by this thread and
/// `threads - 1` pool threads, which take the runs of a `batch::Plan`
/// (long texts cut into pieces, the largest runs first) in turn, each with
/// one memo (`batch::run_batch`). This thread runs `first` before its first
/// run and checks for Ctrl-C between its runs.
fn encode_texts(
    enc: &Encoder,
    texts: &[&str],
    allowed: &FxHashSet<String>,
    threads: usize,
    first: impl FnOnce() -> PyResult<()>,
) -> PyResult<Vec<Vec<Rank>>> {
    let workers = guard(|| call_workers(enc, threads))?;
    let plan = batch::Plan::new(texts, threads, |text, bytes| pieces::cut_for(enc, allowed, text, bytes));
    let ids = batch::run_batch(
        &plan.order,
        workers.as_deref(),
        || enc.memo(),
        first,
        || Python::with_gil(|py| py.check_signals()),
        |k, memo| guard(|| enc.encode_each(&plan.parts[plan.runs[k].clone()], allowed, memo)),
    )?;
    Ok(plan.join(ids.into_iter().flatten().collect()))
}
