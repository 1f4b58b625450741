//! The mask lexer against the exact lexer (and fancy-regex): random texts
//! built to put every kind of run across the 64-byte windows' edges,
//! adversarial texts, the corpora. (`split/lexer/tests.rs` compares the lexers, the
//! mask lexer included, with fancy-regex.)

use super::super::tests::{adversarial_texts, corpus_paths, rng, weighted, ALPHABET, ASCII_HEAVY, LEXERS, WHITE_HEAVY};
use super::super::Lexer;
use super::classify::{known_high, Bytewise, Classify};
use super::Engine;
use fancy_regex::Regex;

/// The engines to test: the byte-by-byte classifier, and the SIMD ones this
/// CPU has.
fn engines() -> Vec<Engine> {
    let mut e = vec![Engine::Bytewise];
    #[cfg(target_arch = "x86_64")]
    {
        e.push(Engine::Sse2);
        if Engine::best() == Engine::Avx2 {
            e.push(Engine::Avx2);
        }
    }
    e
}

fn chunks(lexer: Lexer, engine: Engine, text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    lexer.for_each_chunk_with(engine, text, |c| out.push(c));
    out
}

/// Panics with the first differing chunk (and some context) if an engine's
/// chunks differ from the exact lexer's.
fn check(lexer: Lexer, text: &str) {
    let want = chunks(lexer, Engine::Exact, text);
    for engine in engines() {
        let got = chunks(lexer, engine, text);
        if got != want {
            let k = (0..got.len().min(want.len())).find(|&k| got[k] != want[k]).unwrap_or(got.len().min(want.len()));
            let at: usize = want[..k].iter().map(|c| c.len()).sum();
            panic!(
                "{lexer:?} {engine:?} at byte {at}, chunk {k}: {:?} vs exact {:?}\ntext {:?}",
                &got[k.saturating_sub(3)..(k + 3).min(got.len())],
                &want[k.saturating_sub(3)..(k + 3).min(want.len())],
                if text.len() < 400 { text } else { &text[..text.floor_char_boundary(400)] },
            );
        }
    }
}

/// `check`, and also from the next few bytes on, so that the windows fall
/// at other places in the same text.
fn check_shifted(lexer: Lexer, text: &str) {
    for k in 0..4.min(text.len()) {
        if text.is_char_boundary(k) {
            check(lexer, &text[k..]);
        }
    }
}

/// Pieces for texts with runs across window edges: each kind of run, of a
/// random length.
#[rustfmt::skip]
fn run_piece(rand: &mut impl FnMut() -> u64) -> String {
    let len = match rand() % 4 {
        0 => 1 + rand() % 4,
        1 => 1 + rand() % 16,
        2 => 50 + rand() % 30,
        _ => 1 + rand() % 140,
    } as usize;
    let pick = |r: u64, s: &[&str]| s[(r % s.len() as u64) as usize].to_string();
    let rep = |s: &str| s.repeat(len);
    match rand() % 22 {
        0 => rep(&pick(rand(), &["a", "Z", "e", "s", "é", "É", "“"])),
        1 => (0..len).map(|_| pick(rand(), &["a", "b", "Q", "R", "s", "T"])).collect(),
        2 => (0..len).map(|_| pick(rand(), &["0", "7", "9"])).collect(),
        3 => rep(" "),
        4 => (0..len).map(|_| pick(rand(), &[" ", "\t", "\n", "\r", "\u{b}", "\u{c}"])).collect(),
        5 => format!("\n{}", " ".repeat(len)),
        6 => (0..len).map(|_| pick(rand(), &[".", ",", "!", "(", ")", "/", "-", "#", "\u{1c}", "\0", "\u{7f}"])).collect(),
        7 => format!("{}\n\n", pick(rand(), &[".", ";", "/", "'", "*/"])),
        8 => pick(rand(), &["'s", "'S", "'t", "'d", "'m", "'ll", "'LL", "'lL", "'ve", "'VE", "'re", "'Re", "'x", "'", "'l", "'v", "'r", "'ſ"]),
        9 => pick(rand(), &["don't", "DON'T", "it's", "we'll", "they're", "I've", "o'clock", "rock'n'roll", "x''s", "it's's"]),
        10 => pick(rand(), &["é", "É", "ſ", "日本", "\u{301}", "٣", "\u{a0}", "\u{85}", "\u{2028}", "\u{3000}", "…", "“", "”", "’", "🙂", "Ⅻ"]),
        18 => pick(rand(), &["“", "”", "‘", "’", "—", "–", "…", "′", "‿", "\u{2027}", "\u{2028}", "\u{2029}", "\u{202f}", "\u{200b}", "\u{200d}", "\u{2000}", "\u{203f}", "\u{2040}", "\u{2070}", "\u{20ac}"]),
        19 => pick(rand(), &["é", "É", "æ", "Æ", "ß", "ÿ", "À", "Þ", "×", "÷", "ª", "µ", "\u{a0}", "²", "Ā", "ā", "ı", "é's", "É'S", "“Hello”", "don’t", "’s", " “", "“ ", ".“a", "×a", "a×", "Éa", "aÉ", "éÉ", "ÉÉé", "caféCafé"]),
        11 => (0..len).map(|_| pick(rand(), &["é", "a", " ", "б", "ж", "日", "1", ".", "\u{301}"])).collect(),
        12 => pick(rand(), &[" ", "  ", "\t", "\n", " \n", "\n ", "\r\n", "\n\t", ". ", ".\n", "./", "\n/", ".\n/"]),
        13 => pick(rand(), &["HTMLParser", "camelCase", "ABC", "aBc", "Hello", "WORLD", "iOS", "x"]),
        14 => format!("{}{}", " ".repeat(len), pick(rand(), &["x", "X", "1", ".", "\n", "é", "\u{a0}", "'s", "\t"])),
        15 => format!("{}{}", pick(rand(), &[".", "!", "'", "/", " ", "\t", "\n"]), pick(rand(), &["a", "Z", "é", "1", "'s", "\n", " "])),
        _ => {
            let words = ["the", " the", " and", " of", ",", ".", "\n", " A", "I", " 1234", " x1", "(", ")", ";", " --", "    ", "\n    "];
            (0..1 + len / 4).map(|_| pick(rand(), &words)).collect()
        }
    }
}

/// A text of pieces of `run_piece` up to about `len` bytes.
fn runs_text(rand: &mut impl FnMut() -> u64, len: usize) -> String {
    let mut s = String::new();
    while s.len() < len {
        s.push_str(&run_piece(rand));
    }
    s
}

#[test]
fn classifiers_equal_the_bytewise_one() {
    let mut rand = rng(0x1234_5678_9abc_def1);
    for k in 0..20_000 {
        let mut w = [0u8; 64];
        for (i, b) in w.iter_mut().enumerate() {
            // Every byte value at every place, and random ones.
            *b = if k < 256 { (k + i) as u8 } else { rand() as u8 };
        }
        // The engines tested are those the CPU has.
        // SAFETY: `Bytewise` is plain Rust.
        let want = unsafe { Bytewise::classify(&w) };
        // SAFETY: as above.
        let want_high = unsafe { Bytewise::high_bytes(&w) };
        #[cfg(target_arch = "x86_64")]
        {
            // SAFETY: SSE2 is part of x86_64.
            assert_eq!(unsafe { super::Sse2::classify(&w) }, want, "{w:?}");
            // SAFETY: as above.
            assert_eq!(unsafe { super::Sse2::high_bytes(&w) }, want_high, "{w:?}");
            if Engine::best() == Engine::Avx2 {
                // SAFETY: `Engine::best` chose AVX2: the CPU has what it uses.
                assert_eq!(unsafe { super::Avx2::classify(&w) }, want, "{w:?}");
                // SAFETY: as above.
                assert_eq!(unsafe { super::Avx2::high_bytes(&w) }, want_high, "{w:?}");
            }
        }
        // The byte-by-byte classes are those of `split/ascii.rs`.
        for (i, &c) in w.iter().enumerate() {
            let k = crate::split::ascii::CLASS[c as usize];
            let bit = |m: u64| m >> i & 1 != 0;
            assert_eq!(bit(want.letter), k & crate::split::ascii::LETTER != 0);
            assert_eq!(bit(want.upper), k == crate::split::ascii::UPPER);
            assert_eq!(bit(want.digit), k == crate::split::ascii::DIGIT);
            assert_eq!(bit(want.white), k & (crate::split::ascii::SPACE | crate::split::ascii::NEWLINE) != 0);
            assert_eq!(bit(want.newline), k == crate::split::ascii::NEWLINE);
            assert_eq!(bit(want.high), k == crate::split::ascii::HIGH);
        }
    }
}

/// The longer characters that `known_high` knows have the classes it gives
/// them in the Unicode table, and no other character of 2 or 3 bytes is
/// known: each such character, at every place in a window of `x`.
#[test]
fn known_high_characters_have_their_classes() {
    use super::super::{table, L, LL, LM, LO, LT, LU, M, N, S};
    let t = table();
    let mut known = 0;
    for c in ('\u{80}'..='\u{7ff}').chain('\u{2000}'..='\u{2fff}') {
        let f = t[c as usize];
        let mut buf = [0u8; 4];
        let bytes = c.encode_utf8(&mut buf).as_bytes();
        for at in 0..=64 - bytes.len() {
            let mut w = [b'x'; 64];
            w[at..at + bytes.len()].copy_from_slice(bytes);
            // SAFETY: `Bytewise` is plain Rust.
            let mut m = unsafe { Bytewise::classify(&w) };
            // SAFETY: as above.
            known_high(&mut m, unsafe { Bytewise::high_bytes(&w) });
            let ours = (at..at + bytes.len()).map(|i| 1u64 << i).sum::<u64>();
            let x_letters = !ours & ((1u128 << 64) - 1) as u64;
            // The x's around it are untouched.
            assert_eq!(m.letter & x_letters, x_letters, "{c:?} at {at}");
            assert_eq!(m.high & x_letters | m.upper & x_letters | m.punct_tail & x_letters, 0, "{c:?} at {at}");
            if m.high & ours != 0 {
                // Unknown: all its bytes stay undecided, in no class.
                assert_eq!(m.high & ours, ours, "{c:?} at {at}");
                assert_eq!((m.letter | m.upper | m.punct_tail) & ours, 0, "{c:?} at {at}");
                continue;
            }
            known += 1;
            if m.letter & ours != 0 {
                // A letter, of one case class only (GPT-4o's UP or LOW).
                assert_eq!(m.letter & ours, ours, "{c:?}");
                assert!(f & L != 0 && f & (LT | LM | LO | M) == 0 && f & (LU | LL) != 0, "{c:?}");
                let upper = if f & LU != 0 { ours } else { 0 };
                assert_eq!(m.upper & ours, upper, "{c:?}");
                assert_eq!(m.punct_tail & ours, 0, "{c:?}");
            } else {
                // Punctuation: not a letter, number, mark or white space.
                assert!(f & (L | N | S | M) == 0, "{c:?}");
                assert_eq!(m.punct_tail & ours, ours & !(1 << at), "{c:?}");
                assert_eq!(m.upper & ours, 0, "{c:?}");
            }
        }
    }
    assert!(known > 1000, "{known}");
}

/// Texts of runs of every kind and length, 60 to 400 bytes: every run
/// crosses window edges somewhere.
#[test]
fn mask_lexer_equals_exact_lexer_on_runs_across_windows() {
    let mut rand = rng(0x05ee_d0fe_d9e5);
    for _ in 0..super::super::tests::iterations() / 3 {
        let len = 60 + (rand() % 340) as usize;
        let text = runs_text(&mut rand, len);
        for (lexer, _) in LEXERS {
            check_shifted(lexer, &text);
        }
    }
}

/// Longer random texts from the lexer tests' generators.
#[test]
fn mask_lexer_equals_exact_lexer_on_random_text() {
    let mut rand = rng(0x2545f4914f6cdd1d);
    for k in 0..super::super::tests::iterations() / 3 {
        let n = 20 + (rand() % 200) as usize;
        let text: String = match k % 3 {
            0 => (0..n).map(|_| ALPHABET[(rand() % ALPHABET.len() as u64) as usize]).collect(),
            1 => (0..n).map(|_| weighted(ASCII_HEAVY, rand())).collect(),
            _ => (0..n).map(|_| weighted(WHITE_HEAVY, rand())).collect(),
        };
        for (lexer, _) in LEXERS {
            check(lexer, &text);
        }
    }
}

/// The same texts against fancy-regex itself (fewer: it is slow).
#[test]
fn mask_lexer_equals_fancy_regex_on_runs_across_windows() {
    let mut rand = rng(0xfeed_beef_1234_5678);
    for (lexer, pattern) in LEXERS {
        let re = Regex::new(pattern).unwrap();
        for _ in 0..super::super::tests::iterations() / 10 {
            let len = 60 + (rand() % 200) as usize;
            let text = runs_text(&mut rand, len);
            for engine in engines() {
                let theirs: Vec<&str> = re.find_iter(&text).map(|m| m.unwrap().as_str()).collect();
                assert_eq!(chunks(lexer, engine, &text), theirs, "{lexer:?} {engine:?} on {text:?}");
            }
        }
    }
}

/// A random text of up to 79 bytes: each byte one of `common`, or one time
/// in eight one of `rare`.
#[cfg(target_arch = "x86_64")]
fn mostly(rand: &mut impl FnMut() -> u64, common: &[u8], rare: &[u8]) -> Vec<u8> {
    let n = (rand() % 80) as usize;
    (0..n)
        .map(|_| {
            let pool = if !rand().is_multiple_of(8) { common } else { rare };
            pool[(rand() % pool.len() as u64) as usize]
        })
        .collect()
}

/// The white-space scan (of long runs) equals the byte-by-byte one: random
/// texts of mostly white space, from every place.
#[cfg(target_arch = "x86_64")]
#[test]
fn white_run_scans_agree() {
    let mut rand = rng(0x7777_1234_abcd_0001);
    for _ in 0..20_000 {
        let text = mostly(&mut rand, &[b' ', b'\t', b'\n', b'\r', 0x0B, 0x0C], &[b'x', b'.', 0x1C, 0xC2, 0xA0]);
        for from in 0..text.len() {
            assert_eq!(
                super::classify::white_run_sse2(&text, from),
                super::classify::white_run(&text, from),
                "{text:?} from {from}"
            );
        }
    }
}

/// The letter scan (of long words) equals `ascii::letters_end`: random
/// texts of mostly letters, from every place.
#[cfg(target_arch = "x86_64")]
#[test]
fn letter_run_scans_agree() {
    let mut rand = rng(0x1357_9bdf_2468_ace0);
    for _ in 0..20_000 {
        let text = mostly(&mut rand, b"azAZmQ", &[b'@', b'[', b'`', b'{', b' ', b'1', 0xC3, 0xA9, 0xFF]);
        for from in 0..text.len() {
            assert_eq!(
                super::classify::letter_run_sse2(&text, from),
                crate::split::ascii::letters_end(&text, from),
                "{text:?} from {from}"
            );
        }
    }
}

/// Long runs of one character around window edges: every length from 0 to
/// 200 after every prefix length from 0 to 70, before each kind of byte.
#[test]
fn mask_lexer_equals_exact_lexer_on_long_runs() {
    let runs = [
        "a", "Z", "aZ", "Ab", "7", " ", "\t", "\n", " \n", "\n ", "\r\n", ".", "/", "'", "é", "'s", "x'", " .",
        "\u{a0}",
    ];
    let ends = ["", "x", "X", "1", ".", " ", "\n", "é", "\u{a0}", "'s", "'ll", "/", "\t", " x", "\n\n"];
    for run in runs {
        for pre in [0, 1, 2, 3, 5, 8, 30, 58, 59, 60, 61, 62, 63, 64, 65, 66, 70] {
            for len in (0..70).chain([100, 125, 126, 127, 128, 129, 130, 190, 200]) {
                for end in ends {
                    let text = format!(
                        "{}{}{end}{}",
                        "w".repeat(pre),
                        run.repeat(len),
                        " tail of the text to fill a window".repeat(3)
                    );
                    for (lexer, _) in LEXERS {
                        check(lexer, &text);
                        // And with the run at (or near) the end of the text.
                        check(lexer, &text[..pre + run.len() * len + end.len()]);
                    }
                }
            }
        }
    }
}

/// A contraction, and the other apostrophe cases, at every byte of a window.
#[test]
fn mask_lexer_equals_exact_lexer_on_contractions_at_every_place() {
    let cases = [
        "'s", "'S", "'t", "'d", "'m", "'M", "'ll", "'LL", "'lL", "'l", "'ve", "'VE", "'v", "'re", "'RE", "'r", "'x",
        "''", "'", "'ſ", "'\u{301}", "'é", "'1", "' ", "'\n", "'s's", "'sx", "'llx", "'sS", "'sé",
    ];
    for case in cases {
        for before in ["x", "X", " ", ".", "1", "\n", "\t", "  ", "é", ""] {
            for at in 50..70 {
                let text = format!("{}{before}{case}{}", &"ab ".repeat(30)[..at], " and the rest".repeat(6));
                for (lexer, _) in LEXERS {
                    check(lexer, &text);
                }
            }
        }
    }
}

/// Text that switches between ASCII and other scripts at random (so the
/// exact lexer takes over and hands back at every kind of place).
#[test]
fn mask_lexer_equals_exact_lexer_on_mixed_scripts() {
    let mut rand = rng(0xabad_1dea_dead_beef);
    let ascii =
        ["The quick brown fox. ", "x = 1234567;\n", "    return y\n", "\"quoted\" ", "it's ", "  \t ", "A", "\n\n"];
    let other = [
        "Привет мир. ",
        "日本語のテキスト",
        "é",
        "naïve café ",
        "“",
        "”",
        "\u{a0}",
        "\u{3000}",
        "٣٤",
        "e\u{301}",
        "🙂 ",
        "ſ",
        "Ærøskøbing ",
        "’",
        "—",
        "…",
        "×",
        "ÀÉÎ",
        "“Quoted,” ",
        "don’t ",
        "Ā",
    ];
    for _ in 0..super::super::tests::iterations() / 3 {
        let mut text = String::new();
        while text.len() < 300 {
            let pieces: &[&str] = if rand().is_multiple_of(3) { &other } else { &ascii };
            text.push_str(pieces[(rand() % pieces.len() as u64) as usize]);
        }
        for (lexer, _) in LEXERS {
            check_shifted(lexer, &text);
        }
    }
}

#[test]
fn mask_lexer_equals_exact_lexer_on_adversarial_text() {
    let mut texts = adversarial_texts();
    texts.extend([
        format!("{}x", " ".repeat(1000)),
        format!("{}x", "\n".repeat(1000)),
        format!("{}x", " \n".repeat(500)),
        "1234567890".repeat(1000),
        "abcdefghijklmnopqrstuvwxyz".repeat(1000),
        "ABCDEFGHIJKLMNOPQRSTUVWXYZ".repeat(1000),
        "aB".repeat(5000),
        "a'b".repeat(5000),
        "x's".repeat(5000),
        ".\n".repeat(5000),
        "/\n".repeat(5000),
        "  \n".repeat(5000),
        "\n  x".repeat(5000),
        "é".repeat(5000),
        "aé".repeat(5000),
        "\u{a0} ".repeat(5000),
        "Привет, мир! Hello, world! ".repeat(500),
    ]);
    for text in &texts {
        for (lexer, _) in LEXERS {
            check(lexer, text);
        }
    }
}

/// The corpora of `corpus_paths` (those in `corpora/` and any
/// `LEXER_CORPUS` names), each from its first few bytes on.
#[test]
fn mask_lexer_equals_exact_lexer_on_corpora() {
    let paths = corpus_paths();
    assert!(!paths.is_empty(), "no corpus in corpora/");
    for path in &paths {
        let text = std::fs::read_to_string(path).unwrap();
        for (lexer, _) in LEXERS {
            check_shifted(lexer, &text);
        }
    }
}

/// The masks decide most chunks of English and code (the shipped corpora),
/// with each classifier: a change that sent them all to the exact lexer
/// would give the same chunks, slower, and no other test would see it.
/// `LEXER_CORPUS` adds files, and `--nocapture` shows the shares.
#[test]
fn masks_decide_most_chunks_of_english_and_code() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("corpora");
    let mut files = vec![
        (root.join("tinyshakespeare.txt").display().to_string(), 0.95),
        (root.join("cpython_stdlib_sample.py.txt").display().to_string(), 0.95),
    ];
    if let Ok(more) = std::env::var("LEXER_CORPUS") {
        files.extend(more.split(':').map(|p| (p.to_string(), 0.0)));
    }
    let mut engines = vec![Engine::Bytewise];
    #[cfg(target_arch = "x86_64")]
    engines.push(Engine::Sse2);
    #[cfg(target_arch = "x86_64")]
    if Engine::best() == Engine::Avx2 {
        engines.push(Engine::Avx2);
    }
    for (path, least) in &files {
        let text = std::fs::read_to_string(path).unwrap();
        for (lexer, _) in LEXERS {
            for &engine in &engines {
                super::STATS.with(|s| s.set(Default::default()));
                chunks(lexer, engine, &text);
                let s = super::STATS.with(|s| s.get());
                let total = s.mask_chunks + s.exact_chunks;
                let share = s.mask_chunks as f64 / total as f64;
                println!(
                    "{path} {lexer:?} {engine:?}: {} windows ({:.1} bytes each), {:.1}% of {total} chunks by masks",
                    s.windows,
                    text.len() as f64 / s.windows as f64,
                    100.0 * share
                );
                assert!(
                    share >= *least,
                    "{path} {lexer:?} {engine:?}: masks decided {:.1}% of the chunks",
                    100.0 * share
                );
            }
        }
    }
}
