"""What the commands of the `bpe` command line read and write: their input
files (expanded, checked up front, standard input), their output (standard
output, or a file written atomically), the progress bar over the input, and
the error for arguments that do not go together, and the tokenizer that
``-t`` names. The commands themselves are in ``bpe/cli/``'s other files.
"""

from __future__ import annotations

import argparse
import os
import shutil
import stat
import sys
import tempfile

from bpe.sources import paths as sources
from bpe._util.files import UsageError, atomic_write
from bpe.sources.paths import SourceOptions
from bpe.tokenizer import Tokenizer

#: The FILE that stands for standard input.
STDIN = "-"


class CommandLineError(UsageError):
    """Arguments that contradict each other or do not go together: shown as
    argparse shows its own errors, under the command, with exit status 2."""


def inputs(files: list[str], options: SourceOptions | None = None, *, streams: bool = True) -> list[str]:
    """The input files, directories and globs expanded (``bpe/sources/paths.py``),
    checked up front (so a bad one fails before any output). ``-`` is stdin
    (at most once); with ``streams``, a pipe such as ``<(zcat c.gz)`` is
    read once, like stdin (the core checks it for NUL bytes as it reads),
    else it is refused by ``check_text_file``."""
    if files.count(STDIN) > 1:
        raise CommandLineError("- (standard input) can be read only once; give it once")
    options = options or SourceOptions()
    return [f if f == STDIN or (streams and is_stream(f)) else sources.check(f, options)
            for f in sources.expand(files)]


def load_tokenizer(spec: str) -> Tokenizer:
    """The tokenizer ``-t SPEC`` names: a file (``.bpe``, ``.tiktoken``,
    ``tokenizer.json``) or an encoding name (``Tokenizer.from_name_or_path``)."""
    return Tokenizer.from_name_or_path(spec)


def report_warnings(caught) -> None:
    """Warnings caught during a command, one line each on stderr (not
    Python's ``file:line: UserWarning`` form)."""
    for w in caught:
        print(f"bpe: warning: {w.message}", file=sys.stderr)


def source_options(args) -> SourceOptions:
    return SourceOptions(text_field=args.text_field, skip_bad=args.skip_bad, input_format=args.input_format)


def report_skipped(skipped: dict[str, int]) -> None:
    message = sources.skipped_message(skipped)
    if message:
        print(f"bpe: warning: {message}", file=sys.stderr)


def is_stream(path: str) -> bool:
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISCHR(mode)


def special_policy(args) -> dict:
    """tiktoken's rule, as in Python's ``encode``: special-token text in the
    input is an error unless --allow-special (encode it as the special
    token) or --special-as-text (encode it as ordinary text)."""
    if args.allow_special:
        return {"allowed_special": "all", "disallowed_special": ()}
    if args.special_as_text:
        return {"allowed_special": (), "disallowed_special": ()}
    return {"allowed_special": (), "disallowed_special": "all"}


def special_lists(tok: Tokenizer, args) -> tuple[list[str], list[str]]:
    policy = special_policy(args)
    allowed = tok._allowed(policy["allowed_special"])
    return sorted(allowed), sorted(tok._disallowed(allowed, policy["disallowed_special"]))


def fd_of(stream) -> int | None:
    """The file descriptor behind a standard stream, or None when an
    in-process caller (a test, a notebook) replaced it by a Python object."""
    try:
        return stream.fileno()
    except (AttributeError, OSError, ValueError):
        return None


def write_output(path: str | None, force: bool, write) -> None:
    """Runs ``write(fd)`` into standard output, or into ``path`` atomically."""
    if path is None:
        sys.stdout.flush()
        fd = fd_of(sys.stdout)
        if fd is not None:
            write(fd)
            return
        with tempfile.TemporaryFile() as f:  # stdout is a Python object: write, then copy
            write(f.fileno())
            f.seek(0)
            data = f.read()
        if hasattr(sys.stdout, "buffer"):
            sys.stdout.buffer.write(data)
        else:
            sys.stdout.write(data.decode("utf-8", "replace"))
        return

    def fill(f):
        f.flush()
        write(f.fileno())

    atomic_write(path, fill, force=force)


class Bar:
    """Progress over ``total`` bytes of input (when stderr is a terminal and
    not --quiet), as the core reports it between blocks."""

    def __init__(self, what: str, total: int | None, quiet: bool):
        from bpe.progress import Progress

        self.bar = Progress(what, total=total, unit="bytes", show=False if quiet else None)

    def __enter__(self):
        self.bar.__enter__()
        return self.bar.update

    def __exit__(self, *exc):
        return self.bar.__exit__(*exc)


def total_bytes(paths: list[str]) -> int | None:
    if any(p == STDIN or is_stream(p) for p in paths):
        return None
    return sum(os.path.getsize(p) for p in paths)


class StdinAsFile:
    """Standard input copied to a temporary file that stands for ``-``, where
    a file is needed: for ``train`` (which sizes and checks its files before
    reading them) and Parquet, and for any command when an in-process caller (a test, a
    notebook) replaced ``sys.stdin`` by a Python object (the core reads
    descriptor 0). Messages name it ``<stdin>``, never the temporary file."""

    def __init__(self, args: argparse.Namespace, needs_file: bool):
        # needs_file: the command sizes its files before reading them (train, count).
        self.args, self.needs_file, self.tmp = args, needs_file, None

    def __enter__(self):
        files = list(getattr(self.args, "files", None) or []) + [getattr(self.args, "file", None)]
        # Parquet is read by seeking to its footer.
        needs_file = self.needs_file or getattr(self.args, "input_format", None) == "parquet"
        if STDIN not in files or (fd_of(sys.stdin) == 0 and not needs_file):
            return self
        fd, self.tmp = tempfile.mkstemp(prefix="bpe-stdin-", suffix=".txt")
        with os.fdopen(fd, "wb") as f:
            if hasattr(sys.stdin, "buffer"):
                shutil.copyfileobj(sys.stdin.buffer, f, 1 << 20)
            else:
                data = sys.stdin.read()
                f.write(data.encode("utf-8", "surrogateescape") if isinstance(data, str) else data)
        if getattr(self.args, "files", None):
            self.args.files = [self.tmp if p == STDIN else p for p in self.args.files]
        if getattr(self.args, "file", None) == STDIN:
            self.args.file = self.tmp
        return self

    def __exit__(self, kind, error, tb):
        if self.tmp:
            os.unlink(self.tmp)
            if isinstance(error, (ValueError, OSError)) and self.tmp in str(error):
                raise UsageError(str(error).replace(self.tmp, "<stdin>")) from None
        return False
