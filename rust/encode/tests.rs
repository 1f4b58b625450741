//! The encoder's unit tests (`mod.rs`): the textbook example, an encoder
//! built from a vocabulary, long runs, the memo and its front tables (which
//! must never change the ids), and special tokens.

use super::*;
use crate::split::patterns::GPT4_PATTERN;
use crate::vocab::byte_ranks;

#[test]
fn textbook_example() {
    let enc = Encoder::new(byte_ranks(&["aa", "ab", "aaab"]), FxHashMap::default(), r"[\s\S]+").unwrap();
    assert_eq!(enc.encode_ordinary("aaabdaaabac").unwrap(), vec![258, 100, 258, 97, 99]);
}

/// An encoder assembled from a vocabulary filled one token at a time (as
/// the trainer does) encodes and decodes as one made from a rank map, and
/// refuses a special token on an ordinary id.
#[test]
fn from_vocab_equals_new() {
    let ranks = byte_ranks(&["aa", "ab", "aaab", "bd", "aaabdaaabac!"]);
    let mut tokens = vec![Vec::new(); ranks.len()];
    for (bytes, &id) in &ranks {
        tokens[id as usize] = bytes.clone();
    }
    let vocab = || Vocab::of(&tokens);
    let specials: FxHashMap<String, Rank> = [("<s>".to_string(), 261)].into_iter().collect();
    let made = Encoder::new(ranks, specials.clone(), GPT4_PATTERN).unwrap();
    let assembled = Encoder::from_vocab(vocab(), &tokens, specials, Splitter::new(GPT4_PATTERN).unwrap()).unwrap();
    let allowed: FxHashSet<String> = ["<s>".to_string()].into_iter().collect();
    for text in ["aaabdaaabac", "aaabdaaabac!<s> aab", "x<s>"] {
        let ids = made.encode(text, &allowed).unwrap();
        assert_eq!(assembled.encode(text, &allowed).unwrap(), ids);
        assert_eq!(assembled.decode_bytes(&ids).unwrap(), text.as_bytes());
    }
    let taken: FxHashMap<String, Rank> = [("<s>".to_string(), 3)].into_iter().collect();
    let err = Encoder::from_vocab(vocab(), &tokens, taken, Splitter::new(GPT4_PATTERN).unwrap()).err().unwrap();
    assert!(err.contains("already taken"), "{err}");
}
#[test]
fn long_runs_are_fast() {
    let ranks = byte_ranks(&["aa", "aaaa", "aaaaaaaa"]);
    let enc = Encoder::new(ranks, FxHashMap::default(), GPT4_PATTERN).unwrap();
    let ids = enc.encode_ordinary(&"a".repeat(1_000_000)).unwrap();
    assert_eq!(ids.len(), 125_000);
    assert!(ids.iter().all(|&i| i == 258));
}

/// A memo carried across texts (as `encode_batch` does) gives each text
/// the ids it gets alone, also once the memo has started afresh.
#[test]
fn memo_across_texts() {
    let ranks = byte_ranks(&["th", "the", "he", "en", "an", "ant"]);
    let mut sp = FxHashMap::default();
    sp.insert("<|end|>".to_string(), 300);
    let enc = Encoder::new(ranks, sp, GPT4_PATTERN).unwrap();
    let allowed: FxHashSet<String> = ["<|end|>".to_string()].into_iter().collect();
    let long = "an".repeat(Memo::MAX_IDS);
    // (" anthemanthemanthem": a chunk too long for the memo's packed keys.)
    let texts = [
        "then anthem<|end|> theme",
        " then then",
        &long,
        "anthem then",
        " anthemanthemanthem anthemanthemanthem",
        " then<|end|> anthemanthemanthem",
    ];
    let mut memo = Memo::default();
    for t in texts {
        let mut ids = vec![7];
        enc.encode_into(t, &allowed, &mut memo, &mut ids).unwrap();
        assert_eq!(ids[1..], enc.encode(t, &allowed).unwrap()[..], "{:?}", &t[..t.len().min(20)]);
    }
    // The long chunk (MAX_IDS ids) filled the memo, so it started afresh;
    // the words after it are in it.
    assert!(memo.len() < 10 && memo.get(b" then").is_some());
    assert!(memo.get(b" anthemanthemanthem").is_some() && memo.get(b" anthemanthemanthe").is_none());
}

/// Texts too short each for the memo's front tables, but long together,
/// get them (`encode_each`: a batch's run), and the ids each gets alone.
#[test]
fn a_long_run_of_short_texts_gets_front_tables() {
    let enc =
        Encoder::new(byte_ranks(&["th", "the", "he", "en", "an", " the"]), FxHashMap::default(), GPT4_PATTERN).unwrap();
    let texts: Vec<String> = (0..4000).map(|i| format!("then the anthem {i}, then {}\n", i % 37)).collect();
    let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
    assert!(texts.iter().all(|t| t.len() < front::FRONT_TEXT));
    let none = FxHashSet::default();
    let mut memo = Memo::default();
    let few = enc.encode_each(&texts[..100], &none, &mut memo).unwrap();
    assert!(!memo.has_front(), "100 short texts: no front tables");
    let all = enc.encode_each(&texts, &none, &mut memo).unwrap();
    assert!(memo.has_front(), "{} bytes in all", texts.iter().map(|t| t.len()).sum::<usize>());
    for (k, t) in texts.iter().enumerate() {
        assert_eq!(all[k], enc.encode(t, &none).unwrap(), "{t:?}");
    }
    assert_eq!(few[..], all[..100]);
}

/// A memo that grows (its old words recur) and then starts afresh (on
/// words it never saw) changes no id, within a call and across calls.
#[test]
fn a_growing_memo_is_invisible() {
    let ranks = byte_ranks(&["th", "the", "he", "en", "an", "ant", " t", " th", " the", "em"]);
    let enc = Encoder::new(ranks, FxHashMap::default(), GPT4_PATTERN).unwrap();
    let mut next = crate::split::lexer::tests::rng(0x9e37_79b9_7f4a_7c15);
    // Word k: a space and 2 to 21 letters, most of them chunks that take
    // merging (some longer than 15 bytes), distinct for distinct k.
    let word = |k: u64| {
        let mut h = (k + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let mut w = String::from(" ");
        for _ in 0..2 + k % 20 {
            w.push(b"thenam"[(h >> 61) as usize % 6] as char);
            h = h.rotate_left(3) ^ k;
        }
        w
    };
    // 20k draws from 1,500 words (more than `MAX_CHUNKS`, 1,024 in
    // tests), then 20k words never seen before.
    let recurring: String = (0..20_000).map(|_| word(next() % 1500)).collect();
    let fresh: String = (0..20_000).map(|i| word(1_000_000 + 7 * i)).collect();
    // (Cache off: no seen table, whose chunks of up to 15 bytes would
    // otherwise not go in the memo's maps; `table.rs` bounds its own.)
    enc.cache().set_capacity(0);
    let mut memo = Memo::default();
    for (text, grown) in [(&recurring, true), (&fresh, false)] {
        let mut chunk_by_chunk = vec![];
        enc.splitter.for_each_chunk(text, |c| enc.encode_chunk(c.as_bytes(), &mut chunk_by_chunk).unwrap()).unwrap();
        let mut ids = vec![];
        enc.encode_ordinary_into(text, &mut memo, &mut ids).unwrap();
        assert!(ids == chunk_by_chunk);
        assert_eq!(memo.grown() > 0, grown, "{} chunks in the memo", memo.len());
    }
}

/// Words of 2 to 16 letters of `thenam`, distinct for distinct `k`: most
/// take merging, some are longer than 15 bytes (never shared).
fn word(k: u64) -> String {
    let mut h = (k + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let mut w = String::from(" ");
    for _ in 0..2 + k % 15 {
        w.push(b"thenam"[(h >> 61) as usize % 6] as char);
        h = h.rotate_left(3) ^ k;
    }
    w
}

/// Where two memos are out at once, a chunk one of them merged is found by
/// the other in the table they share, with the ids merging gives.
#[test]
fn a_word_merged_by_one_thread_is_found_by_another() {
    // Every pair of " thenam" and every pair of those: a word of up to 15
    // bytes merges into at most 5 ids.
    let pairs: Vec<String> =
        " thenam".chars().flat_map(|a| " thenam".chars().map(move |b| format!("{a}{b}"))).collect();
    let quads: Vec<String> = pairs.iter().flat_map(|a| pairs.iter().map(move |b| format!("{a}{b}"))).collect();
    let tokens: Vec<&str> = pairs.iter().chain(&quads).map(String::as_str).collect();
    let enc = Encoder::new(byte_ranks(&tokens), FxHashMap::default(), GPT4_PATTERN).unwrap();
    let text: String = (0..3000).map(word).collect();
    let mut chunk_by_chunk = vec![];
    enc.splitter.for_each_chunk(&text, |c| enc.encode_chunk(c.as_bytes(), &mut chunk_by_chunk).unwrap()).unwrap();
    // (The pool has seen `SHARE_FROM` threads encode at once: memos taken
    // from now on share its table.)
    enc.cache().expect(super::pool::SHARE_FROM);
    {
        let (mut one, mut other) = (enc.memo(), enc.memo());
        let (mut a, mut b) = (vec![], vec![]);
        enc.encode_ordinary_into(&text, &mut one, &mut a).unwrap();
        enc.encode_ordinary_into(&text, &mut other, &mut b).unwrap();
        assert!(a == chunk_by_chunk && b == chunk_by_chunk);
    }
    // The first memo put in each distinct chunk of up to 15 bytes that took
    // merging into at most 4 ids; the second found each of them (some twice:
    // its own memo, of 1,024 chunks in tests, started afresh).
    let mut shareable = std::collections::HashSet::new();
    enc.splitter
        .for_each_chunk(&text, |c| {
            let mut ids = vec![];
            enc.encode_chunk(c.as_bytes(), &mut ids).unwrap();
            if c.len() <= 15 && enc.vocab.get(c.as_bytes()) == NONE && ids.len() <= 4 {
                shareable.insert(c.to_string());
            }
        })
        .unwrap();
    assert!(shareable.len() > 1000);
    let info = enc.cache().info();
    assert_eq!(info.shared, shareable.len());
    assert!(info.shared_hits >= shareable.len(), "{} found", info.shared_hits);
    // A later call, on one thread, finds them too.
    let again = enc.encode_ordinary(&text).unwrap();
    assert!(again == chunk_by_chunk);
}

/// Threads that encode overlapping texts at once, each putting in and
/// finding the others' words as they go, get the ids of merging, with a
/// shared table roomy and one too small to take them all.
#[test]
fn threads_sharing_words_get_the_ids_of_merging() {
    let ranks = byte_ranks(&["th", "the", "he", "en", "an", "ant", " t", " th", " the", "em"]);
    let enc = Encoder::new(ranks, FxHashMap::default(), GPT4_PATTERN).unwrap();
    let mut next = crate::split::lexer::tests::rng(0x2545_f491_4f6c_dd1d);
    let texts: Vec<String> = (0..8).map(|_| (0..4000).map(|_| word(next() % 6000)).collect()).collect();
    let expected: Vec<Vec<Rank>> = texts
        .iter()
        .map(|t| {
            let mut ids = vec![];
            enc.splitter.for_each_chunk(t, |c| enc.encode_chunk(c.as_bytes(), &mut ids).unwrap()).unwrap();
            ids
        })
        .collect();
    // (4 MiB: the shared table has 1 MiB; 4 KiB less: it has none. The
    // pool counts enough threads from the start that each round shares.)
    enc.cache().expect(super::pool::SHARE_FROM);
    for capacity in [DEFAULT_CACHE_BYTES, 4 << 20, (4 << 20) - 4096] {
        enc.cache().set_capacity(capacity);
        for round in 0..2 {
            std::thread::scope(|s| {
                for k in 0..4 {
                    let (enc, texts, expected) = (&enc, &texts, &expected);
                    s.spawn(move || {
                        for j in 0..4 {
                            let t = (k + j * 3 + round) % texts.len();
                            assert!(enc.encode_ordinary(&texts[t]).unwrap() == expected[t], "text {t}, thread {k}");
                        }
                    });
                }
            });
        }
    }
}

/// The chunk cache changes no id: on, off, too small to keep a memo,
/// cleared, and shared by threads.
#[test]
fn cache_is_invisible() {
    let ranks = byte_ranks(&["th", "the", "he", "en", "an", "ant", " t", " th", " the", "em"]);
    let enc = Encoder::new(ranks, FxHashMap::default(), GPT4_PATTERN).unwrap();
    let words = ["then", " anthem", " theme", " thanthemanthemanthem", "enanthem", " é", "\n\n", " 12345"];
    let text: String = (0..5000).map(|i| words[(i * 7 + i / 3) % words.len()]).collect();
    enc.cache().set_capacity(0);
    let plain = enc.encode_ordinary(&text).unwrap();
    for capacity in [DEFAULT_CACHE_BYTES, 64, 0, 1 << 20] {
        enc.cache().set_capacity(capacity);
        for _ in 0..2 {
            assert_eq!(enc.encode_ordinary(&text).unwrap(), plain, "capacity {capacity}");
        }
        let info = enc.cache().info();
        assert!(info.bytes <= capacity, "{} > {capacity}", info.bytes);
        // The second call took the memo of the first (a memo that
        // passes the cap is not kept).
        assert_eq!(info.reused > 0, capacity >= 1 << 20, "capacity {capacity}: {} reused", info.reused);
        enc.cache().clear();
        assert_eq!(enc.encode_ordinary(&text[..999]).unwrap(), enc.encode_ordinary(&text[..999]).unwrap());
    }
    std::thread::scope(|s| {
        for k in 0..4 {
            let (enc, text, plain) = (&enc, &text, &plain);
            s.spawn(move || {
                for _ in 0..3 {
                    assert_eq!(&enc.encode_ordinary(text).unwrap(), plain, "thread {k}");
                }
            });
        }
    });
}

#[test]
fn specials() {
    let mut sp = FxHashMap::default();
    sp.insert("<|end|>".to_string(), 300);
    let enc = Encoder::new(byte_ranks(&[]), sp, GPT4_PATTERN).unwrap();
    let allowed: FxHashSet<String> = ["<|end|>".to_string()].into_iter().collect();
    assert_eq!(enc.encode("a<|end|>b", &allowed).unwrap(), vec![97, 300, 98]);
    // Not allowed: encoded as ordinary text.
    assert_eq!(enc.encode("a<|end|>", &FxHashSet::default()).unwrap(), enc.encode_ordinary("a<|end|>").unwrap());
    assert_eq!(enc.decode_bytes(&[97, 300]).unwrap(), b"a<|end|>");
    assert_eq!(enc.decode_bytes(&[99999]), Err(99999));
    assert_eq!(enc.find_special("xx<|end|>", &["<|end|>".to_string()]), Some("<|end|>"));
}

/// `find_special` with a shared prefix (one pass) finds what a search
/// for each token finds: the leftmost, the longest where two start at
/// the same byte; on random texts of the tokens' own bytes.
#[test]
fn find_special_is_leftmost_longest() {
    let enc = Encoder::new(byte_ranks(&[]), FxHashMap::default(), GPT4_PATTERN).unwrap();
    let sets: [&[&str]; 4] =
        [&["<|a|>", "<|ab|>", "<|a", "<|b|>"], &["<|x|>", "<|y|>"], &["<a>", "<b>"], &["ab", "abab", "b"]];
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for set in sets {
        let tokens: Vec<String> = set.iter().map(|t| t.to_string()).collect();
        let bytes: Vec<char> = tokens.concat().chars().collect();
        for _ in 0..3000 {
            crate::split::lexer::tests::next_random(&mut x);
            let text: String =
                (0..x % 24).map(|k| bytes[((x >> (k % 60)) as usize + k as usize * 7) % bytes.len()]).collect();
            let naive = tokens
                .iter()
                .filter_map(|t| text.find(t.as_str()).map(|p| (p, t.as_str())))
                .min_by_key(|&(p, t)| (p, std::cmp::Reverse(t.len())))
                .map(|(_, t)| t);
            assert_eq!(enc.find_special(&text, &tokens), naive, "{text:?} {tokens:?}");
        }
    }
}
