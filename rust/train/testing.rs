//! Helpers of the training tests.

/// xorshift64: reproducible pseudo-random numbers for the tests below.
pub(super) use crate::split::lexer::tests::next_random;

/// `count` groups of 1 to `max_words` of `words`, picked by xorshift from
/// `seed`, each followed by a space (or, with `newlines`, a newline one
/// time in 7).
pub(super) fn random_text(words: &[&str], count: usize, max_words: u64, mut seed: u64, newlines: bool) -> String {
    let mut text = String::new();
    for _ in 0..count {
        next_random(&mut seed);
        let n = 1 + (seed % max_words) as usize;
        for k in 0..n {
            text.push_str(words[((seed >> (8 * k + 8)) % words.len() as u64) as usize]);
        }
        text.push(if newlines && seed % 7 == 0 { '\n' } else { ' ' });
    }
    text
}
