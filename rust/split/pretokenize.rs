//! Pre-tokenization: cutting text into the chunks that BPE works inside.
//!
//! Byte-level BPE never merges across chunk boundaries. The chunks come from a
//! split pattern: a regular expression (GPT-2, GPT-4, GPT-4o, Llama 3 and
//! Qwen2 each ship one: `patterns.rs`, byte for byte as their tokenizers have
//! them), or a sequence of regexes applied one after the other, as
//! HuggingFace's pre-tokenizers do (DeepSeek-V3's, and any pattern with a
//! digit rule: `steps/mod.rs`). The regexes use look-ahead (`\s+(?!\S)`)
//! and possessive quantifiers, which the linear-time `regex` crate lacks. For
//! the built-in ones we run hand-written lexers (`split/lexer/mod.rs`:
//! several times faster, and they never give up on long inputs); any other
//! regex runs on `fancy-regex`, the engine tiktoken uses (`fancy.rs`).
//!
//! The second half of this file finds *safe cut points*: places where a long
//! document can be cut into segments that are split independently (for
//! streaming a file and for spreading one text over all cores) without
//! changing a single chunk.

use std::sync::Arc;

use crate::split::fancy::FancyRegex;
use crate::split::lexer::Lexer;
use crate::split::steps::{self, Step};

/// A compiled split pattern. (A clone shares the compiled program: the
/// trainer hands its own to the encoder it builds, to compile a custom
/// pattern once.)
#[derive(Clone)]
pub struct Splitter {
    engine: Engine,
    pattern: String,
}

#[derive(Clone)]
enum Engine {
    /// One of the built-in single-regex patterns.
    Lexer(Lexer),
    /// SuperBPE's second-stage pattern (`split/superword.rs`).
    Superword,
    /// Any other regex.
    Regex(FancyRegex),
    /// A sequence of two or more steps (`steps/mod.rs`).
    Steps(Arc<[Step]>),
}

impl Splitter {
    /// The splitter of a pattern: a regex, or a sequence in its text form (a
    /// JSON array of regexes, `steps/mod.rs`).
    pub fn new(pattern: &str) -> Result<Self, String> {
        if let Some(parsed) = steps::parse(pattern) {
            return Self::sequence(&parsed?);
        }
        let engine = match Lexer::for_pattern(pattern) {
            None if pattern == crate::split::superword::STAGE2_PATTERN => {
                crate::split::lexer::is_letter('a'); // the class table, now
                Engine::Superword
            }
            Some(lexer) => {
                // Builds the lexers' character-class table (a few ms, once
                // per process) now rather than in the first call that lexes.
                crate::split::lexer::is_letter('a');
                Engine::Lexer(lexer)
            }
            None => Engine::Regex(FancyRegex::new(pattern)?),
        };
        Ok(Splitter { engine, pattern: pattern.to_string() })
    }

    /// The splitter that applies `patterns` one after the other, as
    /// HuggingFace's `Sequence` of `Split` pre-tokenizers with behavior
    /// "isolated" does: each splits every piece the ones before it made, its
    /// matches and the text between them becoming pieces. A pattern that is a
    /// sequence itself counts as its steps; a sequence of one pattern is
    /// that pattern.
    pub fn sequence<S: AsRef<str>>(patterns: &[S]) -> Result<Self, String> {
        let flat = steps::flatten(patterns)?;
        if let [one] = &flat[..] {
            return Self::new(one);
        }
        let compiled = flat.iter().map(|p| Step::new(p)).collect::<Result<Vec<_>, _>>()?;
        crate::split::lexer::is_letter('a');
        Ok(Splitter { engine: Engine::Steps(compiled.into()), pattern: steps::text(&flat) })
    }

    /// This pattern, then one more step: the pieces it makes split again by
    /// `regex`, isolated (its matches and the text between them are pieces).
    /// Its `pattern()` is the sequence's text form.
    pub fn then_isolated(&self, regex: &str) -> Result<Self, String> {
        Self::sequence(&[self.pattern.as_str(), regex])
    }

    /// The pattern (for a sequence, its text form: `steps::text`).
    pub fn pattern(&self) -> &str {
        &self.pattern
    }

    /// The regexes the pattern applies in turn: one for a single regex.
    pub fn steps(&self) -> Vec<String> {
        match steps::parse(&self.pattern) {
            Some(Ok(steps)) => steps,
            _ => vec![self.pattern.clone()],
        }
    }

    /// Whether a text may be cut at safe cut points and split piece by piece
    /// with the same result as splitting it whole.
    /// True for the built-in single-regex patterns, for which cutting a text
    /// at [`is_safe_cut`] points is proven not to change any chunk (see
    /// there), and for sequences of them and digit rules with at least one of
    /// them (`steps::cuttable`).
    pub fn cuttable(&self) -> bool {
        match &self.engine {
            Engine::Lexer(_) => true,
            Engine::Superword | Engine::Regex(_) => false,
            Engine::Steps(steps) => steps::cuttable(steps),
        }
    }

    /// Calls `f` on every non-empty chunk of `text`, left to right.
    ///
    /// fancy-regex can fail at match time; that is an error for the caller,
    /// never a panic (`fancy.rs`).
    /// A custom regex must match every character: text it skips would be
    /// lost (encoding drops it, training ignores it), so a gap is an error
    /// naming its byte offset. (The built-in patterns match everything; in a
    /// sequence the text between matches is a piece, so nothing is lost.)
    pub fn for_each_chunk<'t>(&self, text: &'t str, mut f: impl FnMut(&'t str)) -> Result<(), String> {
        // Always inlined into each lexer's loop: left to the compiler, this
        // was a call per chunk (it has several callers: one loop per lexer)
        // that saved and restored six registers around the encoder's work.
        self.for_each_match_checked(
            text,
            true,
            #[inline(always)]
            |m| {
                if !m.is_empty() {
                    f(m)
                }
            },
        )
    }

    /// Where each chunk of `text` ends (byte offsets, ascending; the last is
    /// the text's end, as the chunks tile it).
    pub fn chunk_ends(&self, text: &str) -> Result<Vec<usize>, String> {
        let base = text.as_ptr() as usize;
        let mut ends = Vec::with_capacity(text.len() / 32 + 1);
        self.for_each_chunk(text, |chunk| ends.push(chunk.as_ptr() as usize - base + chunk.len()))?;
        Ok(ends)
    }

    /// All chunks of `text` (empty matches included, as `regex.findall`
    /// returns them; a sequence's pieces are never empty).
    pub fn findall<'t>(&self, text: &'t str) -> Result<Vec<&'t str>, String> {
        let mut out = Vec::new();
        self.for_each_match(text, |m| out.push(m))?;
        Ok(out)
    }

    fn for_each_match<'t>(&self, text: &'t str, f: impl FnMut(&'t str)) -> Result<(), String> {
        self.for_each_match_checked(text, false, f)
    }

    /// The matches of `text`; with `covering`, an error if they leave a gap
    /// (text that no match covers would be silently dropped by encoding).
    fn for_each_match_checked<'t>(
        &self,
        text: &'t str,
        covering: bool,
        mut f: impl FnMut(&'t str),
    ) -> Result<(), String> {
        match &self.engine {
            Engine::Lexer(lexer) => lexer.for_each_chunk(text, f),
            Engine::Superword => crate::split::superword::for_each_chunk(text, f),
            Engine::Steps(steps) => steps::walk(steps, text, &mut f)?,
            Engine::Regex(regex) => {
                let mut pos = 0;
                let mut gap = None;
                regex.for_each_match(text, |start, end| {
                    if covering && start > pos {
                        gap = Some(pos);
                        return false;
                    }
                    pos = pos.max(end);
                    f(&text[start..end]);
                    true
                })?;
                if let Some(at) = gap.or((covering && pos < text.len()).then_some(pos)) {
                    return Err(self.gap_error(text, at));
                }
            }
        }
        Ok(())
    }

    fn gap_error(&self, text: &str, pos: usize) -> String {
        let snippet: String = text[pos..].chars().take(20).collect();
        format!(
            "the split pattern {:?} matches nothing at byte {pos} of the text (at {snippet:?}), so \
             that text would be lost; a split pattern must match every character: end it with \
             `|[\\s\\S]` (any character)",
            self.pattern
        )
    }
}

// ---------------------------------------------------------------------------
// Safe cut points
//
// A cut at byte offset `p` is safe when `text[p-1]` is '\n', the character
// before that newline is not white space, and `text[p]` is a letter or digit.
// Why this is safe for the three built-in patterns:
//   * No alternative can match a '\n' followed by a letter or digit: the
//     optional prefix of the letter alternatives excludes '\r' and '\n', and
//     every alternative that can contain '\n' continues only with white space
//     (or '/' in GPT-4o's punctuation alternative).
//   * So in the whole text a chunk ends at `p`; the chunk that ends there is
//     the single '\n' (its left neighbour is not white space), which every
//     pattern also produces when the '\n' is the last character of a segment
//     (`\s++$` / `\s*[\r\n]` / `\s` all give exactly "\n"). Requiring a
//     non-space before the '\n' matters for GPT-2: in "  \nA" the whole text
//     gives "  ", "\n" while a segment ending in "  \n" would give "  \n".
//   * Nothing looks behind or uses `^`, so matching from `p` in a segment is
//     matching from `p` in the whole text.
// For custom patterns no such proof exists: texts are only cut when streaming
// files (docs/training.md#safe-cut-points), never in `pretokenize`.

//
// Inside a line there is a second kind of safe cut, used when a block of a
// streamed file has no line cut (one very long line): a *word cut* at `p`,
// where the character before `p` is a letter (`\p{L}`) and the character at
// `p` is neither a letter, nor a mark (`\p{M}`), nor an apostrophe. Why it is
// safe for the three built-in patterns:
//   * A letter can only be in a chunk matched by a letter alternative
//     (` ?\p{L}++`, `[^\r\n\p{L}\p{N}]?+\p{L}++`, GPT-4o's
//     `[^\r\n\p{L}\p{N}]?[UP]*[LOW]+(?i:'s|...)?` and its twin) or a
//     contraction (`'s`, `'ll`, ...). None of these can go on past the letter
//     with a character that is not a letter, a mark (GPT-4o's UP and LOW
//     include `\p{M}`) or an apostrophe (GPT-4o's contraction suffix). So in
//     the whole text a chunk ends at `p`.
//   * The only questions any alternative asks about the character at `p`
//     while matching the chunk that ends there are "is it a letter / UP /
//     LOW / a mark / an apostrophe?", answered "no" both by that character
//     and by the end of the segment; white-space alternatives (`$`,
//     `(?!\S)`) cannot reach `p` across the letter. Chunks ending earlier
//     never look at `p`. So the segment before `p` gives the same chunks.
//   * Matching from `p` never looks behind, so the segment from `p` gives the
//     chunks of the whole text from `p`.
// Tests check both rules by cutting texts at every such point (Rust unit
// tests here and the `pretokenize` fuzz target).

/// Python's `regex` treats U+001C..U+001F as white space too; be strict.
fn is_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// The character starting at byte `i` of `b`, if `b[i..]` starts with a valid one.
fn char_at(b: &[u8], i: usize) -> Option<char> {
    let first = *b.get(i)?;
    let len = match first {
        0x00..=0x7f => return Some(first as char),
        0xc0..=0xdf => 2,
        0xe0..=0xef => 3,
        0xf0..=0xf7 => 4,
        _ => return None,
    };
    let s = std::str::from_utf8(b.get(i..i + len)?).ok()?;
    s.chars().next()
}

/// The character ending just before byte `end` of `b`, if valid.
fn char_before(b: &[u8], end: usize) -> Option<char> {
    // A UTF-8 character is at most 4 bytes; walk back over continuation bytes.
    let mut start = end.checked_sub(1)?;
    while start > 0 && end - start < 4 && (b[start] & 0xc0) == 0x80 {
        start -= 1;
    }
    let s = std::str::from_utf8(&b[start..end]).ok()?;
    s.chars().next_back()
}

/// See the comment above: is `p` (just after a '\n') a safe place to cut?
pub fn is_safe_cut(b: &[u8], p: usize) -> bool {
    p >= 2
        && b[p - 1] == b'\n'
        && matches!(char_before(b, p - 1), Some(c) if !is_space(c))
        && matches!(char_at(b, p), Some(c) if c.is_alphanumeric())
}

/// Is `p` a word cut (see above): a letter before it, and after it a character
/// that is no letter, mark or apostrophe?
pub fn is_word_cut(b: &[u8], p: usize) -> bool {
    if p == 0 || p >= b.len() {
        return false;
    }
    // ASCII fast path: the ASCII letters are exactly [A-Za-z]; no ASCII
    // character is a mark.
    let (before, at) = (b[p - 1], b[p]);
    if before < 0x80 && !before.is_ascii_alphabetic() {
        return false;
    }
    if at < 0x80 && (at.is_ascii_alphabetic() || at == b'\'') {
        return false;
    }
    matches!(char_before(b, p), Some(c) if crate::split::lexer::is_letter(c))
        && matches!(char_at(b, p), Some(c) if c != '\'' && !crate::split::lexer::is_letter_or_mark(c))
}

/// The last word cut in `b`.
pub fn last_word_cut(b: &[u8]) -> Option<usize> {
    // Walk back over character starts (not continuation bytes).
    let mut p = b.len();
    while p > 1 {
        p -= 1;
        if (b[p] & 0xc0) != 0x80 && is_word_cut(b, p) {
            return Some(p);
        }
    }
    None
}

/// The first safe cut at or after byte `from`.
pub fn next_safe_cut(b: &[u8], from: usize) -> Option<usize> {
    let mut i = from.max(1);
    while let Some(off) = memchr::memchr(b'\n', b.get(i - 1..)?) {
        let p = i - 1 + off + 1; // just after the newline
        if p >= b.len() {
            return None;
        }
        if p >= from && is_safe_cut(b, p) {
            return Some(p);
        }
        i = p + 1;
    }
    None
}

/// The last safe cut in `b` (used to end a block read from a file): the last
/// line cut, or if the block has none (one long line), the last word cut.
pub fn last_safe_cut(b: &[u8]) -> Option<usize> {
    last_line_cut(b).or_else(|| last_word_cut(b))
}

/// The last line cut ([`is_safe_cut`]) in `b`.
pub fn last_line_cut(b: &[u8]) -> Option<usize> {
    let mut end = b.len();
    while let Some(nl) = memchr::memrchr(b'\n', &b[..end]) {
        if is_safe_cut(b, nl + 1) {
            return Some(nl + 1);
        }
        end = nl;
    }
    None
}

/// Cuts `text` into segments of roughly `target` bytes at safe cut points.
/// The segments concatenate back to `text`.
pub fn segments(text: &str, target: usize) -> Vec<&str> {
    // Safe cuts sit before an ASCII newline's successor: a char boundary.
    cut_at(text, target, |from| next_safe_cut(text.as_bytes(), from))
}

/// Cuts `text` into pieces of at least `target` bytes (but the last): each
/// piece ends at `next(from)`, the first allowed cut at or after `from` (a
/// character boundary), `target` bytes past its start; the last piece ends
/// where `next` finds none. The pieces concatenate back to `text`.
pub fn cut_at(text: &str, target: usize, mut next: impl FnMut(usize) -> Option<usize>) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    while start < text.len() {
        match next(start + target.max(1)) {
            Some(p) => {
                out.push(&text[start..p]);
                start = p;
            }
            None => {
                out.push(&text[start..]);
                break;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::split::patterns::{GPT2_PATTERN, GPT4O_PATTERN, GPT4_PATTERN};

    fn chunks(s: &Splitter, text: &str) -> Vec<String> {
        s.findall(text).unwrap().into_iter().map(String::from).collect()
    }

    #[test]
    fn gpt2_splits_like_tiktoken() {
        let s = Splitter::new(GPT2_PATTERN).unwrap();
        assert_eq!(
            chunks(&s, "Hello world's  end\n\n 42!"),
            vec!["Hello", " world", "'s", " ", " end", "\n\n", " 42", "!"]
        );
    }

    #[test]
    fn gpt4_splits_digits_in_threes() {
        let s = Splitter::new(GPT4_PATTERN).unwrap();
        assert_eq!(chunks(&s, "12345 abc"), vec!["123", "45", " abc"]);
    }

    #[test]
    fn invalid_pattern_is_an_error() {
        assert!(Splitter::new("(unclosed").is_err());
    }

    #[test]
    fn segments_give_the_same_chunks_as_the_whole_text() {
        let text = "First line.\nSecond  \nThird\n  4th\nfifth 5\n\nSixth\nx\n/slash\n\u{3000}\nZ";
        for pattern in [GPT2_PATTERN, GPT4_PATTERN, GPT4O_PATTERN] {
            let s = Splitter::new(pattern).unwrap();
            let whole = chunks(&s, text);
            for target in 1..text.len() {
                let segs = segments(text, target);
                assert_eq!(segs.concat(), text);
                let cut: Vec<String> = segs.iter().flat_map(|seg| chunks(&s, seg)).collect();
                assert_eq!(cut, whole, "pattern {pattern} target {target}");
            }
        }
    }

    /// Cutting at any line or word cut gives the chunks of the whole text
    /// (random texts of tricky characters, every cut point of each).
    #[test]
    fn every_cut_point_keeps_the_chunks() {
        const ALPHABET: &[&str] = &[
            "a", "Z", "é", "ǅ", "ʰ", "日", "\u{301}", "\u{903}", "ſ", "1", "٣", "½", " ", "  ", "\t", "\n", "\r",
            "\u{a0}", "\u{3000}", "'", "'s", "'LL", "'ve", "!", "/", ".", "🙂", "$", "\u{295}", "-", "’",
        ];
        let mut rand = crate::split::lexer::tests::rng(0x2545f4914f6cdd1d);
        let splitters: Vec<Splitter> =
            [GPT2_PATTERN, GPT4_PATTERN, GPT4O_PATTERN].iter().map(|p| Splitter::new(p).unwrap()).collect();
        let mut cuts = 0;
        for _ in 0..3000 {
            let n = (rand() % 12) as usize;
            let text: String = (0..n).map(|_| ALPHABET[(rand() % ALPHABET.len() as u64) as usize]).collect();
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

    #[test]
    fn word_cut_rules() {
        assert!(is_word_cut(b"ab cd", 2)); // letter, space
        assert!(is_word_cut(b"ab1", 2)); // letter, digit
        assert!(is_word_cut("日。".as_bytes(), 3)); // CJK letter, CJK punctuation
        assert!(!is_word_cut(b"abc", 1)); // inside a word
        assert!(!is_word_cut(b"ab's", 2)); // GPT-4o's contraction suffix
        assert!(!is_word_cut("e\u{301} ".as_bytes(), 1)); // a combining mark continues GPT-4o's word
        assert!(!is_word_cut(b"1 a", 1)); // no letter before
        assert!(!is_word_cut(b"ab", 2)); // the end is no cut
        assert!(!is_word_cut(b"a\xff", 1)); // not a character after
        assert_eq!(last_word_cut(b"one two three"), Some(7));
        // A line cut wins over a later word cut; a word cut when there is no line cut.
        assert_eq!(last_safe_cut(b"a\nbc de"), Some(2));
        assert_eq!(last_safe_cut(b"  bc de"), Some(4));
        assert_eq!(last_safe_cut(b"   12345"), None);
    }

    #[test]
    fn a_custom_pattern_must_cover_the_text() {
        let s = Splitter::new(r"\w+").unwrap();
        let err = s.for_each_chunk("ab, cd", |_| {}).unwrap_err();
        assert!(err.contains("byte 2") && err.contains("[\\s\\S]"), "{err}");
        let err = Splitter::new(r"a").unwrap().for_each_chunk("aab", |_| {}).unwrap_err();
        assert!(err.contains("byte 2"), "{err}");
        assert!(Splitter::new("").unwrap().for_each_chunk("x", |_| {}).is_err());
        // findall mirrors regex.findall: gaps are fine there.
        assert_eq!(s.findall("ab, cd").unwrap(), vec!["ab", "cd"]);
        assert!(Splitter::new(r"\w+|[\s\S]").unwrap().for_each_chunk("ab, cd", |_| {}).is_ok());
    }

    #[test]
    fn slow_custom_patterns_are_stopped() {
        // Exponential on one match: fancy-regex's backtracking limit.
        let s = Splitter::new(r"(a|a)*(?=b)|[\s\S]").unwrap();
        assert!(s.for_each_chunk(&"a".repeat(30_000), |_| {}).unwrap_err().contains("backtracking"));
        // Quadratic over many matches: the time budget (1 s + 10 µs a byte).
        let s = Splitter::new(r"(a+)+(?!x)c|[\s\S]").unwrap();
        let started = std::time::Instant::now();
        let err = s.for_each_chunk(&format!("{}b", "a".repeat(30_000)), |_| {}).unwrap_err();
        assert!(err.contains("too slow") && err.contains("simpler pattern"), "{err}");
        assert!(started.elapsed().as_secs_f64() < 5.0);
    }

    #[test]
    fn safe_cut_rules() {
        let b = "a\nb".as_bytes();
        assert!(is_safe_cut(b, 2));
        assert!(!is_safe_cut(" \nb".as_bytes(), 2)); // space before the newline
        assert!(!is_safe_cut("a\n b".as_bytes(), 2)); // space after
        assert!(!is_safe_cut("a\n/".as_bytes(), 2)); // GPT-4o's `[\r\n/]*`
        assert!(is_safe_cut("é\nж".as_bytes(), 3));
        assert_eq!(last_safe_cut("a\nb\nc d".as_bytes()), Some(4));
        assert_eq!(next_safe_cut("a\nb\nc d".as_bytes(), 3), Some(4));
        assert_eq!(next_safe_cut("a\nb".as_bytes(), 0), Some(2));
    }
}
