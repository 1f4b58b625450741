//! The SuperBPE encoder's two phases against BPE with the merge list from
//! single bytes (the slow path, the paper's algorithm), on a vocabulary
//! trained in two stages on real and random text.

use rustc_hash::FxHashMap;

use super::{count_documents, extend_merges, learn_merges, superword_allowed};
use crate::encode::Encoder;
use crate::split::patterns::GPT4_PATTERN;
use crate::split::pretokenize::Splitter;
use crate::split::superword::STAGE2_PATTERN as STAGE2;
use crate::train::testing::shakespeare as corpus;
use crate::vocab::Rank;

/// A two-stage vocabulary trained on `text`: `transition` ids from the first
/// stage, `target` in all. Returns the encoder and its merges.
fn two_stages(text: &str, transition: usize, target: usize) -> (Encoder, Vec<(Rank, Rank, Rank)>) {
    let p1 = Splitter::new(GPT4_PATTERN).unwrap();
    let p2 = Splitter::new(STAGE2).unwrap();
    let first = learn_merges(count_documents(&p1, &[text]).unwrap(), transition, |_, _| Ok(())).unwrap();
    let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    for m in &first {
        assert_eq!(m.new as usize, tokens.len(), "the test's text makes no duplicate");
        let t = [&tokens[m.left as usize][..], &tokens[m.right as usize][..]].concat();
        tokens.push(t);
    }
    let ranks: FxHashMap<Vec<u8>, Rank> = tokens.iter().enumerate().map(|(i, t)| (t.clone(), i as Rank)).collect();
    let stage1 = Encoder::with_splitter(ranks, FxHashMap::default(), p1.clone()).unwrap();
    let counts = count_documents(&p2, &[text]).unwrap();
    let allow = Some(std::sync::Arc::new(|t: &[u8]| superword_allowed(t, 4)) as super::Allow);
    let encode = |b: &[u8], out: &mut Vec<u32>| stage1.encode_chunk(b, out).unwrap();
    let second = extend_merges(counts, &tokens, || encode, target, allow, || Ok(()), |_, _| Ok(())).unwrap();
    let mut merges: Vec<(Rank, Rank, Rank)> = first.iter().map(|m| (m.left, m.right, m.new)).collect();
    for m in &second {
        if m.new as usize == tokens.len() {
            let t = [&tokens[m.left as usize][..], &tokens[m.right as usize][..]].concat();
            tokens.push(t);
        }
        merges.push((m.left, m.right, m.new));
    }
    let ranks: FxHashMap<Vec<u8>, Rank> = tokens.iter().enumerate().map(|(i, t)| (t.clone(), i as Rank)).collect();
    let enc = Encoder::superbpe(ranks, FxHashMap::default(), &merges, p2, p1, transition as Rank).unwrap();
    (enc, merges)
}

#[test]
fn superwords_are_learned_within_the_rule() {
    let (enc, merges) = two_stages(&corpus(), 1000, 1400);
    let superwords: Vec<Vec<u8>> = merges[(1000 - 256)..]
        .iter()
        .map(|&(_, _, new)| enc.token_bytes(new).unwrap().to_vec())
        .filter(|t| t.iter().skip(1).any(|&b| b == b' '))
        .collect();
    assert!(superwords.len() > 50, "{} superwords", superwords.len());
    for t in &superwords {
        assert!(superword_allowed(t, 4), "{:?}", String::from_utf8_lossy(t));
    }
    assert!(!superword_allowed(b" by the way it is", 4) && superword_allowed(b" by the way", 4));
    assert!(!superword_allowed(b"Name: John", 4));
}

#[test]
fn two_phases_equal_bpe_from_bytes() {
    let text = corpus();
    let (enc, _) = two_stages(&text, 1000, 1400);
    let mut checked = 0;
    let tail = &text[250_000..];
    enc.splitter()
        .for_each_chunk(tail, |chunk| {
            let (fast, slow, _, _, two_phases) = enc.superword_paths(chunk);
            assert!(two_phases);
            assert_eq!(fast, slow, "{chunk:?}");
            checked += 1;
        })
        .unwrap();
    // (The chunks of the second stage are long: sentences and paragraphs.)
    assert!(checked > 50, "{checked}");
    // Whole texts, through the encoder's loop, memo and front tables.
    let ids = enc.encode_ordinary(tail).unwrap();
    assert_eq!(enc.decode_bytes(&ids).unwrap(), tail.as_bytes());
    let mut slow = Vec::new();
    enc.splitter().for_each_chunk(tail, |chunk| slow.extend(enc.superword_paths(chunk).1)).unwrap();
    assert_eq!(ids, slow);
}

#[test]
fn random_text_equals_bpe_from_bytes() {
    const WORDS: &[&str] = &[
        "the", " the", "  ", "\n", "\n\n", ".", "..", ", ", "((", "(the", "é", "日本", "42", "12345", "'s", ": ",
        " \n", "\t", "!?", " a", "way", " by", "--", "/",
    ];
    let mut seed = 0x2545f4914f6cdd1d_u64;
    let mut text = String::new();
    for _ in 0..40_000 {
        crate::split::lexer::tests::next_random(&mut seed);
        text.push_str(WORDS[(seed % WORDS.len() as u64) as usize]);
    }
    let (enc, _) = two_stages(&text, 600, 900);
    let (mut checked, mut joined) = (0, 0);
    enc.splitter()
        .for_each_chunk(&text, |chunk| {
            let (fast, slow, pieces, segments, _) = enc.superword_paths(chunk);
            assert_eq!(fast, slow, "{chunk:?}");
            checked += 1;
            joined += (segments < pieces) as usize;
        })
        .unwrap();
    // Cuts a merge may cross were met (the words were picked to make them:
    // "((" then "(the"), and the segments across them took phase A whole.
    assert!(checked > 100 && joined > 0, "{joined} of {checked}");
}
