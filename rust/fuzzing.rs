//! The logic of the fuzz targets in `fuzz/` (cargo-fuzz, nightly), here so
//! that a plain `cargo test` replays every input kept in
//! `tests/fuzz_regressions/<target>/` through exactly the same code.
//!
//! Each function takes the fuzzer's raw bytes and panics on a wrong result:
//! - [`pretokenize`]: the hand-written lexers equal fancy-regex on arbitrary
//!   UTF-8, and the mask lexer equals the exact one; cutting at any line or word cut, and by `segments` and
//!   `pieces::cut`, changes no chunk; the cut finders never panic on
//!   arbitrary bytes.
//! - [`custom_pattern`]: any pattern either fails to compile or splits any
//!   text without a panic, and when it succeeds its chunks cover the text.
//! - [`encode_decode`]: with trained vocabularies (three patterns, special
//!   tokens), `decode(encode(text)) == text`, encoding in pieces equals
//!   encoding whole, and every chunk's ids equal a naive reference BPE (which
//!   covers both merge implementations: the scan for chunks up to 128 bytes,
//!   the heap above).
//! - [`train`]: counting and merging never panic, give the same merges on 1
//!   and 2 threads, and the merges are valid (parts exist, bytes unique).
//! - [`encoder_new`]: `Encoder::new` with arbitrary ranks, ids and special
//!   tokens either refuses them or gives an encoder that never panics.

use std::sync::OnceLock;

use rustc_hash::{FxHashMap, FxHashSet};

use crate::encode::Encoder;
use crate::run::pieces;
use crate::split::lexer::{Engine, Lexer};
use crate::split::patterns::{GPT2_PATTERN, GPT4O_PATTERN, GPT4_PATTERN};
use crate::split::pretokenize::{is_safe_cut, is_word_cut, last_safe_cut, segments, Splitter};
use crate::train::{count_documents, learn_merges};
use crate::vocab::{Rank, MAX_ID};

const BUILTIN: [&str; 3] = [GPT2_PATTERN, GPT4_PATTERN, GPT4O_PATTERN];

fn splitters() -> &'static [Splitter] {
    static S: OnceLock<Vec<Splitter>> = OnceLock::new();
    S.get_or_init(|| BUILTIN.iter().map(|p| Splitter::new(p).unwrap()).collect())
}

fn regexes() -> &'static [fancy_regex::Regex] {
    static R: OnceLock<Vec<fancy_regex::Regex>> = OnceLock::new();
    R.get_or_init(|| BUILTIN.iter().map(|p| fancy_regex::Regex::new(p).unwrap()).collect())
}

fn chunks<'t>(s: &Splitter, text: &'t str) -> Vec<&'t str> {
    s.findall(text).expect("built-in patterns never fail")
}

pub fn pretokenize(data: &[u8]) {
    // On arbitrary bytes the cut finders return only cut points.
    if let Some(p) = last_safe_cut(data) {
        assert!(0 < p && p < data.len() && (is_safe_cut(data, p) || is_word_cut(data, p)));
    }
    let text = String::from_utf8_lossy(data);
    let text: &str = &text;
    let b = text.as_bytes();
    let cuts: Vec<usize> = (1..b.len()).filter(|&p| is_safe_cut(b, p) || is_word_cut(b, p)).collect();
    // The mask lexer (texts of 64 bytes or more) equals the exact lexer,
    // with each classifier this CPU has.
    for lexer in [Lexer::Gpt2, Lexer::Gpt4, Lexer::Gpt4o] {
        let with = |engine: Engine| {
            let mut out = Vec::new();
            lexer.for_each_chunk_with(engine, text, |c| out.push(c));
            out
        };
        let exact = with(Engine::Exact);
        assert_eq!(with(Engine::best()), exact, "{lexer:?}: mask lexer vs exact lexer on {text:?}");
        #[cfg(target_arch = "x86_64")]
        assert_eq!(with(Engine::Sse2), exact, "{lexer:?}: mask lexer (SSE2) vs exact lexer on {text:?}");
    }
    for (i, s) in splitters().iter().enumerate() {
        let ours = chunks(s, text);
        assert_eq!(ours.concat(), text);
        assert!(ours.iter().all(|c| !c.is_empty()));
        // fancy-regex may give up (backtracking limit) on long inputs.
        let theirs: Result<Vec<&str>, _> = regexes()[i].find_iter(text).map(|m| m.map(|m| m.as_str())).collect();
        if let Ok(theirs) = theirs {
            assert_eq!(ours, theirs, "lexer {i} vs fancy-regex on {text:?}");
        }
        // Every cut point (at most 12 of them, spread out) keeps the chunks.
        let step = cuts.len() / 12 + 1;
        for &p in cuts.iter().step_by(step) {
            let mut cut = chunks(s, &text[..p]);
            cut.extend(chunks(s, &text[p..]));
            assert_eq!(cut, ours, "pattern {i}, cut at {p} of {text:?}");
        }
        let target = 1 + data.first().map_or(0, |&x| x as usize % 64);
        for (how, segs) in [("segments", segments(text, target)), ("pieces::cut", pieces::cut(text, target, &[]))] {
            assert_eq!(segs.concat(), text);
            let cut: Vec<&str> = segs.iter().flat_map(|seg| chunks(s, seg)).collect();
            assert_eq!(cut, ours, "pattern {i}, {how} of {target}");
        }
    }
}

/// `data`: a pattern (up to the first 0 byte, at most 80 bytes) and a text.
pub fn custom_pattern(data: &[u8]) {
    let split = data.iter().position(|&b| b == 0).unwrap_or(data.len().min(16));
    let pattern = String::from_utf8_lossy(&data[..split.min(80)]);
    let text = String::from_utf8_lossy(data.get(split + 1..).unwrap_or_default());
    let Ok(s) = Splitter::new(&pattern) else { return };
    let _ = s.findall(&text);
    let mut covered = String::new();
    if s.for_each_chunk(&text, |c| covered.push_str(c)).is_ok() {
        assert_eq!(covered, *text, "pattern {pattern:?}");
    }
}

/// A text with repeats at several scales, so that training makes long tokens.
fn training_text() -> String {
    let mut t = String::new();
    for i in 0..40 {
        t.push_str("The quick brown fox jumps over the lazy dog's back; it's 1234567 o'clock.\n");
        t.push_str("  indented code(x, y) => { return x + y; } // done\r\n\t\t");
        t.push_str("Über naïve café — 日本語のテキスト、中文文本。Ελληνικά κείμενα! 🙂👍🏽🇫🇷\n\n");
        t.push_str(&"a".repeat(i * 7));
        t.push_str(&" ".repeat(i % 9));
        t.push_str(&format!("{} {}\n", i * 997, "ab".repeat(i)));
    }
    t
}

const SPECIALS: [&str; 3] = ["<|endoftext|>", "<|fim|>", "x\ny"];

/// Token bytes of a merge list replayed from the 256 bytes, checking that the
/// merges are valid: parts exist, a new id is the next one, a reused id has
/// the same bytes, and all token bytes are unique.
fn replay(merges: &[crate::train::Merge]) -> Vec<Vec<u8>> {
    let mut vocab: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    let mut seen: FxHashMap<Vec<u8>, u32> = vocab.iter().enumerate().map(|(i, b)| (b.clone(), i as u32)).collect();
    for m in merges {
        assert!((m.left as usize) < vocab.len() && (m.right as usize) < vocab.len(), "{m:?}");
        let bytes = [vocab[m.left as usize].clone(), vocab[m.right as usize].clone()].concat();
        if m.new as usize == vocab.len() {
            assert!(!seen.contains_key(&bytes), "{m:?} duplicates a token");
            seen.insert(bytes.clone(), m.new);
            vocab.push(bytes);
        } else {
            assert_eq!(seen.get(&bytes), Some(&m.new), "{m:?} reuses an id of other bytes");
        }
    }
    vocab
}

/// An encoder and the ranks it was made from.
type Trained = (Encoder, FxHashMap<Vec<u8>, Rank>);

/// Three trained encoders (one per built-in pattern) and their ranks.
fn trained() -> &'static [Trained] {
    static E: OnceLock<Vec<Trained>> = OnceLock::new();
    E.get_or_init(|| {
        let text = training_text();
        BUILTIN
            .iter()
            .map(|pattern| {
                let s = Splitter::new(pattern).unwrap();
                let counts = count_documents(&s, &[&text]).unwrap();
                let merges = learn_merges(counts, 700, |_, _| Ok(())).unwrap();
                let vocab = replay(&merges);
                let ranks: FxHashMap<Vec<u8>, Rank> =
                    vocab.iter().enumerate().map(|(i, b)| (b.clone(), i as Rank)).collect();
                let specials: FxHashMap<String, Rank> =
                    SPECIALS.iter().enumerate().map(|(i, t)| (t.to_string(), (vocab.len() + i) as Rank)).collect();
                (Encoder::new(ranks.clone(), specials, pattern).unwrap(), ranks)
            })
            .collect()
    })
}

/// Byte-level BPE as specified, as slowly as can be: the whole chunk if it is
/// a token, else merge the leftmost adjacent pair of lowest rank until none
/// is a token.
fn reference_bpe(ranks: &FxHashMap<Vec<u8>, Rank>, chunk: &[u8]) -> Vec<Rank> {
    if let Some(&r) = ranks.get(chunk) {
        return vec![r];
    }
    let mut parts: Vec<Vec<u8>> = chunk.iter().map(|&b| vec![b]).collect();
    loop {
        let best = (0..parts.len().saturating_sub(1))
            .filter_map(|i| ranks.get(&[parts[i].as_slice(), parts[i + 1].as_slice()].concat()).map(|&r| (r, i)))
            .min();
        let Some((_, i)) = best else { break };
        let right = parts.remove(i + 1);
        parts[i].extend(right);
    }
    parts.iter().map(|p| ranks[p]).collect()
}

pub fn encode_decode(data: &[u8]) {
    let Some((&sel, rest)) = data.split_first() else { return };
    let text = String::from_utf8_lossy(rest);
    let text: &str = &text;
    let (enc, ranks) = &trained()[sel as usize % 3];
    let ordinary = enc.encode_ordinary(text).unwrap();
    assert_eq!(enc.decode_bytes(&ordinary).unwrap(), text.as_bytes());
    let allowed: FxHashSet<String> =
        SPECIALS.iter().enumerate().filter(|(i, _)| sel & (8 << i) != 0).map(|(_, t)| t.to_string()).collect();
    let ids = enc.encode(text, &allowed).unwrap();
    assert_eq!(enc.decode_bytes(&ids).unwrap(), text.as_bytes());
    if allowed.is_empty() {
        assert_eq!(ids, ordinary);
    }
    let piece = 1 + (sel as usize >> 6) * 5;
    assert_eq!(pieces::encode_with(enc, text, &allowed, piece, || Ok(())).unwrap(), ids);
    // Each chunk, and the raw bytes as one chunk, against the reference.
    let check = |chunk: &[u8]| {
        if chunk.len() <= 300 {
            let mut out = Vec::new();
            enc.encode_chunk(chunk, &mut out).unwrap();
            assert_eq!(out, reference_bpe(ranks, chunk), "{:?}", String::from_utf8_lossy(chunk));
        }
    };
    enc.splitter().for_each_chunk(text, |c| check(c.as_bytes())).unwrap();
    if !rest.is_empty() {
        check(rest);
    }
}

pub fn train(data: &[u8]) {
    fn pool(n: usize) -> &'static rayon::ThreadPool {
        static P: OnceLock<[rayon::ThreadPool; 2]> = OnceLock::new();
        &P.get_or_init(|| [1, 2].map(|n| rayon::ThreadPoolBuilder::new().num_threads(n).build().unwrap()))[n - 1]
    }
    let Some((&sel, rest)) = data.split_first() else { return };
    let text = String::from_utf8_lossy(rest);
    let docs: Vec<&str> = text.split('|').collect();
    let pattern = [GPT2_PATTERN, GPT4_PATTERN, GPT4O_PATTERN, r"[\s\S]+"][sel as usize % 4];
    let s = Splitter::new(pattern).unwrap();
    let target = 256 + (sel as usize >> 2) * 4;
    let run = |threads| {
        pool(threads).install(|| {
            let counts = count_documents(&s, &docs).unwrap();
            let mut bytes = 0u64;
            counts.for_each(|k, n| bytes += k.len() as u64 * n);
            assert_eq!(bytes, docs.iter().map(|d| d.len() as u64).sum::<u64>());
            learn_merges(counts, target, |_, _| Ok(())).unwrap()
        })
    };
    let merges = run(1);
    assert_eq!(run(2), merges, "1 and 2 threads differ");
    let vocab = replay(&merges);
    assert!(vocab.len() <= target);
    let ranks: FxHashMap<Vec<u8>, Rank> = vocab.iter().enumerate().map(|(i, b)| (b.clone(), i as Rank)).collect();
    let enc = Encoder::new(ranks, FxHashMap::default(), pattern).unwrap();
    for doc in &docs {
        let ids = enc.encode_ordinary(doc).unwrap();
        assert_eq!(enc.decode_bytes(&ids).unwrap(), doc.as_bytes());
    }
}

/// `data`: a flag byte, then records `[kind, len, bytes.., id (2 bytes)]`
/// until a record does not fit; what is left is a text to encode and ids to
/// decode. Flags: bits 0-1 the pattern, bit 2 "add the 256 single bytes".
pub fn encoder_new(data: &[u8]) {
    let Some((&flags, mut rest)) = data.split_first() else { return };
    let pattern = [GPT2_PATTERN, GPT4_PATTERN, GPT4O_PATTERN, r"\w+|[\s\S]"][flags as usize % 4];
    let mut ranks: FxHashMap<Vec<u8>, Rank> = FxHashMap::default();
    if flags & 4 != 0 {
        ranks.extend((0..=255u8).map(|b| (vec![b], b as Rank)));
    }
    let mut specials: FxHashMap<String, Rank> = FxHashMap::default();
    while let [kind, len, tail @ ..] = rest {
        let len = (*len % 16) as usize;
        if tail.len() < len + 2 || *kind == 0xff {
            break;
        }
        let bytes = &tail[..len];
        let mut id = u16::from_le_bytes([tail[len], tail[len + 1]]) as Rank;
        if kind & 0x80 != 0 {
            id |= MAX_ID + 1; // out of range: must be refused, never allocated
        }
        if kind & 1 != 0 {
            specials.insert(String::from_utf8_lossy(bytes).into_owned(), id);
        } else {
            ranks.insert(bytes.to_vec(), id);
        }
        rest = &tail[len + 2..];
    }
    let complete = (0..=255u8).all(|b| ranks.contains_key(&vec![b]));
    let ids: Vec<Rank> = rest.chunks(2).map(|c| c[0] as Rank | (*c.last().unwrap() as Rank) << 8).collect();
    let text = String::from_utf8_lossy(rest);
    let Ok(enc) = Encoder::new(ranks.clone(), specials.clone(), pattern) else { return };
    let max = ranks.values().chain(specials.values()).copied().max();
    assert_eq!(enc.n_vocab(), max.map_or(0, |m| m as usize + 1));
    if let Ok(bytes) = enc.decode_bytes(&ids) {
        let expected: Vec<u8> = ids.iter().flat_map(|&i| enc.token_bytes(i).unwrap().to_vec()).collect();
        assert_eq!(bytes, expected);
    }
    let all: FxHashSet<String> = specials.keys().cloned().collect();
    for allowed in [FxHashSet::default(), all] {
        match enc.encode(&text, &allowed) {
            Ok(ids) => assert_eq!(enc.decode_bytes(&ids).unwrap(), text.as_bytes()),
            Err(e) => assert!(!complete, "a complete byte-level vocabulary failed: {e}"),
        }
    }
    let _ = enc.recover_merges();
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Replays every kept input (crashes found by fuzzing, and seeds) through
    /// its target, on stable Rust: `tests/fuzz_regressions/<target>/*`.
    #[test]
    fn fuzz_regressions() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz_regressions");
        type Target = (&'static str, fn(&[u8]));
        let targets: [Target; 5] = [
            ("pretokenize", pretokenize),
            ("custom_pattern", custom_pattern),
            ("encode_decode", encode_decode),
            ("train", train),
            ("encoder_new", encoder_new),
        ];
        let mut n = 0;
        for (name, target) in targets {
            let Ok(dir) = std::fs::read_dir(root.join(name)) else { continue };
            for entry in dir {
                let path = entry.unwrap().path();
                if path.extension().is_some_and(|e| e == "md") {
                    continue; // notes, not inputs
                }
                let data = std::fs::read(&path).unwrap();
                let result = std::panic::catch_unwind(|| target(&data));
                assert!(result.is_ok(), "{} fails again", path.display());
                n += 1;
            }
        }
        assert!(n > 0, "no inputs in {}", root.display());
    }

    #[test]
    fn targets_accept_simple_inputs() {
        let inputs: [&[u8]; 6] = [
            b"",
            b"\x00",
            b"Hello world's 1234 end\n\nnew line",
            "ünï 🙂 \u{301}x".as_bytes(),
            b"\xff\xfe",
            b"a\nb\n c",
        ];
        for data in inputs {
            pretokenize(data);
            custom_pattern(data);
            encode_decode(data);
            train(data);
            encoder_new(data);
        }
        custom_pattern(b"\\w+\x00ab, cd");
        encode_decode(b"\xff<|endoftext|>x\ny<|fim|>");
        encoder_new(b"\x04\x01\x03abc\x00\x01\x00\x02xy\x00\x02text");
    }
}
