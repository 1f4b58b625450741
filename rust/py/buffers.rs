//! Ids handed to numpy without a copy: an `IdBuffer` owns the `Vec` the
//! encoder wrote and exposes it through Python's buffer protocol, so
//! `numpy.frombuffer(buf, "<u4")` makes an array over that very memory.
//!
//! **Why:** copying 10 MB of ids into a fresh bytearray costs a page fault
//! per 4 KiB of it plus the copy; for `encode_to_numpy` on 10 MB of English
//! that was a tenth of the call (see docs/dev/performance.md, "Ids to numpy").
//!
//! **Safety.** The buffer points into `ids`, which is never resized or
//! dropped while the `IdBuffer` lives, and every view holds a reference to
//! it (`view.obj`), so the memory outlives every array made from it. The
//! view is writable (as a bytearray's was): numpy may write ids, and no
//! Rust code reads them after the buffer is made.

use std::ffi::{c_int, CStr};

use pyo3::exceptions::PyBufferError;
use pyo3::ffi;
use pyo3::prelude::*;

use super::lists::bytearray_of_width;
use crate::vocab::Rank;

/// Ids as u32 in native byte order (little-endian on every platform we build
/// for; numpy reads them as "<u4").
#[pyclass(module = "bpe._core", frozen)]
pub(super) struct IdBuffer {
    ids: Vec<Rank>,
    /// `[len]` and `[4]`: the view's shape and strides point here.
    shape: [ffi::Py_ssize_t; 1],
    strides: [ffi::Py_ssize_t; 1],
}

impl IdBuffer {
    pub(super) fn new(ids: Vec<Rank>) -> IdBuffer {
        let n = ids.len() as ffi::Py_ssize_t;
        IdBuffer { ids, shape: [n], strides: [4] }
    }
}

/// Native-endian u32 (`struct` code "I"): the `Vec` as it is in memory.
const FORMAT: &CStr = c"I";

#[pymethods]
impl IdBuffer {
    /// Fills `view` with the ids (one dimension, 4-byte items).
    unsafe fn __getbuffer__(slf: Bound<'_, Self>, view: *mut ffi::Py_buffer, flags: c_int) -> PyResult<()> {
        if view.is_null() {
            return Err(PyBufferError::new_err("no view to fill"));
        }
        let me = slf.get();
        // SAFETY: `view` is the caller's, non-null; every field is set
        // below, and `obj` takes a reference that `PyBuffer_Release` drops.
        unsafe {
            (*view).buf = me.ids.as_ptr() as *mut std::ffi::c_void;
            (*view).len = (me.ids.len() * 4) as ffi::Py_ssize_t;
            (*view).readonly = 0;
            (*view).itemsize = 4;
            (*view).format =
                if flags & ffi::PyBUF_FORMAT != 0 { FORMAT.as_ptr() as *mut _ } else { std::ptr::null_mut() };
            (*view).ndim = 1;
            (*view).shape = if flags & ffi::PyBUF_ND != 0 { me.shape.as_ptr() as *mut _ } else { std::ptr::null_mut() };
            (*view).strides = if flags & ffi::PyBUF_STRIDES == ffi::PyBUF_STRIDES {
                me.strides.as_ptr() as *mut _
            } else {
                std::ptr::null_mut()
            };
            (*view).suboffsets = std::ptr::null_mut();
            (*view).internal = std::ptr::null_mut();
            (*view).obj = slf.into_any().into_ptr();
        }
        Ok(())
    }

    unsafe fn __releasebuffer__(&self, _view: *mut ffi::Py_buffer) {}

    fn __len__(&self) -> usize {
        self.ids.len()
    }
}

/// `ids` for `numpy.frombuffer` with `width` bytes an id: lent without a
/// copy when 4 (u32), narrowed into a bytearray when 2 (u16, every id must
/// fit: Python chooses the width from the vocabulary's size).
pub(super) fn ids_array(py: Python<'_>, ids: Vec<Rank>, width: usize) -> PyResult<Bound<'_, PyAny>> {
    if width == 4 {
        return Ok(Bound::new(py, IdBuffer::new(ids))?.into_any());
    }
    super::errors::guard(|| check_width(&ids, width))?;
    Ok(bytearray_of_width(py, &ids, width)?.into_any())
}

/// Ids that do not fit `width` bytes are an error (a bug guard: Python
/// chooses the width from the vocabulary's size).
pub(super) fn check_width(ids: &[Rank], width: usize) -> Result<(), String> {
    match ids.iter().find(|&&id| width == 2 && id > u16::MAX as Rank) {
        Some(id) => Err(format!("token id {id} does not fit in 16 bits")),
        None => Ok(()),
    }
}
