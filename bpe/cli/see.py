"""`bpe compare`, `bpe show`, `bpe audit` and `bpe serve`: commands to see
tokenizers at work and to compare them (``bpe/inspect/compare.py``,
``bpe/inspect/show.py``, ``bpe/inspect/audit.py``, ``bpe/inspect/serve.py`` do the work).

numpy is needed by compare and audit, matplotlib by ``--plot``; both are
imported inside the commands, so `bpe --help` works without them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from bpe._util.files import UsageError
from bpe.cli import arguments
from bpe.cli.arguments import TOKENIZER_HELP, byte_size
from bpe.cli.io import CommandLineError, load_tokenizer

def add_parser(sub) -> None:
    """Adds compare, show, audit and serve to the `bpe` command's subparsers."""
    c = sub.add_parser(
        "compare",
        help="compare tokenizers on corpora: bytes/token, fertility, Rényi efficiency, speed ...",
        description="A row per tokenizer and corpus (or per section, for files with `===== ... [code] ... =====` "
        "header lines, like corpora/multilingual_udhr.txt): bytes/token, characters/token, tokens/word, share of "
        "the vocabulary used, Rényi efficiency (alpha 2.5), share of words split into 3+ tokens, encode speed. "
        "docs/inspect.md#bpe-compare defines each.",
    )
    c.add_argument("tokenizers", nargs="+", metavar="TOK", help=TOKENIZER_HELP)
    c.add_argument("--corpus", nargs="+", required=True, metavar="FILE",
                   help="UTF-8 text files (.gz/.xz/.bz2/.zst decompressed; - for standard input)")
    out = c.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print the rows as JSON")
    out.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    c.add_argument("--plot", metavar="FILE", help="also draw bar charts into FILE (.png, .svg, .pdf; needs matplotlib)")
    c.add_argument("--no-sections", action="store_true", help="one row per file even where it has section headers")
    c.add_argument("--limit", type=byte_size, metavar="SIZE",
                   help="read only the first SIZE bytes of each corpus (cut at a line end): 10M (2**20 bytes), 10MB (10**6)")
    c.add_argument("--threads", type=arguments.non_negative, default=1, metavar="N",
                   help="threads to encode with (default 1, so that MB/s compares one core; 0: all cores)")
    c.add_argument("--force", action="store_true", help="replace a read-only --plot file")
    c.set_defaults(func=cmd_compare)

    s = sub.add_parser(
        "show",
        help="show text with its token boundaries coloured",
        description="Prints the text token by token: alternating background colours on a terminal (`|` between "
        "tokens otherwise), whitespace made visible (· space, ↵ newline, → tab), bytes that are not whole "
        "characters as <0xE2>. A summary goes to stderr.",
    )
    s.add_argument("text", nargs="?", help="the text (or -f FILE)")
    s.add_argument("-t", "--tokenizer", required=True, metavar="TOK", help=TOKENIZER_HELP)
    s.add_argument("-f", "--file", metavar="FILE", help="show this UTF-8 file (- for standard input)")
    s.add_argument("--ids", action="store_true", help="print each token's id after it")
    s.add_argument("--color", "--colour", choices=("auto", "always", "never"), default="auto",
                   help="colours: auto (when stdout is a terminal and NO_COLOR is unset), always, never")
    s.add_argument("-q", "--quiet", action="store_true", help="no summary on stderr")
    s.set_defaults(func=cmd_show)

    a = sub.add_parser(
        "audit",
        help="list tokens that behave badly: unreachable, rare (glitch candidates), consumed, not UTF-8, near duplicates",
        description="A ranked report of suspicious tokens; docs/inspect.md#bpe-audit defines each "
        "category. rare and consumed need --corpus.",
    )
    a.add_argument("-t", "--tokenizer", required=True, metavar="TOK", help=TOKENIZER_HELP)
    a.add_argument("--corpus", nargs="+", default=[], metavar="FILE", help="UTF-8 text files to count tokens on")
    a.add_argument("--json", action="store_true", help="print the report as JSON")
    a.add_argument("--top", type=int, default=20, metavar="N", help="items per category (default 20; 0: all)")
    a.add_argument("--min-count", type=int, default=0, metavar="N",
                   help="rare: produced at most N times on the corpus (default 0)")
    a.add_argument("--min-inside", type=int, default=100, metavar="N",
                   help="consumed: inside longer tokens at least N times (default 100)")
    a.add_argument("--max-share", type=float, default=0.01, metavar="F",
                   help="consumed: alone at most F of those times (default 0.01)")
    a.add_argument("--threads", type=arguments.non_negative, default=0, metavar="N", help="threads to encode with (0: all cores)")
    a.set_defaults(func=cmd_audit)

    v = sub.add_parser(
        "serve",
        help="a local web page: type text, see it tokenized by each tokenizer side by side",
        description="Serves a page on http://HOST:PORT/ (127.0.0.1: this machine only) where text typed or pasted "
        "is tokenized live by each TOK, and an uploaded file gets the `bpe compare` table. Ctrl-C stops it.",
    )
    v.add_argument("tokenizers", nargs="*", metavar="TOK",
                   help=f"{TOKENIZER_HELP} (default: gpt2 cl100k o200k)")
    v.add_argument("--port", type=int, default=8000, help="port (default 8000; 0: any free port)")
    v.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1; 0.0.0.0 shows the page to your network)")
    v.add_argument("--max-body", type=byte_size, default=None, metavar="SIZE",
                   help="largest request body (typed text or an uploaded file; default 16M): larger gets 413")
    v.set_defaults(func=cmd_serve)


def display_name(spec: str) -> str:
    """A tokenizer's name in tables: the file name without its folder."""
    return os.path.basename(spec) or spec


def _unique_names(specs: list[str]) -> None:
    seen = set()
    for s in specs:
        if display_name(s) in seen:
            raise CommandLineError(f"two tokenizers are named {display_name(s)}; give each once, or rename a file")
        seen.add(display_name(s))


def cmd_compare(args: argparse.Namespace) -> None:
    from bpe.inspect import compare as compare

    _unique_names(args.tokenizers)
    if args.plot:
        from bpe._util.files import check_output_file

        check_output_file(args.plot, force=args.force)
    tokenizers = {display_name(spec): load_tokenizer(spec) for spec in args.tokenizers}
    rows = compare.compare(tokenizers, args.corpus, split_sections=not args.no_sections,
                           threads=args.threads or None, limit=args.limit)
    if args.plot:
        compare.plot(rows, args.plot, force=args.force)
    if args.json:
        print(json.dumps(rows, indent=1, allow_nan=False, default=str) if _finite(rows) else
              json.dumps(_nan_to_none(rows), indent=1))
    elif args.markdown:
        print(compare.format_markdown(rows))
    else:
        print(compare.format_table(rows))


def _finite(rows) -> bool:
    return all(v == v for r in rows for v in r.values() if isinstance(v, float))


def _nan_to_none(rows):
    # JSON has no NaN: a figure that is undefined (no words, no tokens) is null.
    return [{k: (None if isinstance(v, float) and v != v else v) for k, v in r.items()} for r in rows]


def _read_stdin_text() -> str:
    data = sys.stdin.buffer.read() if hasattr(sys.stdin, "buffer") else sys.stdin.read()
    if isinstance(data, str):
        return data
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UsageError(f"<stdin> is not valid UTF-8 at byte offset {e.start}; convert it to UTF-8") from None


def cmd_show(args: argparse.Namespace) -> None:
    from bpe.inspect import show as show

    if (args.text is None) == (args.file is None):
        raise CommandLineError("give the TEXT or -f FILE (one of them)")
    if args.file == "-":
        text = _read_stdin_text()
    elif args.file is not None:
        from bpe._util.files import read_text

        text = read_text(args.file)
    else:
        text = args.text
    tok = load_tokenizer(args.tokenizer)
    ids = tok.encode(text, disallowed_special=())
    color = show.use_color(args.color)
    out = show.render(tok, ids, color=color, show_ids=args.ids)
    sys.stdout.write(out + ("" if out.endswith("\n") else "\n"))
    sys.stdout.flush()
    if not args.quiet:
        print(show.summary(tok, text, ids), file=sys.stderr)


def cmd_audit(args: argparse.Namespace) -> None:
    from bpe.inspect import audit as audit

    if args.top < 0:
        raise CommandLineError(f"--top must be 0 (all) or more, got {args.top}")
    if not 0 <= args.max_share <= 1:
        raise CommandLineError(f"--max-share is a share between 0 and 1, got {args.max_share}")
    from bpe.cli.io import inputs

    corpus = inputs(args.corpus, streams=False) if args.corpus else []
    tok = load_tokenizer(args.tokenizer)
    report = audit.audit(tok, corpus, min_count=args.min_count, min_inside=args.min_inside,
                         max_share=args.max_share, threads=args.threads or None)
    if args.json:
        if args.top:
            for cat in report["categories"].values():
                cat["items"] = cat["items"][: args.top]
        print(json.dumps({"tokenizer": args.tokenizer, **report}, indent=1, ensure_ascii=False))
    else:
        print(audit.format_report(report, top=args.top))


def cmd_serve(args: argparse.Namespace) -> None:
    from bpe.inspect import serve as serve

    specs = args.tokenizers or ["gpt2", "cl100k", "o200k"]
    _unique_names(specs)
    if not 0 <= args.port <= 65535:
        raise CommandLineError(f"--port must be 0..65535, got {args.port}")
    tokenizers = {display_name(spec): load_tokenizer(spec) for spec in specs}
    kwargs = {} if args.max_body is None else {"max_body": args.max_body}
    server = serve.make_server(tokenizers, host=args.host, port=args.port, **kwargs)
    host, port = server.server_address[:2]
    print(f"bpe serve: http://{host}:{port}/ ({', '.join(tokenizers)}); Ctrl-C stops", file=sys.stderr, flush=True)
    try:
        server.serve_forever()
    finally:
        server.server_close()
