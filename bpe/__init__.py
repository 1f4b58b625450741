"""bpe: byte-level BPE tokenization with a Rust core.

    >>> from bpe import Tokenizer
    >>> tok = Tokenizer.train(Path("corpus.txt"), vocab_size=4096)
    >>> tok.decode(tok.encode("hello world"))
    'hello world'
"""

__version__ = "0.1.0"  # before the core is found: _installed_core compares versions


def _installed_core():
    """The compiled core of the bpe installed elsewhere on ``sys.path``, for
    when this folder has none.

    Why: after a plain ``pip install .``, Python started inside the clone
    imports the source folder ``bpe/`` (the current directory comes first on
    ``sys.path``), which holds no compiled core; the installed copy (in
    site-packages) has one. Its Python files are these same files when its
    version is ours, so its core is loaded, under its own name ``bpe._core``.
    Another version's core may not fit these files: then, as when no core is
    found, a one-line ImportError says what to do.
    """
    import importlib.machinery
    import importlib.metadata
    import importlib.util
    import os
    import sys

    here = os.path.dirname(os.path.realpath(__file__))
    fix = "run `pip install -e .` here, or run Python from another directory"
    for entry in sys.path:
        if not isinstance(entry, str):
            continue
        folder = os.path.join(entry or os.getcwd(), "bpe")
        if not os.path.isdir(folder) or os.path.realpath(folder) == here:
            continue
        cores = [os.path.join(folder, "_core" + s) for s in importlib.machinery.EXTENSION_SUFFIXES]
        path = next((c for c in cores if os.path.isfile(c)), None)
        if path is None:
            continue
        try:
            installed = importlib.metadata.version("bpe")
        except importlib.metadata.PackageNotFoundError:
            installed = "unknown"
        if installed != __version__:
            raise ImportError(
                f"bpe's compiled Rust core is missing from {here} (the source folder), and the installed "
                f"bpe (its core in {folder}) is version {installed}, not {__version__}: {fix}"
            )
        spec = importlib.util.spec_from_file_location("bpe._core", path)
        core = importlib.util.module_from_spec(spec)
        sys.modules["bpe._core"] = core  # before it runs, as the import system does
        spec.loader.exec_module(core)
        return core
    raise ImportError(
        f"bpe's compiled Rust core is missing from {here}. This usually means Python imported "
        f"the source tree (you are inside the repository) instead of the installed package: {fix}."
    )


try:
    import bpe._core as _core
except ModuleNotFoundError as e:  # pragma: no cover - depends on how it was installed
    if e.name != "bpe._core":
        raise
    _core = _installed_core()
from bpe._core import GPT2_PATTERN, GPT4_PATTERN, GPT4O_PATTERN
from bpe.counts import Counts, count
from bpe.decoder import StreamDecoder
from bpe.formats.bpefile import TokenizerFileError
from bpe._util.patterns import PATTERNS, pretokenize, resolve_pattern
from bpe._util.specials import ENDOFTEXT
from bpe.tokenizer import Tokenizer
from bpe.encodings import (Encoding, encoding_for_model, encoding_name_for_model, get_encoding, list_encoding_names,
                           register_encoding)

__all__ = [
    "Counts",
    "ENDOFTEXT",
    "Encoding",
    "GPT2_PATTERN",
    "GPT4_PATTERN",
    "GPT4O_PATTERN",
    "PATTERNS",
    "StreamDecoder",
    "Tokenizer",
    "TokenizerFileError",
    "count",
    "encoding_for_model",
    "encoding_name_for_model",
    "get_encoding",
    "list_encoding_names",
    "pretokenize",
    "register_encoding",
    "resolve_pattern",
]
