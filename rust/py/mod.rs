//! Python bindings (the `bpe._core` module): type conversion, GIL release,
//! progress bars and error mapping only. The algorithms live in the other
//! files; each binding converts its arguments, runs a Python-free call
//! (without the GIL where it may take long) and maps its errors (`errors.rs`).
//!
//! In the order they build on each other: `errors.rs` (panics and errors to
//! Python exceptions), `lists.rs` (lists of ids written directly: all the
//! unsafe code but one), `buffers.rs` (ids lent to numpy without a copy), `text.rs`
//! (a `str`'s UTF-8, made faster than CPython makes it), `encoder.rs` (`CoreBPE`), `bulk.rs` (files
//! encoded in bulk), `stream.rs` (encoding and decoding streams into a file
//! descriptor: the CLI), `progress.rs` (the progress bar, and `Progress`),
//! `trainer.rs` (`Trainer`), and
//! here the module itself, with `Pretokenizer` and a test hook.

use pyo3::prelude::*;

use crate::split::pretokenize::Splitter;

mod errors;
mod lists;
mod text;
mod buffers;
mod encoder;
mod bulk;
mod stream;
mod arrow;
mod progress;
mod made;
mod tables;
mod trainer;

use encoder::CoreBPE;
use errors::guard;
use trainer::Trainer;

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

    /// The splitter that applies `patterns` in turn, each splitting the
    /// pieces of the ones before it (HF's `Sequence` of isolated `Split`s).
    #[staticmethod]
    fn sequence(patterns: Vec<String>) -> PyResult<Self> {
        Ok(Pretokenizer { splitter: guard(|| Splitter::sequence(&patterns))? })
    }

    /// The pattern as files store it (a sequence in its text form).
    #[getter]
    fn pattern(&self) -> &str {
        self.splitter.pattern()
    }

    /// The regexes applied in turn (one for a single regex).
    #[getter]
    fn steps(&self) -> Vec<String> {
        self.splitter.steps()
    }

    /// Whether a text may be cut at safe cut points (files split in pieces).
    #[getter]
    fn cuttable(&self) -> bool {
        self.splitter.cuttable()
    }

    fn findall(&self, py: Python<'_>, text: &str) -> PyResult<Vec<String>> {
        py.allow_threads(|| guard(|| Ok(self.splitter.findall(text)?.into_iter().map(String::from).collect())))
    }
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

// `gil_used = false`: on a free-threaded CPython (3.13t and later) the module
// runs without the GIL (the core takes its own locks; `lists.rs` writes lists
// through CPython's functions there). Ignored by the usual CPython.
#[pymodule(gil_used = false)]
#[pyo3(name = "_core")]
fn core_module(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // Before anything is made that a forked child must make afresh (`threads.rs`).
    crate::threads::register_fork_handlers();
    m.add("GPT2_PATTERN", crate::split::patterns::GPT2_PATTERN)?;
    m.add("GPT4_PATTERN", crate::split::patterns::GPT4_PATTERN)?;
    m.add("GPT4O_PATTERN", crate::split::patterns::GPT4O_PATTERN)?;
    m.add("LLAMA3_PATTERN", crate::split::patterns::LLAMA3_PATTERN)?;
    m.add("QWEN2_PATTERN", crate::split::patterns::QWEN2_PATTERN)?;
    m.add("DEEPSEEK_V3_PATTERN", crate::split::steps::text(&crate::split::patterns::DEEPSEEK_V3_STEPS))?;
    m.add("DIGITS_SINGLE", crate::split::patterns::DIGITS_SINGLE)?;
    m.add("DIGITS_R2L3", crate::split::patterns::DIGITS_R2L3)?;
    m.add("MAX_ID", crate::vocab::MAX_ID)?;
    m.add_class::<Pretokenizer>()?;
    m.add_class::<Trainer>()?;
    m.add_class::<CoreBPE>()?;
    m.add_class::<buffers::IdBuffer>()?;
    m.add_class::<progress::Progress>()?;
    m.add_function(wrap_pyfunction!(bulk::encode_files, m)?)?;
    m.add_function(wrap_pyfunction!(bulk::write_ids, m)?)?;
    m.add_function(wrap_pyfunction!(stream::encode_to_fd, m)?)?;
    m.add_function(wrap_pyfunction!(stream::decode_to_fd, m)?)?;
    m.add_function(wrap_pyfunction!(stream::encode_records_to_fd, m)?)?;
    m.add_function(wrap_pyfunction!(arrow::encode_arrow_to_fd, m)?)?;
    m.add_function(wrap_pyfunction!(_panic_for_tests, m)?)?;
    Ok(())
}
