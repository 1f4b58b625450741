"""`bpe serve`: a local web page to see tokenizers side by side.

Standard library only (``http.server``). The page (``bpe/inspect/web/``: HTML, CSS
and a script, shipped in the wheel) asks this server for tokens as JSON and
renders every piece of text with ``textContent``, never as HTML, so text
such as ``<script>`` shows as text. The server's answers carry a Content
Security Policy that allows scripts from this server only (no inline script).

Routes:
  GET  /, /app.js, /style.css    the page
  GET  /api/tokenizers           [{"name", "vocab_size"}]
  POST /api/tokenize             {"text": "..."} -> {"results": [{"name", "count", "characters", "bytes",
                                 "tokens": [[id, piece, newlines], ...], "truncated"}]}
  POST /api/compare?name=FILE    the file's bytes -> {"rows": [...]}: the `bpe compare` rows

A request body larger than ``max_body`` is refused with 413 before it is
read; one without a Content-Length with 411.
"""

from __future__ import annotations

import json
import os
import sys
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from bpe.inspect.show import piece
from bpe.tokenizer import Tokenizer

WEB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "web")
STATIC = {"/": ("index.html", "text/html; charset=utf-8"),
          "/index.html": ("index.html", "text/html; charset=utf-8"),
          "/app.js": ("app.js", "text/javascript; charset=utf-8"),
          "/style.css": ("style.css", "text/css; charset=utf-8")}
MAX_BODY = 16 * 1024 * 1024
#: Tokens sent back per tokenizer (the count is always exact): a browser
#: slows down past tens of thousands of spans.
MAX_SHOWN = 20_000
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


class _HttpError(Exception):
    def __init__(self, status: HTTPStatus, message: str):
        super().__init__(message)
        self.status = status


def tokenize(tokenizers: dict[str, Tokenizer], text: str) -> dict:
    """The answer of /api/tokenize."""
    results = []
    n_bytes = len(text.encode("utf-8", errors="replace"))
    for name, tok in tokenizers.items():
        ids = tok.encode(text, disallowed_special=())
        shown = ids[:MAX_SHOWN]
        raws = [tok.token_bytes(i) for i in shown]
        results.append({
            "name": name,
            "count": len(ids),
            "characters": len(text),
            "bytes": n_bytes,
            "tokens": [[i, piece(raw), raw.count(b"\n")] for i, raw in zip(shown, raws)],
            "truncated": len(ids) > len(shown),
        })
    return {"results": results}


def compare_upload(tokenizers: dict[str, Tokenizer], name: str, data: bytes) -> dict:
    """The answer of /api/compare: the `bpe compare` rows of one file."""
    from bpe.inspect.compare import compare_texts

    try:
        data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise _HttpError(HTTPStatus.BAD_REQUEST,
                         f"{name} is not valid UTF-8 at byte offset {e.start}; upload a UTF-8 text file") from None
    rows = compare_texts(tokenizers, [(name, data)])
    return {"rows": [{k: (None if isinstance(v, float) and v != v else v) for k, v in r.items()} for r in rows]}


class Handler(BaseHTTPRequestHandler):
    server_version = "bpe-serve"
    protocol_version = "HTTP/1.1"

    # -- plumbing --------------------------------------------------------------

    def log_message(self, format, *args):  # noqa: A002 (the base class's name)
        if self.server.verbose:
            sys.stderr.write(f"bpe serve: {self.address_string()} {format % args}\n")

    def _send(self, status: HTTPStatus, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        for k, v in SECURITY_HEADERS.items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, status: HTTPStatus, value) -> None:
        self._send(status, json.dumps(value, ensure_ascii=False).encode("utf-8"), "application/json; charset=utf-8")

    def _error(self, status: HTTPStatus, message: str) -> None:
        self._json(status, {"error": message})

    def _body(self) -> bytes:
        length = self.headers.get("Content-Length")
        if length is None:
            raise _HttpError(HTTPStatus.LENGTH_REQUIRED, "send a Content-Length")
        try:
            n = int(length)
        except ValueError:
            raise _HttpError(HTTPStatus.BAD_REQUEST, f"bad Content-Length {length!r}") from None
        if n < 0:
            raise _HttpError(HTTPStatus.BAD_REQUEST, f"bad Content-Length {length!r}")
        if n > self.server.max_body:
            # Not read: the connection is closed after the answer instead.
            self.close_connection = True
            raise _HttpError(HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                             f"the body is {n:,} bytes; this server takes at most {self.server.max_body:,} "
                             f"(bpe serve --max-body)")
        return self.rfile.read(n)

    # -- routes ----------------------------------------------------------------

    def do_GET(self):  # noqa: N802 (http.server's name)
        path = urlsplit(self.path).path
        if path == "/api/tokenizers":
            self._json(HTTPStatus.OK, [{"name": n, "vocab_size": len(t.vocab)}
                                       for n, t in self.server.tokenizers.items()])
            return
        if path not in STATIC:
            self._error(HTTPStatus.NOT_FOUND, f"no page {path}")
            return
        name, content_type = STATIC[path]
        with open(os.path.join(WEB, name), "rb") as f:
            self._send(HTTPStatus.OK, f.read(), content_type)

    do_HEAD = do_GET

    def do_POST(self):  # noqa: N802
        url = urlsplit(self.path)
        try:
            if url.path not in ("/api/tokenize", "/api/compare"):
                raise _HttpError(HTTPStatus.NOT_FOUND, f"no route POST {url.path}")
            body = self._body()
            if url.path == "/api/tokenize":
                try:
                    request = json.loads(body)
                except (ValueError, UnicodeDecodeError):
                    raise _HttpError(HTTPStatus.BAD_REQUEST, 'send JSON: {"text": "..."}') from None
                if not isinstance(request, dict) or not isinstance(request.get("text"), str):
                    raise _HttpError(HTTPStatus.BAD_REQUEST, 'send JSON: {"text": "..."}')
                self._json(HTTPStatus.OK, tokenize(self.server.tokenizers, request["text"]))
            else:
                name = (parse_qs(url.query).get("name") or ["upload"])[0]
                self._json(HTTPStatus.OK, compare_upload(self.server.tokenizers, name, body))
        except _HttpError as e:
            self._error(e.status, str(e))


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address, tokenizers: dict[str, Tokenizer], *, max_body: int = MAX_BODY,
                 verbose: bool = False):
        self.tokenizers, self.max_body, self.verbose = tokenizers, max_body, verbose
        super().__init__(address, Handler)


def make_server(tokenizers: dict[str, Tokenizer], *, host: str = "127.0.0.1", port: int = 8000,
                max_body: int = MAX_BODY, verbose: bool = False) -> Server:
    """A server for the page (not yet serving: call ``serve_forever()``, and
    ``server_close()`` at the end); ``port=0`` takes a free port
    (``server.server_address[1]``)."""
    if not tokenizers:
        raise ValueError("give at least one tokenizer")
    if max_body < 1:
        raise ValueError(f"max_body must be at least 1 byte, got {max_body}")
    return Server((host, port), tokenizers, max_body=max_body, verbose=verbose)
