//! Sequences and their hand-written steps against fancy-regex: each step as
//! an HF `Split` (behavior "isolated") on random texts of tricky characters
//! (digits of several scripts, CJK and kana and the non-letters among them,
//! controls, punctuation before letters), adversarial texts and the corpora;
//! whole sequences (DeepSeek-V3's, the digit rules before each built-in
//! pattern, a custom step after one) against the steps applied one by one;
//! the text form; cutting at safe cuts.

use fancy_regex::{Regex, RegexBuilder};

use super::*;
use crate::split::lexer::tests::{adversarial_texts, corpus_paths, iterations, rng, weighted, ALPHABET, ASCII_HEAVY};
use crate::split::patterns::*;
use crate::split::pretokenize::{is_safe_cut, is_word_cut, Splitter};

/// `text` split by `re` as HF's isolated `Split`: matches and the text
/// between them, empty pieces dropped.
fn isolated<'t>(re: &Regex, text: &'t str) -> Vec<&'t str> {
    let (mut out, mut pos) = (Vec::new(), 0);
    for m in re.find_iter(text) {
        let m = m.unwrap();
        if m.start() > pos {
            out.push(&text[pos..m.start()]);
        }
        if m.end() > m.start() {
            out.push(m.as_str());
        }
        pos = m.end();
    }
    if pos < text.len() {
        out.push(&text[pos..]);
    }
    out
}

/// The reference: each regex splits every piece of the ones before it.
fn reference<'t>(regexes: &[Regex], text: &'t str) -> Vec<&'t str> {
    let mut pieces = vec![text];
    for re in regexes {
        pieces = pieces.into_iter().flat_map(|p| isolated(re, p)).collect();
    }
    pieces
}

fn compile(patterns: &[&str]) -> Vec<Regex> {
    patterns.iter().map(|p| RegexBuilder::new(p).backtrack_limit(usize::MAX).build().unwrap()).collect()
}

fn ours<'t>(steps: &[Step], text: &'t str) -> Vec<&'t str> {
    let mut out = Vec::new();
    walk(steps, text, &mut |p| out.push(p)).unwrap();
    out
}

/// The sequences the tests run: DeepSeek-V3's; each digit rule before each
/// built-in pattern; a custom regex after a pattern (SuperBPE's kind).
fn sequences() -> Vec<Vec<&'static str>> {
    let mut out = vec![DEEPSEEK_V3_STEPS.to_vec()];
    for digits in [DIGITS_SINGLE, DIGITS_R2L3, DEEPSEEK_V3_DIGITS, DIGITS_RUNS] {
        for pattern in [GPT2_PATTERN, GPT4_PATTERN, GPT4O_PATTERN, LLAMA3_PATTERN, QWEN2_PATTERN] {
            out.push(vec![digits, pattern]);
        }
    }
    out.push(vec![GPT4_PATTERN, r"\p{L}{1,4}"]);
    out.push(vec![DIGITS_RUNS, r"(?=(\d{3})+(?!\d))| ?\p{L}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"]);
    out.push(vec![DIGITS_R2L3, DEEPSEEK_V3_CJK, GPT4O_PATTERN]);
    out
}

/// The hand-written steps (each alone, as a one-step walk).
fn hand_written() -> Vec<&'static str> {
    vec![DIGITS_SINGLE, DIGITS_R2L3, DEEPSEEK_V3_DIGITS, DIGITS_RUNS, DEEPSEEK_V3_CJK, DEEPSEEK_V3_WORDS]
}

/// Tricky characters for the steps: digits of several scripts and numbers
/// that are no decimal digits, every edge of the CJK class (and its
/// non-letters), DeepSeek-V3's punctuation-then-letters, controls and format
/// characters that no alternative of it matches.
#[rustfmt::skip]
const STEP_ALPHABET: &[&str] = &[
    "0", "1", "7", "12", "123", "1234", "١", "٢٣", "½", "Ⅻ", "²", "〇",
    "一", "龥", "龦", "日本", "\u{3040}", "ぁ", "ゟ", "゠", "・", "ー", "ヿ", "゛", "カタ", "\u{3097}", "ㄱ",
    "a", "Z", "é", "\u{301}", "ß", "ǅ", " ", "  ", "\t", "\n", "\r\n", "\u{a0}", "\u{3000}", "\u{85}",
    ".", "'", "'s", "_x", ".Net", "(a", "$", "→", "©", "!!", "\u{1}", "\u{7f}", "\u{200d}", "\u{ad}",
    "\u{e000}", "🙂", "\u{fe0f}",
];

fn random_text(rand: &mut impl FnMut() -> u64, k: usize) -> String {
    let n = (rand() % if k % 8 == 0 { 48 } else { 14 }) as usize;
    (0..n)
        .map(|_| match rand() % 4 {
            0 => ALPHABET[(rand() % ALPHABET.len() as u64) as usize],
            1 => weighted(ASCII_HEAVY, rand()),
            _ => STEP_ALPHABET[(rand() % STEP_ALPHABET.len() as u64) as usize],
        })
        .collect()
}

fn check(patterns: &[&str], text: &str) {
    let steps: Vec<Step> = patterns.iter().map(|p| Step::new(p).unwrap()).collect();
    let regexes = compile(patterns);
    let (got, want) = (ours(&steps, text), reference(&regexes, text));
    if got != want {
        let k = (0..got.len().min(want.len())).find(|&k| got[k] != want[k]).unwrap_or(got.len().min(want.len()));
        panic!(
            "{patterns:?} on {:?}: piece {k}: {:?} vs fancy-regex {:?}",
            &text[..text.floor_char_boundary(200)],
            &got[k.saturating_sub(2)..(k + 2).min(got.len())],
            &want[k.saturating_sub(2)..(k + 2).min(want.len())]
        );
    }
}

#[test]
fn hand_written_steps_equal_fancy_regex_on_random_text() {
    let mut rand = rng(0x005e_ed0f_d161_7535);
    for pattern in hand_written() {
        for k in 0..iterations() / 2 {
            check(&[pattern], &random_text(&mut rand, k));
        }
    }
}

#[test]
fn sequences_equal_their_steps_on_random_text() {
    let mut rand = rng(0x0dd_5eed_2025);
    for patterns in sequences() {
        for k in 0..iterations() / 10 {
            check(&patterns, &random_text(&mut rand, k));
        }
    }
}

/// Long runs (digits of every length, CJK, letters, gaps) and the lexers'
/// adversarial texts.
/// fancy-regex runs `DIGITS_R2L3` in time quadratic in a run of digits (its
/// look-ahead reads the rest of the run at every match), so the texts it
/// checks have runs of at most a thousand digits (a custom step with a
/// look-ahead has the same cost, under its time budget); longer runs are
/// checked against the definition (`long_digit_runs`).
fn step_adversarial_texts() -> Vec<String> {
    let mut texts = adversarial_texts();
    texts.retain(|t| longest_digit_run(t) <= 1_000);
    for n in 1..=10 {
        texts.push(format!("x{}y", "9".repeat(n)));
        texts.push(format!("{} {}", "٣".repeat(n), "1".repeat(n + 3)));
    }
    texts.extend([
        "1".repeat(1_001),
        "日".repeat(50_000),
        "\u{1}".repeat(50_000),
        format!("{}a", "\u{200d}".repeat(50_000)),
        ".Net _x __init__ (a)[b]{c} 'll 's".repeat(1000),
        "日本語のテキスト・カタカナ゠ー123,456.78".repeat(1000),
    ]);
    texts
}

fn longest_digit_run(text: &str) -> usize {
    text.split(|c: char| !c.is_numeric()).map(|r| r.chars().count()).max().unwrap_or(0)
}

/// Runs too long for fancy-regex: each digit rule against its definition.
#[test]
fn long_digit_runs() {
    for n in [99_999, 100_000, 100_001] {
        for digit in ["1", "٣"] {
            let text = format!("x{}y", digit.repeat(n));
            let lens = |rule: &str| -> Vec<usize> {
                let s = Splitter::sequence(&[rule, GPT4_PATTERN]).unwrap();
                s.findall(&text).unwrap().iter().map(|c| c.chars().count()).collect()
            };
            let head = (n - 1) % 3 + 1;
            let mut r2l3 = vec![1, head];
            r2l3.extend(std::iter::repeat_n(3, (n - head) / 3));
            r2l3.push(1);
            assert_eq!(lens(DIGITS_R2L3), r2l3, "r2l3, {n} of {digit:?}");
            assert_eq!(lens(DIGITS_SINGLE), vec![1; n + 2], "single, {n} of {digit:?}");
        }
    }
}

#[test]
fn steps_and_sequences_equal_fancy_regex_on_adversarial_text() {
    for text in step_adversarial_texts() {
        for pattern in hand_written() {
            check(&[pattern], &text);
        }
        for patterns in sequences() {
            check(&patterns, &text);
        }
    }
}

#[test]
fn steps_and_sequences_equal_fancy_regex_on_corpora() {
    for path in corpus_paths() {
        let text = std::fs::read_to_string(&path).unwrap();
        for pattern in hand_written() {
            check(&[pattern], &text);
        }
        for patterns in sequences() {
            check(&patterns, &text);
        }
    }
}

fn chunks(s: &Splitter, text: &str) -> Vec<String> {
    s.findall(text).unwrap().into_iter().map(String::from).collect()
}

#[test]
fn digit_rules() {
    let r2l3 = Splitter::sequence(&[DIGITS_R2L3, GPT4_PATTERN]).unwrap();
    assert_eq!(chunks(&r2l3, "1234567"), ["1", "234", "567"]);
    assert_eq!(chunks(&r2l3, "x 123456 12 ٣٣٣٣"), ["x", " ", "123", "456", " ", "12", " ", "٣", "٣٣٣"]);
    let single = Splitter::sequence(&[DIGITS_SINGLE, GPT2_PATTERN]).unwrap();
    // GPT-2's ` ?\p{N}++` no longer takes the space: the digits were cut off first.
    assert_eq!(chunks(&single, "a 123"), ["a", " ", "1", "2", "3"]);
    // Qwen2's pattern differs from GPT-4's with single digits where white
    // space comes before a digit: the step leaves it at the end of a piece.
    let qwen2 = Splitter::new(QWEN2_PATTERN).unwrap();
    assert_eq!(chunks(&qwen2, "a   12"), ["a", "  ", " ", "1", "2"]);
    let gpt4_single = Splitter::sequence(&[DIGITS_SINGLE, GPT4_PATTERN]).unwrap();
    assert_eq!(chunks(&gpt4_single, "a   12"), ["a", "   ", "1", "2"]);
}

#[test]
fn deepseek_v3_splits_as_its_three_steps() {
    let s = Splitter::sequence(&DEEPSEEK_V3_STEPS).unwrap();
    assert_eq!(
        chunks(&s, "Hello, 世界! 12345 .Net\u{1}\u{1}x"),
        ["Hello", ",", " ", "世界", "!", " ", "123", "45", " .", "Net", "\u{1}", "\u{1}x"]
    );
    assert!(!s.cuttable());
}

#[test]
fn text_form() {
    let s = Splitter::sequence(&DEEPSEEK_V3_STEPS).unwrap();
    let text = s.pattern().to_string();
    assert!(text.starts_with(r#"["\\p{N}{1,3}","#), "{text}");
    assert_eq!(parse(&text).unwrap().unwrap(), DEEPSEEK_V3_STEPS);
    assert_eq!(Splitter::new(&text).unwrap().pattern(), text);
    assert_eq!(s.steps(), DEEPSEEK_V3_STEPS);
    // Sequences inside sequences are flattened; one step is that step.
    let nested = Splitter::sequence(&[DIGITS_R2L3, &text]).unwrap();
    assert_eq!(nested.steps().len(), 4);
    assert_eq!(Splitter::sequence(&[GPT4_PATTERN]).unwrap().pattern(), GPT4_PATTERN);
    assert_eq!(Splitter::new(&format!("[{:?}]", "a|b")).unwrap().pattern(), "a|b");
    // Character classes are regexes; a broken array is an error.
    for regex in ["[abc]", "[\"']", "[\"]", "[\"a\"b]x"] {
        assert!(parse(regex).is_none(), "{regex}");
    }
    let err = Splitter::new(r#"["\p{N}", "x"]"#).err().unwrap();
    assert!(err.contains("not valid JSON") && err.contains("backslash"), "{err}");
    assert!(Splitter::new("[]").is_err());
    assert!(Splitter::sequence::<&str>(&[]).is_err());
    assert!(Splitter::sequence(&["(unclosed", "x"]).err().unwrap().contains("invalid split pattern"));
    // Control characters are escaped as serde_json and Python's json do.
    assert_eq!(super::text(&["\r\n", "\"\\é"]), "[\"\\r\\n\",\"\\\"\\\\é\"]");
}

#[test]
fn then_isolated_adds_a_step() {
    let base = Splitter::new(GPT4O_PATTERN).unwrap();
    let more = base.then_isolated(r"\p{L}{1,4}").unwrap();
    assert_eq!(more.steps(), [GPT4O_PATTERN, r"\p{L}{1,4}"]);
    assert_eq!(chunks(&more, "Internationalization rocks"), ["Inte", "rnat", "iona", "liza", "tion", " ", "rock", "s"]);
    assert!(!more.cuttable());
    let twice = more.then_isolated(r"x").unwrap();
    assert_eq!(twice.steps().len(), 3);
}

#[test]
fn which_sequences_are_cuttable() {
    let cut = |p: &[&str]| Splitter::sequence(p).unwrap().cuttable();
    assert!(cut(&[DIGITS_R2L3, GPT4_PATTERN]));
    assert!(cut(&[GPT2_PATTERN, DIGITS_SINGLE]));
    assert!(!cut(&[DIGITS_R2L3, DIGITS_SINGLE]));
    assert!(!cut(&[DIGITS_R2L3, DEEPSEEK_V3_CJK, GPT4_PATTERN]));
    assert!(!cut(&[DIGITS_R2L3, "x|[\\s\\S]"]));
}

/// Cutting a text at any line or word cut gives the chunks of the whole
/// text, for every cuttable sequence.
#[test]
fn cuttable_sequences_keep_their_chunks_at_safe_cuts() {
    let splitters: Vec<Splitter> =
        sequences().iter().map(|p| Splitter::sequence(p).unwrap()).filter(Splitter::cuttable).collect();
    assert!(splitters.len() >= 20);
    let mut rand = rng(0xc0ff_ee15_600d);
    let mut cuts = 0;
    for k in 0..3000 {
        let text = random_text(&mut rand, k);
        let b = text.as_bytes();
        for p in 0..=b.len() {
            if !(is_safe_cut(b, p) || is_word_cut(b, p)) {
                continue;
            }
            cuts += 1;
            for s in &splitters {
                let mut cut = chunks(s, &text[..p]);
                cut.extend(chunks(s, &text[p..]));
                assert_eq!(cut, chunks(s, &text), "{:?} cut at {p} of {text:?}", s.pattern());
            }
        }
    }
    assert!(cuts > 1000, "{cuts}");
}
