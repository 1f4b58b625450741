"""Arrow sources: corpora held as Parquet files, pyarrow Tables, record
batches and readers, or HF ``datasets``, read where Arrow keeps them.

Each record (row) of a text column is one document. Rust reads the records
straight from the Arrow buffers (``rust/input/arrow.rs``): no record is ever
copied into a Python ``str``, and no two records are joined, so no chunk
crosses from one into the next. Python's part is to find the column and
hand it over one batch of rows at a time, so memory stays at a batch or two
whatever the size of the corpus (a Parquet file is streamed by row groups).

    skipped = feed_arrow(trainer, "shard-0001.parquet", column="text")
    records, ids, skipped = encode_arrow_to_fd(tok, table, fd, "json")

A record that cannot be read as text (null, not UTF-8, or holding special
token text the call disallows) is an error naming the source and the row
(counting from 0); with ``skip_bad=True`` it is skipped, counted, and a
``SkippedRecordsWarning`` says how many and what the first was.

pyarrow is imported only when a function here needs it (``import bpe`` never
does); ``datasets`` is never imported here: its objects are recognised by
their class, and read through their Arrow tables.
"""

from __future__ import annotations

import os
import queue
import threading
import warnings
from typing import Any, Callable, Iterator, Optional, Tuple

from bpe import _core

INSTALL_HINT = "pip install 'bpe[data]'"

#: About this many bytes of text go to Rust per call. Each call ends with
#: its counts merged into the trainer's, a cost per batch: counting 50 MB in
#: batches of 16 MB took 18% more CPU than reading one text file, in
#: batches of 64 MB 2% more. Memory: two batches (one read ahead).
BATCH_BYTES = 64 << 20

#: File name endings read as Parquet.
PARQUET_SUFFIXES = (".parquet", ".pq", ".parq")

_PYARROW_KINDS = {"Table", "RecordBatch", "RecordBatchReader", "ChunkedArray"}
_DATASETS_KINDS = {"Dataset", "IterableDataset"}


class SkippedRecordsWarning(UserWarning):
    """Bad records were skipped (``skip_bad=True``): how many, and the first."""


def pyarrow():
    """The pyarrow module, or a one-line ImportError saying how to get it."""
    try:
        import pyarrow as pa
    except ImportError:
        raise ImportError(f"reading Parquet and Arrow data needs pyarrow: {INSTALL_HINT}") from None
    return pa


# -- What is an Arrow source -------------------------------------------------


def is_arrow_source(obj: Any) -> bool:
    """Is ``obj`` an in-memory Arrow source: a pyarrow Table, RecordBatch,
    RecordBatchReader, ChunkedArray or text Array, or a ``datasets``
    Dataset or IterableDataset? (Paths: see ``is_parquet_path``.) Decided by
    class, without importing pyarrow or datasets."""
    cls = type(obj)
    module = cls.__module__ or ""
    if module.split(".")[0] == "datasets":
        return any(c.__name__ in _DATASETS_KINDS for c in cls.__mro__)
    if module.split(".")[0] != "pyarrow":
        return False
    if cls.__name__ in _PYARROW_KINDS:
        return True
    # pyarrow is loaded, since obj is one of its objects.
    pa = pyarrow()
    return isinstance(obj, pa.Array) and _is_text_type(pa, obj.type)


def is_parquet_path(path: Any) -> bool:
    """Is ``path`` (a str or path) named like a Parquet file?"""
    return isinstance(path, (str, os.PathLike)) and os.fspath(path).lower().endswith(PARQUET_SUFFIXES)


def _is_text_type(pa, t) -> bool:
    return (
        pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t)
        or pa.types.is_large_binary(t) or str(t) in ("string_view", "binary_view")
        or (pa.types.is_dictionary(t) and _is_text_type(pa, t.value_type))
    )


def describe(source: Any) -> str:
    """How a source is named in messages: a path, or what kind of object it is."""
    if isinstance(source, (str, os.PathLike)):
        return os.fspath(source)
    cls = type(source)
    return f"the {cls.__module__.split('.')[0]} {cls.__name__}"


def total_rows(source: Any) -> Optional[int]:
    """The number of rows of ``source`` if known without reading it (for a
    progress bar's total), else None."""
    try:
        if isinstance(source, (str, os.PathLike)):
            return pyarrow().parquet.ParquetFile(os.fspath(source)).metadata.num_rows
        if is_arrow_source(source):
            return len(source)  # a reader or an IterableDataset has none
    except Exception:  # an unreadable file is reported when it is read
        return None
    return None


# -- Batches of records ------------------------------------------------------


def batches(source: Any, column: str = "text", batch_rows: Optional[int] = None) -> Iterator[Tuple[Any, int]]:
    """``(array, first_row)`` for each batch of rows of ``source``: the text
    column's records as a pyarrow string (or binary) array, and the row
    number of its first record in the source.

    ``source``: the path of a Parquet file (streamed, one batch in memory
    at a time), a pyarrow Table, RecordBatch, RecordBatchReader, ChunkedArray
    or Array, or a ``datasets`` Dataset or IterableDataset. ``column`` (not
    used for arrays) may name a field of a struct column: ``"meta.text"``.
    Batches hold about ``BATCH_BYTES`` of text, or ``batch_rows`` rows.
    """
    pa = pyarrow()
    name = describe(source)
    if isinstance(source, (str, os.PathLike)):
        arrays = _parquet(pa, os.fspath(source), column, batch_rows)
    elif type(source).__module__.split(".")[0] == "datasets":
        arrays = _dataset(pa, source, column, batch_rows)
    elif isinstance(source, (pa.Array, pa.ChunkedArray)):
        arrays = _chunks(source)
    elif isinstance(source, (pa.Table, pa.RecordBatch)):
        arrays = _chunks(_column(pa, source, column, name))
    elif isinstance(source, pa.RecordBatchReader):
        arrays = (_column(pa, batch, column, name) for batch in source)
    else:
        raise TypeError(f"{name} is not an Arrow source: give a Parquet file, a pyarrow Table or a datasets Dataset")
    row = 0
    for array in arrays:
        array = _text_array(pa, array, column, name)
        for piece in _pieces(array, batch_rows):
            yield piece, row
            row += len(piece)


def _column(pa, data, column: str, name: str):
    """Column ``column`` of a Table or RecordBatch; ``a.b`` is field ``b``
    of struct column ``a``."""
    names = data.schema.names
    head, _, rest = column.partition(".")
    if column in names:
        return data.column(column)
    if head not in names or not rest:
        raise ValueError(f"{name} has no column {column!r}; its columns: {', '.join(names) or 'none'} (pass column=)")
    values = data.column(head)
    for field in rest.split("."):
        if not pa.types.is_struct(values.type):
            raise ValueError(f"{name}: column {head!r} is {values.type}, not a struct with a field {field!r}")
        fields = [values.type.field(i).name for i in range(values.type.num_fields)]
        if field not in fields:
            raise ValueError(f"{name}: column {head!r} has no field {field!r}; its fields: {', '.join(fields)}")
        # struct_field honours the struct's own offset and nulls.
        import pyarrow.compute  # a submodule `import pyarrow` does not load

        values = pyarrow.compute.struct_field(values, [field])
    return values


def _chunks(values) -> Iterator[Any]:
    return iter(values.chunks) if hasattr(values, "chunks") else iter([values])


def _text_array(pa, array, column: str, name: str):
    """``array`` as one of the layouts Rust reads (string, large_string,
    binary, large_binary): others of text are converted (a copy), anything
    else is an error."""
    t = array.type
    if pa.types.is_dictionary(t):
        array, t = array.dictionary_decode(), t.value_type
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return array
    if str(t) in ("string_view", "binary_view"):
        return array.cast(pa.large_string() if str(t) == "string_view" else pa.large_binary())
    if pa.types.is_null(t):
        return array.cast(pa.string())  # a column of nulls: every record is bad
    raise ValueError(f"{name}: column {column!r} holds {t}, not text (string or binary)")


def _pieces(array, batch_rows: Optional[int]) -> Iterator[Any]:
    """``array`` in slices (no copy) of about ``BATCH_BYTES`` or ``batch_rows``."""
    n = len(array)
    if batch_rows is None:
        batch_rows = max(1, int(n * BATCH_BYTES / max(1, array.nbytes)))
    for start in range(0, n, batch_rows):
        yield array.slice(start, batch_rows)
    if n == 0:
        yield array


def _parquet(pa, path: str, column: str, batch_rows: Optional[int]) -> Iterator[Any]:
    """The column's batches, read one at a time. pyarrow's errors (a
    missing, truncated or corrupt file) become one line naming the file."""
    import pyarrow.parquet as pq

    def failed(e: Exception) -> ValueError:
        lines = str(e).strip().splitlines() or [type(e).__name__]
        return ValueError(f"cannot read {path} as Parquet: {lines[0]}")

    try:
        file = pq.ParquetFile(path)
        schema = file.schema_arrow
    except (pa.ArrowException, OSError) as e:
        raise failed(e) from None
    head = column.partition(".")[0]
    if column not in schema.names and head not in schema.names:
        raise ValueError(f"{path} has no column {column!r}; its columns: {', '.join(schema.names) or 'none'} (pass column=)")
    if batch_rows is None:
        # Rows of about BATCH_BYTES, from the sizes the file records
        # (uncompressed, every column read: an upper bound).
        meta = file.metadata
        size = sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
        batch_rows = max(1, min(1 << 20, int(meta.num_rows * BATCH_BYTES / max(1, size))))
    reader = file.iter_batches(batch_size=batch_rows, columns=[head])
    while True:
        try:
            batch = next(reader)
        except StopIteration:
            return
        except (pa.ArrowException, OSError) as e:
            raise failed(e) from None
        yield _column(pa, batch, column, path)


def _dataset(pa, ds, column: str, batch_rows: Optional[int]) -> Iterator[Any]:
    """A ``datasets`` Dataset's or IterableDataset's column, a batch at a
    time: through its Arrow table (no copy where it has no index mapping),
    else (an older ``datasets``) its rows made into arrays."""
    name = describe(ds)
    names = getattr(ds, "column_names", None)
    if names is not None and column.partition(".")[0] not in names:
        raise ValueError(f"{name} has no column {column!r}; its columns: {', '.join(names) or 'none'} (pass column=)")
    rows = batch_rows or 8192
    try:
        tables = ds.with_format("arrow").iter(batch_size=rows)
    except (AttributeError, TypeError, NotImplementedError, ValueError):
        tables = None
    if tables is not None:
        for table in tables:
            yield from _chunks(_column(pa, table, column, name))
        return
    group: list = []
    for row in ds:
        group.append(row[column])
        if len(group) == rows:
            yield _from_values(pa, group, name)
            group = []
    if group:
        yield _from_values(pa, group, name)


def _from_values(pa, values: list, name: str):
    try:
        return pa.array(values, pa.large_string())
    except (pa.ArrowException, TypeError) as e:
        raise ValueError(f"{name}: a record is not text: {e}") from None


def _parts(array) -> tuple:
    """What Rust reads of a string array: ``(validity, offsets, data,
    offset_width, offset, length)``, the buffers lent, not copied."""
    pa = pyarrow()
    validity, offsets, data = array.buffers()[:3]
    large = pa.types.is_large_string(array.type) or pa.types.is_large_binary(array.type)
    return (validity, offsets, data, 8 if large else 4, array.offset, len(array))


def _ahead(items: Iterator[Any]) -> Iterator[Any]:
    """``items``, the next one made by a thread of its own while the caller
    works on the current one. pyarrow reads and decompresses a Parquet
    batch without the GIL, and Rust counts or encodes one without it, so
    the two overlap: reading costs little more than reading a text file.
    Memory: one batch more. An error in the thread is raised here, in order."""
    ready: queue.Queue = queue.Queue(maxsize=1)
    stop = threading.Event()
    end = object()

    def put(item) -> bool:
        while not stop.is_set():
            try:
                ready.put(item, timeout=0.1)
                return True
            except queue.Full:
                pass
        return False  # the caller has stopped reading

    def run() -> None:
        try:
            for item in items:
                if not put((item, None)):
                    return
            put((end, None))
        except BaseException as e:  # handed to the caller, which raises it
            put((end, e))

    thread = threading.Thread(target=run, name="bpe-arrow-reader", daemon=True)
    thread.start()
    try:
        while True:
            item, error = ready.get()
            if item is end:
                if error is not None:
                    raise error
                return
            yield item
    finally:
        stop.set()
        thread.join()


# -- Training -------------------------------------------------------------------


def feed_arrow(
    trainer: _core.Trainer,
    source: Any,
    *,
    column: str = "text",
    name: Optional[str] = None,
    skip_bad: bool = False,
    progress: Optional[Callable[[int], None]] = None,
    batch_rows: Optional[int] = None,
) -> int:
    """Counts each record of ``source``'s text column as one document into
    ``trainer`` (a ``_core.Trainer``); returns the number of bad records
    skipped (``skip_bad=True``; else the first is a ValueError naming
    ``name`` — by default the file or the kind of object — and its row).
    ``progress(rows)``, if given, is called with the rows done so far after
    each batch."""
    name = name or describe(source)
    skipped, first, done = 0, None, 0
    for array, row in _ahead(batches(source, column, batch_rows)):
        n, bad = trainer.feed_arrow(_parts(array), name, row, skip_bad)
        skipped += n
        first = first or bad
        done = row + len(array)
        if progress is not None:
            progress(done)
    _warn_skipped(name, skipped, first)
    return skipped


# -- Encoding -----------------------------------------------------------------

#: What ``encode_arrow_to_fd`` writes: ``ids``/``json`` a line per record,
#: ``binary`` fixed-width little-endian ids, ``count`` nothing.
FORMATS = ("ids", "json", "binary", "count")


def encode_arrow_to_fd(
    tok,
    source: Any,
    fd: int,
    fmt: str,
    *,
    column: str = "text",
    name: Optional[str] = None,
    skip_bad: bool = False,
    allowed_special=frozenset(),
    disallowed_special="all",
    separator: Optional[int] = None,
    width: Optional[int] = None,
    num_threads: int = 0,
    progress: Optional[Callable[[int], None]] = None,
    batch_rows: Optional[int] = None,
) -> Tuple[int, int, int]:
    """Encodes each record of ``source``'s text column as ``tok.encode``
    would (same ``allowed_special``/``disallowed_special``) and writes the
    ids to descriptor ``fd`` in ``fmt`` (see ``FORMATS``); for ``binary``,
    ``width`` bytes an id (default: 2 if every id fits, else 4) and
    ``separator`` (an id, e.g. ``<|endoftext|>``'s) between records.
    Returns ``(records, ids, skipped)``: records encoded, ids written
    (separators included: what a ``.npy`` header needs), bad records
    skipped. ``fd`` stays open; ``progress(rows)`` as for ``feed_arrow``."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}: use one of {', '.join(FORMATS)}")
    name = name or describe(source)
    allowed = tok._allowed(allowed_special)
    disallowed = sorted(tok._disallowed(allowed, disallowed_special))
    if width is None:
        width = 2 if tok.n_vocab - 1 <= 0xFFFF else 4
    records = ids = skipped = 0
    first = None
    for array, row in _ahead(batches(source, column, batch_rows)):
        counts, n, bad = _core.encode_arrow_to_fd(
            tok._core, _parts(array), fd, fmt, sorted(allowed), disallowed, separator, num_threads, width,
            name, row, skip_bad, records > 0,
        )
        records += len(array) - n
        ids += sum(counts)
        skipped += n
        first = first or bad
        if progress is not None:
            progress(row + len(array))
    _warn_skipped(name, skipped, first)
    return records, ids, skipped


def count_arrow_tokens(
    tok,
    source: Any,
    *,
    column: str = "text",
    name: Optional[str] = None,
    skip_bad: bool = False,
    allowed_special=frozenset(),
    disallowed_special="all",
    num_threads: int = 0,
    progress: Optional[Callable[[int], None]] = None,
    batch_rows: Optional[int] = None,
) -> Tuple[int, int, int]:
    """``(records, tokens, skipped)`` of ``source``'s text column, encoded
    as ``encode_arrow_to_fd`` would, nothing kept but the counts."""
    return encode_arrow_to_fd(
        tok, source, -1, "count", column=column, name=name, skip_bad=skip_bad, allowed_special=allowed_special,
        disallowed_special=disallowed_special, num_threads=num_threads, progress=progress, batch_rows=batch_rows,
    )


def _warn_skipped(name: str, skipped: int, first: Optional[str]) -> None:
    if skipped:
        warnings.warn(
            f"{name}: skipped {skipped} bad record(s) (skip_bad=True); the first: {first}",
            SkippedRecordsWarning,
            stacklevel=3,
        )
