"""Encoding in bulk into numpy arrays, and the chunk cache: the methods of
:class:`bpe.Tokenizer` for datasets rather than single strings.

Files are read, checked, cut and encoded by the Rust core on all cores
(``rust/run/bulk/mod.rs``), and the ids come back as one array, without a Python
string or int ever made per document or token. This module holds the
policy only: defaults, the dtype, the separator, argument checks.
"""

from __future__ import annotations

import operator
import os
import reprlib
from typing import TYPE_CHECKING, Callable, Collection, Literal, Sequence, Union

from bpe import _core
from bpe.sources.corpus import replace_surrogates
from bpe._util.files import PathLike, check_text_file
from bpe._util.sizes import parse_bytes
from bpe._util.specials import disallowed_error

if TYPE_CHECKING:  # numpy is optional: only type checkers see it
    import numpy as np

Specials = Union[Literal["all"], Collection[str]]


def _numpy(what: str):
    try:
        import numpy as np
    except ImportError:
        raise ImportError(f"{what} needs numpy: pip install numpy (or pip install 'bpe[model]')") from None
    return np


def _threads(num_threads: int | None) -> int:
    """The core's thread count: 0 is all cores."""
    if num_threads is None:
        return 0
    try:
        threads = operator.index(num_threads)  # an int (numpy's too); not a float or a str
    except TypeError:
        threads = None
    if threads is None or isinstance(num_threads, bool):
        raise TypeError(f"num_threads must be an int (or None for all cores), not {num_threads!r}")
    if threads < 1:
        raise ValueError(f"num_threads must be at least 1 (or None for all cores), got {num_threads}")
    return threads


def _texts(texts, method: str, single: str) -> list:
    """``texts`` as a list, or a ``TypeError`` for what is not a list of texts."""
    if isinstance(texts, (str, bytes, bytearray)):
        raise TypeError(f"{method} takes a list of str, not a {type(texts).__name__}; for one text use {single}()")
    try:
        it = iter(texts)
    except TypeError:
        raise TypeError(f"{method} takes a list of str, not {type(texts).__name__}") from None
    return list(it)


def _check_texts(texts: list) -> None:
    """Names the first item of ``texts`` that is not a str, once the core
    refused one (the binding's message names neither the item nor its index)."""
    for k, t in enumerate(texts):
        if not isinstance(t, str):
            hint = " (decode it first)" if isinstance(t, (bytes, bytearray)) else ""
            raise TypeError(f"texts[{k}] is {reprlib.repr(t)}, not a str{hint}")


class BulkEncoding:
    """Mixed into :class:`bpe.Tokenizer` (which provides ``_core``,
    ``n_vocab``, ``special_tokens``, ``_allowed`` and ``_disallowed``)."""

    def _width(self, dtype) -> int:
        """Bytes per id: the smallest unsigned type that holds every id, or
        ``dtype`` if given (``"uint16"`` or ``"uint32"``)."""
        np = _numpy("encoding to arrays")
        if dtype is None:
            return 2 if self.n_vocab <= 1 << 16 else 4
        try:
            kind, width = np.dtype(dtype).kind, np.dtype(dtype).itemsize
        except TypeError:  # not a dtype at all ("bogus"): numpy's message names no argument
            kind, width = None, 0
        if kind != "u" or width not in (2, 4):
            raise ValueError(f"dtype must be uint16 or uint32, got {dtype!r}")
        if width == 2 and self.n_vocab > 1 << 16:
            raise ValueError(f"dtype uint16 cannot hold the ids of {self.n_vocab} tokens; use uint32")
        return width

    def _separator(self, separator: int | str | None) -> int | None:
        if separator is None or isinstance(separator, int) and not isinstance(separator, bool):
            if separator is not None and not 0 <= separator < self.n_vocab:
                raise ValueError(f"separator {separator} is not a token id of this vocabulary (0..{self.n_vocab - 1})")
            return separator
        if not isinstance(separator, str):
            raise TypeError(f"separator must be a token id (int), a special token (str) or None, not {separator!r}")
        if separator not in self.special_tokens:
            raise ValueError(
                f"separator {separator!r} is not a special token of this tokenizer "
                f"(it has {sorted(self.special_tokens) or 'none'}); pass a token id or one of them"
            )
        return self.special_tokens[separator]

    @staticmethod
    def _arrays(raw_ids: bytearray, raw_offsets: bytearray, width: int):
        np = _numpy("encoding to arrays")
        ids = np.frombuffer(raw_ids, dtype="<u2" if width == 2 else "<u4")
        return ids, np.frombuffer(raw_offsets, dtype="<u8").astype(np.int64)

    def encode_files(
        self,
        paths: Sequence[PathLike] | PathLike,
        *,
        separator: int | str | None = None,
        num_threads: int | None = None,
        allowed_special: Specials = frozenset(),
        disallowed_special: Specials = "all",
        dtype=None,
        progress: Callable[[int], object] | None = None,
    ) -> tuple["np.ndarray", "np.ndarray"]:
        """Encodes UTF-8 text files (each one document) on all cores; returns
        ``(ids, offsets)``: every file's ids in one numpy array (``uint16``
        when every id fits, else ``uint32``; or ``dtype``), and, as
        ``int64``, the index of each file's first id, then ``len(ids)``
        (``ids[offsets[i]:offsets[i + 1]]`` is file ``i``, with the separator
        after it if any).

        The files are read, cut and encoded in Rust; one large file is cut
        at safe points and shared by all cores, with the ids of encoding it
        whole. ``separator`` (a token id, or a special token such as
        ``"<|endoftext|>"``) goes between documents. Special-token text is
        handled as by :meth:`encode`: ``ValueError`` naming the file and byte
        offset unless allowed (its id) or ``disallowed_special=()`` (text).
        ``progress(bytes_done)`` is called about every 50 ms (between blocks
        of 16 MiB for compressed files and pipes). Memory: the ids, plus the
        pieces in flight (up to 2 MiB each, about four per thread).
        """
        if isinstance(paths, (str, bytes, os.PathLike)):
            paths = [paths]
        try:
            it = iter(paths)
        except TypeError:
            raise TypeError(f"paths must be a path or a list of paths, not {type(paths).__name__}") from None
        paths = list(it)
        for k, p in enumerate(paths):
            # The core takes str paths: a bytes path (or a PathLike giving
            # one) would be refused by the binding, in its own words.
            if not isinstance(p, (str, os.PathLike)) or not isinstance(os.fspath(p), str):
                raise TypeError(f"paths[{k}] is {p!r}: give str or os.PathLike paths (os.fsdecode converts bytes)")
        if progress is not None and not callable(progress):
            raise TypeError(f"progress must be a function of the bytes done (or None), not {progress!r}")
        paths = [check_text_file(p) for p in paths]
        width = self._width(dtype)
        allowed = self._allowed(allowed_special)
        disallowed = sorted(self._disallowed(allowed, disallowed_special))
        raw_ids, raw_offsets = _core.encode_files(
            self._core, paths, list(allowed), disallowed, self._separator(separator),
            _threads(num_threads), width, progress,
        )
        return self._arrays(raw_ids, raw_offsets, width)

    def encode_batch_to_numpy(
        self,
        texts: Sequence[str],
        *,
        num_threads: int | None = None,
        allowed_special: Specials = frozenset(),
        disallowed_special: Specials = "all",
        dtype=None,
    ) -> tuple["np.ndarray", "np.ndarray"]:
        """:meth:`encode_batch` into one flat array: ``(ids, offsets)`` as
        :meth:`encode_files` returns them (text ``i`` is
        ``ids[offsets[i]:offsets[i + 1]]``). No Python int is made per token."""
        texts = _texts(texts, "encode_batch_to_numpy", "encode_to_numpy")
        width = self._width(dtype)
        allowed = self._allowed(allowed_special)
        disallowed = sorted(self._disallowed(allowed, disallowed_special))
        args = (list(allowed), disallowed, _threads(num_threads), width)
        try:
            out = self._core.encode_batch_flat(texts, *args)
        except UnicodeEncodeError:
            out = self._core.encode_batch_flat([replace_surrogates(t) for t in texts], *args)
        except TypeError:
            _check_texts(texts)
            raise
        if isinstance(out[0], int):
            k, found = out
            raise disallowed_error(found, f"texts[{k}]")
        return self._arrays(*out, width)

    # -- the chunk cache ---------------------------------------------------

    def cache_info(self) -> dict:
        """The chunk cache: the memos of merged chunks (chunk -> ids) that
        finished calls leave behind, so that the next call does not merge
        those chunks again (``rust/encode/pool.rs``). ``capacity`` and
        ``bytes`` in bytes; ``entries`` the chunks held, ``memos`` how many
        memos hold them; ``reused``/``fresh`` count the calls (or threads of
        a batch) that started with a kept memo or an empty one. Where 4 threads
        or more encode at once they also share a table of the chunks they merge
        (``rust/encode/shared.rs``): ``shared`` is the chunks in it,
        ``shared_hits`` the look-ups that found one there."""
        keys = ("capacity", "bytes", "entries", "memos", "reused", "fresh", "shared", "shared_hits")
        return dict(zip(keys, self._core.cache_info()))

    def set_cache_size(self, size: int | str) -> None:
        """Caps the chunk cache at ``size``: bytes, or a size such as
        ``"64M"`` or ``"64MiB"`` (2**20 bytes each; ``bpe/_util/sizes.py``),
        and empties it; 0 keeps nothing between calls. The default is 64M,
        widened to room for a memo per thread where more threads encode at
        once (8M each for cl100k, 12M for o200k); a size set here is kept
        whatever the threads. The ids never depend on the cache."""
        self._core.set_cache_capacity(0 if size == 0 and not isinstance(size, bool) else
                                      parse_bytes(size, "the cache size"))

    def clear_cache(self) -> None:
        """Empties the chunk cache (its memory is given back)."""
        self._core.clear_cache()
