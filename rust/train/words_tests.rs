//! `merge_word` and `pairs_at` against the plain loop they replace: a copy
//! of every symbol and a rescan of the whole word for the new pairs.
use rustc_hash::FxHashMap;

use super::*;

/// The plain loop: symbol by symbol, the same deltas.
fn merge_word_plain(
    word: &mut [u16],
    (a, b): Pair<u16>,
    new: u16,
    f: i64,
    delta: &mut FxHashMap<Pair<u16>, i64>,
) -> usize {
    let n = word.len();
    let (mut i, mut out, mut merged) = (0, 0, 0);
    while i < n {
        if i + 1 < n && word[i] == a && word[i + 1] == b {
            merged += 1;
            if out > 0 {
                let x = word[out - 1];
                *delta.entry((x, a)).or_insert(0) -= f;
                *delta.entry((x, new)).or_insert(0) += f;
            }
            if i + 2 < n {
                let y = word[i + 2];
                *delta.entry((b, y)).or_insert(0) -= f;
                *delta.entry((new, y)).or_insert(0) += f;
            }
            word[out] = new;
            i += 2;
        } else {
            word[out] = word[i];
            i += 1;
        }
        out += 1;
    }
    if merged > 0 {
        *delta.entry((a, b)).or_insert(0) -= merged * f;
    }
    out
}

/// Random words over 1 to 4 symbols (so that runs such as `a a a` and pairs
/// `(a, a)` are common), 0 to 40 symbols long, and a random pair of them:
/// the same word, length and deltas as the plain loop, `made` where the new
/// token stands, and, for a token no word held, the same new pairs in the
/// same order as a rescan.
#[test]
fn merges_as_the_plain_loop() {
    let mut rng = crate::split::lexer::tests::rng(0x51_7cc1_b727_220a);
    for case in 0..20_000 {
        let k = 1 + rng() % 4;
        let n = (rng() % 41) as usize;
        let word: Vec<u16> = (0..n).map(|_| (rng() % k) as u16).collect();
        let pair = ((rng() % k) as u16, (rng() % k) as u16);
        // A fresh token (9), or one the word may hold already (a duplicate's id).
        let new = if case % 4 == 0 { (rng() % k) as u16 } else { 9 };
        let f = 1 + (rng() % 3) as i64;
        let (mut plain, mut fast) = (word.clone(), word.clone());
        let (mut d_plain, mut d_fast) = (FxHashMap::default(), FxHashMap::default());
        let mut made = vec![7]; // cleared by the merge
        let m_plain = merge_word_plain(&mut plain, pair, new, f, &mut d_plain);
        let m = merge_word(&mut fast, pair, new, f, &mut d_fast, &mut made);
        assert_eq!((m, &fast[..m]), (m_plain, &plain[..m_plain]), "{word:?} {pair:?}");
        assert_eq!(d_fast, d_plain, "{word:?} {pair:?}");
        assert_eq!(made.len(), n - m, "one symbol less per occurrence");
        assert!(made.iter().all(|&q| fast[q as usize] == new) && made.windows(2).all(|w| w[0] < w[1]));
        if new == 9 {
            let rescan: Vec<_> = new_pairs(&fast[..m], new).collect();
            assert_eq!(pairs_at(&fast[..m], &made).collect::<Vec<_>>(), rescan, "{word:?} {pair:?}");
        }
    }
}

/// `new_with` encodes on all threads in batches: the same words, in the same
/// order, as encoding each chunk in turn, whatever the threads and batches.
#[test]
fn words_from_a_base_do_not_depend_on_threads_or_batches() {
    // An encoder that makes one symbol of two equal bytes, so that some
    // chunks of two bytes or more become one symbol (and are dropped).
    let encode = |bytes: &[u8], out: &mut Vec<u16>| {
        let mut i = 0;
        while i < bytes.len() {
            if i + 1 < bytes.len() && bytes[i] == bytes[i + 1] {
                out.push(256 + u16::from(bytes[i]));
                i += 2;
            } else {
                out.push(u16::from(bytes[i]));
                i += 1;
            }
        }
    };
    let mut next = crate::split::lexer::tests::rng(0x2545_f491_4f6c_dd1d);
    let mut counts: Vec<(Vec<u8>, u64)> = (0..3000)
        .map(|_| {
            let len = next() % 40;
            let chunk: Vec<u8> = (0..len).map(|_| b"aab c"[(next() % 5) as usize]).collect();
            (chunk, 1 + next() % 9)
        })
        .collect();
    counts.push((b"xyz".to_vec(), 3 * u64::from(u32::MAX))); // three words
    let counts: super::super::count::ChunkCounts = counts.into_iter().collect();
    let mut expected: Vec<(Vec<u16>, u32)> = Vec::new();
    counts.clone().drain(|bytes, mut freq| {
        let mut symbols = Vec::new();
        encode(bytes, &mut symbols);
        while symbols.len() >= 2 && freq > 0 {
            let part = freq.min(u64::from(u32::MAX));
            expected.push((symbols.clone(), part as u32));
            freq -= part;
        }
    });
    assert!(expected.len() > 2000, "{}", expected.len());
    for threads in [1, 2, 3] {
        for batch in [1, 7, 500, 1 << 20] {
            let words = crate::threads::pool(threads)
                .unwrap()
                .install(|| Words::<u16>::new_with(counts.clone(), || encode, batch, || Ok(())).unwrap());
            let got: Vec<(Vec<u16>, u32)> =
                (0..words.count()).map(|i| (words.word(i).to_vec(), words.meta[i].freq)).collect();
            assert!(got == expected, "{threads} threads, batches of {batch} bytes");
            assert_eq!(words.live, words.symbols.len());
        }
    }
}

/// The counts by ids, drained on one thread.
struct Drained(super::super::count::ChunkCounts);

impl Source for Drained {
    fn bound(&self) -> (usize, usize) {
        self.0.bound()
    }
    fn drain_into(self, f: &mut super::super::count::Visit<'_>) -> Result<(), String> {
        self.0.drain_into(f)
    }
}

/// `of_keys` reads counts in memory on all threads, a group of long keys'
/// blocks at a time: the same words, in the same order, as draining the
/// counts key by key, whatever the threads and groups. (Keys of up to 15
/// bytes and longer ones, over several blocks; ids of one to three bytes;
/// keys of one id, dropped; chunks counted more than a `u32` holds.)
#[test]
fn words_of_keys_do_not_depend_on_threads_or_groups() {
    let mut next = crate::split::lexer::tests::rng(0x9e37_79b9_7f4a_7c15);
    let mut counts = super::super::count::ChunkCounts::default();
    let mut key = Vec::new();
    for i in 0..70_000u64 {
        let len = next() % 60;
        let ids: Vec<u32> = (0..len).map(|_| (next() % 200_000) as u32 >> (next() % 12)).collect();
        key.clear();
        super::super::ids::write_key(&ids, &mut key);
        let freq = if i % 10_000 == 7 { 3 * u64::from(u32::MAX) } else { 1 + next() % 9 };
        counts.add(&key, freq);
    }
    assert!(counts.long().len() > 30_000, "{}", counts.long().len());
    let expected = Words::<u32>::of_keys(Drained(counts.clone()), || Ok(())).unwrap();
    let words_of = |w: &Words<u32>| -> Vec<(Vec<u32>, u32)> {
        (0..w.count()).map(|i| (w.word(i).to_vec(), w.meta[i].freq)).collect()
    };
    let expected_words = words_of(&expected);
    assert!(expected_words.iter().filter(|(_, f)| *f == u32::MAX).count() >= 7, "copies of large counts");
    for threads in [1, 2, 3] {
        for group in [1, 2, 64] {
            let (mut betweens, pool) = (0, crate::threads::pool(threads).unwrap());
            let words = pool.install(|| {
                Words::<u32>::of_keys_in(counts.clone(), group, || {
                    betweens += 1;
                    Ok(())
                })
                .unwrap()
            });
            assert!(words_of(&words) == expected_words, "{threads} threads, groups of {group} blocks");
            assert_eq!((words.live, words.symbols.len()), (expected.live, expected.live));
            assert!(betweens >= 1);
        }
    }
}
