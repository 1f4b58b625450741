//! SuperBPE's encoder (Liu et al., 2025, "SuperBPE: Space Travel for Language
//! Models"): its vocabulary was learned in two stages, the first within the
//! chunks of an ordinary split pattern (subwords), the second within the
//! longer chunks of a relaxed one (superwords: " by the way"). Its chunks
//! are the second pattern's, and a chunk is encoded by BPE over the whole
//! chunk with the merge list: from single bytes, the earliest merge among
//! the adjacent pairs is made first (the leftmost on a tie), until no
//! adjacent pair is a merge. That is the paper's algorithm, as its
//! tokenizer files encode (the slow path below: `superword_merge.rs`'s heap
//! merge from bytes).
//!
//! The fast path gives the same ids in two phases. BPE makes every merge of
//! the first stage before any merge of the second: a second-stage merge
//! makes a token that is in no first-stage merge, so it never makes a pair
//! the first stage merges. (A vocabulary where a merge reuses an id, two
//! paths to one token's bytes, always takes the slow path.)
//!
//! - Phase A (the first stage's merges) never crosses a *safe cut*: a cut
//!   between two bytes that occur next to each other inside no first-stage
//!   token (`inside`), since such a merge would make a first-stage token
//!   that holds them. So the chunk is cut at the safe cuts among the first
//!   stage's split points (its pattern's lexer finds them fast), and each
//!   segment, mostly one word, is encoded by the first stage's encoder
//!   alone, with its chunk cache.
//! - Phase B (the rest): BPE with the merge list from phase A's parts over
//!   the whole chunk; only merges of the second stage are left to make.
//!   It never joins two of phase A's ids that lie side by side in no
//!   second-stage token (`superword_merge.rs`, `Joins`), so the chunk falls
//!   into short runs, each merged alone, by a scan.
//!
//! Tested against the slow path and the Python oracle
//! (`bpe/reference.py`) on random and real text: `train/superword_tests.rs`,
//! `tests/tokenizer/test_superbpe.py`.

// A child of this module, in a file of its own beside it (so that the
// encoder's module list, `mod.rs`, needs no line for it).
#[path = "superword_merge.rs"]
mod superword_merge;
#[path = "superword_pass.rs"]
mod superword_pass;

use super::Encoder;
use crate::split::pretokenize::Splitter;
use crate::vocab::{Rank, NONE};
use superword_merge::{merge_runs, merge_with_heap, Joins, Merges, PartsScratch};

/// Segments looked up together (`Encoder::encode_text_between`,
/// `Encoder::encode_chunks_between`).
const BATCH: usize = 32;

/// The safe cuts of a first-stage vocabulary (see the module's doc): bit
/// `a << 8 | b` is set when the bytes `a b` occur, in that order, inside
/// some of its tokens; a cut between two bytes whose bit is clear is never
/// crossed by a merge of that vocabulary.
pub struct SafeCuts {
    inside: Box<[u64; 1024]>,
}

impl SafeCuts {
    pub fn new<'a>(tokens: impl IntoIterator<Item = &'a [u8]>) -> SafeCuts {
        let mut inside = Box::new([0u64; 1024]);
        for token in tokens {
            for w in token.windows(2) {
                let k = (w[0] as usize) << 8 | w[1] as usize;
                inside[k / 64] |= 1 << (k % 64);
            }
        }
        SafeCuts { inside }
    }

    /// Whether a merge could cross a cut between `a` and `b`.
    #[inline]
    fn crossable(&self, a: u8, b: u8) -> bool {
        let k = (a as usize) << 8 | b as usize;
        self.inside[k / 64] & (1 << (k % 64)) != 0
    }

    /// Calls `f` with each segment of `text` between the safe cuts among
    /// the split points of `splitter` (the first stage's pattern).
    pub(super) fn segments<'t>(
        &self,
        splitter: &Splitter,
        text: &'t str,
        mut f: impl FnMut(&'t str),
    ) -> Result<(), String> {
        let bytes = text.as_bytes();
        let mut start = 0;
        splitter.for_each_chunk(text, |piece| {
            let at = piece.as_ptr() as usize - text.as_ptr() as usize;
            if at > start && !self.crossable(bytes[at - 1], bytes[at]) {
                f(&text[start..at]);
                start = at;
            }
        })?;
        if start < text.len() {
            f(&text[start..]);
        }
        Ok(())
    }
}

/// Buffers reused from chunk to chunk: phase A's ids, and phase B's parts.
#[derive(Default)]
struct Scratch {
    phase_a: Vec<Rank>,
    parts: PartsScratch,
}

/// What a SuperBPE encoder needs beside its vocabulary.
pub(super) struct Superword {
    /// The encoder of the first stage: the tokens below the transition, and
    /// the first stage's split pattern.
    pub(super) stage1: Box<Encoder>,
    /// Every merge, both stages.
    merges: Merges,
    /// The second stage's merges alone: all that phase B can make.
    second: Merges,
    /// Where the first stage's merges never cross.
    cuts: SafeCuts,
    /// Where the second stage's merges may cross, between phase A's ids.
    joins: Joins,
    /// Whether the two phases give BPE's ids (see the module's doc).
    two_phases: bool,
    /// The length of the longest token (`usize::MAX` where not known): a
    /// longer chunk, as most second-stage chunks are, is no token, and
    /// looking it up would hash it whole.
    longest: usize,
}

impl Superword {
    /// `stage1`: the first stage's encoder; `merges`: all merges, in order,
    /// as `(left, right, new)`; `transition`: the first id of the second stage.
    pub(super) fn new(stage1: Encoder, merges: &[(Rank, Rank, Rank)], transition: Rank) -> Superword {
        let cuts = SafeCuts::new((0..transition).filter_map(|id| stage1.token_bytes(id)));
        // Every merge makes a new id, in order: then the first stage's merges
        // are those of ids below the transition, and the second stage makes
        // no id of the first (see the module's doc). Otherwise, the slow path.
        let two_phases = merges.iter().enumerate().all(|(k, &(_, _, new))| new as usize == 256 + k)
            && (transition as usize) <= 256 + merges.len();
        // The first place of a pair, should a list hold it twice.
        let (mut places, mut second) = (Merges::default(), Merges::default());
        for (k, &(l, r, new)) in merges.iter().enumerate() {
            places.insert(l, r, k as u32, new);
            if new >= transition {
                second.insert(l, r, k as u32, new);
            }
        }
        // Every token but a byte is a merge's (where `two_phases` holds).
        let mut lengths: Vec<usize> = vec![1; 256];
        for &(l, r, _) in merges.iter().take_while(|_| two_phases) {
            let length = lengths.get(l as usize).zip(lengths.get(r as usize)).map_or(usize::MAX, |(a, b)| a + b);
            lengths.push(length);
        }
        let longest = if two_phases { lengths.into_iter().max().unwrap_or(1) } else { usize::MAX };
        let joins = Joins::new(merges, transition);
        Superword { stage1: Box::new(stage1), merges: places, second, cuts, joins, two_phases, longest }
    }
}

impl Encoder {
    /// A chunk of a SuperBPE encoder that is not one token: its ids, by the
    /// two phases (see the module's doc), or by BPE from single bytes for a
    /// chunk that is not UTF-8 or a vocabulary that reuses an id.
    pub(super) fn merge_superword(&self, sw: &Superword, chunk: &[u8], out: &mut Vec<Rank>) -> Result<(), String> {
        let mut scratch = Scratch::default();
        self.superword_chunk(sw, chunk, None, &mut sw.stage1.memo(), &mut scratch, out)
    }

    /// A SuperBPE encoder's `encode_ordinary_into`: its pattern's chunks,
    /// each a token or its ids by the two phases, phase A in one pass over
    /// the whole text (`superword_pass.rs`) where the vocabulary allows the
    /// two phases, else chunk by chunk. Its chunks are
    /// long (sentences, runs of words) and seldom seen twice, so they are
    /// not remembered: `memo` serves phase A, the first stage's segments
    /// (the only use of a SuperBPE encoder's memos, so its entries are all
    /// of one kind).
    pub(super) fn encode_superword_text(
        &self,
        sw: &Superword,
        text: &str,
        memo: &mut super::Memo,
        out: &mut Vec<Rank>,
    ) -> Result<(), String> {
        if sw.two_phases {
            return self.encode_superword_pass(sw, text, memo, out);
        }
        self.encode_superword_chunks(sw, text, memo, out)
    }

    /// [`Encoder::encode_superword_text`] chunk by chunk: the first stage's
    /// lexer run on each second-stage chunk alone (the single pass's
    /// reference in the tests, and the path of a vocabulary that reuses an id).
    pub(super) fn encode_superword_chunks(
        &self,
        sw: &Superword,
        text: &str,
        memo: &mut super::Memo,
        out: &mut Vec<Rank>,
    ) -> Result<(), String> {
        let mut failed = None;
        let mut scratch = Scratch::default();
        self.splitter.for_each_chunk(text, |chunk| {
            if failed.is_some() {
                return;
            }
            let whole = if chunk.len() <= sw.longest { self.vocab.get(chunk.as_bytes()) } else { NONE };
            if whole != NONE {
                out.push(whole);
            } else if let Err(e) = self.superword_chunk(sw, chunk.as_bytes(), Some(chunk), memo, &mut scratch, out) {
                failed = Some(e);
            }
        })?;
        failed.map_or(Ok(()), Err)
    }

    /// The ids of a chunk that is not one token: by the two phases (see the
    /// module's doc), with `memo` caching phase A's segments, or by BPE from
    /// single bytes for a chunk that is not UTF-8 or a vocabulary that reuses
    /// an id.
    /// (`text`: the chunk as text, where the caller has it so.)
    fn superword_chunk(
        &self,
        sw: &Superword,
        chunk: &[u8],
        text: Option<&str>,
        memo: &mut super::Memo,
        scratch: &mut Scratch,
        out: &mut Vec<Rank>,
    ) -> Result<(), String> {
        let text = text.or_else(|| std::str::from_utf8(chunk).ok()).filter(|_| sw.two_phases);
        let Some(text) = text else {
            return self.merge_superword_from_bytes(sw, chunk, out);
        };
        // Phase A: the first stage's ids of each segment, with the cache.
        let Scratch { phase_a, parts } = scratch;
        phase_a.clear();
        sw.stage1.encode_text_between(text, &sw.cuts, memo, phase_a)?;
        // Phase B: the rest of BPE over the whole chunk, from those parts.
        merge_runs(&sw.second, &sw.joins, phase_a, parts, out);
        Ok(())
    }

    /// `chunk`'s ids as [`Encoder::encode_chunk`] gives them, for a chunk of
    /// many words (SuperBPE's second stage starts from these): encoded
    /// segment by segment between `cuts`, the safe cuts of this encoder's
    /// vocabulary among its pattern's split points, with `memo` as cache.
    pub fn encode_chunk_between(
        &self,
        chunk: &[u8],
        cuts: &SafeCuts,
        memo: &mut super::Memo,
        out: &mut Vec<Rank>,
    ) -> Result<(), String> {
        match std::str::from_utf8(chunk) {
            Ok(text) => self.encode_text_between(text, cuts, memo, out),
            Err(_) => self.encode_chunk(chunk, out),
        }
    }

    /// [`Encoder::encode_chunk_between`] of a chunk known to be UTF-8 (no check).
    pub(super) fn encode_text_between(
        &self,
        text: &str,
        cuts: &SafeCuts,
        memo: &mut super::Memo,
        out: &mut Vec<Rank>,
    ) -> Result<(), String> {
        // The segments are found a batch at a time and then looked up, so
        // that the look-ups of neighbouring segments (in vocabulary maps
        // larger than the L2 cache) sit close together in the instruction
        // stream and their cache misses overlap.
        let bytes = text.as_bytes();
        let (mut ends, mut n, mut from) = ([0usize; BATCH], 0, 0);
        let mut failed = None;
        cuts.segments(self.splitter(), text, |segment| {
            ends[n] = segment.as_ptr() as usize - text.as_ptr() as usize + segment.len();
            n += 1;
            if n == BATCH {
                if failed.is_none() {
                    failed = self.encode_segments(bytes, from, &ends, memo, out).err();
                }
                (from, n) = (ends[BATCH - 1], 0);
            }
        })?;
        match failed {
            Some(e) => Err(e),
            None => self.encode_segments(bytes, from, &ends[..n], memo, out),
        }
    }

    /// The ids of each chunk of `text` ending at `ends` (ascending, the
    /// last `text`'s end; each chunk non-empty), as
    /// `Encoder::encode_text_between` gives them chunk by chunk, passed to
    /// `emit` in order. This encoder's lexer runs once over the whole text,
    /// not once per chunk (where starting it and its callback cost as much
    /// as lexing a sentence), its split points cut where safe and every
    /// chunk end a cut: the same ids, since a chunk's are BPE over the
    /// whole chunk, whatever its safe cuts (see `superword_pass.rs`).
    pub fn encode_chunks_between(
        &self,
        text: &str,
        ends: &[usize],
        cuts: &SafeCuts,
        memo: &mut super::Memo,
        mut emit: impl FnMut(&[Rank]),
    ) -> Result<(), String> {
        debug_assert!(ends.last().map_or(text.is_empty(), |&e| e == text.len()));
        let bytes = text.as_bytes();
        // A batch of segments: where each ends and whether it ends a chunk;
        // `ids` holds the current chunk's ids so far.
        let (mut seg_ends, mut closes, mut n) = ([0usize; BATCH], [false; BATCH], 0);
        let (mut from, mut start, mut next) = (0, 0, 0);
        let mut ids = Vec::new();
        let mut failed = None;
        let mut segment = |end: usize, close: bool| {
            seg_ends[n] = end;
            closes[n] = close;
            n += 1;
            if n == BATCH {
                if failed.is_none() {
                    failed = self.encode_closing(bytes, from, &seg_ends, &closes, memo, &mut ids, &mut emit).err();
                }
                (from, n) = (end, 0);
            }
        };
        let base = text.as_ptr() as usize;
        self.splitter().for_each_chunk(text, |piece| {
            let at = piece.as_ptr() as usize - base;
            while next < ends.len() && ends[next] <= at {
                segment(ends[next], true);
                (start, next) = (ends[next], next + 1);
            }
            if at > start && !cuts.crossable(bytes[at - 1], bytes[at]) {
                segment(at, false);
                start = at;
            }
        })?;
        for &end in &ends[next..] {
            segment(end, true);
        }
        match failed {
            Some(e) => Err(e),
            None => self.encode_closing(bytes, from, &seg_ends[..n], &closes[..n], memo, &mut ids, &mut emit),
        }
    }

    /// [`Encoder::encode_segments`] into `ids`, passing them to `emit` (and
    /// clearing them) after each segment that ends a chunk.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn encode_closing(
        &self,
        bytes: &[u8],
        mut from: usize,
        ends: &[usize],
        closes: &[bool],
        memo: &mut super::Memo,
        ids: &mut Vec<Rank>,
        emit: &mut impl FnMut(&[Rank]),
    ) -> Result<(), String> {
        for (&end, &close) in ends.iter().zip(closes) {
            self.encode_unseen(&bytes[from..end], memo, ids)?;
            from = end;
            if close {
                emit(ids);
                ids.clear();
            }
        }
        Ok(())
    }

    /// Encodes the segments of `bytes` from `from` to each of `ends` in turn
    /// (at most `BATCH`).
    #[inline(always)]
    fn encode_segments(
        &self,
        bytes: &[u8],
        mut from: usize,
        ends: &[usize],
        memo: &mut super::Memo,
        out: &mut Vec<Rank>,
    ) -> Result<(), String> {
        for &end in ends {
            self.encode_unseen(&bytes[from..end], memo, out)?;
            from = end;
        }
        Ok(())
    }

    /// The slow path: BPE with the merge list over the whole chunk, from its
    /// single bytes.
    pub(super) fn merge_superword_from_bytes(
        &self,
        sw: &Superword,
        chunk: &[u8],
        out: &mut Vec<Rank>,
    ) -> Result<(), String> {
        let ids: Vec<Rank> = chunk.iter().map(|&b| self.vocab.byte[b as usize]).collect();
        if let Some(k) = ids.iter().position(|&id| id == NONE) {
            return Err(super::no_token(&chunk[k..k + 1]));
        }
        merge_with_heap(&sw.merges, &ids, &mut Vec::new(), out);
        Ok(())
    }
}

/// For the tests of SuperBPE as a whole (`train/superword_tests.rs`: they
/// train a vocabulary, and `train` sits above this module).
#[doc(hidden)]
impl Encoder {
    /// A SuperBPE encoder's ids of `chunk` by the two phases and by the
    /// slow path, the number of the first stage's chunks in it and of its
    /// segments between safe cuts, and whether the two phases are used.
    pub fn superword_paths(&self, chunk: &str) -> (Vec<Rank>, Vec<Rank>, usize, usize, bool) {
        let sw = self.superword.as_ref().expect("a SuperBPE encoder");
        let (mut fast, mut slow) = (Vec::new(), Vec::new());
        self.merge_superword(sw, chunk.as_bytes(), &mut fast).expect("encodes");
        self.merge_superword_from_bytes(sw, chunk.as_bytes(), &mut slow).expect("encodes");
        let (mut pieces, mut segments) = (0, 0);
        sw.stage1.splitter().for_each_chunk(chunk, |_| pieces += 1).expect("splits");
        sw.cuts.segments(sw.stage1.splitter(), chunk, |_| segments += 1).expect("splits");
        (fast, slow, pieces, segments, sw.two_phases)
    }
}
