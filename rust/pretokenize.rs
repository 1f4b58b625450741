//! Pre-tokenization: cutting text into the chunks that BPE works inside.
//!
//! Byte-level BPE never merges across chunk boundaries. The chunks come from a
//! regular expression: GPT-2, GPT-4 and GPT-4o each ship one (below, byte for
//! byte as tiktoken has them). They use look-ahead (`\s+(?!\S)`) and possessive
//! quantifiers, which the linear-time `regex` crate lacks. For these three we
//! run hand-written lexers (`lexer.rs`: several times faster, and they never
//! give up on long inputs); any other pattern runs on `fancy-regex`, the
//! engine tiktoken uses.
//!
//! The second half of this file finds *safe cut points*: places where a long
//! document can be cut into segments that are split independently (for
//! streaming a file and for spreading one text over all cores) without
//! changing a single chunk.

use fancy_regex::Regex;

use crate::lexer::Lexer;

/// GPT-2 (`r50k_base`, also `p50k_base`) split pattern, as in tiktoken.
pub const GPT2_PATTERN: &str =
    r"'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s";

/// GPT-4 (`cl100k_base`) split pattern, as in tiktoken.
pub const GPT4_PATTERN: &str = r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s";

/// GPT-4o (`o200k_base`) split pattern, as in tiktoken.
pub const GPT4O_PATTERN: &str = concat!(
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    "|",
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    "|",
    r"\p{N}{1,3}",
    "|",
    r" ?[^\s\p{L}\p{N}]+[\r\n/]*",
    "|",
    r"\s*[\r\n]+",
    "|",
    r"\s+(?!\S)",
    "|",
    r"\s+",
);

/// A compiled split pattern.
pub struct Splitter {
    engine: Engine,
    pattern: String,
}

enum Engine {
    /// One of the three built-in patterns.
    Lexer(Lexer),
    /// Any other pattern.
    Regex(Regex),
}

impl Splitter {
    pub fn new(pattern: &str) -> Result<Self, String> {
        let engine = match Lexer::for_pattern(pattern) {
            Some(lexer) => Engine::Lexer(lexer),
            None => Engine::Regex(
                Regex::new(pattern).map_err(|e| format!("invalid split pattern {pattern:?}: {e}"))?,
            ),
        };
        Ok(Splitter { engine, pattern: pattern.to_string() })
    }

    pub fn pattern(&self) -> &str {
        &self.pattern
    }

    /// Whether a text may be cut at safe cut points and split piece by piece
    /// with the same result as splitting it whole.
    /// True for the three built-in patterns, for which cutting a text at
    /// [`is_safe_cut`] points is proven not to change any chunk (see there).
    pub fn cuttable(&self) -> bool {
        matches!(self.engine, Engine::Lexer(_))
    }

    /// Calls `f` on every non-empty chunk of `text`, left to right.
    ///
    /// fancy-regex can fail at match time (its backtracking limit); that is an
    /// error for the caller, never a panic.
    pub fn for_each_chunk<'t>(
        &self,
        text: &'t str,
        mut f: impl FnMut(&'t str),
    ) -> Result<(), String> {
        self.for_each_match(text, |m| {
            if !m.is_empty() {
                f(m)
            }
        })
    }

    /// All chunks of `text` (empty matches included, as `regex.findall` returns them).
    pub fn findall<'t>(&self, text: &'t str) -> Result<Vec<&'t str>, String> {
        let mut out = Vec::new();
        self.for_each_match(text, |m| out.push(m))?;
        Ok(out)
    }

    fn for_each_match<'t>(&self, text: &'t str, mut f: impl FnMut(&'t str)) -> Result<(), String> {
        match &self.engine {
            Engine::Lexer(lexer) => lexer.for_each_chunk(text, f),
            Engine::Regex(regex) => {
                for m in regex.find_iter(text) {
                    let m = m.map_err(|e| {
                        format!("the split pattern failed on this text ({e}); try a simpler pattern")
                    })?;
                    f(m.as_str());
                }
            }
        }
        Ok(())
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
// files (documented in README), never in `pretokenize`.

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

/// The last safe cut in `b` (used to end a block read from a file).
pub fn last_safe_cut(b: &[u8]) -> Option<usize> {
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
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut start = 0;
    while start < b.len() {
        match next_safe_cut(b, start + target.max(1)) {
            Some(p) => {
                // Safe cuts sit before an ASCII newline's successor: a char boundary.
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
