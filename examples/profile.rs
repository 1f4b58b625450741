//! Profiling driver (not part of the library): times the phases of encoding
//! and training on one file, so a change can be measured in isolation.
//!   cargo run --profile release --example profile -- encode RANKFILE PATTERN CORPUS
//!   (WARM=FILE encodes another file first; LEX_ONLY=1 and MERGE_ONLY=1 time the
//!   lexer or the merges alone)
//!   cargo run --profile release --example profile -- train CORPUS VOCAB
//!   (MERGES=PATH writes the learned merges to PATH)
//!   cargo run --profile release --example profile -- records (raw|parse) FIELD FILES...
//!   (reads JSON Lines shards: `raw` only decompresses, `parse` takes each record's field too)
use std::time::Instant;

use bpe::encode::Encoder;
use bpe::split::patterns::{GPT2_PATTERN, GPT4O_PATTERN, GPT4_PATTERN};
use bpe::split::pretokenize::Splitter;
use bpe::vocab::Rank;
use rustc_hash::FxHashMap;

fn b64(s: &[u8]) -> Vec<u8> {
    let val = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => 0,
    };
    let s: Vec<u8> = s.iter().copied().filter(|&c| c != b'=').collect();
    let mut out = Vec::new();
    for ch in s.chunks(4) {
        let mut acc = 0u32;
        for (i, &c) in ch.iter().enumerate() {
            acc |= (val(c) as u32) << (18 - 6 * i);
        }
        for i in 0..ch.len() - 1 {
            out.push((acc >> (16 - 8 * i)) as u8);
        }
    }
    out
}

fn pattern(name: &str) -> &'static str {
    match name {
        "gpt2" => GPT2_PATTERN,
        "gpt4" => GPT4_PATTERN,
        "gpt4o" => GPT4O_PATTERN,
        _ => panic!("pattern: gpt2|gpt4|gpt4o"),
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args[1].as_str() {
        "records" => {
            let t = Instant::now();
            let field: Vec<String> = args[3].split('.').map(String::from).collect();
            let (mut bytes, mut docs) = (0usize, 0usize);
            for path in &args[4..] {
                let path = std::path::Path::new(path);
                let read = std::sync::atomic::AtomicU64::new(0);
                let input = bpe::input::open_counted(path, &read).unwrap();
                let mut input = std::io::BufReader::with_capacity(1 << 20, input);
                if args[2] == "raw" {
                    bytes += std::io::copy(&mut input, &mut std::io::sink()).unwrap() as usize;
                    continue;
                }
                let mut records = bpe::input::records::Records::new(input, path, &field, false);
                while let Some(batch) = records.next_batch(bpe::input::records::BATCH_BYTES).unwrap() {
                    bytes += batch.text.len();
                    docs += batch.len();
                }
            }
            let s = t.elapsed().as_secs_f64();
            println!(
                "{} {} MB of text, {} records, {:.2} s, {:.0} MB/s",
                args[2],
                bytes / 1_000_000,
                docs,
                s,
                bytes as f64 / 1e6 / s
            );
        }
        "encode" => {
            let ranks: FxHashMap<Vec<u8>, Rank> = std::fs::read(&args[2])
                .unwrap()
                .split(|&c| c == b'\n')
                .filter(|l| !l.is_empty())
                .map(|l| {
                    let mut it = l.split(|&c| c == b' ');
                    let tok = b64(it.next().unwrap());
                    let r: Rank = std::str::from_utf8(it.next().unwrap()).unwrap().parse().unwrap();
                    (tok, r)
                })
                .collect();
            let text = std::fs::read_to_string(&args[4]).unwrap();
            let pat = pattern(&args[3]);
            // (The build is timed too: the whole-character table is made here.)
            let t = Instant::now();
            let enc = Encoder::new(ranks, FxHashMap::default(), pat).unwrap();
            println!("Encoder::new {:.1} ms", t.elapsed().as_secs_f64() * 1e3);
            // CACHE_MIB=n: the chunk cache's cap (0: off); WARM=FILE: encode
            // another file first (the cache then holds its words).
            if let Ok(mib) = std::env::var("CACHE_MIB") {
                enc.cache().set_capacity(mib.parse::<usize>().unwrap() << 20);
            }
            if let Ok(warm) = std::env::var("WARM") {
                std::hint::black_box(enc.encode_ordinary(&std::fs::read_to_string(warm).unwrap()).unwrap());
            }
            let split = Splitter::new(pat).unwrap();
            let mb = text.len() as f64 / 1e6;
            let reps: usize = std::env::var("REPS").map_or(5, |v| v.parse().unwrap());
            let mut t_lex = vec![];
            let mut t_enc = vec![];
            let mut n = 0usize;
            if reps == 0 {
                return;
            }
            // LEX_ONLY=1: time lexing alone (for texts whose encoding is slow,
            // such as one 10 MB run of a letter).
            // One timed lexing pass: the seconds and the chunks.
            let lex = || {
                let t = Instant::now();
                let mut c = 0usize;
                split.for_each_chunk(&text, |_| c += 1).unwrap();
                (t.elapsed().as_secs_f64(), c)
            };
            // MERGE_ONLY=1: the merges alone. The distinct chunks of the text
            // that are not one token and not chunks of WARM (the words a warm
            // call must merge), each merged once per round (`encode_chunk`):
            // nanoseconds a word, the median of the rounds.
            if std::env::var("MERGE_ONLY").is_ok() {
                let mut known = rustc_hash::FxHashSet::default();
                if let Ok(warm) = std::env::var("WARM") {
                    let w = std::fs::read_to_string(warm).unwrap();
                    split.for_each_chunk(&w, |c| _ = known.insert(c.to_string())).unwrap();
                }
                let mut words: Vec<&str> = Vec::new();
                let mut seen = rustc_hash::FxHashSet::default();
                let mut out = Vec::new();
                split
                    .for_each_chunk(&text, |c| {
                        out.clear();
                        enc.encode_chunk(c.as_bytes(), &mut out).unwrap();
                        if out.len() > 1 && !known.contains(c) && seen.insert(c) {
                            words.push(c);
                        }
                    })
                    .unwrap();
                let bytes: usize = words.iter().map(|w| w.len()).sum();
                let mut ts = vec![];
                let mut ids = 0usize;
                for _ in 0..reps {
                    let t = Instant::now();
                    ids = 0;
                    for w in &words {
                        out.clear();
                        enc.encode_chunk(w.as_bytes(), &mut out).unwrap();
                        ids += out.len();
                    }
                    ts.push(t.elapsed().as_secs_f64());
                }
                let best = ts.iter().copied().fold(f64::MAX, f64::min);
                println!(
                    "merges: {} words, {:.1} bytes and {:.2} ids a word: {:.1} ns a word (best {:.1})",
                    words.len(),
                    bytes as f64 / words.len() as f64,
                    ids as f64 / words.len() as f64,
                    median(ts) * 1e9 / words.len() as f64,
                    best * 1e9 / words.len() as f64
                );
                return;
            }
            if std::env::var("LEX_ONLY").is_ok() {
                for _ in 0..reps {
                    let (s, c) = lex();
                    t_lex.push(s);
                    n = c;
                }
                println!("chunks {n}  lex {:.1} MB/s", mb / median(t_lex));
                return;
            }
            for _ in 0..reps {
                let (s, c) = lex();
                t_lex.push(s);
                n = c;
                let t = Instant::now();
                let ids = enc.encode_ordinary(&text).unwrap();
                t_enc.push(t.elapsed().as_secs_f64());
                std::hint::black_box(ids);
            }
            let (l, e) = (median(t_lex), median(t_enc.clone()));
            // THREADS=1: also time the text's two halves lexed, then encoded,
            // on two threads at once, to see how each part scales on 2 cores.
            if std::env::var("THREADS").is_ok() {
                let mut cut = text.len() / 2;
                while !text.is_char_boundary(cut) {
                    cut += 1;
                }
                let halves = [&text[..cut], &text[cut..]];
                let (mut t2_lex, mut t2_enc) = (vec![], vec![]);
                for _ in 0..reps {
                    let t = Instant::now();
                    std::thread::scope(|s| {
                        for h in halves {
                            let split = &split;
                            s.spawn(move || {
                                split
                                    .for_each_chunk(h, |c| {
                                        std::hint::black_box(c);
                                    })
                                    .unwrap()
                            });
                        }
                    });
                    t2_lex.push(t.elapsed().as_secs_f64());
                    let t = Instant::now();
                    std::thread::scope(|s| {
                        for h in halves {
                            let enc = &enc;
                            s.spawn(move || std::hint::black_box(enc.encode_ordinary(h).unwrap()));
                        }
                    });
                    t2_enc.push(t.elapsed().as_secs_f64());
                }
                let (l2, e2) = (median(t2_lex), median(t2_enc));
                println!("two threads: lex {:.2}x  encode {:.2}x", l / l2, e / e2);
            }
            // BATCH=1: encode_batch's Rust part alone: 1000 documents in
            // runs of at most 1 MB, a memo per thread (as `map_init` keeps one
            // per piece of work rayon splits off, close to one per thread).
            if std::env::var("BATCH").is_ok() {
                use rayon::prelude::*;
                let mut docs = vec![];
                let mut rest = text.as_str();
                while !rest.is_empty() {
                    let mut cut = (text.len() / 1000).min(rest.len());
                    while !rest.is_char_boundary(cut) {
                        cut += 1;
                    }
                    let (d, r) = rest.split_at(cut);
                    docs.push(d);
                    rest = r;
                }
                let sizes: Vec<usize> = docs.iter().map(|d| d.len()).collect();
                let none = rustc_hash::FxHashSet::default();
                for threads in [1, 2] {
                    let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
                    let run_bytes = (text.len() / (4 * threads)).clamp(1, 1 << 20);
                    let runs = bpe::run::pieces::groups(&sizes, run_bytes);
                    let mut ts = vec![];
                    for _ in 0..reps {
                        let t = Instant::now();
                        let out: Vec<Vec<Vec<Rank>>> = pool.install(|| {
                            runs.par_iter()
                                .map_init(
                                    || enc.memo(),
                                    |memo, r| enc.encode_each(&docs[r.clone()], &none, memo).unwrap(),
                                )
                                .collect()
                        });
                        ts.push(t.elapsed().as_secs_f64());
                        std::hint::black_box(out);
                    }
                    println!("batch {threads} thread(s): {:.1} MB/s", mb / median(ts));
                }
            }
            // STATS=1: how many chunks are not one token (they need merging).
            if std::env::var("STATS").is_ok() {
                let (mut multi, mut multi_bytes, mut multi_ids) = (0usize, 0usize, 0usize);
                let mut distinct = rustc_hash::FxHashSet::default();
                let mut out = Vec::new();
                split
                    .for_each_chunk(&text, |c| {
                        out.clear();
                        enc.encode_chunk(c.as_bytes(), &mut out).unwrap();
                        if out.len() > 1 {
                            multi += 1;
                            multi_bytes += c.len();
                            multi_ids += out.len();
                            distinct.insert(c);
                        }
                    })
                    .unwrap();
                println!(
                    "not-one-token chunks {multi} ({} distinct), avg {:.1} bytes -> {:.1} ids",
                    distinct.len(),
                    multi_bytes as f64 / multi as f64,
                    multi_ids as f64 / multi as f64
                );
            }
            // The best run too: on a noisy machine it moves less than the median.
            let best = t_enc.iter().copied().fold(f64::MAX, f64::min);
            println!(
                "chunks {n}  lex {:.1} MB/s ({l:.3}s)  encode {:.1} MB/s ({e:.3}s, best {:.1} MB/s)  bpe-part {:.3}s",
                mb / l,
                mb / e,
                mb / best,
                e - l
            );
        }
        "train" => {
            let _free = bpe::ReturnFreedMemory::new(); // as the Python module does while training
            let path = std::path::PathBuf::from(&args[2]);
            let vocab: usize = args[3].parse().unwrap();
            let split = Splitter::new(GPT4_PATTERN).unwrap();
            let t = Instant::now();
            let counts = bpe::train::count_files(&split, &[path], |_| Ok(())).unwrap();
            let n_distinct = counts.len();
            // Peak memory so far (Linux), to see which phase sets the peak.
            let peak = || {
                let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
                status.lines().find(|l| l.starts_with("VmHWM")).unwrap_or("VmHWM: ?").to_string()
            };
            let tc = t.elapsed().as_secs_f64();
            println!("distinct chunks {n_distinct}  count {tc:.3}s  {}", peak());
            let t = Instant::now();
            let merges = bpe::train::learn_merges(counts, vocab - 256, |_, v| {
                if [300, 1000, 3000, 10000, 30000].contains(&v) {
                    println!("  vocab {v}: {:.3}s", t.elapsed().as_secs_f64());
                }
                Ok(())
            })
            .unwrap();
            println!("merges {} in {:.3}s  {}", merges.len(), t.elapsed().as_secs_f64(), peak());
            // MERGES=PATH: the merges as text ("left right new" per line), to
            // check that a change learns the same ones (`cmp` two files).
            if let Ok(out) = std::env::var("MERGES") {
                let text: String = merges.iter().map(|m| format!("{} {} {}\n", m.left, m.right, m.new)).collect();
                std::fs::write(out, text).unwrap();
            }
        }
        _ => panic!("encode|train"),
    }
}
