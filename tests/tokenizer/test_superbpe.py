"""SuperBPE (``Tokenizer.train(..., superbpe=T)``): training and encoding
against the pure-Python oracle (``bpe.reference.train_superbpe``,
``encode_merges``), the fast encoder against the oracle on arbitrary
Unicode, and the file, pickling and the call paths that must agree."""

from __future__ import annotations

import lzma
import re
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from bpe import Tokenizer, pretokenize, reference
from bpe._tokenizer.superbpe import STAGE2_PATTERN, SUPERWORD_WORDS
from conftest import CORPORA, shared_file

SHAKESPEARE = (CORPORA / "tinyshakespeare.txt").read_text()
UDHR = (CORPORA / "multilingual_udhr.txt").read_text()


# Arbitrary text, of characters Python's unicodedata knows (no Cn): the
# Rust lexer's class tables and Python's `regex` module follow different
# Unicode versions, and disagree on the characters one of them has not
# assigned yet; the Rust tests compare with fancy-regex, on the same tables.
UNICODE = st.text(st.characters(blacklist_categories=("Cs", "Cn")), max_size=300)


def oracle_merges(texts, vocab_size, transition, pattern="gpt4", n_special=1):
    return reference.train_superbpe(texts, vocab_size, transition, Tokenizer(pattern=pattern).pattern,
                                    STAGE2_PATTERN, n_special, SUPERWORD_WORDS)


def merges_of(tok: Tokenizer):
    return [(l, r, n) for (l, r), n in tok.merges.items()]


@pytest.fixture(scope="module")
def sup():
    """A small SuperBPE vocabulary of English and other scripts."""
    return Tokenizer.train([SHAKESPEARE[:300_000], UDHR], 1500, superbpe=900)


@pytest.mark.timeout(300)
def test_training_equals_the_oracle():
    texts = [SHAKESPEARE[:30_000], UDHR[:8_000]]
    tok = Tokenizer.train(texts, 700, superbpe=450)
    assert tok.superbpe.transition == 450 - 1  # ordinary ids below it; one special token
    assert merges_of(tok) == oracle_merges(texts, 700, 450)
    # Stage 2 made tokens that cross spaces, which stage 1 never does.
    assert any(b" " in tok.vocab[i].strip(b" ") for i in range(tok.superbpe.transition, len(tok.vocab)))
    assert all(b" " not in tok.vocab[i].lstrip(b" ") for i in range(tok.superbpe.transition))


@pytest.mark.timeout(300)
@settings(max_examples=25)
@given(st.lists(st.text(alphabet=st.sampled_from("ab c.,:\n1é字"), min_size=1, max_size=60), min_size=1, max_size=8),
       st.integers(1, 30), st.integers(1, 30))
def test_training_equals_the_oracle_on_arbitrary_text(texts, first, second):
    tok = Tokenizer.train(texts, 257 + first + second, superbpe=257 + first, special_tokens=())
    assert merges_of(tok) == oracle_merges(texts, 257 + first + second, 257 + first, n_special=0)


def test_the_superword_rule():
    for t, ok in [(b" by the way", True), (b"a b c d", True), (b"a b c d e", False), (b"Note: it", False),
                  (b"  spaces  ", True), (b"x:y", True)]:
        assert reference.superword_allowed(t, 4) is ok


@pytest.mark.timeout(300)
@settings(max_examples=200)
@given(UNICODE)
def test_encoding_equals_the_oracle_on_arbitrary_unicode(sup, text):
    ids = sup.encode_ordinary(text)
    assert ids == reference.encode_merges(text, merges_of(sup), sup.pattern)
    assert sup.decode(ids) == text


@pytest.mark.timeout(300)
@settings(max_examples=100)
@given(st.lists(st.sampled_from(["the", " the", " of", " and", " to", "  ", "\n", ".", ",", " by", " way", "1234",
                                 " I", " am", ":", "!!", "é", " 字"]), max_size=60))
def test_encoding_equals_the_oracle_on_words_it_has_merged(sup, parts):
    text = "".join(parts)
    assert sup.encode_ordinary(text) == reference.encode_merges(text, merges_of(sup), sup.pattern)


@pytest.mark.timeout(300)
@settings(max_examples=150)
@given(st.lists(st.sampled_from([" the", " of", " and", "((", "(the", '"The', "\n ", "\n\n", "   ", "  x", " \t", "123",
                                 "45678", "字字", "😀", " 😀", "é", ".", ", ", "!!", "::", " ", "x", "\u00a0", "٣"]),
                max_size=80))
def test_encoding_equals_the_oracle_on_awkward_runs(sup, parts):
    """The fast paths' hard cases side by side: unsafe cuts ("((", "(the"),
    "\\n " where the two stages' chunks overlap, digits, CJK, emoji, runs of
    spaces; long runs of merged words (phase B's runs and its heap)."""
    text = "".join(parts)
    want = reference.encode_merges(text, merges_of(sup), sup.pattern)
    assert sup.encode_ordinary(text) == want
    assert sup.encode_ordinary_batch([text, text], num_threads=2) == [want, want]
    assert sup.encode_to_numpy(text).tolist() == want


@pytest.mark.timeout(600)
def test_encoding_equals_the_oracle_on_real_text(sup):
    merges = merges_of(sup)
    for text in [SHAKESPEARE[-60_000:], UDHR[-20_000:]]:
        assert sup.encode_ordinary(text) == reference.encode_merges(text, merges, sup.pattern)
    held_out = SHAKESPEARE[-60_000:]
    plain = Tokenizer.train([SHAKESPEARE[:300_000], UDHR], 1500)
    assert len(sup.encode_ordinary(held_out)) < len(plain.encode_ordinary(held_out))


@pytest.mark.timeout(600)
def test_encoding_equals_the_oracle_on_wikipedia(sup):
    with lzma.open(shared_file("bench/enwiki2015_extract100m.txt.xz"), "rt", errors="replace") as f:
        text = f.read(60_000)
    assert sup.encode_ordinary(text) == reference.encode_merges(text, merges_of(sup), sup.pattern)


def test_every_call_path_agrees(sup, tmp_path):
    docs = [SHAKESPEARE[k:k + 5000] for k in range(0, 100_000, 5000)] + ["<|endoftext|> of the", ""]
    want = [sup.encode_ordinary(d) for d in docs]
    assert sup.encode_ordinary_batch(docs, num_threads=2) == want
    ids, offsets = sup.encode_batch_to_numpy(docs[:-2])
    assert [ids[offsets[k]:offsets[k + 1]].tolist() for k in range(len(docs) - 2)] == want[:-2]
    assert sup.encode_to_numpy(docs[0]).tolist() == want[0]
    assert sup.encode(docs[-2], allowed_special="all")[0] == sup.special_tokens["<|endoftext|>"]
    path = tmp_path / "docs.txt"
    path.write_text("".join(docs[:-2]))
    file_ids, _ = sup.encode_files([path], num_threads=2)
    joined = sup.encode_ordinary("".join(docs[:-2]))
    assert file_ids.tolist() == joined
    assert sup.encode("".join(docs[:-2]), num_threads=2) == joined
    # The chunk cache: the same text again, after the cache has seen it.
    assert sup.encode_ordinary("".join(docs[:-2])) == joined
    sup.clear_cache()
    assert sup.encode_ordinary("".join(docs[:-2])) == joined
    assert isinstance(sup.encode_to_numpy(docs[1]), np.ndarray)


def test_file_and_pickle_keep_the_stages(sup, tmp_path):
    path = tmp_path / "sup.bpe"
    sup.save(path)
    assert f"superbpe {sup.superbpe.transition} " in path.read_text()
    loaded = Tokenizer.load(path)
    assert loaded == sup and loaded.superbpe == sup.superbpe
    text = SHAKESPEARE[:20_000]
    assert loaded.encode(text) == sup.encode(text)
    again = pickle.loads(pickle.dumps(sup))
    assert again == sup and again.encode(text) == sup.encode(text)
    # Not the same tokenizer as its vocabulary encoded as ordinary BPE.
    plain = Tokenizer(sup.merges, sup.pattern, sup.special_tokens)
    assert plain != sup


def test_shrinking_below_the_transition_gives_ordinary_bpe(sup):
    small = sup.shrink(800)
    assert small.superbpe is None and small.pattern == sup.superbpe.pattern
    assert small.encode(SHAKESPEARE[:5000]) == Tokenizer.train([SHAKESPEARE[:300_000], UDHR], 800).encode(
        SHAKESPEARE[:5000])


@pytest.mark.timeout(300)
def test_deterministic_across_threads_and_memory_caps(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(SHAKESPEARE[:400_000])
    script = ("import sys; from bpe import Tokenizer; "
              "Tokenizer.train(sys.argv[1], 1200, superbpe=800, max_memory=sys.argv[3] or None).save(sys.argv[2])")
    files = []
    for threads, cap in [("1", ""), ("2", ""), ("2", "1M")]:
        out = tmp_path / f"t{threads}{cap}.bpe"
        subprocess.run([sys.executable, "-c", script, str(corpus), str(out), cap], check=True, timeout=240,
                       env=dict(os.environ, RAYON_NUM_THREADS=threads))
        files.append(out.read_bytes())
    assert files[0] == files[1] == files[2]


@pytest.mark.timeout(300)
def test_every_kind_of_source_gives_the_same_vocabulary(tmp_path):
    """Stage 2 counts its chunks by the ids stage 1 encodes them to, on every
    way in: texts, JSON Lines records (compressed too) and Parquet (Arrow
    batches) give the vocabulary of the same documents as texts, capped or
    not (rust/train/ids.rs)."""
    import gzip
    import json
    records = [SHAKESPEARE[i:i + 5000] for i in range(0, 200_000, 5000)] + [UDHR[:20_000]]
    expected = merges_of(Tokenizer.train(records, 900, superbpe=600))
    lines = "".join(json.dumps({"text": r}) + "\n" for r in records).encode()
    (tmp_path / "r.jsonl").write_bytes(lines)
    (tmp_path / "r.jsonl.gz").write_bytes(gzip.compress(lines))
    sources = [[tmp_path / "r.jsonl"], [tmp_path / "r.jsonl.gz"]]
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
        pq.write_table(pa.table({"text": records}), tmp_path / "r.parquet", row_group_size=7)
        sources.append([tmp_path / "r.parquet"])
    except ImportError:  # the data extra is optional; the other sources still run
        pass
    for source in sources:
        for cap in (None, "100K"):
            assert merges_of(Tokenizer.train(source, 900, superbpe=600, max_memory=cap)) == expected, (source, cap)


def test_counts_by_ids_are_for_stage_2_alone():
    """A trainer counting by ids (stage 2's) refuses what needs chunks' bytes."""
    from bpe import _core
    stage1 = Tokenizer.train(SHAKESPEARE[:20_000], 300)
    tokens = [stage1.vocab.get(i, b"") for i in range(max(stage1.vocab) + 1)]
    trainer = _core.Trainer(STAGE2_PATTERN)
    trainer.count_by_ids(stage1._core, tokens)
    trainer.feed_texts([SHAKESPEARE[:20_000]])
    for call, what in [(lambda: trainer.train(400, False), "training from scratch"),
                       (lambda: trainer.train_picky(400, 0.9, False), "training from scratch"),
                       (lambda: trainer.fork(), "forking counts"),
                       (lambda: trainer.save_counts(0, "x"), "saving counts")]:
        with pytest.raises(ValueError, match=f"{what} needs counts by bytes"):
            call()
    fed = _core.Trainer(STAGE2_PATTERN)
    fed.feed_texts([SHAKESPEARE[:1000]])
    with pytest.raises(ValueError, match="before anything is fed"):
        fed.count_by_ids(stage1._core, tokens)


def test_bad_arguments_say_what_to_do():
    with pytest.raises(ValueError, match="below vocab_size"):
        Tokenizer.train(SHAKESPEARE[:10_000], 500, superbpe=500)
    with pytest.raises(ValueError, match="at least"):
        Tokenizer.train(SHAKESPEARE[:10_000], 500, superbpe=100)
    with pytest.raises(TypeError, match="an int"):
        Tokenizer.train(SHAKESPEARE[:10_000], 500, superbpe=0.8)
    with pytest.raises(ValueError, match="one-pass iterator"):
        Tokenizer.train(iter([SHAKESPEARE[:10_000]]), 500, superbpe=400)
    with pytest.raises(ValueError, match="base="):
        Tokenizer.train(SHAKESPEARE[:10_000], 600, superbpe=400, base=Tokenizer.train(SHAKESPEARE[:10_000], 300))


def test_huggingface_export_encodes_the_same(sup, tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    sup.save_huggingface(tmp_path / "tokenizer.json")
    hf = tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    for text in [SHAKESPEARE[-30_000:], UDHR[-10_000:], "of the  way: 12345 ,, x"]:
        assert hf.encode(text, add_special_tokens=False).ids == sup.encode_ordinary(text)


def test_command_line(tmp_path):
    from helpers import ok, run

    corpus = tmp_path / "corpus.txt"
    corpus.write_text(SHAKESPEARE[:200_000])
    result = ok(run("train", str(corpus), "--vocab", "1k", "--superbpe", "700", "-o", "sup.bpe", cwd=tmp_path))
    assert "SuperBPE" in result.stderr
    tok = Tokenizer.load(tmp_path / "sup.bpe")
    assert tok.superbpe.transition == 699 and tok == Tokenizer.train(SHAKESPEARE[:200_000], 1000, superbpe=700)
    info = ok(run("info", "-t", "sup.bpe", cwd=tmp_path)).stdout
    assert "stage 1 ids 0-698" in info and "stage 2 ids 699-998" in info
    bad = run("train", str(corpus), "--vocab", "1k", "--superbpe", "1k", "-o", "x.bpe", cwd=tmp_path)
    assert bad.returncode == 2 and "below --vocab" in bad.stderr


@pytest.mark.timeout(300)
@settings(max_examples=300)
@given(st.text(alphabet=st.sampled_from(list("ab Z1٣½  \t\n\r.,:;!?/-'\"()字é\u00a0\u2003\u0300\x1c😀")), max_size=80)
       | UNICODE)
def test_the_stage2_lexer_equals_the_regex(text):
    import regex

    assert pretokenize(text, STAGE2_PATTERN) == [c for c in regex.findall(STAGE2_PATTERN, text) if c]


def test_the_stage2_pattern_is_the_one_rust_lexes():
    """The Rust lexer (rust/split/superword.rs) serves only its own pattern,
    byte for byte: another string would fall back to the regex engine."""
    from conftest import ROOT

    source = (ROOT / "rust/split/superword.rs").read_text()
    const = source.split("pub const STAGE2_PATTERN: &str = concat!(")[1].split(");")[0]
    rust = "".join(re.findall(r'r"([^"]*)"', const))
    assert rust == STAGE2_PATTERN


def test_what_ranks_cannot_express_is_refused(sup, tmp_path):
    for call in (lambda: sup.to_tiktoken(), lambda: sup.save_tiktoken(tmp_path / "x.tiktoken"),
                 lambda: sup._mergeable_ranks):
        with pytest.raises(ValueError, match="cannot hold a SuperBPE vocabulary"):
            call()
    with pytest.raises(ValueError, match="no dropout"):
        sup.encode("the way", dropout=0.1, seed=1)
