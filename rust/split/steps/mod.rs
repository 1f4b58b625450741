//! Split patterns that are a sequence of steps, as HuggingFace's
//! pre-tokenizers have them: a `Sequence` of `Split` pre-tokenizers with
//! behavior "isolated". Each step splits every piece that the steps before it
//! made: its regex's matches become pieces, and so does the text between two
//! matches (empty pieces are dropped). The last step's pieces are the chunks.
//!
//! Why: DeepSeek-V3's pattern is three such steps (digits, CJK runs, then
//! words), and it is not one regex: a step's matches never cross the pieces
//! of the steps before it, and its look-ahead (`\s+(?!\S)`) stops at a
//! piece's end. The digit rules (`digits="r2l3"`, `"single"`) are a first
//! step before any pattern, and SuperBPE's second stage adds a step after one.
//!
//! The text form (what `Splitter::pattern` returns, what files store and
//! Python's `Tokenizer.pattern` holds): the steps' regexes as a JSON array of
//! strings, compact, as `serde_json` writes it (`["\\p{N}{1,3}","..."]`).
//! No split pattern is a JSON array of strings (as a regex it would be one
//! character class, which matches no text whole), so a pattern that parses
//! as one is a sequence.
//!
//! Steps we recognise run by hand (`split/lexer/`): the built-in patterns'
//! lexers (which match every character, so "isolated" adds nothing), the
//! digit rules and DeepSeek-V3's CJK runs (`lexer/runs.rs`), DeepSeek-V3's
//! words (`lexer/deepseek.rs`); any other regex runs on fancy-regex
//! (`fancy.rs`).

use crate::split::fancy::FancyRegex;
use crate::split::lexer::{deepseek_v3_words, Lexer, Runs};
use crate::split::patterns::DEEPSEEK_V3_WORDS;

/// One compiled step.
#[derive(Clone)]
pub(crate) enum Step {
    /// A built-in single-regex pattern (it matches every character).
    Lexer(Lexer),
    /// Digits in groups, or CJK runs.
    Runs(Runs),
    /// DeepSeek-V3's third step.
    DeepSeekWords,
    /// Any other regex.
    Regex(FancyRegex),
}

impl Step {
    pub(crate) fn new(regex: &str) -> Result<Step, String> {
        if let Some(lexer) = Lexer::for_pattern(regex) {
            return Ok(Step::Lexer(lexer));
        }
        if let Some(runs) = Runs::for_regex(regex) {
            return Ok(Step::Runs(runs));
        }
        if regex == DEEPSEEK_V3_WORDS {
            return Ok(Step::DeepSeekWords);
        }
        Ok(Step::Regex(FancyRegex::new(regex)?))
    }

    /// Calls `f` on each non-empty piece of `text`: the matches and the text
    /// between them.
    fn for_each_piece<'t>(&self, text: &'t str, f: &mut dyn FnMut(&'t str)) -> Result<(), String> {
        match self {
            Step::Lexer(lexer) => lexer.for_each_chunk(text, f),
            Step::Runs(runs) => runs.for_each_piece(text, f),
            Step::DeepSeekWords => deepseek_v3_words(text, f),
            Step::Regex(regex) => {
                let mut pos = 0;
                regex.for_each_match(text, |start, end| {
                    if start > pos {
                        f(&text[pos..start]);
                    }
                    if end > start {
                        f(&text[start..end]);
                    }
                    pos = end;
                    true
                })?;
                if pos < text.len() {
                    f(&text[pos..]);
                }
            }
        }
        Ok(())
    }
}

/// Calls `f` on the chunks of `text`: the pieces of `steps[0]`, each split by
/// the rest in turn.
pub(crate) fn walk<'t>(steps: &[Step], text: &'t str, f: &mut dyn FnMut(&'t str)) -> Result<(), String> {
    match steps {
        [] => {
            f(text);
            Ok(())
        }
        [last] => last.for_each_piece(text, f),
        [first, rest @ ..] => {
            let mut failed = Ok(());
            first.for_each_piece(text, &mut |piece| {
                if failed.is_ok() {
                    failed = walk(rest, piece, f);
                }
            })?;
            failed
        }
    }
}

/// Whether cutting a text at the safe cuts of `split/pretokenize.rs` keeps
/// the chunks of a sequence: when each step is a built-in lexer or a digit
/// rule, and one is a lexer. A lexer step keeps its pieces across a safe cut
/// (the proof there; the conditions of a cut are about the characters next
/// to it, which a piece that holds them has too). A digit step cuts nothing
/// at a safe cut but a run of digits that starts there (whose groups are
/// counted from its own start or end, both on the cut's side); it may cut
/// the text between runs there, and the next lexer, which has a chunk
/// boundary at the cut either way, then splits the two parts as the whole.
/// The CJK step is not cuttable: its class holds characters that are no
/// letters (U+30A0, U+30FB), so a word cut may fall inside a run.
pub(crate) fn cuttable(steps: &[Step]) -> bool {
    steps.iter().all(|s| matches!(s, Step::Lexer(_)) || matches!(s, Step::Runs(r) if r.is_digits()))
        && steps.iter().any(|s| matches!(s, Step::Lexer(_)))
}

/// The steps of a pattern in the text form; None if it is not a sequence.
/// A pattern that looks like one (`["...`) but is no valid JSON array of
/// strings is an error, not a regex.
pub(crate) fn parse(pattern: &str) -> Option<Result<Vec<String>, String>> {
    if !pattern.starts_with('[') || !pattern.ends_with(']') {
        return None;
    }
    match serde_json::from_str::<Vec<String>>(pattern) {
        Ok(steps) => Some(flatten(&steps)),
        Err(e) if pattern.len() >= 4 && pattern.starts_with("[\"") && pattern.ends_with("\"]") => Some(Err(format!(
            "the split pattern {pattern:?} looks like a sequence of patterns (a JSON array of strings) but is \
             not valid JSON ({e}); write each regex as a JSON string (a backslash as \\\\)"
        ))),
        Err(_) => None,
    }
}

/// `patterns` with each sequence replaced by its steps; an error if none is left.
pub(crate) fn flatten<S: AsRef<str>>(patterns: &[S]) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    for p in patterns {
        match parse(p.as_ref()) {
            Some(steps) => out.extend(steps?),
            None => out.push(p.as_ref().to_string()),
        }
    }
    if out.is_empty() {
        return Err("a sequence of split patterns needs at least one pattern".into());
    }
    Ok(out)
}

/// The text form of a sequence of regexes (one regex is itself).
pub fn text<S: AsRef<str>>(steps: &[S]) -> String {
    match steps {
        [one] => one.as_ref().to_string(),
        _ => serde_json::to_string(&steps.iter().map(|s| s.as_ref()).collect::<Vec<_>>()).expect("strings to JSON"),
    }
}

#[cfg(test)]
mod tests;
