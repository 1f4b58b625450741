//! Encoding and decoding with a trained (or loaded) vocabulary.
//!
//! The vocabulary is a map from token bytes to rank (= token id), as in
//! tiktoken's rank files. Encoding a chunk, tiktoken's way:
//!   1. if the whole chunk is a token, that is the answer (most chunks of
//!      ordinary text are: one hash look-up, no merging at all);
//!   2. otherwise start from its single bytes and repeatedly merge the adjacent
//!      pair whose concatenation has the lowest rank (the leftmost on a tie)
//!      until no adjacent concatenation is a token.
//!
//! Working on bytes rather than on a `(id, id) -> id` merge table is what makes
//! us agree with tiktoken on rank-only vocabularies, which have no merge list.
//!
//! Step 2 may start from whole characters (`chars.rs`) and pairs of ASCII
//! bytes (`pairs.rs`) instead of bytes where that is sure to give the same
//! result; that skips the merges that only rebuild characters, and the
//! first, surest merges of words.
//!
//! Step 2 has two implementations with the same result: a simple scan that
//! rescans all pairs after each merge (O(n²), fastest for the short chunks that
//! are the vast majority), and a heap over a linked list (O(n log n)) for long
//! chunks such as a million repeated characters, where the scan would take
//! hours.
use rustc_hash::{FxHashMap, FxHashSet};

use crate::split::pretokenize::Splitter;
use crate::vocab::{Rank, Vocab, MAX_ID, NONE};

// In the order they build on each other: the whole characters and pairs
// that merging may start from, the merges, the memo of merged chunks, the
// loop with the memo's front tables, and what pipelines ask beyond the ids.
pub mod chars;
pub mod pairs;
mod merge;
mod memo;
mod pool;
mod table;
mod shared;
mod front;
mod waiting;
mod extra;
mod superword;
mod events;

use chars::Chars;
use pairs::Pairs;

pub use extra::{Segment, SplitMix};

pub use events::Event as PickyEvent;
pub use memo::Memo;
use merge::{merge_with_heap, merge_with_scan, whole_at, LONG_CHUNK};
pub use pool::{CacheInfo, MemoPool, PooledMemo, DEFAULT_CAPACITY as DEFAULT_CACHE_BYTES};
pub use superword::SafeCuts;
use superword::Superword;

/// The bytes that all of `tokens` start with (none for no tokens).
fn common_prefix(tokens: &[String]) -> &[u8] {
    let Some(first) = tokens.first() else { return &[] };
    let mut prefix = first.as_bytes();
    for t in &tokens[1..] {
        let n = prefix.iter().zip(t.as_bytes()).take_while(|(a, b)| a == b).count();
        prefix = &prefix[..n];
    }
    prefix
}

/// Room for the ids of a text of `bytes` bytes: a third of an id per byte,
/// so that a buffer seldom grows (which copies it): English and code take
/// 0.25-0.26, FLORES-200 0.29 with o200k (0.46 with cl100k, which grows it
/// once). Room never written costs no memory, only address space.
pub fn ids_room(bytes: usize) -> usize {
    bytes / 3
}

/// The error of a merge that ended on a part with no token (`bytes`): the
/// vocabulary lacks single bytes.
fn no_token(bytes: &[u8]) -> String {
    format!(
        "the vocabulary has no token for the bytes {bytes:?}; a byte-level vocabulary must contain all 256 single \
         bytes"
    )
}

/// An empty vector for the ids of a text of `bytes` bytes (`ids_room`).
pub fn ids_buffer(bytes: usize) -> Vec<Rank> {
    let mut ids = Vec::with_capacity(ids_room(bytes));
    // Mapped in one call as far as English fills it (an id per 4 bytes):
    // the rest, if used, faults page by page (`pages.rs`).
    crate::pages::map_for_writing(ids.as_mut_ptr() as *mut u8, bytes.min(ids.capacity() * 4));
    ids
}

pub struct Encoder {
    /// Ordinary token bytes -> id.
    vocab: Vocab,
    /// The multi-byte characters that may start merging whole.
    chars: Chars,
    /// The pairs of ASCII bytes that may.
    pairs: Pairs,
    /// Special token text -> id.
    specials: FxHashMap<String, Rank>,
    /// id -> bytes, ordinary and special tokens alike.
    decoder: Decoder,
    splitter: Splitter,
    /// Finds special tokens in text: an alternation of their escaped texts,
    /// longest first so that a special token that is a prefix of another never
    /// shadows it. `None` when there are no special tokens.
    special_regex: Option<regex::Regex>,
    /// The memos of finished calls (see `pool.rs`): the chunk cache.
    memos: MemoPool,
    /// The vocabulary's tokens of 8 to 15 bytes in a seen table
    /// (`table.rs`), which each memo's starts as a copy of.
    seed: table::Table,
    /// A SuperBPE vocabulary's first stage (see `superword.rs`); `None` for
    /// ordinary BPE.
    superword: Option<Box<Superword>>,
    /// A Picky BPE vocabulary's events (see `events.rs`); `None` otherwise.
    picky: Option<Box<events::Events>>,
}

impl Encoder {
    pub fn new(
        ranks: FxHashMap<Vec<u8>, Rank>,
        specials: FxHashMap<String, Rank>,
        pattern: &str,
    ) -> Result<Self, String> {
        Encoder::with_splitter(ranks, specials, Splitter::new(pattern)?)
    }

    /// [`Encoder::new`] with the split pattern compiled already.
    pub fn with_splitter(
        ranks: FxHashMap<Vec<u8>, Rank>,
        specials: FxHashMap<String, Rank>,
        splitter: Splitter,
    ) -> Result<Self, String> {
        let max_id = ranks.values().chain(specials.values()).copied().max();
        if let Some(m) = max_id.filter(|&m| m > MAX_ID) {
            return Err(format!("token id {m} is too large: ids must be at most {MAX_ID}"));
        }
        if ranks.contains_key(&Vec::new()) {
            return Err("the vocabulary has an empty token; every token must have at least one byte".into());
        }
        let mut by_id: Vec<Option<&[u8]>> = vec![None; max_id.map_or(0, |m| m as usize + 1)];
        for (bytes, &id) in &ranks {
            if by_id[id as usize].is_some() {
                return Err(format!("two tokens have id {id}"));
            }
            by_id[id as usize] = Some(bytes);
        }
        Encoder::assemble(Vocab::new(&ranks), by_id, specials, splitter)
    }

    /// An encoder for the ordinary tokens `tokens` (token `i` has id `i`),
    /// which `vocab` holds already, and `specials`: the trainer fills `vocab`
    /// while it learns, so that little is left to do once it has finished
    /// (and hands over its own `splitter`, compiled once).
    pub fn from_vocab(
        vocab: Vocab,
        tokens: &[Vec<u8>],
        specials: FxHashMap<String, Rank>,
        splitter: Splitter,
    ) -> Result<Self, String> {
        debug_assert!(tokens.iter().enumerate().all(|(i, t)| vocab.get(t) == i as Rank));
        // One more than the largest id.
        let n = specials.values().map(|&id| id as usize + 1).chain([tokens.len()]).max().unwrap_or(0);
        if n > MAX_ID as usize + 1 {
            return Err(format!("token id {} is too large: ids must be at most {MAX_ID}", n - 1));
        }
        let mut by_id: Vec<Option<&[u8]>> = tokens.iter().map(|t| Some(&t[..])).collect();
        by_id.resize(n, None);
        Encoder::assemble(vocab, by_id, specials, splitter)
    }

    /// The rest of both constructors: the special tokens (put in `by_id`,
    /// which holds the ordinary tokens and is long enough for every id), the
    /// decoder and the special-token regex.
    fn assemble(
        vocab: Vocab,
        by_id: Vec<Option<&[u8]>>,
        specials: FxHashMap<String, Rank>,
        splitter: Splitter,
    ) -> Result<Self, String> {
        // (Rebound so that it may borrow from `specials`, which moves below.)
        let mut by_id: Vec<Option<&[u8]>> = by_id;
        if specials.contains_key("") {
            return Err("a special token is the empty string".into());
        }
        let chars = Chars::new(&vocab, &by_id);
        let pairs = Pairs::new(&vocab, &by_id);
        let short: Vec<(u128, Rank)> = by_id
            .iter()
            .enumerate()
            .filter_map(|(id, t)| {
                t.filter(|t| (8..=15).contains(&t.len())).map(|t| (crate::vocab::pack(t), id as Rank))
            })
            .collect();
        let seed = table::Table::seed(short.into_iter());
        for (text, &id) in &specials {
            if by_id[id as usize].is_some() {
                return Err(format!("special token {text:?} has id {id}, which is already taken"));
            }
            by_id[id as usize] = Some(text.as_bytes());
        }
        let decoder = Decoder::new(&by_id)?;
        let special_regex = if specials.is_empty() {
            None
        } else {
            let mut texts: Vec<&String> = specials.keys().collect();
            texts.sort_by(|a, b| b.len().cmp(&a.len()).then(a.cmp(b)));
            let alternation: Vec<String> = texts.iter().map(|t| regex::escape(t)).collect();
            Some(regex::Regex::new(&alternation.join("|")).map_err(|e| e.to_string())?)
        };
        let memos = MemoPool::new(seed.bytes() + pool::MEMO_REST);
        Ok(Encoder {
            vocab,
            chars,
            pairs,
            specials,
            decoder,
            splitter,
            special_regex,
            memos,
            seed,
            superword: None,
            picky: None,
        })
    }

    /// A SuperBPE encoder (see `superword.rs`): `ranks` and `specials` as for
    /// [`Encoder::new`], `merges` every merge in order as `(left, right,
    /// new)`, `splitter` the second stage's pattern (its chunks are encoded
    /// whole), `stage1` the first stage's, and `transition` the first id of
    /// the second stage.
    pub fn superbpe(
        ranks: FxHashMap<Vec<u8>, Rank>,
        specials: FxHashMap<String, Rank>,
        merges: &[(Rank, Rank, Rank)],
        splitter: Splitter,
        stage1: Splitter,
        transition: Rank,
    ) -> Result<Self, String> {
        let first: FxHashMap<Vec<u8>, Rank> =
            ranks.iter().filter(|(_, &id)| id < transition).map(|(b, &id)| (b.clone(), id)).collect();
        let mut stage1 = Encoder::with_splitter(first, FxHashMap::default(), stage1)?;
        let mut enc = Encoder::with_splitter(ranks, specials, splitter)?;
        // Neither encoder's memos copy a seed (`ready_memo`), so neither
        // needs one, and their pools expect memos without it.
        for e in [&mut stage1, &mut enc] {
            e.seed = table::Table::unused();
            e.memos = MemoPool::new(pool::MEMO_REST);
        }
        enc.superword = Some(Box::new(Superword::new(stage1, merges, transition)));
        Ok(enc)
    }

    /// A Picky BPE encoder (see `events.rs`): `ranks` and `specials` as for
    /// [`Encoder::with_splitter`] (the present tokens), `events` its merges
    /// and removals in order.
    pub fn picky(
        ranks: FxHashMap<Vec<u8>, Rank>,
        specials: FxHashMap<String, Rank>,
        splitter: Splitter,
        events: &[PickyEvent],
    ) -> Result<Self, String> {
        let mut enc = Encoder::with_splitter(ranks, specials, splitter)?;
        enc.picky = Some(Box::new(events::Events::new(events)?));
        Ok(enc)
    }

    /// Whether this is a SuperBPE encoder.
    pub fn is_superbpe(&self) -> bool {
        self.superword.is_some()
    }

    pub fn splitter(&self) -> &Splitter {
        &self.splitter
    }

    /// The chunk cache: the pool of memos (to size, clear or inspect it).
    pub fn cache(&self) -> &MemoPool {
        &self.memos
    }

    /// A memo for one call (or one thread's runs of a batch), from the pool
    /// if it has one; given back when dropped.
    ///
    /// Taken on a thread of a pool of several (a multi-threaded call), it
    /// counts the pool's threads as encoding at once before it is taken, so
    /// that the call's first thread shares the pool's table too (the pool
    /// counts memos as they are taken: `MemoPool::take`).
    pub fn memo(&self) -> PooledMemo<'_> {
        if rayon::current_thread_index().is_some() {
            self.memos.expect(rayon::current_num_threads());
        }
        PooledMemo::new(&self.memos)
    }

    /// The texts of the special tokens (for `run/pieces.rs`: where not to cut).
    pub fn special_texts(&self) -> impl Iterator<Item = &str> {
        self.specials.keys().map(String::as_str)
    }

    /// Encodes one chunk's bytes, appending ids to `out`.
    #[inline]
    pub fn encode_chunk(&self, chunk: &[u8], out: &mut Vec<Rank>) -> Result<(), String> {
        let whole = self.vocab.get(chunk);
        if whole != NONE {
            out.push(whole);
            return Ok(());
        }
        self.merge_chunk(chunk, out)
    }

    /// [`Encoder::encode_chunk`] for a chunk known not to be one token (the
    /// caller looked it up already): its merged parts' ids, appended to `out`.
    /// (The empty chunk, which no look-up finds, has none.)
    #[inline]
    fn merge_chunk(&self, chunk: &[u8], out: &mut Vec<Rank>) -> Result<(), String> {
        if chunk.is_empty() {
            return Ok(());
        }
        if let Some(sw) = &self.superword {
            return self.merge_superword(sw, chunk, out);
        }
        if let Some(ev) = &self.picky {
            let ids: Vec<Rank> = chunk.iter().map(|&b| self.vocab.byte[b as usize]).collect();
            return ev.replay(&ids, out);
        }
        let mut missing = None;
        let mut push = |start: usize, end: usize, rank: Rank| {
            if rank == NONE {
                missing.get_or_insert((start, end));
            }
            out.push(rank);
        };
        if chunk.len() > LONG_CHUNK {
            merge_with_heap(&self.vocab, chunk, NONE, &mut push);
        } else if self.chars.is_empty() || chunk.is_ascii() {
            // (An ASCII chunk has no character to start whole, and skipping
            // the test is faster: 3-6% on English.) The closures are always
            // inlined: left to the compiler, each was a call per byte of
            // every chunk that needs merging (+9% instructions on FLORES-200).
            merge_with_scan(
                &self.vocab,
                chunk,
                NONE,
                #[inline(always)]
                |i| self.pairs.whole(&self.vocab, chunk, i),
                &mut push,
            );
        } else {
            merge_with_scan(
                &self.vocab,
                chunk,
                NONE,
                #[inline(always)]
                |i| whole_at(&self.vocab, &self.chars, &self.pairs, chunk, i),
                &mut push,
            );
        }
        missing.map_or(Ok(()), |(s, e)| Err(no_token(&chunk[s..e])))
    }

    /// Encodes text with no special-token handling (special token text is
    /// encoded as ordinary text).
    pub fn encode_ordinary(&self, text: &str) -> Result<Vec<Rank>, String> {
        let mut out = ids_buffer(text.len());
        self.encode_ordinary_into(text, &mut self.memo(), &mut out)?;
        Ok(out)
    }

    /// Encodes text, turning the special tokens in `allowed` into their ids;
    /// any other special token text is encoded as ordinary text. (Refusing
    /// disallowed special tokens is the caller's policy: see `find_special`.)
    pub fn encode(&self, text: &str, allowed: &FxHashSet<String>) -> Result<Vec<Rank>, String> {
        let mut out = ids_buffer(text.len());
        self.encode_into(text, allowed, &mut self.memo(), &mut out)?;
        Ok(out)
    }

    /// [`Encoder::encode`], appending to `out`; `memo` carries the ids of
    /// merged chunks from one call to the next (see `memo.rs`).
    pub fn encode_into(
        &self,
        text: &str,
        allowed: &FxHashSet<String>,
        memo: &mut Memo,
        out: &mut Vec<Rank>,
    ) -> Result<(), String> {
        let Some(special_regex) = self.special_regex.as_ref().filter(|_| !allowed.is_empty()) else {
            return self.encode_ordinary_into(text, memo, out);
        };
        let mut start = 0;
        let mut search = 0;
        while start <= text.len() {
            // The next *allowed* special token at or after `search`.
            let next = loop {
                match special_regex.find_at(text, search) {
                    Some(m) if allowed.contains(m.as_str()) => break Some(m),
                    Some(m) => {
                        // Not allowed: keep looking one character further.
                        search = m.start() + text[m.start()..].chars().next().map_or(1, char::len_utf8);
                    }
                    None => break None,
                }
            };
            let end = next.map_or(text.len(), |m| m.start());
            self.encode_ordinary_into(&text[start..end], memo, out)?;
            match next {
                Some(m) => {
                    out.push(self.specials[m.as_str()]);
                    start = m.end();
                    search = m.end();
                }
                None => break,
            }
        }
        Ok(())
    }

    /// Encodes each of `texts` (one list of ids each) with one memo for all
    /// of them: `encode_batch`'s work for a run of neighbouring documents.
    pub fn encode_each(
        &self,
        texts: &[&str],
        allowed: &FxHashSet<String>,
        memo: &mut Memo,
    ) -> Result<Vec<Vec<Rank>>, String> {
        // Texts that are long together get the memo's front tables, as one
        // long text does: one by one, the texts of a batch (~10 KB each in
        // the benchmark's) were each too short for them, so a batch with
        // fresh memos went without (docs/dev/performance.md, "encode_batch").
        if texts.iter().map(|t| t.len()).sum::<usize>() >= front::FRONT_TEXT {
            self.ready_memo(memo);
        }
        texts
            .iter()
            .map(|t| {
                let mut ids = ids_buffer(t.len());
                self.encode_into(t, allowed, memo, &mut ids)?;
                Ok(ids)
            })
            .collect()
    }

    /// The leftmost special token in `text` (any of them), if any.
    pub fn find_any_special<'t>(&self, text: &'t str) -> Option<&'t str> {
        self.special_regex.as_ref()?.find(text).map(|m| m.as_str())
    }

    /// The first special token among `tokens` that occurs in `text`, if any.
    pub fn find_special<'a>(&self, text: &str, tokens: &'a [String]) -> Option<&'a str> {
        // Leftmost occurrence wins, as a reader scanning the text would report it
        // (the longest token where two start at the same byte).
        // memmem (SIMD) rather than `str::find`: this scans every text that
        // `encode` gets, and was 5× slower than encoding it with `str::find`.
        // Tokens that share a first byte and more (`<|` for tiktoken's) are
        // found in one pass for that prefix, not one pass per token: the
        // leftmost token starts at the first occurrence of the prefix where
        // one of them starts.
        let prefix = common_prefix(tokens);
        if tokens.len() > 1 && prefix.len() >= 2 {
            let text = text.as_bytes();
            return memchr::memmem::find_iter(text, prefix).find_map(|at| {
                let rest = &text[at..];
                tokens.iter().filter(|t| rest.starts_with(t.as_bytes())).max_by_key(|t| t.len()).map(|t| t.as_str())
            });
        }
        tokens
            .iter()
            .filter_map(|t| memchr::memmem::find(text.as_bytes(), t.as_bytes()).map(|pos| (pos, t.as_str())))
            .min_by_key(|&(pos, t)| (pos, std::cmp::Reverse(t.len())))
            .map(|(_, t)| t)
    }

    pub fn decode_bytes(&self, ids: &[Rank]) -> Result<Vec<u8>, Rank> {
        let mut out = Vec::with_capacity(ids.len() * 4);
        for &id in ids {
            out.extend_from_slice(self.decoder.get(id).ok_or(id)?);
        }
        Ok(out)
    }

    pub fn token_bytes(&self, id: Rank) -> Option<&[u8]> {
        self.decoder.get(id)
    }

    /// Recovers the merge list of a rank-only vocabulary (a `.tiktoken` file
    /// has no merges): a token of rank r is the merge of the two parts that
    /// BPE makes of its bytes using only the ranks below r. Returns
    /// `(left, right, rank)` in rank order, or the first token (by rank) whose
    /// bytes do not come out as exactly two parts.
    pub fn recover_merges(&self) -> Result<Vec<(Rank, Rank, Rank)>, Rank> {
        let special_ids: FxHashSet<Rank> = self.specials.values().copied().collect();
        let mut merges = Vec::new();
        for rank in 0..self.n_vocab() as Rank {
            let Some(bytes) = self.decoder.get(rank).filter(|b| b.len() >= 2) else { continue };
            if special_ids.contains(&rank) {
                continue;
            }
            let mut parts: Vec<(usize, Rank)> = Vec::with_capacity(2);
            let mut push = |start: usize, _end: usize, r: Rank| parts.push((start, r));
            if bytes.len() > LONG_CHUNK {
                merge_with_heap(&self.vocab, bytes, rank, &mut push);
            } else {
                merge_with_scan(&self.vocab, bytes, rank, |_| None, &mut push);
            }
            match parts[..] {
                [(_, left), (_, right)] if left != NONE && right != NONE => merges.push((left, right, rank)),
                _ => return Err(rank),
            }
        }
        Ok(merges)
    }

    /// One more than the largest id.
    pub fn n_vocab(&self) -> usize {
        self.decoder.offsets.len() - 1
    }
}

/// id -> token bytes, all tokens' bytes in one buffer: token `i` is
/// `bytes[offsets[i]..offsets[i + 1]]`, and an empty span is an id with no
/// token (tokens are never empty). Decoding reads the offsets in order and the
/// bytes from one compact buffer; with a box per token (scattered over the
/// heap) decoding o200k ids was a third slower, from cache misses.
struct Decoder {
    bytes: Vec<u8>,
    offsets: Vec<u32>,
}

impl Decoder {
    fn new(by_id: &[Option<&[u8]>]) -> Result<Decoder, String> {
        let total: usize = by_id.iter().flatten().map(|b| b.len()).sum();
        if total > u32::MAX as usize {
            return Err(format!("the tokens hold {total} bytes in all; at most {} are supported", u32::MAX));
        }
        let mut bytes = Vec::with_capacity(total);
        let mut offsets = Vec::with_capacity(by_id.len() + 1);
        offsets.push(0);
        for token in by_id {
            bytes.extend_from_slice(token.unwrap_or_default());
            offsets.push(bytes.len() as u32);
        }
        Ok(Decoder { bytes, offsets })
    }

    #[inline]
    fn get(&self, id: Rank) -> Option<&[u8]> {
        let i = id as usize;
        let (&start, &end) = (self.offsets.get(i)?, self.offsets.get(i + 1)?);
        (start < end).then(|| &self.bytes[start as usize..end as usize])
    }
}

#[cfg(test)]
mod tests;
