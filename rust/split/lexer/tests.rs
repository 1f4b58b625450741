use super::*;
use fancy_regex::Regex;

pub(crate) const LEXERS: [(Lexer, &str); 5] = [
    (Lexer::Gpt2, GPT2_PATTERN),
    (Lexer::Gpt4, GPT4_PATTERN),
    (Lexer::Gpt4o, GPT4O_PATTERN),
    (Lexer::Llama3, LLAMA3_PATTERN),
    (Lexer::Qwen2, QWEN2_PATTERN),
];

/// Tricky characters: each class and each boundary case of the patterns.
#[rustfmt::skip]
pub(crate) const ALPHABET: &[&str] = &[
    "a", "Z", "é", "ß", "ǅ", "ʰ", "日", "\u{301}", "\u{903}", "ſ", "K", "1", "٣", "Ⅻ", "½", " ", "  ",
    "\t", "\n", "\r", "\r\n", "\u{85}", "\u{a0}", "\u{2028}", "\u{3000}", "\u{1c}", "\u{b}", "'", "'s",
    "'S", "'ll", "'LL", "'ve", "'Re", "'d", "!", "/", ".", "?!", "🙂", "\u{200d}", "\u{fe0f}", "$",
    "\u{323b0}", "\u{295}", "\u{e000}",
];

/// Mostly ASCII, with weights, so that the ASCII fast paths run and hand
/// over to the general path at every position: letters of both cases (the
/// contraction letters among them), digits, each ASCII white space,
/// apostrophes, punctuation and '/', and a few longer letters (of each case
/// class), a mark, digits, spaces and punctuation.
#[rustfmt::skip]
pub(crate) const ASCII_HEAVY: &[(&str, u32)] = &[
    ("e", 8), ("t", 4), ("s", 4), ("l", 3), ("v", 2), ("r", 2), ("d", 2), ("m", 2), ("x", 2),
    ("E", 3), ("S", 3), ("L", 2), ("V", 1), ("R", 1), ("D", 1), ("M", 1), ("T", 2), ("Q", 1),
    ("0", 3), ("7", 3),
    (" ", 12), ("\t", 2), ("\n", 3), ("\r", 2), ("\u{b}", 1), ("\u{c}", 1),
    ("'", 6), (".", 2), (",", 2), ("/", 2), ("(", 1), ("\"", 1), ("-", 1), ("#", 1), ("\u{1c}", 1), ("\u{7f}", 1), ("\0", 1),
    ("é", 1), ("É", 1), ("ſ", 1), ("ǅ", 1), ("ʰ", 1), ("日", 1), ("\u{301}", 1), ("٣", 1), ("Ⅻ", 1),
    ("\u{a0}", 1), ("\u{85}", 1), ("\u{2028}", 1), ("\u{3000}", 1), ("…", 1), ("“", 1), ("🙂", 1),
];

/// Mostly white space, ASCII and longer, so that runs of every length and
/// mix (and the 8-byte scan of long ones) meet every kind of character.
#[rustfmt::skip]
pub(crate) const WHITE_HEAVY: &[(&str, u32)] = &[
    (" ", 16), ("\t", 4), ("\n", 4), ("\r", 2), ("\r\n", 2), ("\u{b}", 1), ("\u{c}", 1),
    ("\u{a0}", 1), ("\u{85}", 1), ("\u{2028}", 1), ("\u{3000}", 1),
    ("x", 1), ("X", 1), ("1", 1), (".", 1), ("'s", 1), ("é", 1), ("\u{301}", 1), ("\u{1c}", 1),
];

/// The piece of `table` that the random number `r` picks.
pub(crate) fn weighted(table: &[(&'static str, u32)], r: u64) -> &'static str {
    let total: u64 = table.iter().map(|&(_, w)| w as u64).sum();
    let mut r = r % total;
    for &(s, w) in table {
        if r < w as u64 {
            return s;
        }
        r -= w as u64;
    }
    unreachable!()
}

pub(crate) fn regex_chunks<'t>(re: &Regex, text: &'t str) -> Vec<&'t str> {
    re.find_iter(text).map(|m| m.unwrap().as_str()).collect()
}

fn lexer_chunks(lexer: Lexer, text: &str) -> Vec<&str> {
    let mut chunks = Vec::new();
    lexer.for_each_chunk(text, |c| chunks.push(c));
    chunks
}

/// xorshift64: the same texts on every run (the crate's tests all draw
/// from it, through `rng` or this).
pub(crate) fn next_random(seed: &mut u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed
}

/// [`next_random`] from `seed`, as a closure.
pub(crate) fn rng(mut seed: u64) -> impl FnMut() -> u64 {
    move || next_random(&mut seed)
}

/// Texts per lexer for the random tests (the `LEXER_ITERS` variable sets it).
pub(crate) fn iterations() -> usize {
    std::env::var("LEXER_ITERS").ok().and_then(|v| v.parse().ok()).unwrap_or(30_000)
}

#[test]
fn lexers_equal_fancy_regex_on_random_text() {
    let mut rand = rng(0x9e3779b97f4a7c15);
    for (lexer, pattern) in LEXERS {
        let re = Regex::new(pattern).unwrap();
        for _ in 0..iterations() {
            let n = (rand() % 16) as usize;
            let text: String = (0..n).map(|_| ALPHABET[(rand() % ALPHABET.len() as u64) as usize]).collect();
            assert_eq!(lexer_chunks(lexer, &text), regex_chunks(&re, &text), "{lexer:?} on {text:?}");
        }
    }
}

/// Random texts from a weighted `table`: mostly short, some long enough for
/// several 8-byte steps.
fn check_weighted_texts(table: &[(&'static str, u32)], seed: u64) {
    let mut rand = rng(seed);
    for (lexer, pattern) in LEXERS {
        let re = Regex::new(pattern).unwrap();
        for k in 0..iterations() {
            let n = (rand() % if k % 8 == 0 { 64 } else { 24 }) as usize;
            let text: String = (0..n).map(|_| weighted(table, rand())).collect();
            assert_eq!(lexer_chunks(lexer, &text), regex_chunks(&re, &text), "{lexer:?} on {text:?}");
        }
    }
}

#[test]
fn lexers_equal_fancy_regex_on_mostly_ascii_text() {
    check_weighted_texts(ASCII_HEAVY, 0x2545f4914f6cdd1d);
}

#[test]
fn lexers_equal_fancy_regex_on_mostly_white_text() {
    check_weighted_texts(WHITE_HEAVY, 0x9e3779b97f4a7c15);
}

/// Long runs of one class, contractions, ASCII words meeting longer
/// characters, white-space runs before letters and at the end of the text.
pub(crate) fn adversarial_texts() -> Vec<String> {
    let mut texts: Vec<String> = vec![
        "a".repeat(100_000),
        "Z".repeat(100_000),
        "aB".repeat(50_000),
        format!("{}x", " ".repeat(100_000)),
        "1".repeat(100_000),
        format!("x{}", "1234567".repeat(10_000)),
        "!".repeat(100_000),
        "/".repeat(100_000),
        "\n".repeat(100_000),
        " \t".repeat(50_000),
        "a.b,c;d-e/f".repeat(10_000),
        "'''''".into(),
        "a'sS'LL".into(),
        "'s'S'ſ'll'LL'lL've'VE're'RE'd'D'm'M't'T'x'".into(),
        "don't DON'T it'ſ HE'S she'Ll x'".into(),
        "abcабв日本déf ĀbcDEF helloМир HELLOмир ǅemal".into(),
        // Where GPT-4 and Llama 3 differ: a text that ends in white space
        // with a newline and more white space after it.
        "x\n  ".into(),
        "x\r\n\t".into(),
        "a \n\n \u{a0}".into(),
        "\n ".into(),
        // Digits of other scripts, and long runs of them.
        "١٢٣٤٥ ½Ⅻ٣1".into(),
        "٣".repeat(10_000),
    ];
    for word in ["word", "WORD", "Word", "wORD", "w", "W"] {
        for next in ["\u{301}", "é", "É", "٣", "ʰ", "日", "ǅ", "\u{a0}", "…", "ſ", "🙂"] {
            for before in ["", " ", ".", "\t", "\n", "'", "1"] {
                texts.push(format!("{before}{word}{next}"));
                texts.push(format!("{before}{word}{next}x"));
                texts.push(format!("{before}{word}{next}{word}"));
            }
        }
    }
    for run in [" ", "  ", " \t\n\u{a0}", "\t\t", " \n ", "\u{a0}\u{a0} ", "\n\r\n\t ", "\u{85} ", "\u{3000}\n"] {
        for after in ["", "x", "X", "é", "1", "٣", ".", "'s", "\u{301}", "\u{a0}"] {
            texts.push(format!("{run}{after}"));
            texts.push(format!("x{run}{after}"));
            texts.push(format!("!{run}{after}"));
        }
    }
    texts
}

#[test]
fn lexers_equal_fancy_regex_on_adversarial_text() {
    for (lexer, pattern) in LEXERS {
        // (The default limit is too small for some of the long runs.)
        let re = fancy_regex::RegexBuilder::new(pattern).backtrack_limit(usize::MAX).build().unwrap();
        for text in adversarial_texts() {
            let ours = lexer_chunks(lexer, &text);
            let theirs = regex_chunks(&re, &text);
            assert!(
                ours == theirs,
                "{lexer:?} on {:?}: {:?} vs {:?}",
                &text[..text.len().min(40)],
                &ours[..ours.len().min(10)],
                &theirs[..theirs.len().min(10)]
            );
        }
    }
}

#[test]
fn ascii_classes_equal_the_unicode_table() {
    let t = table();
    for b in 0..128u8 {
        let (k, f) = (ascii::CLASS[b as usize], t[b as usize]);
        assert_eq!(k.count_ones(), 1, "{b:#x}");
        assert_eq!(k == ascii::LOWER, f & LL != 0 && f & L != 0, "{b:#x}");
        assert_eq!(k == ascii::UPPER, f & LU != 0 && f & L != 0, "{b:#x}");
        assert_eq!(k & ascii::LETTER != 0, f & L != 0, "{b:#x}");
        assert_eq!(k == ascii::DIGIT, f & N != 0, "{b:#x}");
        assert_eq!(k & (ascii::SPACE | ascii::NEWLINE) != 0, f & S != 0, "{b:#x}");
        assert_eq!(k == ascii::NEWLINE, b == b'\r' || b == b'\n', "{b:#x}");
        assert_eq!(k == ascii::PUNCT, f & (S | L | N) == 0, "{b:#x}");
        assert_eq!(f & (LT | LM | LO | M), 0, "{b:#x}");
    }
    assert!((128..256).all(|b| ascii::CLASS[b] == ascii::HIGH));
}

#[test]
fn long_white_space_runs_do_not_fail() {
    // fancy-regex gives up on these with GPT-4o's pattern; we must not.
    for (lexer, _) in LEXERS {
        for text in [" ".repeat(1_000_000), "\t".repeat(1_000_000), format!("{}x", " ".repeat(100_000))] {
            let chunks = lexer_chunks(lexer, &text);
            assert_eq!(chunks.concat(), text);
            assert!(chunks.len() <= 3, "{lexer:?}: {}", chunks.len());
        }
    }
}

/// The files the corpus tests read: the text corpora in `corpora/`, and
/// any more files that `LEXER_CORPUS` names (separated by ':'), such as
/// the benchmark's 10 MB of English, code and FLORES-200.
pub(crate) fn corpus_paths() -> Vec<std::path::PathBuf> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("corpora");
    let mut paths: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    paths.retain(|p| p.extension().is_some_and(|e| e == "txt"));
    paths.sort();
    if let Ok(more) = std::env::var("LEXER_CORPUS") {
        paths.extend(more.split(':').map(std::path::PathBuf::from));
    }
    paths
}

/// Whole files (`corpus_paths`).
#[test]
fn lexers_equal_fancy_regex_on_corpora() {
    let paths = corpus_paths();
    assert!(!paths.is_empty(), "no corpus in corpora/");
    for (lexer, pattern) in LEXERS {
        let re = fancy_regex::RegexBuilder::new(pattern).backtrack_limit(usize::MAX).build().unwrap();
        for path in &paths {
            let text = std::fs::read_to_string(path).unwrap();
            let (ours, theirs) = (lexer_chunks(lexer, &text), regex_chunks(&re, &text));
            if let Some(k) = (0..ours.len().min(theirs.len())).find(|&k| ours[k] != theirs[k]) {
                panic!(
                    "{lexer:?} on {path:?}, chunk {k}: {:?} vs {:?}",
                    &ours[k.saturating_sub(2)..k + 1],
                    &theirs[k.saturating_sub(2)..k + 1]
                );
            }
            assert_eq!(ours.len(), theirs.len(), "{lexer:?} on {path:?}");
        }
    }
}
