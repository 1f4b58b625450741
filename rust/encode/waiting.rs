//! The seen table's look-ups, a few chunks late: a chunk of 8 to 15 bytes
//! that the front table misses waits while the encoder goes on, its entry in
//! the seen table fetched meanwhile.
//!
//! Why: the seen table is megabytes (4 MiB for cl100k, 8 for o200k, up to 16
//! where it grew) probed at random, so a chunk the front table missed waited
//! ~90 ns for its entry from memory: 13-18% of encoding English
//! (`table.rs:185` under `perf`: the key's compare), on ~4% of its chunks.
//! The out-of-order core cannot hide that: the ids are written in order, and
//! the loop fills its window long before the entry comes. So such a chunk
//! puts one placeholder id in the output, its entry is prefetched, and it is
//! looked up once `LATE` more ids are written (or at the end): a token (one
//! id) replaces the placeholder; a chunk of more ids moves the few written
//! since. Only these chunks pay the extra work; every other chunk pays one
//! compare (`Waiting::due`). The ids are the same: each waiting chunk is
//! looked up, merged if need be, and put in the memo in the order met, as
//! without waiting (docs/dev/performance.md, "The seen table's look-ups, a
//! few chunks late").
use super::memo::Memo;
use super::Encoder;
use crate::vocab::{Rank, NONE};

/// Ids written past a waiting chunk's placeholder before it is looked up:
/// on English (~1.1 ids a chunk, ~20 ns a chunk) more than the ~100 ns an
/// entry takes to come from memory, and the ids moved along when a chunk of
/// more than one id takes its place few.
const LATE: usize = 16;
/// The most chunks waiting at once (a run of misses: one more looks up the
/// oldest first).
const MOST: usize = 8;

/// A chunk waiting: its `pack`ed key, its front slot, where its bytes are in
/// the text, its placeholder's index in the output when it was made to wait,
/// and `Waiting::moved` then.
#[derive(Clone, Copy, Default)]
struct Wait {
    key: u128,
    slot: u32,
    len: u32,
    at: usize,
    place: usize,
    moved: usize,
}

/// The chunks waiting for their look-up, oldest first (a ring of `MOST`).
pub(super) struct Waiting {
    ring: [Wait; MOST],
    first: usize,
    count: usize,
    /// The output's length at which the oldest is looked up (`usize::MAX`
    /// when none waits): the loop compares it with the length once a chunk.
    pub(super) due: usize,
    /// Ids added to the output so far by chunks of more than one id put in
    /// place of their placeholder: a chunk's placeholder has moved along by
    /// the growth since it was made to wait (every chunk looked up since
    /// then was before it).
    moved: usize,
    /// The ids of the chunk being looked up.
    ids: Vec<Rank>,
}

impl Waiting {
    pub(super) fn new() -> Waiting {
        Waiting { ring: [Wait::default(); MOST], first: 0, count: 0, due: usize::MAX, moved: 0, ids: Vec::new() }
    }

    /// The oldest chunk's placeholder now.
    #[inline(always)]
    fn place(&self, c: &Wait) -> usize {
        c.place + (self.moved - c.moved)
    }
}

impl Encoder {
    /// Makes `chunk` (8 to 15 bytes of `text`, `key` its `pack`, `slot` its
    /// front slot; the memo has a seen table) wait: its seen-table entry
    /// prefetched, a placeholder in `out`. Looks up the oldest first if
    /// `MOST` wait.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub(super) fn wait(
        &self,
        text: &[u8],
        chunk: &[u8],
        key: u128,
        slot: usize,
        memo: &mut Memo,
        w: &mut Waiting,
        out: &mut Vec<Rank>,
    ) -> Result<(), String> {
        if w.count == MOST {
            self.look_up_oldest(text, memo, w, out)?;
        }
        memo.table_prefetch(key);
        let at = chunk.as_ptr() as usize - text.as_ptr() as usize;
        let place = out.len();
        out.push(NONE);
        if w.count == 0 {
            w.due = place + LATE;
        }
        w.ring[(w.first + w.count) % MOST] =
            Wait { key, slot: slot as u32, len: chunk.len() as u32, at, place, moved: w.moved };
        w.count += 1;
        Ok(())
    }

    /// Looks up the waiting chunks whose turn has come (`out` has grown
    /// `LATE` ids past its placeholder), or, if `all` (at the end of a
    /// text), every one.
    #[inline(never)]
    pub(super) fn look_up_waiting(
        &self,
        text: &[u8],
        memo: &mut Memo,
        w: &mut Waiting,
        out: &mut Vec<Rank>,
        all: bool,
    ) -> Result<(), String> {
        while w.count > 0 && (all || out.len() >= w.due) {
            self.look_up_oldest(text, memo, w, out)?;
        }
        Ok(())
    }

    /// The oldest waiting chunk's ids in place of its placeholder: found in
    /// the seen table (then put in the front table too), else merged and put
    /// there, as `encode_seen` does for a chunk met.
    fn look_up_oldest(&self, text: &[u8], memo: &mut Memo, w: &mut Waiting, out: &mut Vec<Rank>) -> Result<(), String> {
        if w.count == 0 {
            return Ok(());
        }
        let c = w.ring[w.first];
        w.first = (w.first + 1) % MOST;
        w.count -= 1;
        let place = w.place(&c);
        let chunk = &text[c.at..c.at + c.len as usize];
        let mut ids = std::mem::take(&mut w.ids);
        ids.clear();
        let found = self.encode_seen(chunk, c.key, memo, &mut ids);
        let result = found.map(|found| {
            if found {
                memo.front_put(c.slot as usize, c.key, &ids);
            }
            debug_assert_eq!(out[place], NONE);
            if let [id] = ids[..] {
                out[place] = id;
            } else {
                put_in_place(out, place, &ids);
                w.moved += ids.len() - 1;
            }
        });
        w.ids = ids;
        w.due = if w.count == 0 { usize::MAX } else { w.place(&w.ring[w.first]) + LATE };
        result
    }
}

/// `ids` (at least one) in place of `out[place]`, the ids after it moved
/// along: `Vec::splice`'s effect without its iterator's overhead, for the
/// few dozen ids written since the placeholder.
#[inline]
fn put_in_place(out: &mut Vec<Rank>, place: usize, ids: &[Rank]) {
    assert!(place < out.len() && !ids.is_empty());
    let (len, n) = (out.len(), ids.len());
    out.reserve(n - 1);
    // SAFETY: `reserve` made room for the `n - 1` more ids; the ids after
    // `place` (`len - place - 1` of them, in bounds) move to `place + n`,
    // ending at `len + n - 1`, within that room; then `ids` fill
    // `place..place + n`, and the length counts them all.
    unsafe {
        let p = out.as_mut_ptr();
        std::ptr::copy(p.add(place + 1), p.add(place + n), len - place - 1);
        std::ptr::copy_nonoverlapping(ids.as_ptr(), p.add(place), n);
        out.set_len(len + n - 1);
    }
}

#[cfg(test)]
mod tests {
    use crate::encode::{Encoder, Memo};
    use crate::split::patterns::GPT4_PATTERN;
    use crate::vocab::byte_ranks;
    use rustc_hash::FxHashMap;

    /// Chunks that wait change no id: texts made mostly of words of 8 to 15
    /// bytes (each a miss of the front table at first), some of them tokens,
    /// some of one id after merging and most of several, in runs longer than
    /// `MOST` and ending while chunks still wait, encode with the seen table
    /// as without it, and as chunk by chunk; again with the same memo (its
    /// tables full, reset many times over: `MAX_LEARNED` is small in tests).
    #[test]
    fn waiting_changes_no_id() {
        let ranks = byte_ranks(&[
            "ab",
            "abab",
            "abababab",
            " abababab",
            "cd",
            "abcd",
            "abcdabcd",
            " abcdabcd",
            "ef",
            "é",
            "éé",
            "ééé",
        ]);
        let enc = Encoder::new(ranks, FxHashMap::default(), GPT4_PATTERN).unwrap();
        let mut next = crate::split::lexer::tests::rng(0x9e37_79b9_7f4a_7c15);
        let pieces = ["ab", "cd", "ef", "é", "x", "abab", "abcd"];
        let mut text = String::new();
        for k in 0..40_000 {
            text.push(' ');
            if k % 7 == 0 {
                text.push_str(["abababab", "abcdabcd"][k % 2]);
                continue;
            }
            let mut word = String::new();
            while word.len() < 7 + (next() % 8) as usize {
                word.push_str(pieces[(next() % pieces.len() as u64) as usize]);
            }
            text.push_str(&word);
            if k % 500 == 0 {
                text.push_str(".\n");
            }
        }
        let plain = enc.reference_ids(&text);
        let mut memo = Memo::default();
        enc.ready_memo(&mut memo);
        assert!(memo.has_table());
        for round in 0..2 {
            let mut ids = vec![7];
            enc.encode_with_front(&text, &mut memo, &mut ids).unwrap();
            assert_eq!(ids[0], 7);
            assert!(ids[1..] == plain[..], "round {round}");
        }
        // Texts that end with chunks waiting, one or many.
        for end in [" abcdabcdx", " abcdabcdx abababab ababcdcdx", " ababcdcdcdx ééééx ababababx"] {
            let (mut a, mut b) = (vec![], vec![]);
            enc.encode_with_front(&text[..1000], &mut memo, &mut a).unwrap();
            enc.encode_with_front(end, &mut memo, &mut a).unwrap();
            enc.encode_without_front(&text[..1000], &mut Memo::default(), &mut b).unwrap();
            enc.encode_without_front(end, &mut Memo::default(), &mut b).unwrap();
            assert_eq!(a, b, "{end:?}");
        }
    }
}
