//! The trainer's bindings: counting texts and files, and learning merges
//! while this thread makes the Python tokenizer's state from them.

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::PyDict;
use rustc_hash::FxHashMap;

use super::encoder::CoreBPE;
use super::errors::{check_interrupt, guard, INTERRUPTED};
use super::made::Made;
use super::progress::bar;
use super::tables;
use crate::encode::{Encoder, SafeCuts};
use crate::progress::{Pace, Unit};
use crate::run::pieces;
use crate::split::pretokenize::Splitter;
use crate::train::{self, table, ChunkCounts, Spill};
use crate::vocab::Rank;

/// Texts are counted in groups of about this many bytes, with a check for
/// Ctrl-C between groups.
const GROUP_BYTES: usize = 8 << 20;

/// Accumulates chunk counts from texts and files, then learns merges.
#[pyclass(module = "bpe._core")]
pub(super) struct Trainer {
    splitter: Splitter,
    counts: ChunkCounts,
    /// The memory cap on `counts`, and the counts spilled to disk past it.
    spill: Spill,
    /// Every ordinary token's bytes, by id, once `train` has run.
    tokens: Vec<Vec<u8>>,
    /// The encoder `train` built, and the special tokens it was given (see
    /// `encoder`).
    built: Option<(FxHashMap<String, Rank>, Encoder)>,
    /// The ids `train` gave the special tokens, in the order given: after the
    /// ordinary tokens. Decided here only; Python reads them (`special_ids`).
    assigned: Vec<(String, Rank)>,
    /// SuperBPE's second stage: its chunks counted under the ids of the
    /// first stage (`count_by_ids`, `train/ids.rs`); `None`: by their bytes.
    by_ids: Option<Box<train::IdChunker>>,
}

/// What the counting keys chunks by: their bytes, or the ids of `by_ids`.
fn chunker<'a>(splitter: &'a Splitter, by_ids: &'a Option<Box<train::IdChunker>>) -> &'a dyn train::Chunker {
    match by_ids {
        Some(ids) => &**ids,
        None => splitter,
    }
}

#[pymethods]
impl Trainer {
    #[new]
    fn new(pattern: &str) -> PyResult<Self> {
        let splitter = guard(|| Splitter::new(pattern))?;
        let spill = Spill::new(pattern);
        Ok(Trainer {
            splitter,
            counts: ChunkCounts::default(),
            spill,
            tokens: Vec::new(),
            built: None,
            assigned: Vec::new(),
            by_ids: None,
        })
    }

    /// Counts the chunks fed from now on under the ids `base` (a byte-level
    /// vocabulary whose ordinary tokens are `base_tokens`, by id, b"" for
    /// an id with none) encodes each to whole, between its safe cuts:
    /// SuperBPE's second stage, which `extend` then trains from. Before
    /// anything is fed; counts by ids are for `extend` alone.
    fn count_by_ids(&mut self, py: Python<'_>, base: PyRef<'_, CoreBPE>, base_tokens: Vec<Vec<u8>>) -> PyResult<()> {
        if !self.counts.is_empty() || self.spill.has_runs() {
            return Err(pyo3::exceptions::PyValueError::new_err(
                "count_by_ids must come before anything is fed: these counts are by bytes",
            ));
        }
        let stage1 = base.enc.splitter().clone();
        let chunker = py.allow_threads(|| {
            guard(|| {
                let enc = encoder_of(&base_tokens, FxHashMap::default(), stage1)?;
                let cuts = SafeCuts::new(base_tokens.iter().map(Vec::as_slice));
                Ok(train::IdChunker::new(self.splitter.clone(), enc, cuts))
            })
        })?;
        self.by_ids = Some(Box::new(chunker));
        Ok(())
    }

    /// Counts a batch of documents (each str is one document), all cores, GIL released.
    fn feed_texts(&mut self, py: Python<'_>, texts: Vec<String>) -> PyResult<()> {
        let splitter = chunker(&self.splitter, &self.by_ids);
        let counts = &mut self.counts;
        let spill = &mut self.spill;
        py.allow_threads(|| {
            let _free = crate::ReturnFreedMemory::new();
            guard(|| {
                let docs: Vec<&str> = texts.iter().map(String::as_str).collect();
                let batch = pieces::count_documents_interruptibly(splitter, &docs, GROUP_BYTES, check_interrupt)?;
                *counts = train::merge_counts(std::mem::take(counts), batch);
                spill.check(counts)
            })
        })
    }

    /// Streams UTF-8 files and counts their chunks, with a progress bar.
    fn feed_files(&mut self, py: Python<'_>, paths: Vec<PathBuf>, progress: bool) -> PyResult<()> {
        let total: u64 = paths.iter().filter_map(|p| std::fs::metadata(p).ok()).map(|m| m.len()).sum();
        let splitter = chunker(&self.splitter, &self.by_ids);
        let (counts, spill) = (&mut self.counts, &mut self.spill);
        py.allow_threads(|| {
            // Freed memory goes back to the system at once only under a cap:
            // without one, mimalloc's short delay lets a freed buffer be reused
            // without faulting its pages in again (Parquet pages are decompressed
            // into fresh ~1 MB buffers: at once, 1 GB of them cost ~365k more page
            // faults and ~15% more counting time; docs/dev/performance.md, "Reading records").
            let _free = spill.is_capped().then(crate::ReturnFreedMemory::new);
            guard(|| {
                let pb = bar("counting", Some(total), Unit::Bytes, Pace::Steady, progress);
                // Into the counts themselves, under the cap (spilling past it).
                let counted = train::count_files_into(splitter, &paths, &mut spill.tally(counts), |n| {
                    pb.inc(n);
                    check_interrupt()
                });
                pb.abandon(); // stays on screen, with the time it took
                if counted.is_err() {
                    // Partly counted: nothing is kept (and spilled runs are removed).
                    *counts = ChunkCounts::default();
                    spill.clear();
                }
                counted
            })
        })
    }

    /// Streams JSON Lines files (compressed or not) and counts the text
    /// field of each record as one document, under the memory cap as
    /// `feed_files` does; returns the number of bad records skipped in each
    /// file (`skip_bad`; otherwise the first is an error).
    #[pyo3(signature = (paths, field, skip_bad, progress))]
    fn feed_records(
        &mut self,
        py: Python<'_>,
        paths: Vec<PathBuf>,
        field: Vec<String>,
        skip_bad: bool,
        progress: bool,
    ) -> PyResult<Vec<u64>> {
        let total: u64 = paths.iter().filter_map(|p| std::fs::metadata(p).ok()).map(|m| m.len()).sum();
        let splitter = chunker(&self.splitter, &self.by_ids);
        let (counts, spill) = (&mut self.counts, &mut self.spill);
        py.allow_threads(|| {
            // As in `feed_files`: at once only under a cap.
            let _free = spill.is_capped().then(crate::ReturnFreedMemory::new);
            guard(|| {
                let pb = bar("counting", Some(total), Unit::Bytes, Pace::Steady, progress);
                let counted =
                    train::count_records_into(splitter, &paths, &field, skip_bad, &mut spill.tally(counts), |n| {
                        pb.inc(n);
                        check_interrupt()
                    });
                pb.abandon();
                if counted.is_err() {
                    // Partly counted: nothing is kept (and spilled runs are removed).
                    *counts = ChunkCounts::default();
                    spill.clear();
                }
                counted
            })
        })
    }

    /// Counts the records of an Arrow string array (`arrow.rs`), each one
    /// document, all cores, GIL released. `array`: its parts, `(validity,
    /// offsets, data, offset_width, offset, length)`; a bad record is an
    /// error naming `name` and its row (`first_row` + index), or with
    /// `skip_bad` skipped. Returns the number skipped and the first one's
    /// description.
    fn feed_arrow(
        &mut self,
        py: Python<'_>,
        array: super::arrow::Parts<'_>,
        name: &str,
        first_row: u64,
        skip_bad: bool,
    ) -> PyResult<(u64, Option<String>)> {
        let rows = super::arrow::Rows { name, first_row, skip_bad };
        let (batch, skipped) = super::arrow::count_records(py, chunker(&self.splitter, &self.by_ids), &array, &rows)?;
        self.counts = train::merge_counts(std::mem::take(&mut self.counts), batch);
        guard(|| self.spill.check(&mut self.counts))?; // under the memory cap, if any
        Ok((skipped.count, skipped.first))
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
    /// their keys and values (fewer objects for the garbage collector to
    /// traverse than lists of merges and tokens for Python's `dict()`).
    ///
    /// The merge loop runs on one core, so it runs in a thread of its own,
    /// and this thread (which holds the GIL) makes the dicts from its merges
    /// in batches as they come, with the encoder's vocabulary for
    /// `specials`, the special tokens the tokenizer will have (at the ids
    /// after the ordinary ones; `encoder` hands that encoder over). That is
    /// faster than making them after the loop, at the price of memory: the
    /// dicts grow while the merge loop still holds its own (see
    /// docs/dev/performance.md, "Training from Python").
    #[pyo3(signature = (target, progress, specials = Vec::new(), min_frequency = 1))]
    fn train<'py>(
        &mut self,
        py: Python<'py>,
        target: usize,
        progress: bool,
        specials: Vec<String>,
        min_frequency: u64,
    ) -> PyResult<(Bound<'py, PyDict>, Bound<'py, PyDict>)> {
        self.by_bytes("training from scratch")?;
        use std::sync::atomic::{AtomicBool, Ordering};
        // The counts go to the training as a source (`train::Spilled`), as
        // in `extend`: spilled runs merged as they are read.
        let (counts, spill) = (std::mem::take(&mut self.counts), &mut self.spill);
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
                let merges = target.saturating_sub(256) as u64;
                let pb = bar("merging", Some(merges), Unit::Items("merges".into()), Pace::Speeding, progress);
                let learnt = train::learn_merges_in_batches(
                    spill.source(counts, min_frequency),
                    target,
                    BATCH,
                    |size| pb.set_position((size - 256) as u64),
                    |batch| _ = send.send(batch),
                    || if stop.load(Ordering::Relaxed) { Err(INTERRUPTED.to_string()) } else { Ok(()) },
                );
                drop(send); // after the last batch: this thread's loop below ends
                pb.abandon(); // as `feed_files`'s (short of the target if pairs ran out)
                learnt
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
        self.spill.clear();
        learnt?;
        let assigned: Vec<(String, Rank)> =
            specials.into_iter().enumerate().map(|(i, s)| (s, (made.tokens.len() + i) as Rank)).collect();
        let special_ids: FxHashMap<String, Rank> = assigned.iter().cloned().collect();
        let (tokens, splitter) = (made.tokens, self.splitter.clone());
        let enc = guard(|| Encoder::from_vocab(made.encoder_vocab, &tokens, special_ids.clone(), splitter))?;
        self.tokens = tokens;
        self.built = Some((special_ids, enc));
        self.assigned = assigned;
        Ok((pairs, vocab))
    }

    /// Learns merges on top of `base` (extending it; `train::extend_merges`):
    /// `base_tokens` holds its ordinary tokens' bytes by id (b"" for an id
    /// with none), `target` the number of ids to reach. The counts are
    /// consumed. Returns the new merges, `(left, right, new)` in order;
    /// Python makes the tokenizer (this is not the hot path `train` is).
    ///
    /// `superword_words`: SuperBPE's second stage (`train::superword_allowed`):
    /// no token of more than that many words, nor one with ": " in it.
    #[pyo3(signature = (base, base_tokens, target, progress, min_frequency = 1, superword_words = None))]
    #[allow(clippy::too_many_arguments)]
    fn extend(
        &mut self,
        py: Python<'_>,
        base: PyRef<'_, CoreBPE>,
        base_tokens: Vec<Vec<u8>>,
        target: usize,
        progress: bool,
        min_frequency: u64,
        superword_words: Option<usize>,
    ) -> PyResult<Vec<(Rank, Rank, Rank)>> {
        // The counts go to the training as a source (`train::Spilled`):
        // runs spilled under a cap are merged as they are read, never all
        // in one map next to the words being made.
        let (counts, spill) = (std::mem::take(&mut self.counts), &mut self.spill);
        let enc = &base.enc;
        let start = base_tokens.len();
        // Counted by ids (`count_by_ids`), the words are read from the keys.
        let by_ids = self.by_ids.take().is_some();
        py.allow_threads(|| {
            let counts = spill.source(counts, min_frequency);
            let learnt = guard(|| {
                let _free = crate::ReturnFreedMemory::new();
                let merges = target.saturating_sub(start) as u64;
                let pb = bar("merging", Some(merges), Unit::Items("merges".into()), Pace::Speeding, progress);
                // SuperBPE's chunks run over many words: encoded whole from
                // bytes they took half of stage 2's time; between the base's
                // safe cuts, word by word with a cache, the same ids
                // (`encode/superword.rs`).
                // (Counted by ids, the chunks were encoded already.)
                let cuts =
                    superword_words.filter(|_| !by_ids).map(|_| SafeCuts::new(base_tokens.iter().map(Vec::as_slice)));
                let cuts = cuts.as_ref();
                // One encoder per thread, each with a cache of its own.
                let encoder = || {
                    let mut memo = enc.memo();
                    move |bytes: &[u8], out: &mut Vec<Rank>| {
                        // Every byte is a token of a byte-level base, so this cannot fail.
                        match cuts {
                            Some(cuts) => enc.encode_chunk_between(bytes, cuts, &mut memo, out),
                            None => enc.encode_chunk(bytes, out),
                        }
                        .expect("a byte-level base encodes every chunk")
                    }
                };
                let mut n = 0u64;
                let allow = superword_words
                    .map(|w| std::sync::Arc::new(move |t: &[u8]| train::superword_allowed(t, w)) as train::Allow);
                // Ctrl-C before the first merge too: at most every 50 ms
                // (each check takes the GIL, which another thread may hold).
                let mut checked = std::time::Instant::now();
                let between = || {
                    if checked.elapsed() < std::time::Duration::from_millis(50) {
                        return Ok(());
                    }
                    checked = std::time::Instant::now();
                    check_interrupt()
                };
                let on_merge = |_: &train::Merge, size: usize| {
                    pb.set_position((size - start) as u64);
                    n += 1;
                    if n % 256 == 0 {
                        check_interrupt()
                    } else {
                        Ok(())
                    }
                };
                let learnt = if by_ids {
                    train::extend_merges_by_ids(counts, &base_tokens, target, allow, between, on_merge)
                } else {
                    train::extend_merges(counts, &base_tokens, encoder, target, allow, between, on_merge)
                };
                pb.abandon();
                Ok(learnt?.iter().map(|m| (m.left, m.right, m.new)).collect())
            });
            spill.clear();
            learnt
        })
    }

    /// Learns a Picky BPE vocabulary (`train::learn_picky`) of `target`
    /// present tokens with threshold `prune`; the counts are consumed.
    /// Returns its events in training ids: `[left, right, new]` for a merge,
    /// `[token]` for a removal. Python makes the tokenizer.
    #[pyo3(signature = (target, prune, progress, min_frequency = 1))]
    fn train_picky(
        &mut self,
        py: Python<'_>,
        target: usize,
        prune: f64,
        progress: bool,
        min_frequency: u64,
    ) -> PyResult<Vec<Vec<Rank>>> {
        self.by_bytes("training from scratch")?;
        // The counts go to the training as a source, as in `train`: spilled
        // runs merged as they are read, never into one map first.
        let (counts, spill) = (std::mem::take(&mut self.counts), &mut self.spill);
        let learnt = py.allow_threads(|| {
            guard(|| {
                let _free = crate::ReturnFreedMemory::new();
                let size = target.saturating_sub(256) as u64;
                let pb = bar("merging", Some(size), Unit::Items("tokens".into()), Pace::Speeding, progress);
                let mut n = 0u64;
                let learnt = train::learn_picky(spill.source(counts, min_frequency), target, prune, |_, present| {
                    pb.set_position(present.saturating_sub(256) as u64);
                    n += 1;
                    if n % 256 == 0 {
                        check_interrupt()
                    } else {
                        Ok(())
                    }
                });
                pb.abandon();
                Ok(learnt?
                    .iter()
                    .map(|e| match *e {
                        train::Event::Merge { left, right, new } => vec![left, right, new],
                        train::Event::Remove { token } => vec![token],
                    })
                    .collect())
            })
        });
        self.spill.clear();
        learnt
    }

    /// `[(special token, id)]` as `train` assigned them, in the order given.
    fn special_ids(&self) -> Vec<(String, Rank)> {
        self.assigned.clone()
    }

    /// The encoder for the vocabulary `train` learnt, built from the tokens
    /// held here (not from a Python dict of bytes -> id, made and converted
    /// back): the one `train` started if it was given these special tokens,
    /// else a new one.
    fn encoder(&mut self, py: Python<'_>, special_tokens: FxHashMap<String, Rank>) -> PyResult<CoreBPE> {
        let enc = match self.built.take() {
            Some((specials, enc)) if specials == special_tokens => enc,
            _ => {
                let (tokens, splitter) = (&self.tokens, self.splitter.clone());
                py.allow_threads(|| guard(|| encoder_of(tokens, special_tokens, splitter)))?
            }
        };
        Ok(CoreBPE::of(enc))
    }

    // -- count tables (`.bpec`, see `train/table.rs`) and the memory cap --

    /// The split pattern.
    fn pattern(&self) -> &str {
        self.splitter.pattern()
    }

    /// Caps the counting maps at about `bytes` (None: no cap), spilling
    /// sorted runs into a directory made in `tmpdir` (None: the system's).
    #[pyo3(signature = (bytes, tmpdir = None))]
    fn set_max_memory(&mut self, bytes: Option<usize>, tmpdir: Option<PathBuf>) {
        self.spill.set_cap(bytes, tmpdir);
    }

    /// (distinct chunks, sum of their counts), spilled ones included.
    fn size(&mut self, py: Python<'_>) -> PyResult<(u64, u64)> {
        let (counts, spill) = (&mut self.counts, &mut self.spill);
        py.allow_threads(|| guard(|| spill.size(counts)))
    }

    /// Writes the counts as a table into the open descriptor `fd` (`name`
    /// for errors); the counts stay (moved into a run if some were spilled).
    /// Returns (entries, total).
    fn save_counts(&mut self, py: Python<'_>, fd: i32, name: &str) -> PyResult<(u64, u64)> {
        self.by_bytes("saving counts")?;
        let (counts, spill) = (&mut self.counts, &mut self.spill);
        py.allow_threads(|| guard(|| tables::save(counts, spill, fd, name)))
    }

    /// A trainer holding the counts of the table at `path` (its pattern),
    /// less the chunks seen fewer than `min_frequency` times.
    #[staticmethod]
    #[pyo3(signature = (path, min_frequency = 1))]
    fn load_counts(py: Python<'_>, path: PathBuf, min_frequency: u64) -> PyResult<Trainer> {
        let pattern = guard(|| Ok(table::TableReader::open(&path)?.pattern().to_string()))?;
        let mut trainer = Trainer::new(&pattern)?;
        let counts = &mut trainer.counts;
        py.allow_threads(|| guard(|| tables::load(&path, min_frequency, counts)))?;
        Ok(trainer)
    }

    /// Adds `other`'s counts (spilled ones included) to these.
    fn add_counts(&mut self, py: Python<'_>, other: PyRef<'_, Trainer>) -> PyResult<()> {
        self.by_bytes("adding counts")?;
        other.by_bytes("adding counts")?;
        if other.spill.pattern() != self.spill.pattern() {
            return Err(pyo3::exceptions::PyValueError::new_err(
                "cannot merge counts made with different split patterns; count both with the same pattern",
            ));
        }
        let (counts, spill) = (&mut self.counts, &mut self.spill);
        let (theirs, their_spill) = (&other.counts, &other.spill);
        py.allow_threads(|| {
            let _free = crate::ReturnFreedMemory::new();
            guard(|| {
                let mut n = 0u64;
                their_spill.visit(theirs, |chunk, count| {
                    counts.add(chunk, count);
                    n += 1;
                    if n % (1 << 16) == 0 {
                        spill.check(counts)?;
                    }
                    Ok(())
                })?;
                spill.check(counts)
            })
        })
    }

    /// A new trainer holding these counts (spilled ones merged in), less
    /// the chunks seen fewer than `min_frequency` times; these stay.
    #[pyo3(signature = (min_frequency = 1))]
    fn fork(&mut self, py: Python<'_>, min_frequency: u64) -> PyResult<Trainer> {
        self.by_bytes("forking counts")?;
        let mut fork = Trainer::new(self.spill.pattern())?;
        let (counts, spill) = (&mut self.counts, &mut self.spill);
        fork.counts = py.allow_threads(|| {
            guard(|| {
                if spill.has_runs() {
                    spill.into_counts(std::mem::take(counts), min_frequency)
                } else {
                    let mut copy = counts.clone();
                    copy.retain_at_least(min_frequency);
                    Ok(copy)
                }
            })
        })?;
        Ok(fork)
    }

    /// Merges the tables at `paths` (one pattern) into a table written into
    /// the open descriptor `fd` (`name` for errors), one entry per table in
    /// memory. Returns the pattern, and (entries, total) written.
    #[staticmethod]
    fn merge_count_files(py: Python<'_>, paths: Vec<PathBuf>, fd: i32, name: &str) -> PyResult<(String, u64, u64)> {
        py.allow_threads(|| guard(|| tables::merge_files(&paths, fd, name)))
    }

    /// Removes the counts spilled to disk (and forgets them), now rather
    /// than when this trainer is collected.
    fn discard_spilled(&mut self) {
        self.spill.clear();
    }
}

impl Trainer {
    /// An error unless the counts are by bytes (not `count_by_ids`): `what`
    /// needs chunks' bytes.
    fn by_bytes(&self, what: &str) -> PyResult<()> {
        match self.by_ids {
            None => Ok(()),
            Some(_) => Err(pyo3::exceptions::PyValueError::new_err(format!(
                "{what} needs counts by bytes; these are by ids (count_by_ids), for extend alone"
            ))),
        }
    }
}

/// An encoder for ordinary tokens `tokens` (id = index) and `specials`.
/// (An empty token stands for an id with none, and is left out.)
fn encoder_of(tokens: &[Vec<u8>], specials: FxHashMap<String, Rank>, splitter: Splitter) -> Result<Encoder, String> {
    let ranks = tokens.iter().enumerate().filter(|(_, b)| !b.is_empty()).map(|(id, b)| (b.clone(), id as Rank));
    let ranks = ranks.collect();
    Encoder::with_splitter(ranks, specials, splitter)
}
