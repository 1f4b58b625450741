"""The Rust core, ``bpe._core``: the compiled extension that ``bpe.Tokenizer``,
``bpe.count`` and the command line wrap. A private module: call it through
``bpe``. Built from ``rust/py/`` (its contents are listed in ``rust/py/mod.rs``)."""

# Types of the extension module, for type checkers; tests/tokenizer/test_typing.py
# checks that every name the built module exports is declared here.

import os
from collections.abc import Callable, Sequence
from typing import Any, Optional, Union

_Path = Union[str, "os.PathLike[str]"]
# A pyarrow array as its parts: (validity, offsets, data, offset width, offset, length).
_Parts = tuple[Any, Any, Any, int, int, int]
_Progress = Optional[Callable[..., Any]]

GPT2_PATTERN: str
"""GPT-2's split pattern: tiktoken's ``r50k_base`` ``pat_str``, character for character."""
GPT4_PATTERN: str
"""GPT-4's split pattern: tiktoken's ``cl100k_base`` ``pat_str``, character for character."""
GPT4O_PATTERN: str
"""GPT-4o's split pattern: tiktoken's ``o200k_base`` ``pat_str``, character for character."""
LLAMA3_PATTERN: str
"""Llama 3's split pattern: cl100k's as first published (without ``\\s++$``), as Llama 3's ``tokenizer.json`` has it."""
QWEN2_PATTERN: str
"""Qwen2's split pattern: Llama 3's with one digit per chunk (``\\p{N}`` for ``\\p{N}{1,3}``)."""
DEEPSEEK_V3_PATTERN: str
"""DeepSeek-V3's three split steps, as a sequence (a JSON array of the regexes)."""
DIGITS_SINGLE: str
"""The digit rule "single" as a split step: every digit its own chunk."""
DIGITS_R2L3: str
"""The digit rule "r2l3" as a split step: runs of digits in threes from the right."""
MAX_ID: int
"""The largest token id a vocabulary may have: 2**24 - 1."""

class Pretokenizer:
    """A split pattern, compiled: its lexer for the built-in patterns, else the regex."""
    def __init__(self, pattern: str) -> None: ...
    @staticmethod
    def sequence(patterns: list[str]) -> Pretokenizer:
        """The patterns applied in turn, as HuggingFace's ``Sequence`` of isolated ``Split`` steps."""
    @property
    def pattern(self) -> str:
        """The pattern as files store it (a sequence as a JSON array of its regexes)."""
    @property
    def steps(self) -> list[str]:
        """The regexes applied in turn (one for a single regex)."""
    @property
    def cuttable(self) -> bool:
        """Whether a text may be cut at safe cut points and split piece by piece."""
    def findall(self, text: str) -> list[str]: ...

class IdBuffer:
    """Ids as native-endian u32, lent to numpy through the buffer protocol."""
    def __len__(self) -> int: ...
    def __buffer__(self, flags: int, /) -> memoryview: ...

class CoreBPE:
    """The encoder and decoder of one vocabulary (ranks, special tokens, pattern)."""
    # superbpe: (stage-1 pattern, transition, merges); picky: Picky BPE's events,
    # (0, [left, right, new]) and (1, [token, parts...]) (bpe/_tokenizer/picky.py).
    def __init__(
        self, ranks: dict[bytes, int], special_tokens: dict[str, int], pattern: str,
        superbpe: Optional[tuple[str, int, Sequence[tuple[int, int, int]]]] = None,
        picky: Optional[Sequence[tuple[int, Sequence[int]]]] = None,
    ) -> None: ...
    def encode_ordinary(self, text: str) -> list[int]: ...
    # The ids, or the leftmost of disallowed_special found in the text (a str).
    def encode(
        self, text: str, allowed_special: Sequence[str], disallowed_special: Sequence[str]
    ) -> Union[list[int], str]: ...
    # The ids, or the first disallowed special token found (a str).
    def encode_unless_special(self, text: str) -> Union[list[int], str]: ...
    def encode_u32(
        self, text: str, allowed_special: Sequence[str], disallowed_special: Sequence[str]
    ) -> Union[IdBuffer, str]: ...
    # The lists, or (index of the text, the disallowed special token found in it).
    def encode_batch(
        self, texts: Sequence[str], allowed_special: Sequence[str], disallowed_special: Sequence[str], num_threads: int
    ) -> Union[list[list[int]], tuple[int, str]]: ...
    # A list of ids (width None) or ids of that byte width in a buffer.
    # The ids (a list, or with width a bytearray), or the disallowed special token found.
    def encode_parallel(
        self,
        text: str,
        allowed_special: Sequence[str],
        disallowed_special: Sequence[str],
        num_threads: int,
        width: Optional[int] = None,
    ) -> Any: ...
    def encode_batch_flat(
        self,
        texts: Sequence[str],
        allowed_special: Sequence[str],
        disallowed_special: Sequence[str],
        num_threads: int,
        width: int,
    ) -> Any: ...
    # (capacity, bytes, entries, memos, reused, fresh)
    def cache_info(self) -> tuple[int, int, int, int, int, int, int, int]: ...
    def clear_cache(self) -> None: ...
    def set_cache_capacity(self, capacity: int) -> None: ...
    def find_special(self, text: str, tokens: Sequence[str]) -> Optional[str]: ...
    def decode_bytes(self, ids: Any) -> bytes: ...
    def decode_bytes_batch(self, batch: Sequence[Any], num_threads: int) -> list[bytes]: ...
    def encode_single_piece(self, piece: bytes) -> list[int]: ...
    def recover_merges(self) -> list[tuple[int, int, int]]: ...
    def token_bytes(self, id: int) -> bytes: ...
    def count(self, text: str, allowed_special: Sequence[str]) -> int: ...
    def encode_dropout(self, text: str, allowed_special: Sequence[str], p: float, seed: int) -> list[int]: ...
    def encode_with_offsets(
        self, text: str, allowed_special: Sequence[str], chars: bool, buffer: bool
    ) -> tuple[Any, Any]: ...

class Trainer:
    """Chunk counts, fed by texts, files, records or Arrow arrays, and the merge loop over them."""
    def __init__(self, pattern: str) -> None: ...
    def count_by_ids(self, base: CoreBPE, base_tokens: Sequence[bytes]) -> None: ...
    def feed_texts(self, texts: Sequence[str]) -> None: ...
    def feed_files(self, paths: Sequence[_Path], progress: bool) -> None: ...
    def feed_records(self, paths: Sequence[_Path], field: Sequence[str], skip_bad: bool, progress: bool) -> list[int]: ...
    def feed_arrow(self, array: _Parts, name: str, first_row: int, skip_bad: bool) -> tuple[int, Optional[str]]: ...
    def n_chunks(self) -> int: ...
    # superword_words: SuperBPE's second stage (no token of more words, nor with ": ").
    def extend(
        self,
        base: CoreBPE,
        base_tokens: Sequence[bytes],
        target: int,
        progress: bool,
        min_frequency: int = 1,
        superword_words: Optional[int] = None,
    ) -> list[tuple[int, int, int]]: ...
    # ({(left, right): new}, {id: bytes})
    def train(
        self, target: int, progress: bool, specials: Sequence[str] = ..., min_frequency: int = 1
    ) -> tuple[dict[tuple[int, int], int], dict[int, bytes]]: ...
    # Picky BPE's events in training ids: [left, right, new] and [token].
    def train_picky(self, target: int, prune: float, progress: bool, min_frequency: int = 1) -> list[list[int]]: ...
    def special_ids(self) -> list[tuple[str, int]]: ...
    def encoder(self, special_tokens: dict[str, int]) -> CoreBPE: ...
    def pattern(self) -> str: ...
    def set_max_memory(self, bytes: Optional[int], tmpdir: Optional[_Path] = None) -> None: ...
    def size(self) -> tuple[int, int]: ...
    def save_counts(self, fd: int, name: str) -> tuple[int, int]: ...
    @staticmethod
    def load_counts(path: _Path, min_frequency: int = 1) -> Trainer: ...
    def add_counts(self, other: Trainer) -> None: ...
    def fork(self, min_frequency: int = 1) -> Trainer: ...
    @staticmethod
    def merge_count_files(paths: Sequence[_Path], fd: int, name: str) -> tuple[str, int, int]: ...
    def discard_spilled(self) -> None: ...

class Progress:
    """The progress bar on stderr (rate, time left), drawn only when stderr is a terminal."""
    def __init__(self, what: str, total: Optional[int] = None, unit: str = "bytes", show: Optional[bool] = None) -> None: ...
    def update(self, done: int, tokens: Optional[int] = None) -> None: ...
    def finish(self) -> None: ...

# (ids in a buffer of `width` bytes each, offsets as a bytearray)
def encode_files(
    core: CoreBPE,
    paths: Sequence[_Path],
    allowed_special: Sequence[str],
    disallowed_special: Sequence[str],
    separator: Optional[int],
    num_threads: int,
    width: int,
    progress: _Progress = None,
) -> tuple[Any, bytearray]: ...
def write_ids(
    core: CoreBPE,
    segments: Sequence[tuple[_Path, int, Optional[int], int, bool]],
    outputs: Sequence[_Path],
    allowed_special: Sequence[str],
    separator: Optional[int],
    num_threads: int,
    width: int,
    block_bytes: int = ...,
    progress: _Progress = None,
    disallowed_special: Sequence[str] = ...,
) -> list[int]: ...
def encode_to_fd(
    core: CoreBPE,
    paths: Sequence[_Path],
    out: int,
    format: str,
    allowed_special: Sequence[str],
    disallowed_special: Sequence[str],
    separator: Optional[int],
    num_threads: int,
    width: int,
    progress: _Progress = None,
) -> list[int]: ...
def decode_to_fd(
    core: CoreBPE, path: _Path, skip: int, ids: str, width: int, signed: bool, errors: str, out: int
) -> int: ...
def encode_records_to_fd(
    core: CoreBPE,
    paths: Sequence[_Path],
    field: Sequence[str],
    skip_bad: bool,
    out: int,
    format: str,
    allowed_special: Sequence[str],
    disallowed_special: Sequence[str],
    separator: Optional[int],
    num_threads: int,
    width: int,
    progress: _Progress = None,
) -> tuple[list[tuple[int, int]], list[int]]: ...
def encode_arrow_to_fd(
    core: CoreBPE,
    array: _Parts,
    out: int,
    format: str,
    allowed_special: Sequence[str],
    disallowed_special: Sequence[str],
    separator: Optional[int],
    num_threads: int,
    width: int,
    name: str,
    first_row: int,
    skip_bad: bool,
    follows: bool,
) -> tuple[list[int], int, Optional[str]]: ...
def _panic_for_tests(threads: int = 0) -> None: ...
