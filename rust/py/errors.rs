//! Errors across the boundary: every entry point runs its Rust work inside
//! `guard`, which turns a panic into a Python `RuntimeError` instead of
//! pyo3's `PanicException` (a `BaseException` that `except Exception` does
//! not catch), so a bug in the core can never take the Python process down.

use std::panic::{catch_unwind, AssertUnwindSafe};

use pyo3::exceptions::{PyBrokenPipeError, PyKeyboardInterrupt, PyRuntimeError, PyValueError};
use pyo3::prelude::*;

/// The marker error a progress callback returns when Ctrl-C was pressed.
pub(super) const INTERRUPTED: &str = "\u{0}interrupted";

/// Runs `f`, mapping a panic to `RuntimeError` and an error string to
/// `ValueError` (or `KeyboardInterrupt`, `BrokenPipeError` for their markers).
pub(super) fn guard<T>(f: impl FnOnce() -> Result<T, String>) -> PyResult<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) if e == INTERRUPTED => Err(PyKeyboardInterrupt::new_err("interrupted")),
        Ok(Err(e)) if e == crate::decode::stream::BROKEN_PIPE => {
            Err(PyBrokenPipeError::new_err("the reader of the output went away"))
        }
        Ok(Err(e)) => Err(PyValueError::new_err(e)),
        Err(panic) => {
            let msg = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "unknown panic".into());
            Err(PyRuntimeError::new_err(format!("internal error in the bpe Rust core: {msg} (please report this)")))
        }
    }
}

/// Checks for Ctrl-C from a thread that released the GIL.
pub(super) fn check_interrupt() -> Result<(), String> {
    Python::with_gil(|py| py.check_signals()).map_err(|_| INTERRUPTED.to_string())
}
