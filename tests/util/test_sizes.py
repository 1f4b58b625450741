"""One size syntax for every flag and parameter (bpe/_util/sizes.py): bytes
with K/M/G/T and KiB/MiB... as powers of 1024 and KB/MB/GB/TB as powers of
1000 (as GNU coreutils read them); counts with k/M as thousands and millions
and Ki/Mi as powers of 1024. The command line's argparse types
(bpe/cli/arguments.py) and the Python parameters read them the same way."""

from __future__ import annotations

import argparse

import pytest

from bpe._util.sizes import parse_bytes, parse_count
from bpe.cli.arguments import byte_size
from bpe.counts import parse_memory


@pytest.mark.parametrize("text, value", [
    ("4096", 4096), (4096, 4096), ("1_000", 1000), (" 2 ", 2), ("1B", 1), ("1b", 1),
    ("64K", 64 << 10), ("64k", 64 << 10), ("64KiB", 64 << 10), ("64Ki", 64 << 10), ("64KB", 64_000),
    ("10M", 10 << 20), ("10MiB", 10 << 20), ("10mib", 10 << 20), ("10MB", 10 * 10**6), ("10mb", 10 * 10**6),
    ("2G", 2 << 30), ("2GiB", 2 << 30), ("2GB", 2 * 10**9), ("1T", 1 << 40), ("1TB", 10**12),
    ("1.5G", 3 << 29), ("1.5K", 1536), (".5M", 1 << 19), ("1.0000001K", 1024), ("10 MB", 10**7),
])
def test_bytes(text, value):
    assert parse_bytes(text) == value


@pytest.mark.parametrize("text", ["", "M", "-1", "1e3", "10 megabytes", "10MBB", "0x10", "1.2.3K", "10P", "KiB"])
def test_bytes_rejects(text):
    with pytest.raises(ValueError, match=r"^size .* is not a size; write e\.g\. 4096, 64M or 64MiB"):
        parse_bytes(text)


def test_bytes_must_be_positive_and_an_int_or_str():
    for bad in (0, "0", "0K", -5, "0.0001K"):
        with pytest.raises(ValueError, match="must be more than 0 bytes"):
            parse_bytes(bad)
    for bad in (1.5, True, None, b"64M"):
        with pytest.raises(TypeError, match="must be a number of bytes or a str such as '64M'"):
            parse_bytes(bad)
    with pytest.raises(ValueError, match="^max_memory '2Q' is not a size"):
        parse_bytes("2Q", "max_memory")


def test_every_user_of_bytes_reads_them_alike():
    """`--max-memory`, `--shard-size`, `--limit` (byte_size) and `max_memory=`
    (parse_memory): `bpe compare --limit 10M` is 10 * 2**20 bytes, 10MB is 10**7."""
    for text in ("10M", "10MB", "64KB", "64K", "1.5G"):
        assert byte_size(text) == parse_memory(text) == parse_bytes(text)
    assert byte_size("10M") == 10 * 2**20 and byte_size("10MB") == 10**7
    assert parse_memory("64KB") == 64_000 and parse_memory("64KiB") == 65_536
    with pytest.raises(argparse.ArgumentTypeError, match="'ten' is not a size"):
        byte_size("ten")


@pytest.mark.parametrize("text, value", [
    ("50000", 50000), ("50k", 50_000), ("50K", 50_000), ("2M", 2_000_000), ("2m", 2_000_000),
    ("32Ki", 32_768), ("1Mi", 1 << 20), ("1.5k", 1500), ("1.001k", 1001), ("50_000", 50000), ("50,000", 50000),
])
def test_counts(text, value):
    assert parse_count(text) == value


@pytest.mark.parametrize("text", ["", "k", "1.5", "0.1Ki", "50kb", "1G", "-5", "1e3"])
def test_counts_reject(text):
    with pytest.raises(ValueError, match=rf"^count {text!r} is not a (whole )?number"):
        parse_count(text)
