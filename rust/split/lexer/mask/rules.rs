//! Where chunks start in a 64-byte window, from its byte classes: the bit
//! algebra of each split pattern, for ASCII text (and the longer characters
//! `classify::known_high` gives a class to: each of their bytes has the
//! character's class).
//!
//! The window starts where a chunk starts (the lexer only puts one there),
//! and no pattern looks behind, so the window is lexed as if the text began
//! at its byte 0: "the byte before" byte 0 is nothing (the shifts below
//! bring in 0 bits). Bit `i` of a mask is byte `i`; `x << 1` moves each
//! byte's bit onto the next byte ("the byte before is ..."), `x >> 1` onto
//! the byte before ("the byte after is ...").
//!
//! Each function returns two masks: the bytes where a chunk starts, and the
//! bytes where the algebra does not know ("undecided"). Only the starts
//! before the first undecided byte are used; the lexer hands the chunk that
//! runs into it to the exact lexer (`Text::gpt4` etc.). Undecided are:
//! - every byte >= 0x80 of a character the masks do not know: it may be a
//!   letter, a mark, white space, a digit or punctuation, and it may join
//!   the run before it;
//! - white space right before such a byte (does the white-space run end
//!   there, and so give its last character to the next chunk?);
//! - byte 63, the window's horizon, and whatever needs to see past it: a
//!   white-space run or a contraction that reaches it.
//!
//! Every rule below says why it is the pattern's; in ASCII, the classes are
//! letter (`\p{L}`), digit (`\p{N}`), white (`\s`: space, `\t \v \f`, and
//! the newlines `\r \n`) and punctuation (all other bytes below 0x80:
//! `[^\s\p{L}\p{N}]`), see `split/ascii.rs`.

use super::classify::Masks;

/// The horizon: byte 63 is never decided (the window does not see what
/// follows it).
const HORIZON: u64 = 1 << 63;

/// Apostrophes at bytes 0..=60 leave the contraction's next two bytes and
/// the byte after it (at most `i + 3`) inside the decided part of the
/// window; later ones are undecided.
const APOSTROPHE_DECIDED: u64 = (1 << 61) - 1;

/// A pattern's rules.
pub(crate) trait Rules {
    /// Whether white space is cut after its last newline (`\s*[\r\n]`).
    const NEWLINE_CUT: bool;

    /// Whether a chunk that starts at a letter is that letter's run,
    /// `\p{L}++` (GPT-2, GPT-4; not GPT-4o, whose words are cut between
    /// cases).
    const LETTER_RUNS: bool;

    /// The chunk starts and the undecided bytes of the window `w` (whose
    /// byte 0 starts a chunk), given its classes `m`.
    fn starts(m: &Masks, w: &[u8; 64]) -> (u64, u64);
}

/// Punctuation: not a letter, digit, white space or a byte of an unknown
/// character (so ASCII punctuation, and the bytes of the punctuation that
/// `known_high` knows).
#[inline(always)]
fn punctuation(m: &Masks) -> u64 {
    !(m.letter | m.digit | m.white | m.high)
}

/// `\p{N}{1,3}+` (GPT-4, GPT-4o): a digit run is cut in threes from its
/// first digit. No alternative that comes before it can take a digit, and
/// nothing can go on into a digit from the chunk before it, so a digit run
/// always starts a chunk; then every third digit does. The loop runs once
/// per three digits of the longest run (usually once, finding nothing).
#[inline(always)]
fn digit_groups(d: u64) -> u64 {
    let first = d & !(d << 1);
    // Bytes that are the third digit of a run or later.
    let third = d & d << 1 & d << 2;
    let mut all = first;
    let mut g = first;
    loop {
        g = g << 3 & third;
        if g == 0 {
            return all;
        }
        all |= g;
    }
}

/// The byte at `i`, lower-cased if it is an ASCII letter (and changed, but
/// still no letter, otherwise: `| 0x20` maps only `A`-`Z` onto `a`-`z`).
#[inline(always)]
fn folded(w: &[u8; 64], i: usize) -> u8 {
    w[i] | 0x20
}

/// The length of the contraction `'s 't 'd 'm 'll 've 're` at an apostrophe
/// at `i` (case-folded bytes `c1`, `c2` after it), or 0.
#[inline(always)]
fn contraction(c1: u8, c2: u8) -> u32 {
    match (c1, c2) {
        (b's' | b't' | b'd' | b'm', _) => 2,
        (b'l', b'l') | (b'v' | b'r', b'e') => 3,
        _ => 0,
    }
}

/// The last byte of each punctuation character that starts a chunk (at a
/// byte of `punct_start`), i.e. the byte right before a letter it may be
/// the prefix of: the character's own byte if ASCII, its third if one of
/// the three-byte ones `known_high` knows.
#[inline(always)]
fn prefix_punct(m: &Masks, punct_start: u64) -> u64 {
    let mut x = punct_start;
    x |= x << 1 & m.punct_tail;
    x |= x << 1 & m.punct_tail;
    x & !(m.punct_tail >> 1)
}

/// White space in GPT-4 and GPT-4o, where `\s*[\r\n]` (`\s*[\r\n]+`) comes
/// before `\s+(?!\S)`, given the newlines in white-space runs (`newline`:
/// not those taken by punctuation before them, see `absorbed`) and the
/// other white space `t`. A run of white space that does not end the text
/// (the window never sees the end) is cut:
/// - at its first byte (whatever came before has ended: a letter, digit or
///   punctuation run, or newlines taken by punctuation, which stop at the
///   first byte that is not a newline);
/// - after its last newline, if white space follows it: the greedy `\s*`
///   backs off to that newline and no further;
/// - before its last byte, if that is no newline: `\s+(?!\S)` backs off one
///   character, which is left to start the next chunk (`" word"`, or `\s`
///   alone). A run of one is cut there anyway.
///
/// The cut after the last newline needs to know that no newline comes later
/// in the run: for each newline followed by two or more `t` (one is the
/// "last byte" cut), the `t` run is followed to its end. A newline there:
/// no cut; a byte >= 0x80 (maybe `\u{85}`, `\u{a0}`...) or the horizon:
/// undecided; anything else: a cut. (Indented lines of code take this loop
/// once per line.)
#[inline(always)]
fn white_cuts(m: &Masks, newline: u64, t: u64, undecided: &mut u64) -> u64 {
    let ws = t | newline;
    let mut starts = ws & !(ws << 1) | t & !((m.white | m.high) >> 1);
    let mut after_newline = newline << 1 & t & t >> 1;
    if after_newline != 0 {
        // Each candidate's run ends where the carry of `t + after_newline`
        // lands (bit 63 counts as no `t`, so that every run has an end bit
        // in the window); runs are disjoint, so the k-th end is the k-th
        // candidate's. (Tested with whole masks, not `mask >> end & 1`: LLVM
        // turned that into byte extracts of the compare vectors, spilled to
        // the stack for every window.)
        let t = t & !HORIZON;
        let mut ends = t.wrapping_add(after_newline) & !t;
        let good = !(m.newline | m.high | HORIZON);
        let unknown = m.high | HORIZON;
        while after_newline != 0 {
            let candidate = after_newline & after_newline.wrapping_neg();
            let end = ends & ends.wrapping_neg();
            if end & good != 0 {
                starts |= candidate;
            } else if end & unknown != 0 {
                *undecided |= candidate;
            }
            after_newline ^= candidate;
            ends ^= end;
        }
    }
    // White space right before a byte >= 0x80: is it the run's last?
    *undecided |= t & m.high >> 1;
    starts
}

/// The newlines that punctuation takes: the run of bytes of `run` (`\r\n`
/// for GPT-4's `[\r\n]*+`, `\r\n/` for GPT-4o's `[\r\n/]*`) from a newline
/// right after punctuation. That punctuation is in a punctuation run's
/// chunk (it could otherwise only be a letter run's prefix, which needs a
/// letter after it), and that chunk takes them.
///
/// Adding a bit at the run's first newline carries through the run and
/// clears it: the bits that `run + first` clears are the run from there on.
/// (In GPT-4o's runs a newline may follow a `/` of the run too, "./\n/\n":
/// its bit, added to the run cleared by the first carry, is set instead of
/// cleared; such a newline is taken all the same, hence `| first`.)
#[inline(always)]
fn absorbed(m: &Masks, p: u64, run: u64) -> u64 {
    let first = m.newline & p << 1;
    run & !run.wrapping_add(first) | first
}

/// GPT-4: `'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+|
/// ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s`, and
/// Llama 3's pattern, which cuts the same inside a text (they differ only
/// where a run of white space ends the text, which a window never sees).
pub(crate) type Gpt4 = Cl100k<false>;

/// Qwen2: Llama 3's pattern with `\p{N}` for `\p{N}{1,3}`: every digit
/// starts a chunk (no alternative before it takes a digit, and none goes on
/// from a digit), the rest is GPT-4's.
pub(crate) type Qwen2 = Cl100k<true>;

/// GPT-4's rules, with digits one by one if `ONE_DIGIT`.
pub(crate) struct Cl100k<const ONE_DIGIT: bool>;

impl<const ONE_DIGIT: bool> Rules for Cl100k<ONE_DIGIT> {
    const LETTER_RUNS: bool = true;
    const NEWLINE_CUT: bool = true;

    #[inline(always)]
    fn starts(m: &Masks, w: &[u8; 64]) -> (u64, u64) {
        let mut undecided = m.high | HORIZON;
        let t = m.white & !m.newline;
        let p = punctuation(m);
        let newline = m.newline & !absorbed(m, p, m.newline);
        let mut starts = white_cuts(m, newline, t, &mut undecided);
        // ` ?[^\s\p{L}\p{N}]++`: a punctuation run starts a chunk, unless a
        // space comes before it (then the space's chunk takes it: that space
        // ends a white-space run, so it starts a chunk of its own).
        let punct_start = p & !(p << 1) & !(m.space << 1);
        // `[^\r\n\p{L}\p{N}]?+\p{L}++`: a letter run starts a chunk unless
        // the character before it starts one and may be its prefix: white
        // space that is no newline (it ends its run, so starts a chunk), or
        // punctuation that starts a chunk (a run of one character, then).
        let prefix = t | prefix_punct(m, punct_start);
        let letter_start = m.letter & !(m.letter << 1) & !(prefix << 1);
        let digits = if ONE_DIGIT { m.digit } else { digit_groups(m.digit) };
        starts |= punct_start | letter_start | digits;
        // `'(?i:[sdmt]|ll|ve|re)`, the first alternative, where a chunk
        // starts at the apostrophe. Its letters are already no starts (the
        // apostrophe is their prefix, or they are in its letter run), but
        // the byte after it is: a letter there starts a new letter run.
        undecided |= m.apostrophe & starts & !APOSTROPHE_DECIDED;
        let mut a = m.apostrophe & starts & APOSTROPHE_DECIDED;
        while a != 0 {
            let i = a.trailing_zeros();
            let k = contraction(folded(w, i as usize + 1), folded(w, i as usize + 2));
            // The contraction is a chunk: a chunk starts after it.
            starts |= ((k != 0) as u64) << (i + k);
            a &= a - 1;
        }
        (starts, undecided)
    }
}

/// GPT-4o:
///   `[^\r\n\p{L}\p{N}]?[UP]*[LOW]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?`
///   `|[^\r\n\p{L}\p{N}]?[UP]+[LOW]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?`
///   `|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`
/// In ASCII, UP is `A`-`Z` and LOW `a`-`z`.
pub(crate) struct Gpt4o;

impl Rules for Gpt4o {
    const LETTER_RUNS: bool = false;
    const NEWLINE_CUT: bool = true;

    #[inline(always)]
    fn starts(m: &Masks, w: &[u8; 64]) -> (u64, u64) {
        let mut undecided = m.high | HORIZON;
        let t = m.white & !m.newline;
        let all_punct = punctuation(m);
        // `[\r\n/]*` after punctuation. The slashes it takes are no longer
        // punctuation that may start a chunk or be a prefix.
        let taken = absorbed(m, all_punct, m.newline | m.slash);
        let p = all_punct & !taken;
        let newline = m.newline & !taken;
        let mut starts = white_cuts(m, newline, t, &mut undecided);
        // Punctuation and prefixes as in GPT-4. The prefix `?` is greedy,
        // not possessive, but giving it back only helps if the prefix
        // character could start the letters itself: a mark, never ASCII.
        let punct_start = p & !(p << 1) & !(m.space << 1);
        let prefix = t | prefix_punct(m, punct_start);
        let lower = m.letter & !m.upper;
        // A letter run is cut before each capital that follows a small
        // letter: `[UP]*[LOW]+` stops at the small letters' end, and the
        // next match starts at the capital. (Capitals then small letters,
        // `HTMLParser`, are one match: `[UP]*` takes the capitals.)
        let letter_start = m.letter & !(m.letter << 1) & !(prefix << 1) | m.upper & lower << 1;
        starts |= punct_start | letter_start | digit_groups(m.digit);
        // The contraction suffix: an apostrophe right after a letter that
        // ends a word (not after a suffix's own letters: "it's's" is
        // "it's", "'s") joins the word when `s t d m ll ve re` follow; the
        // next byte then starts a chunk (a letter there starts a new word).
        // A byte >= 0x80 after the apostrophe may be U+017F (long s), which
        // case-folds to `s`.
        let mut a = m.apostrophe & m.letter << 1;
        undecided |= a & !APOSTROPHE_DECIDED;
        a &= APOSTROPHE_DECIDED;
        let mut suffix_end = u32::MAX;
        while a != 0 {
            let i = a.trailing_zeros();
            a &= a - 1;
            if i == suffix_end {
                continue;
            }
            if w[i as usize + 1] >= 0x80 {
                undecided |= 1 << i;
                continue;
            }
            let k = contraction(folded(w, i as usize + 1), folded(w, i as usize + 2));
            if k != 0 {
                starts = starts & !(((1 << k) - 1) << i) | 1 << (i + k);
                suffix_end = i + k;
            }
        }
        (starts, undecided)
    }
}

/// GPT-2: `'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s`
pub(crate) struct Gpt2;

impl Rules for Gpt2 {
    const LETTER_RUNS: bool = true;
    const NEWLINE_CUT: bool = false;

    #[inline(always)]
    fn starts(m: &Masks, w: &[u8; 64]) -> (u64, u64) {
        let mut undecided = m.high | HORIZON;
        let white = m.white;
        let p = punctuation(m);
        // A run of letters, digits or punctuation starts a chunk unless a
        // space comes before it (` ?`), which then starts it.
        let after_space = m.space << 1;
        let runs = m.letter & !(m.letter << 1) | m.digit & !(m.digit << 1) | p & !(p << 1);
        // White space: `\s+(?!\S)` leaves a run's last character to start the
        // next chunk (`\s` alone, or the space of ` ?X`); newlines are no
        // different here.
        let mut starts = runs & !after_space | white & !(white << 1) | white & !((white | m.high) >> 1);
        undecided |= white & m.high >> 1;
        // `'(?:[sdmt]|ll|ve|re)` (case-sensitive) where a chunk starts at the
        // apostrophe: its letters start no chunk (the first is a letter run's
        // first), and the byte after them does.
        undecided |= m.apostrophe & starts & !APOSTROPHE_DECIDED;
        let mut a = m.apostrophe & starts & APOSTROPHE_DECIDED;
        while a != 0 {
            let i = a.trailing_zeros();
            let k = contraction(w[i as usize + 1], w[i as usize + 2]);
            if k != 0 {
                starts = starts & !(((1 << (k - 1)) - 1) << (i + 1)) | 1 << (i + k);
            }
            a &= a - 1;
        }
        (starts, undecided)
    }
}
