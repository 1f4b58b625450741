//! What training pipelines ask of an encoder beyond the ids: counting
//! tokens without keeping them, BPE-dropout, and where each token starts.
//!
//! These live apart from `encode/mod.rs` on purpose: the ordinary encode
//! path stays exactly as it is (and as fast); each call here reuses its
//! pieces (the chunk look-up, the merge, the memo); dropout, the heap
//! merge with a draw before each merge.

use rustc_hash::FxHashSet;

use super::merge::merge_with_heap_drawing;
use super::{ids_buffer, no_token, Encoder, Memo};
use crate::vocab::{Rank, NONE};

/// A piece of a text as `encode` sees it: ordinary text between allowed
/// special tokens, or one allowed special token's id.
pub enum Segment<'t> {
    Text(&'t str),
    Special(Rank),
}

/// A small, fast, seedable generator (SplitMix64): the same seed gives the
/// same stream on every machine, which makes dropout reproducible.
pub struct SplitMix(u64);

impl SplitMix {
    pub fn new(seed: u64) -> SplitMix {
        SplitMix(seed)
    }

    /// A float in [0, 1), from the top 53 bits.
    #[inline]
    pub fn next_f64(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        (z >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

impl Encoder {
    /// Calls `f` with the segments of `text` in order: the same split into
    /// ordinary text and allowed special tokens as [`Encoder::encode_into`].
    pub fn for_each_segment<'t>(
        &self,
        text: &'t str,
        allowed: &FxHashSet<String>,
        mut f: impl FnMut(Segment<'t>) -> Result<(), String>,
    ) -> Result<(), String> {
        let Some(special_regex) = self.special_regex.as_ref().filter(|_| !allowed.is_empty()) else {
            return f(Segment::Text(text));
        };
        let (mut start, mut search) = (0, 0);
        loop {
            let next = loop {
                match special_regex.find_at(text, search) {
                    Some(m) if allowed.contains(m.as_str()) => break Some(m),
                    Some(m) => search = m.start() + text[m.start()..].chars().next().map_or(1, char::len_utf8),
                    None => break None,
                }
            };
            let end = next.map_or(text.len(), |m| m.start());
            f(Segment::Text(&text[start..end]))?;
            let Some(m) = next else { return Ok(()) };
            f(Segment::Special(self.specials[m.as_str()]))?;
            (start, search) = (m.end(), m.end());
        }
    }

    /// The number of ids [`Encoder::encode`] would return, without keeping
    /// them: each chunk that is one token counts one (a look-up), a chunk
    /// seen before counts what the memo holds, and only the others are
    /// merged, into one scratch buffer reused for every chunk.
    pub fn count(&self, text: &str, allowed: &FxHashSet<String>) -> Result<usize, String> {
        let mut memo = self.memo();
        let mut scratch = Vec::new();
        let mut n = 0;
        self.for_each_segment(text, allowed, |segment| match segment {
            Segment::Special(_) => {
                n += 1;
                Ok(())
            }
            Segment::Text(t) => self.count_ordinary(t, &mut memo, &mut scratch, &mut n),
        })?;
        Ok(n)
    }

    fn count_ordinary(
        &self,
        text: &str,
        memo: &mut Memo,
        scratch: &mut Vec<Rank>,
        n: &mut usize,
    ) -> Result<(), String> {
        let mut err = None;
        self.splitter.for_each_chunk(text, |chunk| {
            if err.is_some() {
                return;
            }
            let chunk = chunk.as_bytes();
            if self.vocab.get(chunk) != NONE {
                *n += 1;
            } else if let Some(ids) = memo.get(chunk) {
                *n += ids.len();
            } else {
                scratch.clear();
                match self.merge_chunk(chunk, scratch) {
                    Ok(()) => {
                        memo.insert(chunk, scratch);
                        *n += scratch.len();
                    }
                    Err(e) => err = Some(e),
                }
            }
        })?;
        err.map_or(Ok(()), Err)
    }

    /// Encodes with BPE-dropout (Provilkov et al., 2020): while merging a
    /// chunk, each candidate merge is skipped with probability `p`, drawn
    /// afresh at every step, so the same text gets different (longer)
    /// segmentations, all of which decode back to it. `rng` makes it
    /// reproducible. No memo and no whole-chunk look-up: both would skip
    /// the draws. (With `p` = 0 this is plain BPE from bytes, which for a
    /// vocabulary whose every token is reachable by merging, as every
    /// trained one, gives `encode`'s ids; callers use `encode` for 0.)
    pub fn encode_dropout(
        &self,
        text: &str,
        allowed: &FxHashSet<String>,
        p: f64,
        rng: &mut SplitMix,
    ) -> Result<Vec<Rank>, String> {
        let mut out = ids_buffer(text.len());
        self.for_each_segment(text, allowed, |segment| match segment {
            Segment::Special(id) => {
                out.push(id);
                Ok(())
            }
            Segment::Text(t) => {
                let mut err = None;
                self.splitter.for_each_chunk(t, |chunk| {
                    if err.is_none() {
                        if let Err(e) = self.merge_dropout(chunk.as_bytes(), p, rng, &mut out) {
                            err = Some(e);
                        }
                    }
                })?;
                err.map_or(Ok(()), Err)
            }
        })?;
        Ok(out)
    }

    /// One chunk with dropout: `merge_with_heap`'s linked list of parts and
    /// min-heap of (rank, position), each merge it offers skipped with
    /// probability `p` (`merge_with_heap_drawing`): a skipped candidate
    /// goes back after the next merge, drawn again, and when every
    /// candidate left was skipped the chunk is done, as the paper has it.
    fn merge_dropout(&self, chunk: &[u8], p: f64, rng: &mut SplitMix, out: &mut Vec<Rank>) -> Result<(), String> {
        let mut missing = None;
        merge_with_heap_drawing(&self.vocab, chunk, NONE, || rng.next_f64() >= p, &mut |start, end, id| {
            if id == NONE {
                missing.get_or_insert((start, end));
            }
            out.push(id);
        });
        missing.map_or(Ok(()), |(s, e)| Err(no_token(&chunk[s..e])))
    }

    /// Where each of `ids` starts in `text` (the text they encode): in
    /// bytes, or with `chars` in characters, a token that starts inside a
    /// character (a piece of its bytes) getting the index of that
    /// character. Ids are the encoder's, so each token's length is its
    /// bytes' (special tokens included).
    pub fn offsets(&self, text: &[u8], ids: &[Rank], chars: bool) -> Result<Vec<u64>, String> {
        let mut out = Vec::with_capacity(ids.len());
        // `pos`: the byte where the next token starts; `seen`: bytes
        // scanned for characters so far, and `starts` the characters that
        // begin in them.
        let (mut pos, mut seen, mut starts) = (0usize, 0usize, 0u64);
        for &id in ids {
            let len = self.decoder.get(id).ok_or_else(|| format!("unknown token id {id}"))?.len();
            if pos >= text.len() {
                return Err("the ids encode more bytes than the text has".into());
            }
            if chars {
                // The character holding byte `pos` is the one whose first
                // byte is the last first byte at or before `pos`.
                while seen <= pos {
                    starts += u64::from(text[seen] & 0xC0 != 0x80);
                    seen += 1;
                }
                out.push(starts - 1);
            } else {
                out.push(pos as u64);
            }
            pos += len;
        }
        if pos != text.len() {
            return Err("the ids do not encode the whole text".into());
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::split::patterns::GPT4_PATTERN;
    use crate::vocab::byte_ranks;
    use rustc_hash::FxHashMap;

    fn encoder() -> Encoder {
        let mut sp = FxHashMap::default();
        sp.insert("<|end|>".to_string(), 400);
        let ranks = byte_ranks(&["th", "the", "he", "en", "an", "ant", " t", " th", " the", "em", "é", "ét"]);
        Encoder::new(ranks, sp, GPT4_PATTERN).unwrap()
    }

    #[test]
    fn count_is_the_number_of_ids() {
        let enc = encoder();
        let allowed: FxHashSet<String> = ["<|end|>".to_string()].into_iter().collect();
        let none = FxHashSet::default();
        for text in ["", "then anthem<|end|> theme", " ététhe<|end|><|end|>", &"an them ".repeat(500)] {
            assert_eq!(enc.count(text, &allowed).unwrap(), enc.encode(text, &allowed).unwrap().len());
            assert_eq!(enc.count(text, &none).unwrap(), enc.encode(text, &none).unwrap().len());
        }
    }

    #[test]
    fn dropout_decodes_back_and_zero_is_encode() {
        let enc = encoder();
        let allowed: FxHashSet<String> = ["<|end|>".to_string()].into_iter().collect();
        let text = "then anthem<|end|> theme étét ".repeat(20);
        let plain = enc.encode(&text, &allowed).unwrap();
        assert_eq!(enc.encode_dropout(&text, &allowed, 0.0, &mut SplitMix::new(1)).unwrap(), plain);
        for p in [0.1, 0.5, 0.99] {
            let ids = enc.encode_dropout(&text, &allowed, p, &mut SplitMix::new(7)).unwrap();
            assert_eq!(enc.decode_bytes(&ids).unwrap(), text.as_bytes());
            assert!(ids.len() > plain.len(), "p = {p}");
            assert_eq!(enc.encode_dropout(&text, &allowed, p, &mut SplitMix::new(7)).unwrap(), ids);
        }
    }

    #[test]
    fn offsets_in_bytes_and_characters() {
        let enc = encoder();
        let text = "é the";
        let ids = enc.encode_ordinary(text).unwrap();
        let bytes = enc.offsets(text.as_bytes(), &ids, false).unwrap();
        let chars = enc.offsets(text.as_bytes(), &ids, true).unwrap();
        assert_eq!(bytes, vec![0, 2]);
        assert_eq!(chars, vec![0, 1]);
        // A token starting inside a character gets that character's index.
        let ids = [0xC3, 0xA9, b' ' as Rank];
        assert_eq!(enc.offsets("é ".as_bytes(), &ids, true).unwrap(), vec![0, 0, 1]);
        assert!(enc.offsets(b"e", &[0xC3, 0xA9], false).is_err());
    }
}
