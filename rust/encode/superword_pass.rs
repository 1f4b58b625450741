//! SuperBPE's phase A in one pass over the whole text (see `superword.rs`
//! for the two phases): the first stage's lexer runs once over the text, not
//! once per second-stage chunk (a sentence, ~75 bytes, where starting the
//! lexer and its callback cost as much as lexing), and its split points are
//! cut at the second stage's chunk ends.
//!
//! Why this gives the same ids as lexing each chunk alone, although the
//! two lexings differ near a chunk's end (look-aheads such as `\s+(?!\S)`
//! see the next character in the text and the chunk's end in a chunk alone;
//! pieces such as `"\n "` cross a chunk's end): phase A's result for a chunk
//! is BPE with the first stage's merges over the whole chunk, and that is
//! the same cut at *any* set of safe cuts (no first-stage merge crosses a
//! cut between two bytes adjacent inside no first-stage token). The lexer
//! only proposes where to cut (word by word, so that the memo finds the
//! segments again); each cut is kept only if it is safe, whichever lexing
//! proposed it, and a chunk's ends are always cuts. So the split points
//! may differ from the chunk-alone lexing's; the ids do not. Tested
//! against the chunk-by-chunk path and BPE from bytes below
//! (`superword_pass_tests.rs`) and against the Python oracle
//! (`tests/tokenizer/test_superbpe.py`).

use super::superword_merge::merge_runs;
use super::{Scratch, Superword};
use crate::encode::{Encoder, Memo};
use crate::vocab::{Rank, NONE};

/// The state of the pass: where the current segment and chunk start, the
/// chunk ends still to come, and whether the current chunk is one token.
struct Pass<'a, 't> {
    enc: &'a Encoder,
    sw: &'a Superword,
    text: &'t str,
    /// The second stage's chunk ends, ascending; the last is the text's end.
    ends: &'a [usize],
    /// The next chunk end (index into `ends`).
    next: usize,
    /// Where the current segment starts.
    start: usize,
    /// The current chunk's id if it is one token (then phase A skips it).
    whole: Rank,
    scratch: Scratch,
    failed: Option<String>,
}

impl<'a, 't> Pass<'a, 't> {
    /// Whether the chunk `[from, to)` is one token: a chunk longer than the
    /// longest token (most) is not looked up, as in the chunk-by-chunk path.
    #[inline(always)]
    fn token_of(&self, from: usize, to: usize) -> Rank {
        if to - from <= self.sw.longest {
            self.enc.vocab.get(&self.text.as_bytes()[from..to])
        } else {
            NONE
        }
    }

    /// Phase A of the segment `[start, at)`, then a segment starts at `at`.
    #[inline(always)]
    fn cut(&mut self, at: usize, memo: &mut Memo) {
        if self.whole == NONE && at > self.start && self.failed.is_none() {
            let bytes = self.text.as_bytes();
            let (segment, phase_a) = (&bytes[self.start..at], &mut self.scratch.phase_a);
            let n = segment.len();
            // A segment of 1-7 bytes seen lately: one probe in the memo's
            // short front table (as in the ordinary encoder's loop).
            let front = n <= 7 && memo.has_front();
            let (key, slot) = if front { short_key(bytes, self.start, n) } else { (0, 0) };
            if front {
                if let Some(ids) = memo.short_get(slot, key) {
                    phase_a.push(ids[0]);
                    if ids[1] != NONE {
                        phase_a.push(ids[1]);
                    }
                    self.start = at;
                    return;
                }
            }
            let from = phase_a.len();
            match self.sw.stage1.encode_unseen(segment, memo, phase_a) {
                Ok(true) if front => memo.short_put(slot, key, &phase_a[from..]),
                Ok(_) => {}
                Err(e) => self.failed = Some(e),
            }
        }
        self.start = at;
    }

    /// Ends every chunk that ends at or before `at`: its last segment, then
    /// phase B over its parts (or its one token).
    #[inline(always)]
    fn finish_to(&mut self, at: usize, memo: &mut Memo, out: &mut Vec<Rank>) {
        while self.next < self.ends.len() && self.ends[self.next] <= at {
            let end = self.ends[self.next];
            self.cut(end, memo);
            if self.whole != NONE {
                out.push(self.whole);
            } else {
                let Scratch { phase_a, parts } = &mut self.scratch;
                merge_runs(&self.sw.second, &self.sw.joins, phase_a, parts, out);
                phase_a.clear();
            }
            self.next += 1;
            self.whole = match self.ends.get(self.next) {
                Some(&to) => self.token_of(end, to),
                None => NONE,
            };
        }
    }

    /// A split point of the first stage's lexer at `at`: the chunks that end
    /// by then are finished, and `at` is a cut if no first-stage merge
    /// crosses it.
    #[inline(always)]
    fn split_point(&mut self, at: usize, memo: &mut Memo, out: &mut Vec<Rank>) {
        self.finish_to(at, memo, out);
        let bytes = self.text.as_bytes();
        if at > self.start && !self.sw.cuts.crossable(bytes[at - 1], bytes[at]) {
            self.cut(at, memo);
        }
    }
}

/// The short front table's key of the `n` (1-7) bytes of `bytes` at `at`
/// (its bytes, little-endian, and the length in the top byte, as the
/// ordinary encoder's loop keys it), and its slot.
#[inline(always)]
fn short_key(bytes: &[u8], at: usize, n: usize) -> (u64, usize) {
    let low = match bytes.get(at..at + 8) {
        Some(wide) => u64::from_le_bytes(wide.try_into().unwrap()) & (u64::MAX >> (64 - 8 * n)),
        None => bytes[at..at + n].iter().rev().fold(0, |k, &b| k << 8 | b as u64),
    };
    let key = low | (n as u64) << 56;
    (key, Memo::short_slot(key))
}

impl Encoder {
    /// [`Encoder::encode_superword_text`] for a vocabulary of two phases: the
    /// second stage's chunk ends first (its lexer, over the whole text), then
    /// the first stage's lexer over the whole text, each split point a cut
    /// where safe, each chunk finished by phase B when the pass reaches its
    /// end (see the module's doc).
    pub(super) fn encode_superword_pass(
        &self,
        sw: &Superword,
        text: &str,
        memo: &mut Memo,
        out: &mut Vec<Rank>,
    ) -> Result<(), String> {
        if memo.has_front() || text.len() >= super::super::front::FRONT_TEXT {
            memo.ready();
        }
        let base = text.as_ptr() as usize;
        let ends = self.splitter.chunk_ends(text)?;
        // The second stage's chunks tile the text (`for_each_chunk` makes a
        // gap an error), so the last end is the text's.
        debug_assert!(ends.last().map_or(text.is_empty(), |&e| e == text.len()));
        let mut pass = Pass {
            enc: self,
            sw,
            text,
            ends: &ends,
            next: 0,
            start: 0,
            whole: NONE,
            scratch: Scratch::default(),
            failed: None,
        };
        pass.whole = ends.first().map_or(NONE, |&to| pass.token_of(0, to));
        sw.stage1.splitter().for_each_chunk(
            text,
            #[inline(always)]
            |piece| pass.split_point(piece.as_ptr() as usize - base, memo, out),
        )?;
        pass.finish_to(text.len(), memo, out);
        pass.failed.map_or(Ok(()), Err)
    }
}

#[cfg(test)]
#[path = "superword_pass_tests.rs"]
mod tests;
