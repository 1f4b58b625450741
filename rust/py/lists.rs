//! Python lists (and bytearrays) of ids, written directly: the only unsafe
//! code of the bindings, with its safety argument here in one place.
//!
//! **Why:** returned lists of ids are most of the cost of encoding from
//! Python. Each list names the shared ints of `CoreBPE` (one per id), is made
//! empty, given room for its items, and written by the threads that encoded
//! its ids, which also count how often they name each id; the references are
//! then counted once per id, not once per item (see docs/dev/performance.md,
//! "Lists of ids").
//!
//! **Safety.** A list from [`empty_list`] is ours alone until we return it:
//! new, untracked by the garbage collector (see [`untracked`]), known to no
//! other code, and of length 0 until [`set_len`]. So its item array may be
//! written without the GIL, each item by one thread ([`Items`]), and it can be
//! freed at any point before `set_len` (it then holds nothing). The ints it
//! names cannot die meanwhile: `CoreBPE::ints` holds a reference to each,
//! and every item written becomes a counted reference before `set_len`
//! ([`write_counted_items`], or [`write_items`] and [`count_references`]).

use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyList};

#[cfg(not(Py_GIL_DISABLED))]
use super::errors::guard;
#[cfg(not(Py_GIL_DISABLED))]
use crate::run::batch::shares;
use crate::vocab::Rank;

/// `ids` as a Python list of the shared `ints` (one per id), untracked (see
/// [`untracked`]).
///
/// Made as [`fill_lists`] makes a batch's lists (`give_room`, then the
/// items, and past one id per vocabulary entry, the references counted from
/// a tally), not with `PyList::new`, which raised each int's count once per
/// item (see docs/dev/performance.md, "Lists of ids").
#[cfg(not(Py_GIL_DISABLED))]
pub(super) fn list_of<'py>(py: Python<'py>, ids: &[Rank], ints: &[Py<PyAny>]) -> PyResult<Bound<'py, PyList>> {
    let list = empty_list(py)?;
    let items = give_room(&list, ids.len())?;
    if ids.len() < ints.len() {
        // (Fewer ids than the vocabulary has: zeroing and reading the
        // tally would cost more than it saves.)
        // SAFETY: the list has room for ids.len() items.
        unsafe { write_counted_items(py, &items, ids, ints) };
    } else {
        let mut tally = vec![0usize; ints.len()];
        // SAFETY: the list has room for ids.len() items, and only this
        // thread writes them.
        unsafe { write_items(&items, 0, ids, ints, &mut tally) };
        count_references(py, ints, &tally);
    }
    // SAFETY: the GIL is held; every item is written and counted.
    unsafe { set_len(&list, ids.len()) };
    Ok(list.into_bound(py))
}

/// Gives each of `lists` (new, from [`empty_list`]) the items `ids` name:
/// room for them with the GIL (held here), then the items written by the
/// threads of `pool` without it, each writing about as many ids, then with
/// the GIL each shared int's reference count raised by the threads' tallies
/// (once per id, not once per item), and the lengths set.
#[cfg(not(Py_GIL_DISABLED))]
pub(super) fn fill_lists(
    py: Python<'_>,
    lists: &[Py<PyList>],
    ids: &[Vec<Rank>],
    ints: &[Py<PyAny>],
    pool: &rayon::ThreadPool,
) -> PyResult<()> {
    let items = lists.iter().zip(ids).map(|(l, v)| give_room(l, v.len())).collect::<PyResult<Vec<_>>>()?;
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
        // (A long list is shared by several threads: `shares` cuts it.)
        let shares = shares(ids, pool.current_num_threads());
        let (items, shares) = (&items, &shares);
        let tallies = py.allow_threads(|| {
            guard(|| {
                Ok(pool.broadcast(|ctx| {
                    // usize: a u32 could wrap on a batch of 4G tokens, and
                    // a count too low frees an int still in use.
                    let mut tally = vec![0usize; ints.len()];
                    for (d, range) in shares[ctx.index()].iter().cloned() {
                        // SAFETY: list d has room for ids[d].len() items,
                        // and the ones in `range` are written here by this
                        // thread alone (the shares are disjoint).
                        unsafe { write_items(&items[d], range.start, &ids[d][range], ints, &mut tally) };
                    }
                    tally
                }))
            })
        })?;
        // (A panic part way leaves lists of length 0: freed as they are.)
        // The threads' tallies summed by the threads (one pass over a
        // vocabulary-sized array per thread, which on 16 threads took a
        // few milliseconds on this thread alone), then counted once.
        let total = py.allow_threads(|| pool.install(|| sum_tallies(tallies)));
        count_references(py, ints, &total);
    }
    // The lengths, now that every item is written and counted.
    for (list, v) in lists.iter().zip(ids) {
        // SAFETY: the GIL is held; every item is written and counted.
        unsafe { set_len(list, v.len()) };
    }
    Ok(())
}

/// `list_of` for a free-threaded CPython (3.13t and later), where a list's
/// item array has another layout and reference counts are split between
/// the owning thread and the others: the list is made with `PyList_New(n)`
/// and each item set with a counted reference, by CPython's own functions.
#[cfg(Py_GIL_DISABLED)]
pub(super) fn list_of<'py>(py: Python<'py>, ids: &[Rank], ints: &[Py<PyAny>]) -> PyResult<Bound<'py, PyList>> {
    // SAFETY: PyList_New returns a new reference or NULL with an exception set.
    let p = unsafe { pyo3::ffi::PyList_New(ids.len() as pyo3::ffi::Py_ssize_t) };
    if p.is_null() {
        return Err(PyErr::fetch(py));
    }
    for (i, &id) in ids.iter().enumerate() {
        // SAFETY: the list is new and ours, index i < its length; SET_ITEM
        // steals the new reference.
        unsafe {
            pyo3::ffi::PyList_SET_ITEM(p, i as pyo3::ffi::Py_ssize_t, ints[id as usize].clone_ref(py).into_ptr())
        };
    }
    // SAFETY: p is a new list.
    let list: Bound<'py, PyList> = unsafe { Bound::from_owned_ptr(py, p).downcast_into_unchecked() };
    Ok(untracked(list).into_bound(py))
}

/// `fill_lists` for a free-threaded CPython: each list (new, from
/// `empty_list`) extended by CPython's own `list.extend` with a list made by
/// [`list_of`], on this thread.
#[cfg(Py_GIL_DISABLED)]
pub(super) fn fill_lists(
    py: Python<'_>,
    lists: &[Py<PyList>],
    ids: &[Vec<Rank>],
    ints: &[Py<PyAny>],
    _pool: &rayon::ThreadPool,
) -> PyResult<()> {
    for (list, v) in lists.iter().zip(ids) {
        let items = list_of(py, v, ints)?;
        // SAFETY: both are live lists; PyList_SetSlice copies the items with
        // their references counted.
        let rc = unsafe { pyo3::ffi::PyList_SetSlice(list.as_ptr(), 0, 0, items.as_ptr()) };
        if rc != 0 {
            return Err(PyErr::fetch(py));
        }
    }
    Ok(())
}

/// `ids` as little-endian integers of `width` bytes in a new bytearray, for
/// `numpy.frombuffer`: 2 (u16, for vocabularies of up to 65,536 ids, whose
/// ids all fit), 4 (u32) or 8 (u64, for offsets). Made uninitialised and
/// written once: `PyByteArray::new` would take the bytes from a second
/// buffer, and `new_with` would zero them first, each pass over fresh memory
/// costing its page faults. (u32 ids of a whole text go to numpy without a
/// copy: `buffers.rs`.)
pub(super) fn bytearray_of_width<'py, T: Copy + Into<u64>>(
    py: Python<'py>,
    ids: &[T],
    width: usize,
) -> PyResult<Bound<'py, PyByteArray>> {
    assert!(matches!(width, 2 | 4 | 8), "width {width}");
    let n = ids.len() * width;
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
    for (o, &id) in out.chunks_exact_mut(width).zip(ids) {
        o.copy_from_slice(&id.into().to_le_bytes()[..width]);
    }
    Ok(array)
}

/// Token ids from Python. A list (what `encode` returns) is read item by
/// item through borrowed references: pyo3's generic `Vec<u32>` extraction
/// iterates it (a new reference, so a reference-count write, per item,
/// which cost more than the look-ups: docs/dev/performance.md, "Reading ids").
/// Anything else goes through the generic path. Errors are pyo3's (OverflowError for a
/// negative or too large int, TypeError for a non-int, and for a bool here);
/// Python names the id.
pub(super) fn ids_of(ids: &Bound<'_, PyAny>) -> PyResult<Vec<Rank>> {
    let Ok(list) = ids.downcast::<PyList>() else { return ids.extract() };
    let n = list.len();
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        // SAFETY: the GIL is held and `list` is alive (held by `ids`);
        // PyList_GetItem checks `i` against the list's length now (NULL past
        // it, should an item's `__index__` below have shortened the list).
        let item = unsafe { pyo3::ffi::PyList_GetItem(list.as_ptr(), i as pyo3::ffi::Py_ssize_t) };
        if item.is_null() {
            return Err(PyErr::fetch(ids.py()));
        }
        // A bool is an int to Python (True == 1) but never a token id: one
        // type compare per item, which is free next to the look-up.
        // SAFETY: `item` is a live object, borrowed from the list just now
        // (no Python code ran since); the check reads its type.
        if unsafe { pyo3::ffi::PyBool_Check(item) } != 0 {
            return Err(pyo3::exceptions::PyTypeError::new_err("a bool is not a token id"));
        }
        // PyLong_AsLong (not AsUnsignedLong) accepts what `__index__` accepts
        // (numpy ints), as the generic path does.
        // SAFETY: as above. (It may run the item's `__index__`, which keeps
        // the item alive while it runs; `item` is not used after.)
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

/// `list`, hidden from Python's cyclic garbage collector, for good: every
/// list of ids this module returns (`encode*`, `encode_batch`) is untracked.
///
/// Why: every tracked list is traversed, item by item, by the collections
/// it lives through, and a caller that keeps its results (`ids = encode(...)`
/// in a loop keeps the last result alive during the next call; a pipeline
/// gathering ids keeps them all) has the collector read every id again and
/// again; a thousand new lists set off a collection of young objects, so
/// `encode_batch` paid for it (docs/dev/performance.md, "Untracked lists").
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
pub(super) fn empty_list(py: Python<'_>) -> PyResult<Py<PyList>> {
    // SAFETY: PyList_New returns a new reference or NULL with an exception set.
    let p = unsafe { pyo3::ffi::PyList_New(0) };
    if p.is_null() {
        return Err(PyErr::fetch(py));
    }
    // SAFETY: `p` is a new reference (not NULL: checked above) to a list.
    Ok(untracked(unsafe { Bound::from_owned_ptr(py, p).downcast_into_unchecked() }))
}

/// Room for `n` items in a list from `empty_list`, not initialised: the
/// threads that write the items also take the page faults of fresh memory,
/// where `PyList_New(n)` would zero it all on the calling thread first
/// (calloc). Needs the GIL (PyMem_Malloc); returns where the
/// items go.
#[cfg(not(Py_GIL_DISABLED))]
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

/// Writes `ids` as items `at..at + ids.len()`, pointers to the shared ints,
/// and counts in `tally` how often each id is named. Needs no GIL: the
/// references are counted after, with it (`count_references`).
///
/// SAFETY: `items` has room for `at + ids.len()` items (`give_room`), and
/// no other thread writes those meanwhile.
#[cfg(not(Py_GIL_DISABLED))]
unsafe fn write_items(items: &Items, at: usize, ids: &[Rank], ints: &[Py<PyAny>], tally: &mut [usize]) {
    for (i, &id) in ids.iter().enumerate() {
        // SAFETY: at + i < at + ids.len(), for which `items` has room,
        // written by no other thread meanwhile (this function's contract).
        unsafe { *items.0.add(at + i) = ints[id as usize].as_ptr() };
        tally[id as usize] += 1;
    }
}

/// Writes `ids` as items, pointers to the shared ints, each a reference
/// counted as it is written (with the GIL, for lists too short for a tally).
///
/// SAFETY: `items` has room for `ids.len()` items (`give_room`).
#[cfg(not(Py_GIL_DISABLED))]
unsafe fn write_counted_items(py: Python<'_>, items: &Items, ids: &[Rank], ints: &[Py<PyAny>]) {
    for (i, &id) in ids.iter().enumerate() {
        // SAFETY: i < ids.len(), for which `items` has room (this
        // function's contract); the list is ours alone (`empty_list`).
        unsafe { *items.0.add(i) = ints[id as usize].clone_ref(py).into_ptr() };
    }
}

/// Raises each shared int's reference count by its tally: one reference for
/// each item `write_items` wrote that names it.
#[cfg(not(Py_GIL_DISABLED))]
fn count_references(_: Python<'_>, ints: &[Py<PyAny>], tally: &[usize]) {
    for (int, &n) in ints.iter().zip(tally) {
        if n > 0 {
            // SAFETY: the GIL is held (`Python`); `int` is alive (held by `ints`).
            unsafe { add_references(int.as_ptr(), n) };
        }
    }
}

/// Adds `n` references to `p` at once. `Py_INCREF` once per reference was
/// ~1 ns a reference on Python 3.12+, whose `Py_INCREF` checks at each step
/// that the object is not immortal (a compiler cannot fold those steps into
/// one addition, as it does 3.11's `+= 1`): under the GIL, after the
/// threads are done (docs/dev/performance.md, "Lists of ids"). One `Py_INCREF`
/// tells whether the object is immortal (its count does not move: Python's
/// small ints since 3.12); a mortal object's count is then set to the sum
/// `Py_INCREF` would have reached: the count is the object's first field, a
/// `Py_ssize_t`, in every CPython this builds for (3.12's union holds the
/// same `Py_ssize_t`; free-threaded builds have no `ob_refcnt` and do not
/// compile this). Counts that would pass 2**31 take the loop (3.12 treats
/// such counts as immortal).
///
/// SAFETY: the GIL is held and `p` points to a live object.
#[cfg(not(Py_GIL_DISABLED))]
unsafe fn add_references(p: *mut pyo3::ffi::PyObject, n: usize) {
    // SAFETY: the GIL is held and `p` is live (this function's contract), so
    // its count may be read and changed; `ob_refcnt` is a `Py_ssize_t` at
    // the object's start in every CPython this builds for (above).
    unsafe {
        let before = pyo3::ffi::Py_REFCNT(p);
        pyo3::ffi::Py_INCREF(p);
        let after = pyo3::ffi::Py_REFCNT(p);
        if n == 1 || after == before {
            return; // done, or immortal: Py_INCREF leaves its count alone
        }
        match before.checked_add(n as pyo3::ffi::Py_ssize_t).filter(|&c| c < i32::MAX as pyo3::ffi::Py_ssize_t) {
            Some(count) => std::ptr::addr_of_mut!((*p).ob_refcnt).cast::<pyo3::ffi::Py_ssize_t>().write(count),
            None => {
                for _ in 1..n {
                    pyo3::ffi::Py_INCREF(p);
                }
            }
        }
    }
}

/// The element-wise sum of `tallies` (at least one), computed by the current
/// pool's threads, each summing a stretch of ids over every tally.
#[cfg(not(Py_GIL_DISABLED))]
fn sum_tallies(mut tallies: Vec<Vec<usize>>) -> Vec<usize> {
    use rayon::prelude::*;
    let mut total = tallies.swap_remove(0);
    let stretch = total.len().div_ceil(rayon::current_num_threads().max(1)).max(1);
    total.par_chunks_mut(stretch).enumerate().for_each(|(k, part)| {
        let (at, len) = (k * stretch, part.len());
        for t in &tallies {
            for (sum, &n) in part.iter_mut().zip(&t[at..at + len]) {
                *sum += n;
            }
        }
    });
    total
}

/// Gives a list its `n` items, once they are written and counted.
///
/// SAFETY: the GIL is held, the list has room for `n` items (`give_room`),
/// and its first `n` items are written, each a counted reference.
#[cfg(not(Py_GIL_DISABLED))]
unsafe fn set_len(list: &Py<PyList>, n: usize) {
    // SAFETY: a list is a `PyVarObject`, whose `ob_size` is its length; its
    // first `n` items are written and counted, and the GIL is held (this
    // function's contract).
    unsafe { (*list.as_ptr().cast::<pyo3::ffi::PyVarObject>()).ob_size = n as pyo3::ffi::Py_ssize_t };
}

/// A list's item array, written by pool threads while the GIL is free, each
/// its own stretch of items.
#[cfg(not(Py_GIL_DISABLED))]
struct Items(*mut *mut pyo3::ffi::PyObject);
// SAFETY: each item is written by one thread only, and read by Python only
// after the threads are done (see `fill_lists` and the module's doc).
#[cfg(not(Py_GIL_DISABLED))]
unsafe impl Send for Items {}
// SAFETY: as above: through a shared `&Items` each item is written by one
// thread only (`fill_lists` hands each stretch of a list to one thread).
#[cfg(not(Py_GIL_DISABLED))]
unsafe impl Sync for Items {}
