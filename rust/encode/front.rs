//! The encoder's loop with the memo's front tables: a chunk of 1 to 15 bytes
//! seen lately costs one probe in a small direct-mapped table (`memo.rs`,
//! `ShortFront` for 1 to 7 bytes, `Front` for 8 to 15), token or merged
//! chunk alike, before the vocabulary's maps and the memo; a chunk of 8 to
//! 15 bytes they miss costs one probe in the memo's seen table (`table.rs`).
//! Measurements: docs/dev/performance.md, "The hot loop".

use super::memo::Memo;
use super::waiting::Waiting;
use super::Encoder;
use crate::vocab::{pack, Rank, NONE};

/// `pack(chunk)` for a `chunk` of 1..=15 bytes of `text`, with one load of
/// the 16 bytes of `text` from where it starts (masked to its length)
/// instead of `pack`'s branches on the length; `pack` itself near the end of
/// `text`.
#[inline(always)]
fn key_at(text: &[u8], chunk: &[u8]) -> u128 {
    let n = chunk.len();
    debug_assert!((1..=15).contains(&n));
    let at = (chunk.as_ptr() as usize).wrapping_sub(text.as_ptr() as usize);
    let key = match text.get(at..at.wrapping_add(16)) {
        Some(wide) => {
            let wide = u128::from_le_bytes(wide.try_into().unwrap());
            wide & (u128::MAX >> (128 - 8 * n)) | (n as u128) << 120
        }
        None => pack(chunk),
    };
    debug_assert_eq!(key, pack(chunk));
    key
}

/// The key of a `chunk` of 1..=7 bytes of `text` for the short front table:
/// its bytes, little-endian, and its length in the top byte (so no two
/// chunks share a key, NUL bytes included, and none is 0, the empty slot's),
/// from one 8-byte load masked to its length; byte by byte near the end of
/// `text`.
#[inline(always)]
fn short_key_at(text: &[u8], chunk: &[u8]) -> u64 {
    let n = chunk.len();
    debug_assert!((1..=7).contains(&n));
    let at = (chunk.as_ptr() as usize).wrapping_sub(text.as_ptr() as usize);
    let bytes = match text.get(at..at.wrapping_add(8)) {
        Some(wide) => u64::from_le_bytes(wide.try_into().unwrap()) & (u64::MAX >> (64 - 8 * n)),
        None => chunk.iter().rev().fold(0, |k, &b| k << 8 | b as u64),
    };
    bytes | (n as u64) << 56
}

/// Texts this long (bytes) get the memo's front table (see
/// `Encoder::encode_ordinary_into`), and runs of texts this long together
/// (`Encoder::encode_each`).
pub(super) const FRONT_TEXT: usize = 1 << 16;

impl Encoder {
    /// [`Encoder::encode_ordinary`], appending to `out` and remembering in
    /// `memo` the chunks that took merging (and, in its front tables, the
    /// chunks of 1 to 15 bytes seen lately).
    ///
    /// A text of fewer than `FRONT_TEXT` bytes with a memo that has no front
    /// tables yet is encoded without them: making them (768 KiB) would cost more
    /// than it saves, and a memo that is not pooled (cache off) would make
    /// one for each call.
    pub(super) fn encode_ordinary_into(&self, text: &str, memo: &mut Memo, out: &mut Vec<Rank>) -> Result<(), String> {
        if let Some(sw) = &self.superword {
            return self.encode_superword_text(sw, text, memo, out);
        }
        if memo.has_front() || text.len() >= FRONT_TEXT {
            self.ready_memo(memo);
            self.encode_with_front(text, memo, out)
        } else {
            self.encode_without_front(text, memo, out)
        }
    }

    /// Makes `memo`'s front tables, and its seen table where the cache's cap
    /// would keep a memo that has one (else every call would copy the seed
    /// afresh: a cap of 0, the cache off, say) and where it is used: a
    /// SuperBPE encoder's chunks go through `superword_pass.rs`, which never
    /// looks in it (a copy of the seed there was 4 MiB a memo for nothing).
    pub(super) fn ready_memo(&self, memo: &mut Memo) {
        memo.ready();
        if self.superword.is_none() && self.memos.capacity() >= self.seed.bytes() {
            memo.ready_table(&self.seed);
        }
    }

    /// The ids of a chunk of 8 to 15 bytes, `key` its `pack`, that is not in
    /// the memo's front table: with the seen table, one probe finds it if it
    /// is a token or merged before, and its absence proves it is neither (it
    /// is merged, and put in the table); without, `encode_unseen`. Returns
    /// whether it was found (then it goes in the front table too).
    #[inline(always)]
    pub(super) fn encode_seen(
        &self,
        chunk: &[u8],
        key: u128,
        memo: &mut Memo,
        out: &mut Vec<Rank>,
    ) -> Result<bool, String> {
        if !memo.has_table() {
            return self.encode_unseen(chunk, memo, out);
        }
        if memo.table_push(key, out) {
            return Ok(true);
        }
        let start = out.len();
        if !memo.shared_push(key, out) {
            self.merge_chunk(chunk, out)?;
            memo.shared_put(key, &out[start..]);
        }
        memo.table_insert(key, &out[start..], &self.seed, self.memos.table_bytes());
        Ok(false)
    }

    /// The ids of a chunk that is not in the memo's front table: the
    /// vocabulary, else the memo, else merging (remembered in the memo).
    /// Returns whether it was a token or in the memo (then it goes in the
    /// front table too).
    #[inline(always)]
    pub(super) fn encode_unseen(&self, chunk: &[u8], memo: &mut Memo, out: &mut Vec<Rank>) -> Result<bool, String> {
        let whole = self.vocab.get(chunk);
        if whole != NONE {
            out.push(whole);
        } else if let Some(ids) = memo.get(chunk) {
            out.extend_from_slice(ids);
        } else {
            // (Not in the memo: in the shared table, where threads encode at
            // once, else merged and put there too; `shared.rs`.)
            let start = out.len();
            let key = if chunk.len() <= 15 && memo.is_sharing() { Some(pack(chunk)) } else { None };
            if !key.is_some_and(|key| memo.shared_push(key, out)) {
                self.merge_chunk(chunk, out)?;
                if let Some(key) = key {
                    memo.shared_put(key, &out[start..]);
                }
            }
            memo.insert(chunk, &out[start..]);
            return Ok(false);
        }
        Ok(true)
    }

    /// [`Encoder::encode_ordinary_into`] with the memo's front tables (made):
    /// a chunk of 1 to 15 bytes seen lately costs one probe in one of them,
    /// token or merged chunk alike, and its key one masked load
    /// (`short_key_at`, `key_at`) instead of `pack`'s branches on the
    /// length. Chunks of 1-2 bytes go through the short table too: taking
    /// the vocabulary's flat tables, they made the branch on the length the
    /// loop's most mispredicted one (docs/dev/performance.md, "The hot loop").
    pub(super) fn encode_with_front(&self, text: &str, memo: &mut Memo, out: &mut Vec<Rank>) -> Result<(), String> {
        let mut err = None;
        let bytes = text.as_bytes();
        // Chunks of 8 to 15 bytes the front table missed wait for their
        // look-up in the seen table (`waiting.rs`).
        let late = memo.has_table();
        let mut waiting = Waiting::new();
        // Always inlined into the lexer's loop: left to the compiler, this
        // was a call per chunk that saved and restored six registers.
        self.splitter.for_each_chunk(
            text,
            #[inline(always)]
            |chunk| {
                if err.is_some() {
                    return;
                }
                if out.len() >= waiting.due {
                    if let Err(e) = self.look_up_waiting(bytes, memo, &mut waiting, out, false) {
                        err = Some(e);
                        return;
                    }
                }
                let chunk = chunk.as_bytes();
                let done = if (1..=7).contains(&chunk.len()) {
                    let key = short_key_at(bytes, chunk);
                    let slot = Memo::short_slot(key);
                    if let Some(ids) = memo.short_get(slot, key) {
                        // (A second id of NONE: one id.)
                        push_ids(out, ids, 1 + (ids[1] != NONE) as usize);
                        return;
                    }
                    let start = out.len();
                    let done = self.encode_unseen(chunk, memo, out);
                    if done == Ok(true) {
                        memo.short_put(slot, key, &out[start..]);
                    }
                    done
                } else if (8..=15).contains(&chunk.len()) {
                    let key = key_at(bytes, chunk);
                    let slot = Memo::front_slot(key);
                    if let Some((ids, n)) = memo.front_get(slot, key) {
                        push_ids(out, ids, n);
                        return;
                    }
                    if late {
                        self.wait(bytes, chunk, key, slot, memo, &mut waiting, out).map(|()| false)
                    } else {
                        let start = out.len();
                        let done = self.encode_seen(chunk, key, memo, out);
                        if done == Ok(true) {
                            memo.front_put(slot, key, &out[start..]);
                        }
                        done
                    }
                } else {
                    self.encode_unseen(chunk, memo, out)
                };
                if let Err(e) = done {
                    err = Some(e);
                }
            },
        )?;
        if let Some(e) = err {
            return Err(e);
        }
        self.look_up_waiting(bytes, memo, &mut waiting, out, true)
    }

    /// [`Encoder::encode_ordinary_into`] without the front table.
    pub(super) fn encode_without_front(&self, text: &str, memo: &mut Memo, out: &mut Vec<Rank>) -> Result<(), String> {
        let mut err = None;
        self.splitter.for_each_chunk(
            text,
            #[inline(always)]
            |chunk| {
                if err.is_some() {
                    return;
                }
                if let Err(e) = self.encode_unseen(chunk.as_bytes(), memo, out) {
                    err = Some(e);
                }
            },
        )?;
        err.map_or(Ok(()), Err)
    }
}

/// Appends the first `n` of a front slot's `N` ids to `out`. All `N` are
/// copied, a fixed-size copy, and `n` kept: `extend_from_slice` of a length
/// known only at run time was a call to `memcpy` for every chunk of two or
/// three ids (`examples/profile.rs`, alternated: code +1-2%, English and
/// FLORES-200 within noise).
#[inline(always)]
pub(super) fn push_ids<const N: usize>(out: &mut Vec<Rank>, ids: &[Rank; N], n: usize) {
    debug_assert!((1..=N).contains(&n));
    let n = n.min(N);
    out.reserve(N);
    // SAFETY: `reserve` made room for N more ids past the length; the first
    // `n <= N` of them are written here before they are counted in the
    // length.
    unsafe {
        let end = out.as_mut_ptr().add(out.len());
        std::ptr::copy_nonoverlapping(ids.as_ptr(), end, N);
        out.set_len(out.len() + n);
    }
}

/// The ids of `text` without the front tables (a fresh memo), checked
/// against chunk-by-chunk encoding: what the tests of the tables compare with.
#[cfg(test)]
impl Encoder {
    pub(super) fn reference_ids(&self, text: &str) -> Vec<Rank> {
        let mut plain = vec![];
        self.encode_without_front(text, &mut Memo::default(), &mut plain).unwrap();
        let mut chunk_by_chunk = vec![];
        self.splitter.for_each_chunk(text, |c| self.encode_chunk(c.as_bytes(), &mut chunk_by_chunk).unwrap()).unwrap();
        assert_eq!(plain, chunk_by_chunk);
        plain
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::split::patterns::GPT4_PATTERN;
    use crate::vocab::byte_ranks;
    use rustc_hash::FxHashMap;

    /// `key_at` packs a chunk as `pack` does, wherever it lies in the text
    /// (the last 15 bytes, where no 16-byte load fits, included).
    #[test]
    fn key_at_is_pack() {
        let text: Vec<u8> = (0..40u8).map(|i| i.wrapping_mul(73).wrapping_add(5)).collect();
        for start in 0..text.len() {
            for n in 1..=15.min(text.len() - start) {
                let chunk = &text[start..start + n];
                assert_eq!(key_at(&text, chunk), pack(chunk), "{start}+{n}");
            }
        }
    }

    /// `short_key_at` is a chunk's bytes and length wherever the chunk lies
    /// (the last 7 bytes, where no 8-byte load fits, included), and no two
    /// chunks share a key: NUL bytes, which the padding is made of, and
    /// length bytes (1-7) in the text included.
    #[test]
    fn short_key_at_is_bytes_and_length() {
        let text: Vec<u8> = (0..40u8).map(|i| [0, 1, 7, b'a', 0xE9, 0xFF][i as usize % 6] ^ (i / 6)).collect();
        let mut seen = std::collections::HashMap::new();
        for start in 0..text.len() {
            for n in 1..=7.min(text.len() - start) {
                let chunk = &text[start..start + n];
                let mut want = (n as u64) << 56;
                for (k, &b) in chunk.iter().enumerate() {
                    want |= (b as u64) << (8 * k);
                }
                let key = short_key_at(&text, chunk);
                assert_eq!(key, want, "{start}+{n}");
                assert_eq!(*seen.entry(key).or_insert(chunk), chunk);
            }
        }
        assert!(seen.len() > 100);
    }

    /// The memo's front tables change no id: a text of 60k distinct words
    /// (so that chunks take each other's slots) encodes with them as without
    /// them, twice with the same memo (the second time from full tables), and
    /// as chunk by chunk; chunks of 1 to 7 bytes and of 8 to 15 (the two
    /// tables), of 1 to 3 ids, of more, of more than 15 bytes, and with NUL
    /// bytes alike.
    #[test]
    fn front_table_is_invisible() {
        let ranks = byte_ranks(&["th", "the", "he", "en", "an", "ant", " t", " th", " the", "em", "é", " é"]);
        let enc = Encoder::new(ranks, FxHashMap::default(), GPT4_PATTERN).unwrap();
        let mut next = crate::split::lexer::tests::rng(0x2545_f491_4f6c_dd1d);
        let letters = ["t", "h", "e", "n", "a", "m", "é", "1", "\n", ".", "\0"];
        let mut text = String::new();
        for _ in 0..60_000 {
            text.push(' ');
            for _ in 0..1 + next() % 18 {
                text.push_str(letters[(next() % letters.len() as u64) as usize]);
            }
        }
        let plain = enc.reference_ids(&text);
        let mut memo = Memo::default();
        memo.ready();
        for round in 0..2 {
            let mut ids = vec![];
            enc.encode_with_front(&text, &mut memo, &mut ids).unwrap();
            assert!(ids == plain, "round {round}");
        }
        assert!(memo.has_front());
        // With the seen table (seeded with the vocabulary, reset to it
        // many times over: 60k words against `MAX_LEARNED`), twice with the
        // same memo.
        let mut memo = Memo::default();
        enc.ready_memo(&mut memo);
        assert!(memo.has_table());
        for round in 0..2 {
            let mut ids = vec![];
            enc.encode_with_front(&text, &mut memo, &mut ids).unwrap();
            assert!(ids == plain, "round {round} with the seen table");
        }
        // Short texts, with and without a front table made.
        for t in [&text[..1000], " the", "é", ""] {
            assert_eq!(enc.encode_ordinary(t).unwrap(), enc.encode_ordinary(t).unwrap());
            let (mut a, mut b) = (vec![], vec![]);
            enc.encode_with_front(t, &mut memo, &mut a).unwrap();
            enc.encode_without_front(t, &mut Memo::default(), &mut b).unwrap();
            assert_eq!(a, b, "{t:?}");
        }
    }
}
