//! A split pattern, or a step of a sequence, that runs on fancy-regex (the
//! engine tiktoken uses): any regex our lexers do not implement. Its matches,
//! left to right, under a time budget for the patterns that need
//! backtracking.

use fancy_regex::Regex;

/// A compiled regex, and whether the linear-time `regex` crate accepts it
/// too (no look-around, no backreference: no backtracking to bound).
#[derive(Clone)]
pub(crate) struct FancyRegex {
    regex: Regex,
    linear: bool,
}

impl FancyRegex {
    pub(crate) fn new(pattern: &str) -> Result<Self, String> {
        Ok(FancyRegex {
            regex: Regex::new(pattern).map_err(|e| format!("invalid split pattern {pattern:?}: {e}"))?,
            linear: regex::Regex::new(pattern).is_ok(),
        })
    }

    /// Calls `f(start, end)` on every match of `text`, left to right (empty
    /// ones included, as `regex.findall` has them), until it returns false.
    ///
    /// fancy-regex can fail at match time (its backtracking limit); that is an
    /// error for the caller, never a panic. It bounds the backtracking of one
    /// match, not of all of them: `(a+)+(?!x)c|[\s\S]` on a run of n a's does
    /// O(n) work at each of n places. So a pattern that needs its
    /// backtracking engine (look-around, backreferences) has a time budget
    /// for the whole text: 1 s plus 10 µs a byte (100 KB/s, 20 times slower
    /// than that engine on ordinary patterns). A pattern the linear-time
    /// `regex` crate runs needs none.
    pub(crate) fn for_each_match(&self, text: &str, mut f: impl FnMut(usize, usize) -> bool) -> Result<(), String> {
        let started = std::time::Instant::now();
        let budget = if self.linear {
            std::time::Duration::MAX
        } else {
            std::time::Duration::from_secs(1)
                + std::time::Duration::from_micros(10u64.saturating_mul(text.len() as u64))
        };
        for (k, m) in self.regex.find_iter(text).enumerate() {
            let m = m.map_err(|e| format!("the split pattern failed on this text ({e}); try a simpler pattern"))?;
            if !f(m.start(), m.end()) {
                break;
            }
            if !self.linear && k % 64 == 63 && started.elapsed() > budget {
                return Err(format!(
                    "the split pattern failed on this text (too slow: {} of {} bytes split in {:.1} s; \
                     catastrophic backtracking?); try a simpler pattern",
                    m.end(),
                    text.len(),
                    started.elapsed().as_secs_f64()
                ));
            }
        }
        Ok(())
    }
}
