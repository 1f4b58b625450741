//! The split patterns of today's models, byte for byte as their tokenizers
//! have them (docs/patterns.md cites each source), and the regexes of the
//! digit rules. `split/lexer/mod.rs` recognises the single-regex ones (and
//! runs its hand-written lexers for them); `split/steps/mod.rs` recognises the
//! steps of a sequence (DeepSeek-V3's, the digit rules); `pretokenize.rs`
//! runs any other pattern on fancy-regex.

/// GPT-2 (`r50k_base`, also `p50k_base`) split pattern, as in tiktoken.
pub const GPT2_PATTERN: &str = r"'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s";

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

/// Llama 3's split pattern: cl100k's as tiktoken first published it (and
/// Llama 3's `tokenizer.py` and `tokenizer.json` still have it). It splits as
/// [`GPT4_PATTERN`] except at the end of a text whose last white space holds
/// a newline and more white space after it: `"x\n  "` is `x`, `\n`, `  `
/// here and `x`, `\n  ` there (`\s++$` came later, with the possessive
/// quantifiers).
pub const LLAMA3_PATTERN: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// Qwen2's split pattern: Llama 3's with one digit per chunk (`\p{N}`
/// instead of `\p{N}{1,3}`).
pub const QWEN2_PATTERN: &str =
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// DeepSeek-V3's first step: digits in threes from the left.
pub const DEEPSEEK_V3_DIGITS: &str = r"\p{N}{1,3}";

/// DeepSeek-V3's second step: runs of CJK ideographs (U+4E00..=U+9FA5),
/// hiragana (U+3040..=U+309F) and katakana (U+30A0..=U+30FF).
pub const DEEPSEEK_V3_CJK: &str = "[\u{4e00}-\u{9fa5}\u{3040}-\u{309f}\u{30a0}-\u{30ff}]+";

/// DeepSeek-V3's third step. Its `\r` and `\n` are the characters
/// themselves (the JSON string's escapes), not regex escapes.
pub const DEEPSEEK_V3_WORDS: &str = concat!(
    r##"[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+"##,
    "|[^\r\n",
    r"\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+",
    r"| ?[\p{P}\p{S}]+[",
    "\r\n]*",
    r"|\s*[",
    "\r\n]+",
    r"|\s+(?!\S)|\s+",
);

/// DeepSeek-V3's three steps, in order (each an HF `Split` with behavior
/// "isolated"; the sequence's text form is `steps::text`).
pub const DEEPSEEK_V3_STEPS: [&str; 3] = [DEEPSEEK_V3_DIGITS, DEEPSEEK_V3_CJK, DEEPSEEK_V3_WORDS];

/// The digit rule "single" as a split step: every digit a piece of its own
/// (HF's `Digits(individual_digits=True)` splits the same).
pub const DIGITS_SINGLE: &str = r"\p{N}";

/// The digit rule "r2l3" as a split step: each run of digits cut into
/// threes from the right ("1234567" is "1", "234", "567").
pub const DIGITS_R2L3: &str = r"\p{N}{1,3}(?=(?:\p{N}{3})*(?!\p{N}))";

/// Whole runs of digits (HF's `Digits(individual_digits=False)`).
pub const DIGITS_RUNS: &str = r"\p{N}+";
