"""Picky BPE (``prune=``): the Rust trainer against the Python oracle
(``bpe/reference.py``: ``train_picky``), the event-replay encoder against
the literal replay (``encode_picky``), and the vocabulary through files,
pickles, the command line and the inspection tools.

Every training here is small (the oracle recounts every pair per step), and
the loops are bounded (vocabulary sizes, and the trainer's guard on the
number of events), so no test can hang.
"""

import pickle

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import bpe
from bpe import reference as ref
from bpe._tokenizer.picky import replay_events
from bpe.formats import bpefile
from bpe.formats.bpefile import TokenizerFileError

from helpers import cli

FAST = settings(max_examples=40, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
GPT4 = bpe.Tokenizer().pattern

with open(__file__.rsplit("/tests/", 1)[0] + "/corpora/tinyshakespeare.txt", encoding="utf-8") as _f:
    SHAKESPEARE = _f.read()[:60_000]


@pytest.fixture(scope="module")
def picky():
    return bpe.Tokenizer.train(SHAKESPEARE, 800, prune=0.9, progress=False)


# -- training ------------------------------------------------------------------


@pytest.mark.parametrize("prune", [0.5, 0.9, 0.99])
def test_training_matches_the_oracle(prune):
    tok = bpe.Tokenizer.train(SHAKESPEARE[:30_000], 600, prune=prune, progress=False)
    assert list(tok.picky.events) == ref.train_picky([SHAKESPEARE[:30_000]], 600, GPT4, prune, n_special=1)
    assert any(len(e) == 1 for e in tok.picky.events)  # some tokens were removed
    assert tok.n_vocab == 600 and len(tok.vocab) == 599  # present tokens only


WORDS = st.lists(st.sampled_from(["a", "b", "ab", "abc", "ba", "c", " ", "é", "aa", "cab"]), min_size=1, max_size=12)


@pytest.mark.filterwarnings("ignore:the corpus ran out of pairs")
@FAST
@given(st.lists(WORDS.map("".join), min_size=1, max_size=8), st.sampled_from([0.3, 0.6, 0.9]),
       st.integers(257, 300))
def test_training_matches_the_oracle_on_generated_corpora(docs, prune, size):
    tok = bpe.Tokenizer.train(docs, size, prune=prune, special_tokens=(), progress=False)
    assert list(tok.picky.events) == ref.train_picky(docs, size, GPT4, prune)
    # The vocabulary size counts present tokens, and ids are compact.
    assert sorted(tok.vocab) == list(range(len(tok.vocab)))


def test_prune_1_learns_ordinary_bpe():
    ordinary = bpe.Tokenizer.train(SHAKESPEARE, 700, progress=False)
    assert bpe.Tokenizer.train(SHAKESPEARE, 700, prune=1, progress=False) == ordinary
    # The Picky loop itself, at 1: the ordinary merges, no removal.
    trainer = bpe._core.Trainer(GPT4)
    trainer.feed_texts([SHAKESPEARE])
    events = [tuple(e[:2]) for e in trainer.train_picky(699, 1.0, False)]
    assert events == list(ordinary.merges)
    assert ref.train_picky([SHAKESPEARE[:5000]], 300, GPT4, 1.0) == [
        (l, r) for l, r, _ in ref.train([SHAKESPEARE[:5000]], 300, GPT4)
    ]


def test_training_is_deterministic_and_from_counts_agrees(picky):
    again = bpe.Tokenizer.train(SHAKESPEARE, 800, prune=0.9, progress=False)
    assert again == picky
    counts = bpe.count(SHAKESPEARE)
    assert bpe.Tokenizer.train_from_counts(counts, 800, prune=0.9) == picky


@pytest.mark.parametrize("prune, error", [(0, ValueError), (1.5, ValueError), (-0.1, ValueError),
                                          (float("nan"), ValueError), ("0.9", TypeError), (True, TypeError)])
def test_bad_prune_is_one_clear_error(prune, error):
    with pytest.raises(error, match="prune"):
        bpe.Tokenizer.train("some text", 300, prune=prune)


def test_prune_refuses_what_it_does_not_go_with(picky):
    for kw in ({"base": picky}, {"superbpe": 280}, {}):
        size = [300, 400] if not kw else 400
        with pytest.raises(ValueError, match="prune="):
            bpe.Tokenizer.train(SHAKESPEARE, size, prune=0.9, **kw)


# -- encoding ------------------------------------------------------------------


def test_encoding_matches_the_literal_replay(picky):
    text = SHAKESPEARE[:20_000]
    assert picky.encode_ordinary(text) == ref.encode_picky(text, picky.picky.events, GPT4)
    assert picky.decode(picky.encode(text)) == text


@FAST
@given(st.text(max_size=80))
def test_encoding_arbitrary_text_matches_the_literal_replay(text):
    tok = _small()
    assert tok.encode_ordinary(text) == ref.encode_picky(text, tok.picky.events, GPT4)
    assert tok.decode(tok.encode_ordinary(text)) == text


_SMALL: list = []


def _small():
    """A Picky vocabulary with many removals and restorations (a low threshold)."""
    if not _SMALL:
        _SMALL.append(bpe.Tokenizer.train(SHAKESPEARE[:20_000] + "ééé 日本語 日本 🙂🙂 aaaa", 500, prune=0.4,
                                          progress=False))
    return _SMALL[0]


def test_restored_tokens_encode_as_replayed():
    tok = _small()
    events = tok.picky.events
    removed = {e[0] for e in events if len(e) == 1}
    assert removed, "the low threshold removes tokens"
    text = SHAKESPEARE[20_000:40_000]
    assert tok.encode_ordinary(text) == ref.encode_picky(text, events, GPT4)


def test_batches_files_and_the_chunk_cache_agree(picky, tmp_path):
    docs = [SHAKESPEARE[i:i + 3000] for i in range(0, 30_000, 3000)]
    one_by_one = [picky.encode_ordinary(d) for d in docs]
    assert picky.encode_batch(docs, num_threads=2) == one_by_one
    assert picky.encode_ordinary(docs[0]) == one_by_one[0]  # cached chunks, the same ids
    path = tmp_path / "d.txt"
    path.write_text(docs[0], encoding="utf-8")
    ids, _ = picky.encode_files([path], num_threads=1)
    assert list(ids) == one_by_one[0]


def test_removed_tokens_are_never_produced(picky):
    ids = set(picky.encode_ordinary(SHAKESPEARE))
    assert ids <= set(picky.vocab)
    removed = picky.removed_tokens
    assert removed and all(b not in picky.vocab.values() for b in removed)


# -- the model: files, pickles, equality -----------------------------------------


def test_save_load_and_pickle_round_trip(picky, tmp_path):
    path = tmp_path / "p.bpe"
    picky.save(path)
    text = path.read_text()
    assert f"events {len(picky.picky.events)} prune 0.9\n" in text and "\nremove " in text
    loaded = bpe.Tokenizer.load(path)
    assert loaded == picky and loaded.picky == picky.picky
    assert loaded.encode_ordinary(SHAKESPEARE[:5000]) == picky.encode_ordinary(SHAKESPEARE[:5000])
    loaded.save(tmp_path / "q.bpe")
    assert (tmp_path / "q.bpe").read_text() == text
    unpickled = pickle.loads(pickle.dumps(picky))
    assert unpickled == picky and unpickled.encode("the king") == picky.encode("the king")
    assert picky != bpe.Tokenizer.train(SHAKESPEARE, 800, progress=False)


def test_a_file_with_bad_events_is_refused(tmp_path):
    # Intact (its checksum matches) but its content is not a Picky vocabulary.
    (tmp_path / "bad.bpe").write_text(bpefile.dumps("gpt4", {}, picky=([(97, 98), (97,)], 0.9)))
    with pytest.raises(TokenizerFileError, match="corrupted: event 1 removes the byte 97"):
        bpe.Tokenizer.load(tmp_path / "bad.bpe")
    (tmp_path / "bad.bpe").write_text(bpefile.dumps("gpt4", {}, picky=([(97, 98)], 1.0)))
    with pytest.raises(TokenizerFileError, match="prune"):
        bpe.Tokenizer.load(tmp_path / "bad.bpe")


def test_events_are_checked():
    with pytest.raises(ValueError, match="not present"):
        replay_events([(97, 98), (300, 97)])
    with pytest.raises(ValueError, match="never removed"):
        replay_events([(97, 98), (97,)])
    r = replay_events([(97, 98), (256, 99), (256,), (97, 98)])  # "ab" removed, then made again
    assert r.vocab[256] == b"ab" and r.vocab[257] == b"abc" and r.removed == [] and r.removals == 1
    tok = bpe.Tokenizer(pattern="gpt4", special_tokens={}, picky=([(97, 98), (256, 99), (256,)], 0.9))
    assert tok.vocab[256] == b"abc" and tok.removed_tokens == [b"ab"]
    assert tok.encode("abc ab") == [256, 32, 97, 98]


def test_exports_that_cannot_hold_events_say_why(picky, tmp_path):
    for call in (lambda: picky.save_huggingface(tmp_path / "t.json"), lambda: picky.save_tiktoken(tmp_path / "t"),
                 lambda: picky.shrink(500), lambda: picky.merges, lambda: picky._mergeable_ranks,
                 lambda: picky.to_tiktoken()):
        with pytest.raises(ValueError, match="Picky"):
            call()
    with pytest.raises(ValueError, match="Picky"):
        picky.encode("the", dropout=0.1, seed=1)
    more = picky.with_special_tokens(["<|pad|>"])
    assert more.picky == picky.picky and more.encode_ordinary("the king") == picky.encode_ordinary("the king")


# -- the command line and the inspection tools ---------------------------------------


def test_cli_train_prune_info_and_audit(tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_text(SHAKESPEARE, encoding="utf-8")
    out = cli("train", corpus, "--vocab", "800", "--prune", "0.9", "-o", "p.bpe", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "tokens removed" in out.stderr
    tok = bpe.Tokenizer.load(tmp_path / "p.bpe")
    assert tok == bpe.Tokenizer.train(SHAKESPEARE, 800, prune=0.9, progress=False)
    info = cli("info", "-t", "p.bpe", cwd=tmp_path)
    assert f"pruned:          {len(tok.removed_tokens)} tokens removed (prune=0.9)" in info.stdout
    audit = cli("audit", "-t", "p.bpe", "--top", "0", cwd=tmp_path)
    assert audit.returncode == 0, audit.stderr
    assert f"removed: {len(tok.removed_tokens)} (" in audit.stdout
    assert repr(tok.removed_tokens[0].decode()) in audit.stdout
    bad = cli("train", corpus, "--vocab", "800", "--prune", "2", cwd=tmp_path)
    assert bad.returncode == 2 and "--prune" in bad.stderr
    sizes = cli("train", corpus, "--vocab", "500,800", "--prune", "0.9", "-o", "p{vocab}.bpe", cwd=tmp_path)
    assert sizes.returncode != 0 and "--prune" in sizes.stderr
