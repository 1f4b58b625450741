"""The `bpe` command line: ``train`` and ``count`` (``train.py``), ``encode``
and ``decode`` (``encode.py``), ``info`` (``info.py``), ``gpt train`` and
``gpt sample`` (``gpt.py``), and ``compare``, ``show``, ``audit``, ``serve``
(``see.py``); ``--engine ray`` and sharded output (``engines.py``), several
sizes, a base vocabulary and dropout (``pipeline.py``), what every command
reads and writes (``io.py``) and the arguments they share (``arguments.py``).

Conventions, the same for every command:
- ``-t/--tokenizer`` takes a ``.bpe`` file, a ``.tiktoken`` file, a
  ``tokenizer.json`` or a name (``gpt2``, ``r50k``, ``cl100k``, ``o200k``):
  ``Tokenizer.from_name_or_path``.
- ``-`` is standard input wherever a FILE is taken; ``-o/--output`` names
  what a command writes (standard output when it is absent, for commands
  that print). Files are written atomically; see ``bpe/_util/files.py`` for what
  is refused (devices, read-only files without ``--force``).
- Encoding and decoding stream: memory stays bounded whatever the input's
  size (``bpe/data/streams.py``).
- Sizes in bytes are written as in GNU coreutils: 64M and 64MiB are 2**20
  bytes each, 10MB is 10**6 (``bpe/_util/sizes.py``).
- An error is one line on stderr: ``bpe: error: ...`` and exit status 1 for
  a problem with the input or the files, ``bpe COMMAND: error: ...`` and
  exit status 2 for a command line that cannot be understood. Never a
  traceback.
"""

from __future__ import annotations

import argparse
import os
import sys

from bpe._util.files import UsageError
from bpe.cli import arguments, encode, gpt, info, see, train
from bpe.cli.io import CommandLineError, StdinAsFile

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    """The parser of the `bpe` command and its subcommands (the documentation's
    command-line reference is generated from it)."""
    p = arguments.Parser(prog="bpe", description="Byte-level BPE tokenizer: train, encode, decode.")
    p.add_argument("--version", action="version", version=arguments.version(), help="show the version and exit")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=arguments.Parser)
    for command in (train, encode, info, gpt, see):
        command.add_parser(sub)
    return p


def _command_parser(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The parser of the command that was given (`bpe encode`, `bpe gpt
    train`), so that its errors show under its name, not the top level's."""
    command = parser._subparsers._group_actions[0].choices[args.command]  # noqa: SLF001
    sub = getattr(args, "gpt_command", None)
    return command._subparsers._group_actions[0].choices[sub] if sub else command  # noqa: SLF001


def main(argv: list[str] | None = None) -> int:
    """Runs the `bpe` command on ``argv`` (default: the process's arguments)
    and returns its exit status: 0, 1 for an error (one line on stderr), 130
    for Ctrl-C. A command line that cannot be understood raises argparse's
    ``SystemExit(2)``."""
    parser = build_parser()
    ns, extra = parser.parse_known_args(argv)
    if extra:
        _command_parser(parser, ns).error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        with StdinAsFile(ns, needs_file=ns.func in (train.cmd_train, train.cmd_count)):
            ns.func(ns)
    except CommandLineError as e:
        _command_parser(parser, ns).error(str(e))
    except KeyboardInterrupt:
        print("bpe: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # `bpe encode ... | head`: the reader left; not an error of ours.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except MemoryError:
        print("bpe: error: out of memory", file=sys.stderr)
        return 1
    except (UsageError, OSError, ValueError, TypeError, OverflowError, RuntimeError, ImportError) as e:
        # RuntimeError: an internal error of the Rust core (its message says so).
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        if isinstance(e, OSError) and e.filename and e.strerror:
            # "out.bpe: No space left on device", not "[Errno 28] No space ...: 'out.bpe'".
            msg = f"{e.filename}: {e.strerror}"
        elif isinstance(e, OSError) and e.filename and e.filename not in msg:
            msg = f"{e.filename}: {msg}"
        print(f"bpe: error: {msg}", file=sys.stderr)
        return 1
    return 0
