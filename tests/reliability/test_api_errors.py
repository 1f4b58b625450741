"""Errors of the Python API in the project's words (issue 34, items 7 and 8):
a wrong argument is named, with what to give instead, never in the words of
the binding ("cannot be converted to 'PyBool'") or of a builtin ("'int'
object is not iterable"); every failure to read a tokenizer file is a
``TokenizerFileError`` naming the file; and ``import bpe`` from inside a
clone finds the installed compiled core.

One test per item of the issue's list; each checks the exception's type and
the fragment of its message that tells the user what to do.
"""

from __future__ import annotations

import codecs
import collections
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import bpe
from bpe import Tokenizer, TokenizerFileError
from bpe.formats.bpefile import TokenizerFileIsADirectoryError, TokenizerFileNotFoundError

#: The binding's (pyo3's) and Python's own wording, which no message may use.
LEAKS = ("cannot be converted", "is not iterable", "object cannot be interpreted", "invalid literal",
         "not supported between", "integral type conversion", "PyString", "PyBool")


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    text = "hello world, the quick brown fox! " * 20
    return Tokenizer.train(text, 280, special_tokens=["<|endoftext|>", "<|fim|>"], progress=False)


def refused(call, error: type[Exception], fragment: str) -> str:
    """Calls ``call``, checks it raises ``error`` with ``fragment`` in a
    one-line message that leaks no binding wording; returns the message."""
    with pytest.raises(error) as info:
        call()
    msg = str(info.value)
    assert fragment in msg, msg
    assert "\n" not in msg, msg
    assert not any(leak in msg for leak in LEAKS), msg
    return msg


# -- item 1: argument types are checked up front, and named --------------------------------


def test_wrong_argument_types_are_named(tok, tmp_path):
    doc = tmp_path / "doc.txt"
    doc.write_text("hello world\n")
    cases = [
        (lambda: Tokenizer.train("abc abc", 300, progress="yes"), "progress must be True, False or None, not 'yes'"),
        (lambda: Tokenizer.train("abc abc", 300, progress=1), "progress must be True, False or None, not 1"),
        (lambda: Tokenizer.train("abc abc", "300"), "vocab_size must be an int, not str"),
        (lambda: Tokenizer.train("abc abc", 300.0), "vocab_size must be an int, not float"),
        (lambda: Tokenizer.train("abc abc", True), "vocab_size must be an int, not bool"),
        (lambda: Tokenizer.train("abc abc", 300, special_tokens=None), "special_tokens must be a collection of str"),
        (lambda: tok.encode(b"abc"), "text must be a str, not bytes; decode it first"),
        (lambda: tok.encode(3, allowed_special="all"), "text must be a str, not int"),
        (lambda: tok.encode_ordinary(None), "text must be a str, not NoneType"),
        (lambda: tok.encode_to_numpy(3), "text must be a str, not int"),
        (lambda: tok.encode("abc", num_threads="2"), "num_threads must be an int (or None for all cores), not '2'"),
        (lambda: tok.encode("abc", num_threads=2.5), "num_threads must be an int"),
        (lambda: tok.encode_batch(["abc"], num_threads=True), "num_threads must be an int"),
        (lambda: tok.encode_batch(["a"], num_threads="x"), "num_threads must be an int"),
        (lambda: tok.encode_files([doc], num_threads=1.5), "num_threads must be an int"),
        # A str other than "all" would be taken as a set of its characters.
        (lambda: tok.encode("abc", allowed_special="<|fim|>"),
         "allowed_special must be 'all' or a collection of special tokens, not the str '<|fim|>'; "
         "for one token write {'<|fim|>'}"),
        (lambda: tok.encode("a<b", disallowed_special="<|fim|>"), "disallowed_special must be 'all' or"),
        (lambda: tok.encode("abc", allowed_special=3), "allowed_special must be 'all' or a collection"),
        (lambda: tok.encode_batch(["abc"], allowed_special={3}), "allowed_special must be 'all' or a collection"),
        (lambda: tok.encode_batch(3), "encode_batch takes a list of str, not int"),
        (lambda: tok.encode_batch(b"ab"), "encode_batch takes a list of str, not a bytes; for one text use encode()"),
        (lambda: tok.encode_batch(["a", 3]), "texts[1] is 3, not a str"),
        (lambda: tok.encode_batch_to_numpy(["a", b"b"]), "texts[1] is b'b', not a str (decode it first)"),
        (lambda: tok.encode_files(3), "paths must be a path or a list of paths, not int"),
        (lambda: tok.encode_files(os.fsencode(doc)), "paths[0] is b'"),
        (lambda: tok.encode_files([doc], separator=True), "separator must be a token id (int), a special token"),
        (lambda: tok.encode_files([doc], progress=3), "progress must be a function of the bytes done"),
        (lambda: tok.encode_batch_to_numpy(["a"], dtype="bogus"), "dtype must be uint16 or uint32, got 'bogus'"),
        (lambda: tok.set_cache_size("3 pages"), "the cache size '3 pages' is not a size"),
        (lambda: tok.set_cache_size(1.5), "the cache size must be a number of bytes or a str such as '64M'"),
        (lambda: Tokenizer(special_tokens=["<|x|>"]), "special_tokens must be a dict {text: id}"),
        (lambda: Tokenizer(ranks=3), "ranks must be a dict {token bytes: rank}"),
        (lambda: Tokenizer(3), "merges must be a dict"),
    ]
    for call, fragment in cases:
        error = ValueError if fragment.startswith(("dtype", "the cache size '")) else TypeError
        refused(call, error, fragment)
    # What was valid stays valid: the int 1, "" and empty sets of specials.
    assert tok.encode("a<|fim|>", num_threads=1, allowed_special="", disallowed_special=()) == \
        tok.encode_ordinary("a<|fim|>")
    assert tok.encode_batch(["a"], num_threads=1) == [tok.encode("a")]


def test_numpy_values_stay_accepted(tok):
    np = pytest.importorskip("numpy")
    # The core took numpy's bools and ints before these checks; so do they.
    assert Tokenizer.train("abc abc", 260, progress=np.bool_(False)).vocab
    assert tok.encode("hello world", num_threads=np.int64(2)) == tok.encode("hello world")
    assert tok.decode(np.array(tok.encode("hello"))) == "hello"
    refused(lambda: tok.decode([np.bool_(True)]), TypeError, "ids[0] is")


# -- item 2: every failure to read a tokenizer file is a TokenizerFileError ----------------


def test_unreadable_tokenizer_files_are_tokenizer_file_errors(tok, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    # Missing: also a FileNotFoundError, so `except FileNotFoundError` still works.
    msg = refused(lambda: Tokenizer.load("nope.bpe"), TokenizerFileNotFoundError, "nope.bpe: no such file")
    assert f"relative to the working directory {tmp_path}" in msg and "check the path" in msg
    for error in (TokenizerFileError, ValueError, FileNotFoundError, OSError):
        with pytest.raises(error):
            Tokenizer.load(tmp_path / "nope.bpe")
    # A directory: also an IsADirectoryError.
    (tmp_path / "model").mkdir()
    msg = refused(lambda: Tokenizer.load(tmp_path / "model"), TokenizerFileIsADirectoryError,
                  f"{tmp_path / 'model'} is a directory, not a tokenizer file")
    assert isinstance(pytest.raises(IsADirectoryError, Tokenizer.load, "model").value, TokenizerFileError)
    # The readers of other formats: the same errors, naming their kind of file.
    refused(lambda: Tokenizer.from_huggingface("nope.json"), TokenizerFileNotFoundError, "nope.json: no such file")
    refused(lambda: Tokenizer.from_tiktoken(Path("nope.tiktoken"), pattern="gpt4"), TokenizerFileNotFoundError,
            "nope.tiktoken: no such file")
    refused(lambda: Tokenizer.from_tiktoken(tmp_path / "model", pattern="gpt4"), TokenizerFileIsADirectoryError,
            "is a directory, not a .tiktoken rank file")
    # A HuggingFace model folder, given instead of its tokenizer.json: the fix is named.
    tok.save_huggingface(tmp_path / "model" / "tokenizer.json")
    refused(lambda: Tokenizer.from_huggingface("model"), TokenizerFileIsADirectoryError,
            f"did you mean {os.path.join('model', 'tokenizer.json')}?")
    # Content that is not the format: named by file, as TokenizerFileError.
    (tmp_path / "bad.json").write_bytes(b"\xff\xfe{}")
    refused(lambda: Tokenizer.from_huggingface("bad.json"), TokenizerFileError,
            "bad.json is not a tokenizer.json: it is not UTF-8 text (byte offset 0)")
    (tmp_path / "bad.tiktoken").write_text("IQ== 0\nnot-a-rank-line\n")
    refused(lambda: Tokenizer.from_tiktoken(Path("bad.tiktoken"), pattern="gpt4"), TokenizerFileError,
            "bad.tiktoken: line 2 is not 'base64-token rank'")
    # Not a path at all: a TypeError naming what the argument must be.
    refused(lambda: Tokenizer.load(3), TypeError,
            "the path of the tokenizer file must be a str or os.PathLike, not int")


def test_other_read_failures_are_tokenizer_file_errors(tok, tmp_path, monkeypatch):
    # A real unreadable file cannot be made where the tests run as root (who
    # reads anything), so open() itself fails here, as it would.
    path = tmp_path / "t.bpe"
    tok.save(path)
    cases = ((PermissionError(13, "Permission denied"), f"{path}: permission denied; make the file readable "
              f"(chmod u+r {path})", PermissionError),
             (OSError(5, "Input/output error"), f"{path}: cannot read the tokenizer file: Input/output error", OSError))
    for error, message, also in cases:
        def failing_open(*args, _error=error, **kwargs):
            raise _error
        monkeypatch.setattr(bpe.formats.bpefile, "open", failing_open, raising=False)
        assert refused(lambda: Tokenizer.load(path), TokenizerFileError, message) == message
        with pytest.raises(also) as info:  # still the OSError open() raised, with its errno
            Tokenizer.load(path)
        assert info.value.errno == error.errno
    monkeypatch.undo()
    assert Tokenizer.load(path) == tok


# -- item 3: a bool or a non-int is not a token id ------------------------------------------


def test_decode_refuses_bools_and_non_ints(tok):
    top = tok.n_vocab - 1
    hello = tok.encode("hello")
    cases = ((lambda: [True], "ids[0] is True"), (lambda: hello + [False], f"ids[{len(hello)}] is False"),
             (lambda: (5, True), "ids[1] is True"), (lambda: iter([104, True]), "ids[1] is True"),
             (lambda: [104, 1.0], "ids[1] is 1.0"), (lambda: [104, "7"], "ids[1] is '7'"),
             (lambda: [None], "ids[0] is None"))
    for make_ids, where in cases:
        for call in (tok.decode, tok.decode_bytes):
            refused(lambda: call(make_ids()), TypeError, f"token ids must be ints in 0..{top}: {where}, not an int")
    # Out of range stays a ValueError, and the argument as a whole is named.
    refused(lambda: tok.decode([104, -1]), ValueError, f"token ids must be ints in 0..{top}: ids[1] is -1")
    refused(lambda: tok.decode([104, top + 1]), ValueError, f"unknown token id {top + 1}")
    refused(lambda: tok.decode(5), TypeError, "ids must be a list of token ids (ints), not int")
    refused(lambda: tok.decode("hello"), TypeError, "not a str; to encode text, use encode()")
    refused(lambda: tok.token_bytes(True), TypeError, f"token id must be an int in 0..{top}, not True")
    refused(lambda: tok.token_bytes("7"), TypeError, "not '7'")
    refused(lambda: tok.token_bytes(-1), ValueError, f"token id must be an int in 0..{top}, not -1")
    # Plain ints decode as before, ids 0 and 1 (bytes 0x00 and 0x01) among them.
    assert tok.decode_bytes([0, 1] + hello) == b"\x00\x01hello"


def test_decode_refuses_bools_where_ids_0_and_1_are_common_text():
    # tiktoken's vocabularies have "!" and '"' as ids 0 and 1: a bool decodes
    # to text that is everywhere, and is still refused.
    order = [ord("!"), ord('"'), *(b for b in range(256) if b not in b'!"')]
    ranked = Tokenizer(ranks={bytes([b]): i for i, b in enumerate(order)}, pattern="gpt2")
    ids = ranked.encode('say "hi"!')
    assert 0 in ids and 1 in ids and ranked.decode(ids) == 'say "hi"!'
    assert ranked.decode(list(ids)) == 'say "hi"!'  # a plain list too
    refused(lambda: ranked.decode(list(ids) + [True]), TypeError, f"ids[{len(ids)}] is True, not an int")


# -- item 4: decode's errors= is checked before any byte needs it ---------------------------


def test_decode_checks_errors_up_front(tok):
    clean = tok.encode("hello")  # no bad byte: bytes.decode would never look `errors` up
    msg = refused(lambda: tok.decode(clean, errors="bogus"), ValueError, "errors='bogus' is not an error handler")
    assert "strict" in msg and "ignore" in msg and "codecs.register_error" in msg
    refused(lambda: tok.decode(clean, errors=3), TypeError, "errors must be a str (one of replace, strict")
    refused(lambda: tok.decode(clean, errors="xmlcharrefreplace"), ValueError, "is for encoding text, not decoding")
    for errors in ("strict", "ignore", "replace", "surrogateescape", "backslashreplace"):
        assert tok.decode(clean, errors=errors) == "hello"
    codecs.register_error("bpe-test-question-mark", lambda e: ("?", e.end))
    assert tok.decode(tok.encode("hé")[:-1] + [104], errors="bpe-test-question-mark").endswith("?h")


# -- item 5: training sources that are not texts or paths -----------------------------------


def test_train_refuses_sources_that_are_not_texts_or_paths():
    fix = "give a str, a path, or an iterable of texts/paths"
    refused(lambda: Tokenizer.train({"hello world": 1}, 300), TypeError, f"source is a dict: {fix}")
    refused(lambda: Tokenizer.train(collections.Counter("ab"), 300), TypeError, f"source is a Counter: {fix}")
    refused(lambda: Tokenizer.train(3, 300), TypeError, f"source is an int: {fix}")
    refused(lambda: Tokenizer.train(None, 300), TypeError, f"source is None: {fix}")
    refused(lambda: Tokenizer.train(b"hello", 300), TypeError, "not bytes; decode it first")
    refused(lambda: Tokenizer.train(["hello", b"x"], 300), TypeError, "source item 1 is a bytes")
    # The keys of a dict, given as such, are texts.
    assert Tokenizer.train({"hello world": 1}.keys(), 260, progress=False).vocab


# -- item 6: `import bpe` inside a clone, after a plain `pip install .` -----------------------


def _clone_and_site(tmp_path: Path, version: str | None) -> tuple[Path, Path]:
    """A clone (bpe/*.py, no compiled core) and a site-packages holding an
    installed bpe with the core (and, if ``version``, its dist-info)."""
    src = Path(bpe.__file__).parent
    clone, site = tmp_path / "clone", tmp_path / "site"
    for folder in (clone / "bpe", site / "bpe"):
        # The package's Python files, subpackages included; no compiled core.
        shutil.copytree(src, folder, ignore=shutil.ignore_patterns("*.so", "*.pyd", "__pycache__"))
    core = Path(bpe._core.__file__)
    (site / "bpe" / core.name).symlink_to(core)
    if version is not None:
        (site / f"bpe-{version}.dist-info").mkdir()
        (site / f"bpe-{version}.dist-info" / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: bpe\nVersion: {version}\n")
    return clone, site


def _python_in(clone: Path, code: str, pythonpath: str, *flags: str) -> subprocess.CompletedProcess:
    # -c: the current directory (the clone) comes first on sys.path, as in a
    # user's `python` started there.
    env = {**os.environ, "PYTHONPATH": pythonpath}
    return subprocess.run([sys.executable, *flags, "-c", textwrap.dedent(code)], cwd=clone, env=env,
                          capture_output=True, text=True, timeout=120)


IMPORT_ERROR = """
    try:
        import bpe
    except ImportError as e:
        print(e)
    else:
        print("imported", bpe._core.__file__)
"""


def test_import_inside_a_clone_finds_the_installed_core(tmp_path):
    clone, site = _clone_and_site(tmp_path, bpe.__version__)
    run = _python_in(clone, """
        import bpe
        tok = bpe.Tokenizer.train("hello world " * 20, 260, progress=False)
        print(bpe.__file__)
        print(bpe._core.__file__)
        print(tok.decode(tok.encode("hello world")))
    """, str(site))
    assert run.returncode == 0, run.stderr
    source, core, text = run.stdout.splitlines()
    assert Path(source) == clone / "bpe" / "__init__.py"  # the clone's Python files...
    assert Path(core).parent == site / "bpe"  # ...with the installed core
    assert text == "hello world"

    # Another version installed: its core may not fit these files; one line says what to do.
    clone, site = _clone_and_site(tmp_path / "other", "0.0.1.dev0")
    run = _python_in(clone, IMPORT_ERROR, str(site))
    assert run.returncode == 0 and len(run.stdout.splitlines()) == 1, run
    assert f"is version 0.0.1.dev0, not {bpe.__version__}" in run.stdout
    assert "run `pip install -e .` here, or run Python from another directory" in run.stdout


def test_import_inside_a_clone_without_an_installed_core_says_what_to_do(tmp_path):
    clone, _ = _clone_and_site(tmp_path, None)
    # -S: no site-packages (where this test's own bpe may be installed).
    run = _python_in(clone, IMPORT_ERROR, "", "-S")
    assert run.returncode == 0 and len(run.stdout.splitlines()) == 1, run
    assert f"bpe's compiled Rust core is missing from {clone / 'bpe'}" in run.stdout
    assert "run `pip install -e .` here, or run Python from another directory" in run.stdout


def test_pretokenize_and_save_wrong_types_name_the_argument(tmp_path):
    import bpe

    with pytest.raises(TypeError, match="text must be a str, not bytes; decode it first"):
        bpe.pretokenize(b"abc")
    tok = bpe.Tokenizer.train("hello world " * 50, 260, progress=False)
    with pytest.raises(TypeError, match="path must be a str or a path, not int"):
        tok.save(3)
    target = tmp_path / "ro.bpe"
    tok.save(target)
    target.chmod(0o444)
    with pytest.raises(PermissionError, match="read-only"):
        tok.save(target)
    tok.save(target, force=True)
    assert bpe.Tokenizer.load(target) == tok
