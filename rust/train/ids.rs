//! SuperBPE's second stage counted by ids: each stage-2 chunk is encoded by
//! the first stage's vocabulary as it is lexed, and counted under its ids.
//!
//! Why: stage 2's chunks run over several words, so nearly all of them are
//! distinct and long (on 1 GB of English, 3.5M distinct chunks hold three
//! quarters of the text). Counted by their bytes, the counts held the whole
//! text again, spilled it to disk under a cap and read it back on one core,
//! and only then were the chunks encoded into words. Counted by their ids,
//! the encoding runs on the counting threads (which read nothing else), the
//! keys are about half the bytes (an id in 1-3 bytes against ~4.4 bytes of
//! English per token), and the words are the keys read back.
//!
//! A key is the ids in LEB128 (7 bits a byte, the high bit set on every byte
//! but an id's last): one sequence of ids has one key and a key decodes to
//! one sequence, so equal keys are equal chunks (an encoding is one-to-one),
//! and the counts are those of the chunks. A key is at least as many bytes
//! as it has ids, so the bytes bound the words' symbols as the bytes of
//! chunks do (`Source::bound`).

use super::count::{ChunkCounts, Chunker};
use crate::encode::{Encoder, SafeCuts};
use crate::split::pretokenize::Splitter;
use crate::vocab::Rank;

/// Counts `splitter`'s chunks under the ids `base` encodes them to, each
/// chunk encoded between `base`'s safe cuts with a cache (as stage 2's
/// words start: `Encoder::encode_chunk_between`), `base`'s lexer run once
/// over each text counted (`Encoder::encode_chunks_between`).
pub struct IdChunker {
    splitter: Splitter,
    base: Encoder,
    cuts: SafeCuts,
}

impl IdChunker {
    /// `base` must be byte-level (all 256 single bytes are tokens), so that
    /// every chunk encodes.
    pub fn new(splitter: Splitter, base: Encoder, cuts: SafeCuts) -> IdChunker {
        IdChunker { splitter, base, cuts }
    }
}

impl Chunker for IdChunker {
    fn cuttable(&self) -> bool {
        self.splitter.cuttable()
    }

    fn count(&self, text: &str, counts: &mut ChunkCounts) -> Result<(), String> {
        // A memo from the encoder's pool for the call, given back after it:
        // a counting thread's next segment starts with what it learnt.
        let mut memo = self.base.memo();
        // The chunks' ends first, then the first stage's lexer over the
        // whole text (`Encoder::encode_chunks_between`).
        let ends = self.splitter.chunk_ends(text)?;
        let mut key = Vec::new();
        self.base.encode_chunks_between(text, &ends, &self.cuts, &mut memo, |ids| {
            key.clear();
            write_key(ids, &mut key);
            counts.add(&key, 1);
        })
    }
}

/// Appends the key of `ids` to `key`.
pub fn write_key(ids: &[Rank], key: &mut Vec<u8>) {
    for &id in ids {
        let mut v = id;
        while v >= 0x80 {
            key.push(v as u8 | 0x80);
            v >>= 7;
        }
        key.push(v as u8);
    }
}

/// Appends the ids of `key` (made by [`write_key`]) to `out`.
#[inline]
pub(super) fn read_key(key: &[u8], out: &mut Vec<Rank>) {
    let mut v: Rank = 0;
    let mut shift = 0;
    for &b in key {
        v |= Rank::from(b & 0x7f) << shift;
        if b < 0x80 {
            out.push(v);
            v = 0;
            shift = 0;
        } else {
            shift += 7;
        }
    }
    debug_assert_eq!(shift, 0, "a key ends with an id's last byte");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::split::patterns::GPT4_PATTERN;
    use crate::split::superword::STAGE2_PATTERN;
    use crate::train::testing::shakespeare as corpus;
    use crate::train::{count_documents, extend_merges, extend_merges_by_ids, learn_merges, superword_allowed};

    #[test]
    fn keys_read_back_to_their_ids_and_differ_for_different_ids() {
        let cases: Vec<Vec<Rank>> = vec![
            vec![],
            vec![0],
            vec![127],
            vec![128],
            vec![0, 128],
            vec![128, 0],
            vec![16383, 16384],
            vec![(1 << 21) - 1, 1 << 21, (1 << 28) + 5],
            vec![200_000, 65, 65, 180_000],
        ];
        let mut seen = rustc_hash::FxHashMap::default();
        for ids in &cases {
            let mut key = Vec::new();
            write_key(ids, &mut key);
            assert!(key.len() >= ids.len());
            let mut back = Vec::new();
            read_key(&key, &mut back);
            assert_eq!(&back, ids);
            assert_eq!(seen.insert(key, ids.clone()), None, "two sequences, one key");
        }
    }

    /// A byte-level first stage of `size` ids learnt from `text`: its tokens by id.
    fn stage1(text: &str, size: usize) -> Vec<Vec<u8>> {
        let counts = count_documents(&Splitter::new(GPT4_PATTERN).unwrap(), &[text]).unwrap();
        let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
        learn_merges(counts, size, |m, _| {
            assert_eq!(m.new as usize, tokens.len(), "the test's text makes no duplicate");
            let t = [&tokens[m.left as usize][..], &tokens[m.right as usize][..]].concat();
            tokens.push(t);
            Ok(())
        })
        .unwrap();
        tokens
    }

    fn encoder(tokens: &[Vec<u8>]) -> Encoder {
        let ranks = tokens.iter().enumerate().map(|(i, t)| (t.clone(), i as Rank)).collect();
        Encoder::new(ranks, Default::default(), GPT4_PATTERN).unwrap()
    }

    /// The counts as a map (`ChunkCounts`'s own equality sees the order its
    /// long chunks were stored in).
    fn as_map(counts: &ChunkCounts) -> rustc_hash::FxHashMap<Vec<u8>, u64> {
        let mut map = rustc_hash::FxHashMap::default();
        counts.for_each(|chunk, n| assert_eq!(map.insert(chunk.to_vec(), n), None));
        map
    }

    /// The counts by ids are the counts by bytes with each chunk's bytes
    /// replaced by the key of the ids the first stage encodes it to whole
    /// (as stage 2's words start): the same chunks, the same counts.
    #[test]
    fn counting_by_ids_is_counting_by_bytes_then_encoding() {
        let text = corpus();
        let tokens = stage1(&text, 1000);
        let cuts = || SafeCuts::new(tokens.iter().map(Vec::as_slice));
        let stage2 = Splitter::new(STAGE2_PATTERN).unwrap();
        let by_ids = IdChunker::new(stage2.clone(), encoder(&tokens), cuts());
        // Many documents (each a call with a memo of its own), and one.
        let docs: Vec<&str> = text.split_inclusive("\n\n").collect();
        assert!(docs.len() > 100);
        let enc = encoder(&tokens);
        // `docs` counted by bytes, each chunk then keyed by the ids the
        // first stage encodes it to whole.
        let expected = |docs: &[&str]| {
            let mut keyed = ChunkCounts::default();
            count_documents(&stage2, docs).unwrap().for_each(|chunk, n| {
                let (mut ids, mut key) = (Vec::new(), Vec::new());
                enc.encode_chunk(chunk, &mut ids).unwrap();
                write_key(&ids, &mut key);
                keyed.add(&key, n);
            });
            as_map(&keyed)
        };
        let many = expected(&docs);
        assert!(many.len() > 1000);
        assert_eq!(as_map(&count_documents(&by_ids, &docs).unwrap()), many);
        let mut whole = ChunkCounts::default();
        by_ids.count(&text, &mut whole).unwrap();
        assert_eq!(as_map(&whole), expected(&[&text]));
    }

    /// Stage 2 learns the same merges from counts by ids (their words read
    /// from the keys) as from counts by bytes (their words encoded).
    #[test]
    fn stage_two_learns_the_same_merges_from_ids_as_from_bytes() {
        let text = corpus();
        let tokens = stage1(&text, 1000);
        let enc = encoder(&tokens);
        let cuts = SafeCuts::new(tokens.iter().map(Vec::as_slice));
        let stage2 = Splitter::new(STAGE2_PATTERN).unwrap();
        let allow = || Some(std::sync::Arc::new(|t: &[u8]| superword_allowed(t, 4)) as crate::train::Allow);
        let encode = |b: &[u8], out: &mut Vec<u32>| enc.encode_chunk(b, out).unwrap();
        let counts = count_documents(&stage2, &[&text]).unwrap();
        let from_bytes = extend_merges(counts, &tokens, || encode, 1400, allow(), || Ok(()), |_, _| Ok(())).unwrap();
        let by_ids = IdChunker::new(stage2, encoder(&tokens), cuts);
        let counts = count_documents(&by_ids, &[&text]).unwrap();
        let from_ids = extend_merges_by_ids(counts, &tokens, 1400, allow(), || Ok(()), |_, _| Ok(())).unwrap();
        assert_eq!(from_bytes.len(), 1400 - 1000);
        assert_eq!(from_ids, from_bytes);
    }
}
