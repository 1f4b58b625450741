//! The first pairs and their word lists (`initial_pairs`, made part by part
//! on all cores) against one map filled word by word, and training on any
//! number of threads.

use std::collections::BTreeMap;

use super::count::{count_documents, ChunkCounts};
use super::merging::initial_pairs;
use super::testing::next_random;
use super::words::{Pair, Symbol, Words};
use super::{extend_merges, learn_merges, superword_allowed, Allow};
use crate::split::pretokenize::Splitter;
use crate::split::superword::STAGE2_PATTERN;

/// Each pair's count and its words (once each, in order), the simple way:
/// one map, one word after another.
fn one_map<S: Symbol + Ord>(words: &Words<S>) -> BTreeMap<Pair<S>, (i64, Vec<u32>)> {
    let mut m = BTreeMap::new();
    for i in 0..words.count() {
        for p in words.word(i).windows(2) {
            let e = m.entry((p[0], p[1])).or_insert((0, Vec::new()));
            e.0 += words.meta[i].freq as i64;
            if e.1.last() != Some(&(i as u32)) {
                e.1.push(i as u32);
            }
        }
    }
    m
}

/// `initial_pairs` with buckets of `block` occurrences gives every pair its
/// count and words, and each list in the arena exactly the room it fills
/// (on the threads of the pool it runs in).
fn check<S: Symbol + Ord>(counts: &ChunkCounts, block: usize) {
    let words = Words::<S>::new(counts.clone()).unwrap();
    let want = one_map(&words);
    let (pairs, lists) = initial_pairs(&words, block, || Ok(())).unwrap();
    assert_eq!(pairs.len(), want.len());
    let mut room = 0;
    for (p, (count, list)) in &want {
        let info = &pairs[p];
        assert_eq!(info.count(), *count);
        let mut got = Vec::new();
        lists.read(info, &mut got);
        assert_eq!(&got, list);
        if info.in_arena() {
            assert_eq!(info.len(), info.slots[1] as usize, "a first list with room to spare");
            room += info.len();
        }
    }
    assert_eq!(lists.arena.len(), room);
}

/// Words of 2 to 400 bytes (long, as SuperBPE's second stage has them),
/// drawn with a skew from 40 bytes so that some pairs are in most words,
/// with runs of one byte (pairs such as (a, a) back to back); counts of 1
/// to 4, a few beyond 32 bits.
fn random_counts(seed: u64) -> ChunkCounts {
    let mut seed = seed;
    let mut words = Vec::new();
    for _ in 0..3000 {
        let len = 2 + (next_random(&mut seed) % 400) as usize;
        let mut w = Vec::with_capacity(len);
        while w.len() < len {
            let r = next_random(&mut seed);
            let b = b' ' + ((r % 40) * (r >> 8 & 0xff) / 255) as u8;
            let run = if r >> 20 & 15 == 0 { 1 + (r >> 24) % 6 } else { 1 };
            w.extend(std::iter::repeat_n(b, run as usize));
        }
        let count = if next_random(&mut seed) % 500 == 0 { (1 << 32) + 3 } else { 1 + seed % 4 };
        words.push((w, count));
    }
    words.into_iter().collect()
}

fn shakespeare() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/corpora/tinyshakespeare.txt");
    std::fs::read_to_string(path).unwrap()[..200_000].to_string()
}

#[test]
fn first_lists_equal_one_map_filled_word_by_word() {
    let real = count_documents(&Splitter::new(STAGE2_PATTERN).unwrap(), &[&shakespeare()]).unwrap();
    for counts in [random_counts(0x9e3779b97f4a7c15), real] {
        for block in [1, 7, 1000, 1 << 21] {
            // (The parts are counted and filled on all threads.)
            for threads in [1, 2, 3] {
                crate::threads::pool(threads).unwrap().install(|| {
                    check::<u16>(&counts, block);
                    check::<u32>(&counts, block);
                });
            }
        }
    }
}

/// Ordinary training and the second stage of SuperBPE (with its rule, so
/// that pairs are refused) learn the same merges on 1, 2 and 3 threads.
#[test]
fn training_does_not_depend_on_the_number_of_threads() {
    let counts = count_documents(&Splitter::new(STAGE2_PATTERN).unwrap(), &[&shakespeare()]).unwrap();
    let train = || {
        let ordinary = learn_merges(counts.clone(), 1500, |_, _| Ok(())).unwrap();
        let base: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
        let bytes = |b: &[u8], out: &mut Vec<u32>| out.extend(b.iter().map(|&b| u32::from(b)));
        let allow = Some(std::sync::Arc::new(|t: &[u8]| superword_allowed(t, 2)) as Allow);
        let superwords =
            extend_merges(counts.clone(), &base, || bytes, 70_000, allow, || Ok(()), |_, _| Ok(())).unwrap();
        (ordinary, superwords)
    };
    let one = crate::threads::pool(1).unwrap().install(train);
    assert!(one.0.len() > 1000 && one.1.len() > 5000, "{} {}", one.0.len(), one.1.len());
    for n in [2, 3] {
        assert!(crate::threads::pool(n).unwrap().install(train) == one, "{n} threads");
    }
}

/// What runs before the first merge of a stage on a base vocabulary (the
/// first encoding, `Words::new_with`, and the first pairs, `initial_pairs`)
/// asks `between` on the calling thread between its batches, and stops at
/// its first error, which it returns (Ctrl-C, from Python).
#[test]
fn the_start_of_a_stage_asks_between_on_the_calling_thread_and_stops_at_its_error() {
    let counts = random_counts(0x2545_f491_4f6c_dd1d);
    let bytes = |b: &[u8], out: &mut Vec<u16>| out.extend(b.iter().map(|&b| u16::from(b)));
    let caller = std::thread::current().id();
    // A `between` that fails at call `fail` (never if 0), counting its
    // calls in `calls`, each of them on the thread `caller`.
    fn stop_at(
        fail: usize,
        calls: &mut usize,
        caller: std::thread::ThreadId,
    ) -> impl FnMut() -> Result<(), String> + '_ {
        move || {
            assert_eq!(std::thread::current().id(), caller);
            *calls += 1;
            if *calls == fail {
                Err("stop".to_string())
            } else {
                Ok(())
            }
        }
    }
    let words_with = |fail: usize| {
        let mut calls = 0;
        let made = Words::<u16>::new_with(counts.clone(), || bytes, 4096, stop_at(fail, &mut calls, caller));
        (calls, made)
    };
    let (n, words) = words_with(0);
    let words = words.unwrap();
    assert!(n > 20, "{n} batches");
    for fail in [1, n / 2, n] {
        let (calls, made) = words_with(fail);
        assert_eq!((calls, made.err()), (fail, Some("stop".to_string())));
    }
    let pairs_with = |fail: usize| {
        let mut calls = 0;
        let made = initial_pairs(&words, 1000, stop_at(fail, &mut calls, caller));
        (calls, made.map(|(pairs, _)| pairs.len()))
    };
    let (n, pairs) = pairs_with(0);
    assert!(n > 20 && pairs.unwrap() > 1000, "{n} blocks");
    for fail in [1, n / 2, n] {
        let (calls, made) = pairs_with(fail);
        assert_eq!((calls, made.err()), (fail, Some("stop".to_string())));
    }
    // The whole stage: its error comes back from `extend_merges`.
    let base: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    let ids = |b: &[u8], out: &mut Vec<u32>| out.extend(b.iter().map(|&b| u32::from(b)));
    let stopped = extend_merges(counts.clone(), &base, || ids, 1000, None, || Err("stop".into()), |_, _| Ok(()));
    assert_eq!(stopped.err(), Some("stop".to_string()));
}
