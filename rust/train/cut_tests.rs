//! The sketch, the cut and training on cut words (`cut.rs`) against the
//! slow way: exact counts, pieces cut one by one, training on whole words.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;

use super::*;
use crate::split::patterns::GPT4_PATTERN;
use crate::split::pretokenize::Splitter;
use crate::split::superword::STAGE2_PATTERN;
use crate::train::count::{count_documents, ChunkCounts};
use crate::train::merging::Tuning;
use crate::train::testing::shakespeare;
use crate::train::{extend_tuned, learn_merges, superword_allowed, Allow, Merge};

/// Every pair's count over `words`, weighted by the words' counts.
fn exact<S: Symbol + Ord>(words: &Words<S>) -> BTreeMap<Pair<S>, u64> {
    let mut m = BTreeMap::new();
    for i in 0..words.count() {
        for p in words.word(i).windows(2) {
            *m.entry((p[0], p[1])).or_insert(0) += u64::from(words.meta[i].freq);
        }
    }
    m
}

/// Each distinct word's symbols and its count (copies summed).
fn contents<S: Symbol + Ord>(words: &Words<S>) -> BTreeMap<Vec<S>, u64> {
    let mut m = BTreeMap::new();
    for i in 0..words.count() {
        *m.entry(words.word(i).to_vec()).or_insert(0) += u64::from(words.meta[i].freq);
    }
    m
}

#[test]
fn the_sketch_counts_each_pair_at_least_as_often_as_it_occurs() {
    let counts = count_documents(&Splitter::new(STAGE2_PATTERN).unwrap(), &[&shakespeare()]).unwrap();
    let words = Words::<u16>::new(counts).unwrap();
    let want = exact(&words);
    for threads in [1, 2, 3] {
        let sketch = crate::threads::pool(threads).unwrap().install(|| Sketch::of(&words, &mut || Ok(())).unwrap());
        let mut same = 0;
        for (&p, &n) in &want {
            // (Counters stop at u16::MAX.)
            let n = n.min(u16::MAX.into());
            assert!(u64::from(sketch.get(p)) >= n, "{p:?}: {} < {n}", sketch.get(p));
            same += usize::from(u64::from(sketch.get(p)) == n);
        }
        // Few pairs share a counter: the sketch is a count, not a bound alone.
        assert!(same * 100 > want.len() * 99, "{same} of {} exact", want.len());
    }
}

/// Words counted more than `WEIGHT` times add `WEIGHT` to their pairs'
/// counters, and the cut still keeps every pair counted `least` times or
/// more, thresholds above `WEIGHT` and above `u16::MAX` included.
#[test]
fn heavy_words_never_cut_a_frequent_pair() {
    let counts = count_documents(&Splitter::new(STAGE2_PATTERN).unwrap(), &[&shakespeare()]).unwrap();
    let mut words = Words::<u16>::new(counts).unwrap();
    for (i, f) in [(0, 100_000), (1, 20_000), (2, WEIGHT), (3, 70_000), (5, 3)] {
        words.meta[i * 7].freq = f;
    }
    let want = exact(&words);
    let sketch = Sketch::of(&words, &mut || Ok(())).unwrap();
    for (&p, &n) in &want {
        assert!(u64::from(sketch.get(p)) >= n.min(WEIGHT.into()), "{p:?}: {} < {n}", sketch.get(p));
    }
    for least in [2, 1000, WEIGHT, WEIGHT + 1, 50_000, 200_000] {
        let frequent = sketch.at_least(least);
        let mut kept = 0;
        for (&p, &n) in &want {
            if n >= u64::from(least) {
                assert!(frequent.get(p), "{p:?} counted {n}, cut at {least}");
                kept += 1;
            }
        }
        assert!(kept > 0 || least == 200_000, "least {least}: no pair as frequent");
    }
}

#[test]
fn the_words_are_cut_at_every_rare_pair_and_nowhere_else() {
    // Stage 2's words over a base vocabulary, as in training.
    let (counts, _, encoder) = stage2(&shakespeare(), 1000);
    let encode = |b: &[u8], out: &mut Vec<u16>| {
        let mut ids = Vec::new();
        encoder.encode_chunk(b, &mut ids).unwrap();
        out.extend(ids.iter().map(|&i| i as u16));
    };
    let words = Words::<u16>::new_with(counts.clone(), || encode, 1 << 16, || Ok(())).unwrap();
    let sketch = Sketch::of(&words, &mut || Ok(())).unwrap();
    // The same words with symbols of 32 bits (vocabularies over 2^16).
    let encode32 = |b: &[u8], out: &mut Vec<u32>| encoder.encode_chunk(b, out).unwrap();
    let words32 = Words::<u32>::new_with(counts, || encode32, 1 << 16, || Ok(())).unwrap();
    // Pieces of each kind of key (packed in one u128, in two, or a slice).
    let mut kinds = [false; 3];
    for least in [2, 10, 100, 1000] {
        // One word at a time, a piece ending at each pair below `least`.
        let mut want = BTreeMap::new();
        for i in 0..words.count() {
            let word = words.word(i);
            let mut piece = vec![word[0]];
            for k in 1..=word.len() {
                if k == word.len() || sketch.get((word[k - 1], word[k])) < least {
                    if piece.len() >= 2 {
                        *want.entry(piece.clone()).or_insert(0) += u64::from(words.meta[i].freq);
                    }
                    piece.clear();
                }
                if k < word.len() {
                    piece.push(word[k]);
                }
            }
        }
        // The symbols, and each word's (count, start, length).
        type Layout = (Vec<u16>, Vec<(u32, u32, u32)>);
        let mut first: Option<Layout> = None;
        for threads in [1, 2, 3] {
            let cut = crate::threads::pool(threads).unwrap().install(|| cut(&words, &sketch, least, &mut || Ok(())));
            let cut = cut.unwrap().unwrap();
            assert_eq!(contents(&cut), want, "least {least}");
            assert_eq!(cut.live, cut.symbols.len());
            // The same words in the same order on any number of threads.
            let layout = (cut.symbols.clone(), cut.meta.iter().map(|w| (w.freq, w.start, w.len)).collect());
            assert!(first.get_or_insert_with(|| layout.clone()) == &layout, "{threads} threads");
        }
        let cut32 = cut(&words32, &sketch, least, &mut || Ok(())).unwrap().unwrap();
        let as16 = contents(&cut32).into_iter().map(|(p, n)| (p.iter().map(|&s| s as u16).collect(), n));
        assert_eq!(as16.collect::<BTreeMap<Vec<u16>, u64>>(), want, "least {least}, u32 symbols");
        for piece in want.keys() {
            kinds[(piece.len() > 5) as usize + (piece.len() > 10) as usize] = true;
        }
        let (kept, all) = (want.keys().map(Vec::len).sum::<usize>(), words.live);
        assert!(least < 10 || kept < all / 2, "least {least}: {kept} of {all} symbols");
    }
    assert_eq!(kinds, [true; 3], "pieces of 2-5, 6-10 and over 10 symbols");
}

/// The words of stage 2 on `text`, over a base trained to `base_size` on it,
/// and the base's tokens by id.
fn stage2(text: &str, base_size: usize) -> (ChunkCounts, Vec<Vec<u8>>, crate::encode::Encoder) {
    let p1 = Splitter::new(GPT4_PATTERN).unwrap();
    let first = learn_merges(count_documents(&p1, &[text]).unwrap(), base_size, |_, _| Ok(())).unwrap();
    let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    for m in &first {
        tokens.push([&tokens[m.left as usize][..], &tokens[m.right as usize][..]].concat());
    }
    let ranks: FxHashMap<Vec<u8>, u32> = tokens.iter().enumerate().map(|(i, t)| (t.clone(), i as u32)).collect();
    let encoder = crate::encode::Encoder::with_splitter(ranks, FxHashMap::default(), p1).unwrap();
    let counts = count_documents(&Splitter::new(STAGE2_PATTERN).unwrap(), &[text]).unwrap();
    (counts, tokens, encoder)
}

/// The merges of stage 2 with the first threshold `first_cut`, and how many
/// merges `on_merge` saw (more than the merges after a retry).
fn extend(
    counts: &ChunkCounts,
    base: &[Vec<u8>],
    encode: impl Fn(&[u8], &mut Vec<u32>) + Sync + Copy + Send,
    target: usize,
    allow: bool,
    first_cut: Option<u32>,
) -> (Vec<Merge>, usize) {
    let allow = allow.then(|| std::sync::Arc::new(|t: &[u8]| superword_allowed(t, 3)) as Allow);
    let tuning = Tuning { first_cut, ..Tuning::EXTEND };
    let mut seen = 0;
    let merges = extend_tuned(
        counts.clone(),
        base,
        Some(|| encode),
        target,
        allow,
        tuning,
        || Ok(()),
        |_, _| {
            seen += 1;
            Ok(())
        },
    );
    (merges.unwrap(), seen)
}

#[test]
fn training_on_cut_words_learns_the_merges_of_the_whole_words() {
    let (counts, base, encoder) = stage2(&shakespeare(), 1000);
    let encode = |b: &[u8], out: &mut Vec<u32>| encoder.encode_chunk(b, out).unwrap();
    for (target, allow) in [(1600, true), (1400, false), (40_000, true)] {
        // `Some(0)`: never cut.
        let (whole, seen) = extend(&counts, &base, encode, target, allow, Some(0));
        assert_eq!(seen, whole.len());
        assert!(whole.len() >= 400, "{} merges", whole.len());
        // The guess, and thresholds that cut: the same merges, in one
        // training where the last merge counts as many (not so at 40k: the
        // corpus runs out, and the last merges count one occurrence).
        for first_cut in [None, Some(2), Some(4)] {
            let (merges, seen) = extend(&counts, &base, encode, target, allow, first_cut);
            assert!(merges == whole, "target {target}, allow {allow}, first cut {first_cut:?}");
            assert!(target == 40_000 || seen == merges.len(), "one training, first cut {first_cut:?}");
        }
        // Too high a threshold: its training stops at the first merge counted
        // below it and is done again lower (or on the whole words at last).
        for first_cut in [60, 1 << 20] {
            let (merges, seen) = extend(&counts, &base, encode, target, allow, Some(first_cut));
            assert!(merges == whole, "target {target}, allow {allow}, first cut {first_cut}");
            assert!(seen > merges.len(), "retried from {first_cut}: {seen} merges seen");
        }
    }
}

#[test]
fn a_duplicate_on_cut_words_sends_the_training_to_the_whole_words() {
    // The base holds "ab" but encodes from single bytes, so that stage 2's
    // first merge, (a, b), makes the bytes of an existing token: a duplicate,
    // after which a token has two spellings and the cut proves nothing.
    let mut base: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    base.push(b"ab".to_vec());
    let bytes = |b: &[u8], out: &mut Vec<u32>| out.extend(b.iter().map(|&b| u32::from(b)));
    let text = "ab abc xab abx cab ab ab xy xyz xy xy xy xy xy xy ".repeat(50);
    let counts = count_documents(&Splitter::new(STAGE2_PATTERN).unwrap(), &[&text]).unwrap();
    let (whole, _) = extend(&counts, &base, bytes, 300, false, Some(0));
    let at = whole.iter().position(|m| m.new == 256).expect("a duplicate");
    assert!(at >= 1 && whole[at].left == u32::from(b'a') && whole[at].right == u32::from(b'b'), "{whole:?}");
    let (merges, seen) = extend(&counts, &base, bytes, 300, false, Some(3));
    assert!(merges == whole);
    // The cut training stopped at the duplicate, having reported the merges
    // before it.
    assert_eq!(seen, merges.len() + at);
}

#[test]
fn training_on_cut_words_from_bytes_learns_the_merges_of_the_whole_words() {
    // A base of the 256 bytes, and text with runs of one byte (pairs
    // (a, a), merged from the left of each run) and of one word.
    let mut seed = 0x2545_f491_4f6c_dd1d;
    let mut text = shakespeare()[..100_000].to_string();
    for _ in 0..3000 {
        let r = crate::train::testing::next_random(&mut seed);
        let run = 1 + (r % 9) as usize;
        text.push_str(&["a", " ", "ab", " the", "."][(r >> 8) as usize % 5].repeat(run));
        text.push(' ');
    }
    let counts = count_documents(&Splitter::new(STAGE2_PATTERN).unwrap(), &[&text]).unwrap();
    let base: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    let bytes = |b: &[u8], out: &mut Vec<u32>| out.extend(b.iter().map(|&b| u32::from(b)));
    for (target, allow) in [(900, true), (1200, false)] {
        let (whole, _) = extend(&counts, &base, bytes, target, allow, Some(0));
        for first_cut in [None, Some(3), Some(30), Some(1000)] {
            let (merges, _) = extend(&counts, &base, bytes, target, allow, first_cut);
            assert!(merges == whole, "target {target}, allow {allow}, first cut {first_cut:?}");
        }
    }
}
