//! Helpers of the training tests.

use std::path::PathBuf;

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

/// The first 300,000 bytes of `corpora/tinyshakespeare.txt`: real text for
/// the two-stage (SuperBPE) tests.
pub(super) fn shakespeare() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/corpora/tinyshakespeare.txt");
    std::fs::read_to_string(path).unwrap()[..300_000].to_string()
}

/// A fresh directory for a test (`bpe-test-NAME-PID` in the system's
/// temporary directory), removed when dropped.
pub(super) struct TempDir(pub(super) PathBuf);

impl TempDir {
    pub(super) fn new(name: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("bpe-test-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    /// How many files and directories it holds.
    pub(super) fn entries(&self) -> usize {
        std::fs::read_dir(&self.0).unwrap().count()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
