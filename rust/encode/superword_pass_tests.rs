//! The single pass (`superword_pass.rs`) against the chunk-by-chunk path and
//! against BPE from single bytes, on a two-stage vocabulary learned here by a
//! small trainer (most frequent pair, in the first stage's chunks, then in
//! the second's) and on random text of the awkward cases: unsafe cuts
//! (`((`, `(the`), `"\n "` and runs of spaces at chunk ends, trailing
//! spaces, digits, CJK, emoji, marks.

use rustc_hash::FxHashMap;

use crate::encode::Encoder;
use crate::split::patterns::GPT4_PATTERN;
use crate::split::pretokenize::Splitter;
use crate::split::superword::STAGE2_PATTERN;
use crate::vocab::Rank;

const PIECES: &[&str] = &[
    " the",
    " of",
    " and",
    "((",
    "(the",
    "\"The",
    "\n ",
    "\n\n",
    "   ",
    "  x",
    " \t",
    "123",
    "45678",
    "字字",
    "😀",
    " 😀",
    "é",
    ".",
    ", ",
    "!!",
    "::",
    " ",
    "x",
    "\u{a0}",
    "٣",
    " in the",
    " of the",
    " United States",
    "\r\n",
    "\n",
    "the",
    " by",
    " way",
    "  \n",
    " \n ",
    "a",
    " a",
];

/// The tests' xorshift (`lexer::tests::next_random`), for reproducible random text.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        (crate::split::lexer::tests::next_random(&mut self.0) % n as u64) as usize
    }

    fn text(&mut self, parts: usize) -> String {
        (0..parts).map(|_| PIECES[self.below(PIECES.len())]).collect()
    }
}

/// Applies merges in order, each leftmost first over the sequence: BPE with
/// the merge list, for lists where each merge makes a new id.
fn apply(ids: &mut Vec<Rank>, merges: &[(Rank, Rank, Rank)]) {
    for &(l, r, new) in merges {
        let mut out = Vec::with_capacity(ids.len());
        let mut i = 0;
        while i < ids.len() {
            if i + 1 < ids.len() && ids[i] == l && ids[i + 1] == r {
                out.push(new);
                i += 2;
            } else {
                out.push(ids[i]);
                i += 1;
            }
        }
        *ids = out;
    }
}

/// `n` merges of the most frequent adjacent pair (the smallest on a tie)
/// over `words`, appended to `merges` and `tokens`.
fn learn(words: &mut [Vec<Rank>], n: usize, merges: &mut Vec<(Rank, Rank, Rank)>, tokens: &mut Vec<Vec<u8>>) {
    for _ in 0..n {
        let mut counts: FxHashMap<(Rank, Rank), usize> = FxHashMap::default();
        for w in words.iter() {
            for p in w.windows(2) {
                *counts.entry((p[0], p[1])).or_default() += 1;
            }
        }
        let Some((&(l, r), _)) = counts.iter().max_by_key(|&(&(l, r), &c)| (c, std::cmp::Reverse((l, r)))) else {
            return;
        };
        let new = tokens.len() as Rank;
        tokens.push([&tokens[l as usize][..], &tokens[r as usize][..]].concat());
        merges.push((l, r, new));
        for w in words.iter_mut() {
            apply(w, &[(l, r, new)]);
        }
    }
}

/// A two-stage vocabulary learned on `text`: `first` merges within the
/// first stage's chunks, then `second` within the second stage's.
fn two_stages(text: &str, first: usize, second: usize) -> Encoder {
    let p1 = Splitter::new(GPT4_PATTERN).unwrap();
    let p2 = Splitter::new(STAGE2_PATTERN).unwrap();
    let bytes = |s: &str| s.bytes().map(Rank::from).collect::<Vec<Rank>>();
    let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    let mut merges = Vec::new();
    let mut words = Vec::new();
    p1.for_each_chunk(text, |c| words.push(bytes(c))).unwrap();
    learn(&mut words, first, &mut merges, &mut tokens);
    let transition = tokens.len() as Rank;
    let mut chunks = Vec::new();
    p2.for_each_chunk(text, |c| chunks.push(bytes(c))).unwrap();
    for c in chunks.iter_mut() {
        apply(c, &merges);
    }
    learn(&mut chunks, second, &mut merges, &mut tokens);
    let ranks = tokens.iter().enumerate().map(|(i, t)| (t.clone(), i as Rank)).collect();
    Encoder::superbpe(ranks, FxHashMap::default(), &merges, p2, p1, transition).unwrap()
}

/// The three paths' ids of `text`: the single pass, chunk by chunk, and BPE
/// from single bytes over each second-stage chunk.
fn paths(enc: &Encoder, text: &str) -> (Vec<Rank>, Vec<Rank>, Vec<Rank>) {
    let sw = enc.superword.as_ref().unwrap();
    let (mut pass, mut again, mut chunks, mut slow) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    // Half the time with the memo's front tables made (a long text's).
    let mut memo = enc.memo();
    if text.len() % 2 == 0 {
        memo.ready();
    }
    enc.encode_superword_pass(sw, text, &mut memo, &mut pass).unwrap();
    enc.encode_superword_pass(sw, text, &mut memo, &mut again).unwrap();
    assert_eq!(pass, again, "the memo's second pass: {text:?}");
    enc.encode_superword_chunks(sw, text, &mut enc.memo(), &mut chunks).unwrap();
    enc.splitter
        .for_each_chunk(text, |c| enc.merge_superword_from_bytes(sw, c.as_bytes(), &mut slow).unwrap())
        .unwrap();
    (pass, chunks, slow)
}

#[test]
fn the_single_pass_equals_the_chunk_by_chunk_path_and_bpe_from_bytes() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let training = rng.text(6000);
    let enc = two_stages(&training, 150, 150);
    assert!(enc.superword.as_ref().unwrap().two_phases);
    // (The seen table, which this path never looks in, is not made.)
    let mut memo = enc.memo();
    enc.ready_memo(&mut memo);
    assert!(memo.has_front() && !memo.has_table());
    assert!(enc.seed.bytes() <= 1024 && enc.superword.as_ref().unwrap().stage1.seed.bytes() <= 1024);
    // Texts of 1 to 40 pieces (many ends of text inside a chunk's look-ahead)
    // and long ones (many chunks, one memo across them).
    for round in 0..3000 {
        let n = if round % 100 == 0 { 3000 } else { 1 + rng.below(40) };
        let text = rng.text(n);
        let (pass, chunks, slow) = paths(&enc, &text);
        assert_eq!(pass, chunks, "{text:?}");
        assert_eq!(pass, slow, "{text:?}");
        assert_eq!(enc.encode_ordinary(&text).unwrap(), pass, "{text:?}");
    }
}

#[test]
fn the_single_pass_agrees_on_the_corpus() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/corpora/tinyshakespeare.txt");
    let text = std::fs::read_to_string(path).unwrap();
    let enc = two_stages(&text[..60_000], 300, 200);
    let sample = &text[200_000..300_000];
    let (pass, chunks, slow) = paths(&enc, sample);
    assert_eq!(pass, chunks);
    assert_eq!(pass, slow);
    // Cut anywhere: text ends in every state of both lexers.
    let mut rng = Rng(7);
    for _ in 0..300 {
        let (a, b) = (rng.below(sample.len()), rng.below(400));
        let piece = sample.get(a..(a + b).min(sample.len())).unwrap_or("");
        let (pass, chunks, slow) = paths(&enc, piece);
        assert_eq!(pass, chunks, "{piece:?}");
        assert_eq!(pass, slow, "{piece:?}");
    }
}

/// `encode_chunks_between` (the first stage's lexer once over the text, for
/// SuperBPE's counting by ids) gives each second-stage chunk the ids that
/// `encode_text_between` gives it alone, and BPE over the whole chunk.
#[test]
fn chunks_between_in_one_pass_equal_each_chunk_alone() {
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let enc = two_stages(&rng.text(6000), 150, 150);
    let sw = enc.superword.as_ref().unwrap();
    for round in 0..2000 {
        let n = if round % 100 == 0 { 3000 } else { 1 + rng.below(40) };
        let text = rng.text(n);
        let (mut ends, mut alone, mut whole) = (Vec::new(), Vec::new(), Vec::new());
        let base = text.as_ptr() as usize;
        enc.splitter
            .for_each_chunk(&text, |c| {
                ends.push(c.as_ptr() as usize - base + c.len());
                let (mut a, mut w) = (Vec::new(), Vec::new());
                sw.stage1.encode_text_between(c, &sw.cuts, &mut sw.stage1.memo(), &mut a).unwrap();
                sw.stage1.encode_chunk(c.as_bytes(), &mut w).unwrap();
                alone.push(a);
                whole.push(w);
            })
            .unwrap();
        let mut pass = Vec::new();
        let mut memo = sw.stage1.memo();
        sw.stage1.encode_chunks_between(&text, &ends, &sw.cuts, &mut memo, |ids| pass.push(ids.to_vec())).unwrap();
        assert_eq!(pass, alone, "{text:?}");
        assert_eq!(pass, whole, "{text:?}");
    }
}
