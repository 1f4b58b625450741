//! Encoding and decoding with a trained (or loaded) vocabulary.
//!
//! The vocabulary is a map from token bytes to rank (= token id), as in
//! tiktoken's rank files. Encoding a chunk, tiktoken's way:
//!   1. if the whole chunk is a token, that is the answer (most chunks of
//!      ordinary text are: one hash look-up, no merging at all);
//!   2. otherwise start from its single bytes and repeatedly merge the adjacent
//!      pair whose concatenation has the lowest rank (the leftmost on a tie)
//!      until no adjacent concatenation is a token.
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

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use rustc_hash::{FxHashMap, FxHashSet};

use crate::chars::Chars;
use crate::pairs::Pairs;
use crate::pretokenize::Splitter;

pub type Rank = u32;

/// Chunks longer than this many bytes use the heap merge. (Also the size of
/// the scan's stack arrays, and small enough that offsets fit in a `u8`.)
const LONG_CHUNK: usize = 128;

/// The largest id a vocabulary may use. The decoder is a table indexed by id,
/// so a file claiming id 4,000,000,000 must be refused, not allocated; 2^24
/// (16.7M) is 80 times the largest vocabulary in use (o200k: 200k).
pub const MAX_ID: Rank = (1 << 24) - 1;

/// "No token": the rank of a byte string that is not in the vocabulary.
pub(crate) const NONE: Rank = Rank::MAX;

/// The ids of chunks that took merging, kept while one thread encodes.
///
/// Chunks that are not one token need merging, the slow path; in real text
/// they are ~8% of chunks but recur (in 10 MB of English, 180k such chunks
/// are 46k distinct words), so their ids are remembered: chunk -> ids.
/// Whole-token chunks skip the memo (that is one look-up already).
///
/// A memo lives as long as the text it borrows from, not in the `Encoder`:
/// one per call, or per run of documents in a batch (a 10 KB document alone
/// repeats too few words to gain much; a run of them does). So it
/// needs no lock, and its memory ends with the call. Alternatives rejected:
/// a shared map behind a lock (contention on every miss) and a thread-local
/// one (owned keys: an allocation per new chunk, and it outlives the call).
#[derive(Default)]
pub struct Memo<'t> {
    /// chunk -> (start, len) in `ids`, for chunks of up to 15 bytes (most
    /// of them: 12 bytes on average on FLORES-200), keyed by `pack`: a hit
    /// compares two integers, where a key that borrows the chunk compares
    /// bytes with a call to `memcmp` (2.5% of encoding FLORES-200), and
    /// rereads text from long before. Keyed so, encoding went 2-10% faster
    /// on FLORES-200 (o200k and cl100k) and 6-15% on English.
    short: FxHashMap<u128, (u32, u32)>,
    /// The same for longer chunks, which borrow from the text.
    long: FxHashMap<&'t [u8], (u32, u32)>,
    ids: Vec<Rank>,
}

impl<'t> Memo<'t> {
    /// Past this many chunks, or this many ids, the memo starts afresh. A
    /// small memo stays in cache: on 200 languages (FLORES), where words
    /// recur less, an unbounded one made encoding 15-20% slower than 32k
    /// chunks; English gained nothing from more. (MAX_IDS is small in unit
    /// tests, so that they reach it quickly.)
    const MAX_CHUNKS: usize = 1 << 15;
    const MAX_IDS: usize = if cfg!(test) { 1 << 12 } else { 1 << 20 };

    #[inline]
    fn get(&self, chunk: &[u8]) -> Option<&[Rank]> {
        let found = if chunk.len() <= 15 { self.short.get(&pack(chunk)) } else { self.long.get(chunk) };
        let &(start, len) = found?;
        Some(&self.ids[start as usize..(start + len) as usize])
    }

    #[inline]
    fn insert(&mut self, chunk: &'t [u8], ids: &[Rank]) {
        if self.ids.len() + ids.len() > Self::MAX_IDS || self.short.len() + self.long.len() >= Self::MAX_CHUNKS {
            if ids.len() > Self::MAX_IDS {
                return;
            }
            self.short.clear();
            self.long.clear();
            self.ids.clear();
        }
        let at = (self.ids.len() as u32, ids.len() as u32);
        if chunk.len() <= 15 {
            self.short.insert(pack(chunk), at);
        } else {
            self.long.insert(chunk, at);
        }
        self.ids.extend_from_slice(ids);
    }
}

/// An empty vector for the ids of a text of `bytes` bytes.
///
/// With room for a third of an id per byte, so that it seldom grows (which
/// copies it): English and code take 0.25-0.26, FLORES-200 0.29 with o200k
/// (0.46 with cl100k, which grows it once). Room never written costs no
/// memory, only address space.
pub fn ids_buffer(bytes: usize) -> Vec<Rank> {
    Vec::with_capacity(bytes / 3)
}

/// Token bytes -> rank, laid out for the encoder's hot loop.
///
/// Encoding is almost all look-ups of short byte strings: the whole chunk
/// first, then, for chunks that are not one token, every adjacent pair and
/// every pair of merged parts. A `HashMap<Vec<u8>, Rank>` costs two cache
/// misses per look-up (the bucket, then the key's heap bytes to compare) and
/// hashes byte by byte. Instead:
///   * single bytes and byte pairs index flat tables (1 KiB and 256 KiB): the
///     first n-1 look-ups of every merge involve no hashing at all;
///   * tokens of 3..=15 bytes are packed into an integer key (bytes plus
///     length; a `u64` up to 7 bytes, else a `u128`), so a look-up is one
///     multiply-hash and one probe with the key inline;
///   * longer tokens (under 1% of a vocabulary, and rarely looked up) keep a
///     byte-string map.
/// This made the merge part of encoding about 2× faster than one map.
pub struct Vocab {
    byte: [Rank; 256],
    pair: Box<[Rank]>,
    small: FxHashMap<u64, Rank>,
    short: FxHashMap<u128, Rank>,
    long: FxHashMap<Box<[u8]>, Rank>,
}

/// An empty vocabulary (no tokens, not even the 256 bytes).
impl Default for Vocab {
    fn default() -> Vocab {
        Vocab {
            byte: [NONE; 256],
            pair: vec![NONE; 1 << 16].into_boxed_slice(),
            small: FxHashMap::default(),
            short: FxHashMap::default(),
            long: FxHashMap::default(),
        }
    }
}

/// Packs up to 15 bytes into a u128: the bytes little-endian, the length in
/// the top byte (so "ab\0" and "ab" differ). Training counts chunks by it too.
///
/// Built from two overlapping loads instead of a byte copy (which compiles to
/// a `memcpy` call for a variable length): this look-up runs once per chunk.
#[inline]
pub(crate) fn pack(b: &[u8]) -> u128 {
    let n = b.len();
    debug_assert!(n <= 15);
    let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap()) as u64;
    let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap());
    let (lo, hi) = if n >= 8 {
        // hi: bytes 8..n, i.e. the top n-8 bytes of the last eight.
        let hi = if n == 8 { 0 } else { u64_at(n - 8) >> (8 * (16 - n)) };
        (u64_at(0), hi)
    } else if n >= 4 {
        // Bytes 0..4 and n-4..n; where they overlap, both hold the same bytes.
        (u32_at(0) | u32_at(n - 4) << (8 * (n - 4)), 0)
    } else {
        (b.iter().rev().fold(0u64, |acc, &x| acc << 8 | x as u64), 0)
    };
    (hi as u128) << 64 | lo as u128 | (n as u128) << 120
}

/// `pack` for 3..=7 bytes, as a u64: the bytes little-endian, the length in
/// the top byte. Most look-ups are of such short strings, and a map of 16-byte
/// entries has half the cache footprint of one with 32-byte entries.
/// (Training counts chunks of up to 7 bytes by this layout too.)
#[inline]
pub(crate) fn pack_small(b: &[u8]) -> u64 {
    let n = b.len();
    debug_assert!((3..=7).contains(&n));
    let u16_at = |i: usize| u16::from_le_bytes(b[i..i + 2].try_into().unwrap()) as u64;
    let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap()) as u64;
    let lo = if n >= 4 { u32_at(0) | u32_at(n - 4) << (8 * (n - 4)) } else { u16_at(0) | (b[2] as u64) << 16 };
    lo | (n as u64) << 56
}

/// The bytes `pack` packed.
#[cfg(test)]
fn unpack(key: u128) -> Vec<u8> {
    let bytes = key.to_le_bytes();
    bytes[..bytes[15] as usize].to_vec()
}

/// The 256 single bytes, then `extra`: the tokens of a test vocabulary
/// (token `i` has rank `i`; see `Vocab::of`).
#[cfg(test)]
pub(crate) fn bytes_then<'a>(extra: &[&'a [u8]]) -> Vec<&'a [u8]> {
    static BYTES: [u8; 256] = {
        let mut b = [0; 256];
        let mut i = 0;
        while i < 256 {
            b[i] = i as u8;
            i += 1;
        }
        b
    };
    BYTES.chunks(1).chain(extra.iter().copied()).collect()
}

impl Vocab {
    fn new(ranks: &FxHashMap<Vec<u8>, Rank>) -> Vocab {
        let mut v = Vocab::default();
        for (bytes, &r) in ranks {
            v.insert(bytes, r);
        }
        v
    }

    /// Adds a token (the trainer adds each one as it learns it). Tokens are
    /// never empty: an empty one is ignored.
    pub fn insert(&mut self, bytes: &[u8], r: Rank) {
        match bytes.len() {
            0 => {}
            1 => self.byte[bytes[0] as usize] = r,
            2 => self.pair[(bytes[0] as usize) << 8 | bytes[1] as usize] = r,
            3..=7 => {
                self.small.insert(pack_small(bytes), r);
            }
            8..=15 => {
                self.short.insert(pack(bytes), r);
            }
            _ => {
                self.long.insert(bytes.into(), r);
            }
        }
    }

    /// The vocabulary where token `i` has rank `i` (for tests).
    #[cfg(test)]
    pub(crate) fn of<T: AsRef<[u8]>>(tokens: &[T]) -> Vocab {
        let mut vocab = Vocab::default();
        for (r, t) in tokens.iter().enumerate() {
            vocab.insert(t.as_ref(), r as Rank);
        }
        vocab
    }

    /// The rank of `b`, or `NONE`.
    ///
    /// Always inlined: left to the compiler, it was a call that saved and
    /// restored five registers, once per whole chunk and twice per merge
    /// (inlining made encoding 4% faster on FLORES-200 with o200k, 2.5% on
    /// English).
    #[inline(always)]
    pub(crate) fn get(&self, b: &[u8]) -> Rank {
        match b.len() {
            0 => NONE,
            1 => self.byte[b[0] as usize],
            2 => self.pair_rank(b[0], b[1]),
            3..=7 => self.small.get(&pack_small(b)).copied().unwrap_or(NONE),
            8..=15 => self.short.get(&pack(b)).copied().unwrap_or(NONE),
            _ => self.long.get(b).copied().unwrap_or(NONE),
        }
    }

    /// The rank of the two bytes `a`, `b`, or `NONE` (a table look-up).
    #[inline(always)]
    pub(crate) fn pair_rank(&self, a: u8, b: u8) -> Rank {
        self.pair[(a as usize) << 8 | b as usize]
    }

    /// The rank of `b` if it is below `limit` (merge recovery replays BPE
    /// with only the tokens learnt before a given one), else `NONE`.
    #[inline]
    fn get_below(&self, b: &[u8], limit: Rank) -> Rank {
        let r = self.get(b);
        if r < limit {
            r
        } else {
            NONE
        }
    }
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
}

impl Encoder {
    pub fn new(
        ranks: FxHashMap<Vec<u8>, Rank>,
        specials: FxHashMap<String, Rank>,
        pattern: &str,
    ) -> Result<Self, String> {
        let splitter = Splitter::new(pattern)?;
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
    /// while it learns, so that little is left to do once it has finished.
    pub fn from_vocab(
        vocab: Vocab,
        tokens: &[Vec<u8>],
        specials: FxHashMap<String, Rank>,
        pattern: &str,
    ) -> Result<Self, String> {
        let splitter = Splitter::new(pattern)?;
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
        Ok(Encoder { vocab, chars, pairs, specials, decoder, splitter, special_regex })
    }

    pub fn splitter(&self) -> &Splitter {
        &self.splitter
    }

    /// The texts of the special tokens (for `pieces.rs`: where not to cut).
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
        match missing {
            None => Ok(()),
            Some((s, e)) => Err(format!(
                "the vocabulary has no token for the bytes {:?}; a byte-level vocabulary must \
                 contain all 256 single bytes",
                &chunk[s..e]
            )),
        }
    }

    /// Encodes text with no special-token handling (special token text is
    /// encoded as ordinary text).
    pub fn encode_ordinary(&self, text: &str) -> Result<Vec<Rank>, String> {
        let mut out = ids_buffer(text.len());
        self.encode_ordinary_into(text, &mut Memo::default(), &mut out)?;
        Ok(out)
    }

    /// [`Encoder::encode_ordinary`], appending to `out` and remembering in
    /// `memo` the chunks that took merging.
    fn encode_ordinary_into<'t>(
        &self,
        text: &'t str,
        memo: &mut Memo<'t>,
        out: &mut Vec<Rank>,
    ) -> Result<(), String> {
        let mut err = None;
        self.splitter.for_each_chunk(text, |chunk| {
            if err.is_some() {
                return;
            }
            let chunk = chunk.as_bytes();
            let whole = self.vocab.get(chunk);
            if whole != NONE {
                out.push(whole);
            } else if let Some(ids) = memo.get(chunk) {
                out.extend_from_slice(ids);
            } else {
                let start = out.len();
                match self.merge_chunk(chunk, out) {
                    Ok(()) => memo.insert(chunk, &out[start..]),
                    Err(e) => err = Some(e),
                }
            }
        })?;
        err.map_or(Ok(()), Err)
    }

    /// Encodes text, turning the special tokens in `allowed` into their ids;
    /// any other special token text is encoded as ordinary text. (Refusing
    /// disallowed special tokens is the caller's policy: see `find_special`.)
    pub fn encode(&self, text: &str, allowed: &FxHashSet<String>) -> Result<Vec<Rank>, String> {
        let mut out = ids_buffer(text.len());
        self.encode_into(text, allowed, &mut Memo::default(), &mut out)?;
        Ok(out)
    }

    /// [`Encoder::encode`], appending to `out`; `memo` carries the ids of
    /// merged chunks from one call to the next (see [`Memo`]).
    pub fn encode_into<'t>(
        &self,
        text: &'t str,
        allowed: &FxHashSet<String>,
        memo: &mut Memo<'t>,
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
    pub fn encode_each<'t>(
        &self,
        texts: &[&'t str],
        allowed: &FxHashSet<String>,
        memo: &mut Memo<'t>,
    ) -> Result<Vec<Vec<Rank>>, String> {
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
        // Leftmost occurrence wins, as a reader scanning the text would report it.
        // memmem (SIMD) rather than `str::find`: this scans every text that
        // `encode` gets, and was 5× slower than encoding it with `str::find`.
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

/// The whole character or pair that may start at `chunk[i]`, if any: the
/// encoder's start for a chunk with characters. (`chars` must not be empty.)
#[inline(always)]
fn whole_at(vocab: &Vocab, chars: &Chars, pairs: &Pairs, chunk: &[u8], i: usize) -> Option<(Rank, usize)> {
    // (Bytes below 0xC2 start no character.)
    if chunk[i] >= 0xC2 {
        chars.whole(chunk, i)
    } else {
        pairs.whole(vocab, chunk, i)
    }
}

/// The O(n²) merge for short chunks (1 to `LONG_CHUNK` bytes).
/// Calls `emit(start, end, rank)` for each final part, left to right.
///
/// Everything lives in fixed arrays on the stack (no allocation per chunk),
/// and each part carries its rank, so the result needs no final look-ups: a
/// merged part's id is the rank of the pair that made it.
///
/// `start(i)` says if a part of more than one byte starts at `chunk[i]`: its
/// rank and length (a whole character or pair, see `chars.rs` and
/// `pairs.rs`); other parts start as single bytes. (Merge recovery starts
/// from bytes alone: it replays BPE with only some of the tokens, for which
/// those tables were not made.)
fn merge_with_scan(
    vocab: &Vocab,
    chunk: &[u8],
    limit: Rank,
    start: impl Fn(usize) -> Option<(Rank, usize)>,
    emit: &mut impl FnMut(usize, usize, Rank),
) {
    // Most chunks that need merging are short (12 bytes on average on FLORES):
    // arrays sized for them are cheaper to set up than ones for LONG_CHUNK.
    if chunk.len() <= 32 {
        scan::<32>(vocab, chunk, limit, start, emit)
    } else {
        scan::<LONG_CHUNK>(vocab, chunk, limit, start, emit)
    }
}

/// [`merge_with_scan`] for chunks of at most `N` bytes.
///
/// Parts are named by the offset where they start, and merged parts are not
/// removed from the arrays: the part after a merge's right half is linked to
/// its left half (`next`, `prev`), and the right half's pair slot becomes
/// `NONE`, so the scan for the lowest rank skips it. An earlier version kept
/// the parts packed, shifting three arrays left after each merge: three
/// `memmove` calls per merge were 8% of encoding FLORES-200 with o200k.
#[inline(always)]
fn scan<const N: usize>(
    vocab: &Vocab,
    chunk: &[u8],
    limit: Rank,
    start: impl Fn(usize) -> Option<(Rank, usize)>,
    emit: &mut impl FnMut(usize, usize, Rank),
) {
    let n = chunk.len();
    debug_assert!((1..=N).contains(&n) && N <= LONG_CHUNK);
    // Part i is chunk[i..next[i]] with id rank[i]; prev[i] is the start of
    // the part before it; pair[i] is the rank of merging part i with the
    // next part (NONE if there is no next part or i no longer starts one).
    let mut next = [0u8; N];
    let mut prev = [0u8; N];
    let mut rank = [NONE; N];
    let mut pair = [NONE; N];
    // The parts `start` allows, and single bytes.
    let (mut i, mut before) = (0, 0);
    while i < n {
        let (r, k) = start(i).unwrap_or((vocab.byte[chunk[i] as usize], 1));
        next[i] = (i + k) as u8;
        prev[i] = before as u8;
        rank[i] = r;
        before = i;
        i += k;
    }
    // A pair of two bytes is in the pair table; others take a look-up.
    let mut i = 0;
    while (next[i] as usize) < n {
        let j = next[i] as usize;
        let end = next[j] as usize;
        let r = if end == i + 2 { vocab.pair_rank(chunk[i], chunk[i + 1]) } else { vocab.get(&chunk[i..end]) };
        pair[i] = if r < limit { r } else { NONE };
        i = j;
    }
    loop {
        // Leftmost lowest rank (strict `<` keeps the first minimum); slots in
        // offset order are parts in text order. (A branch-free minimum over
        // all N slots, then a search for it, measured 10% slower.)
        let (mut best, mut i) = (NONE, 0);
        for (k, &r) in pair[..n - 1].iter().enumerate() {
            if r < best {
                best = r;
                i = k;
            }
        }
        if best == NONE {
            break;
        }
        // Parts i and j become part i; the part after them (if any) and the
        // part before (if any) see a new neighbour.
        let j = next[i] as usize;
        let after = next[j] as usize;
        rank[i] = best;
        next[i] = after as u8;
        pair[j] = NONE;
        pair[i] = if after < n {
            prev[after] = i as u8;
            vocab.get_below(&chunk[i..next[after] as usize], limit)
        } else {
            NONE
        };
        if i > 0 {
            let p = prev[i] as usize;
            pair[p] = vocab.get_below(&chunk[p..after], limit);
        }
    }
    let mut i = 0;
    while i < n {
        emit(i, next[i] as usize, rank[i]);
        i = next[i] as usize;
    }
}

/// The O(n log n) merge for long chunks: a doubly linked list of parts and a
/// min-heap of (rank, position) with lazy deletion. Same result as the scan:
/// the heap orders equal ranks by position, i.e. leftmost first.
fn merge_with_heap(vocab: &Vocab, chunk: &[u8], limit: Rank, emit: &mut impl FnMut(usize, usize, Rank)) {
    let n = chunk.len();
    // Parts are identified by their start offset; next[i] is the start of the
    // following part (n at the end), prev[i] the previous one.
    let mut next: Vec<usize> = (1..=n).collect();
    let mut prev: Vec<usize> = (0..n).map(|i| i.wrapping_sub(1)).collect();
    let mut alive = vec![true; n];
    // id[i]: the id of part i; rank[i]: rank of merging part i with its next part.
    let mut id: Vec<Rank> = chunk.iter().map(|&b| vocab.byte[b as usize]).collect();
    let mut rank: Vec<Rank> =
        (0..n).map(|i| if i + 2 <= n { vocab.get_below(&chunk[i..i + 2], limit) } else { NONE }).collect();
    let mut heap: BinaryHeap<Reverse<(Rank, usize)>> = rank
        .iter()
        .enumerate()
        .filter(|&(_, &r)| r != NONE)
        .map(|(i, &r)| Reverse((r, i)))
        .collect();
    let pair_rank = |next: &[usize], i: usize| -> Rank {
        let j = next[i];
        if j >= n {
            return NONE;
        }
        vocab.get_below(&chunk[i..next[j]], limit)
    };
    while let Some(Reverse((r, i))) = heap.pop() {
        if !alive[i] || rank[i] != r {
            continue; // stale
        }
        let j = next[i];
        alive[j] = false;
        id[i] = r;
        next[i] = next[j];
        if next[i] < n {
            prev[next[i]] = i;
        }
        rank[i] = pair_rank(&next, i);
        if rank[i] != NONE {
            heap.push(Reverse((rank[i], i)));
        }
        if i > 0 {
            let p = prev[i];
            rank[p] = pair_rank(&next, p);
            if rank[p] != NONE {
                heap.push(Reverse((rank[p], p)));
            }
        }
    }
    let mut i = 0;
    while i < n {
        emit(i, next[i], id[i]);
        i = next[i];
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pretokenize::GPT4_PATTERN;

    fn byte_ranks(extra: &[&str]) -> FxHashMap<Vec<u8>, Rank> {
        let mut r: FxHashMap<Vec<u8>, Rank> = (0..=255u8).map(|b| (vec![b], b as Rank)).collect();
        for (i, t) in extra.iter().enumerate() {
            r.insert(t.as_bytes().to_vec(), 256 + i as Rank);
        }
        r
    }

    #[test]
    fn textbook_example() {
        let enc = Encoder::new(byte_ranks(&["aa", "ab", "aaab"]), FxHashMap::default(), r"[\s\S]+").unwrap();
        assert_eq!(enc.encode_ordinary("aaabdaaabac").unwrap(), vec![258, 100, 258, 97, 99]);
    }

    /// An encoder assembled from a vocabulary filled one token at a time (as
    /// the trainer does) encodes and decodes as one made from a rank map, and
    /// refuses a special token on an ordinary id.
    #[test]
    fn from_vocab_equals_new() {
        let ranks = byte_ranks(&["aa", "ab", "aaab", "bd", "aaabdaaabac!"]);
        let mut tokens = vec![Vec::new(); ranks.len()];
        for (bytes, &id) in &ranks {
            tokens[id as usize] = bytes.clone();
        }
        let vocab = || Vocab::of(&tokens);
        let specials: FxHashMap<String, Rank> = [("<s>".to_string(), 261)].into_iter().collect();
        let made = Encoder::new(ranks, specials.clone(), GPT4_PATTERN).unwrap();
        let assembled = Encoder::from_vocab(vocab(), &tokens, specials, GPT4_PATTERN).unwrap();
        let allowed: FxHashSet<String> = ["<s>".to_string()].into_iter().collect();
        for text in ["aaabdaaabac", "aaabdaaabac!<s> aab", "x<s>"] {
            let ids = made.encode(text, &allowed).unwrap();
            assert_eq!(assembled.encode(text, &allowed).unwrap(), ids);
            assert_eq!(assembled.decode_bytes(&ids).unwrap(), text.as_bytes());
        }
        let taken: FxHashMap<String, Rank> = [("<s>".to_string(), 3)].into_iter().collect();
        let err = Encoder::from_vocab(vocab(), &tokens, taken, GPT4_PATTERN).err().unwrap();
        assert!(err.contains("already taken"), "{err}");
    }

    /// The parts (start, end, id) that the scan or the heap merge makes.
    fn parts(ranks: &FxHashMap<Vec<u8>, Rank>, s: &[u8], heap: bool) -> Vec<(usize, usize, Rank)> {
        let vocab = Vocab::new(ranks);
        let mut out = Vec::new();
        let mut push = |a, b, r| out.push((a, b, r));
        if heap {
            merge_with_heap(&vocab, s, NONE, &mut push);
        } else {
            merge_with_scan(&vocab, s, NONE, |_| None, &mut push);
        }
        out
    }

    #[test]
    fn pack_is_injective_and_matches_a_byte_copy() {
        for n in 0..=15usize {
            let b: Vec<u8> = (0..n as u8).map(|i| i.wrapping_mul(37).wrapping_add(200)).collect();
            let mut a = [0u8; 16];
            a[..n].copy_from_slice(&b);
            a[15] = n as u8;
            assert_eq!(pack(&b), u128::from_le_bytes(a), "length {n}");
            assert_eq!(unpack(pack(&b)), b);
            if (3..=7).contains(&n) {
                assert_eq!(pack_small(&b), pack(&b) as u64 | (n as u64) << 56, "length {n}");
            }
        }
    }

    /// Starting from whole characters and pairs changes no result.
    /// Vocabularies of random byte strings cut from mixed text at any offset
    /// (so tokens cross characters' boundaries at random ranks, as " \xd0"
    /// does in o200k), and chunks of it, also cut mid-character, with stray
    /// bytes. Each chunk is merged from bytes, from the characters and pairs
    /// that the encoder starts whole (as for a chunk with characters), and
    /// from the pairs alone (as for an ASCII chunk).
    #[test]
    fn whole_characters_and_pairs_merge_as_bytes_would() {
        let seed = std::cell::Cell::new(7u64);
        let rand = |n: usize| {
            seed.set(seed.get().wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407));
            (seed.get() >> 33) as usize % n
        };
        // Mixed text, and text mostly of ASCII letters (for pairs).
        let mixed: Vec<&[u8]> = ["д", "а", "к", "क", "ा", "ि", "中", "α", "é", " ", "x", "."]
            .iter()
            .map(|c| c.as_bytes())
            .chain([&b"\xd0"[..], b"\xb4", b"\xe0\xa4"])
            .collect();
        let latin: Vec<&[u8]> =
            ["e", "n", "t", "a", "s", " ", ".", "é", "\x7f", "\u{80}"].iter().map(|c| c.as_bytes()).collect();
        let (mut allowed, mut refused, mut inside, mut chunks) = (0, 0, 0, 0);
        let (mut pairs_allowed, mut pairs_refused) = (0, 0);
        for round in 0..80 {
            let alphabet = if round % 2 == 0 { &mixed } else { &latin };
            let text =
                |len: usize| -> Vec<u8> { (0..len).flat_map(|_| alphabet[rand(alphabet.len())]).copied().collect() };
            let source = text(300);
            let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
            let mut seen: FxHashSet<Vec<u8>> = tokens.iter().cloned().collect();
            while tokens.len() < 256 + 120 {
                let start = rand(source.len() - 1);
                let t = source[start..(start + 2 + rand(5)).min(source.len())].to_vec();
                if seen.insert(t.clone()) {
                    // At a random rank, so that any token may rank below any other.
                    tokens.insert(256 + rand(tokens.len() - 255), t);
                }
            }
            let vocab = Vocab::of(&tokens);
            let listed: Vec<Option<&[u8]>> = tokens.iter().map(|t| Some(&t[..])).collect();
            let chars = Chars::new(&vocab, &listed);
            let pairs = Pairs::new(&vocab, &listed);
            for _ in 0..300 {
                let whole = text(1 + rand(16));
                let chunk = &whole[rand(2).min(whole.len() - 1)..];
                let parts = |start: &dyn Fn(usize) -> Option<(Rank, usize)>| {
                    let mut out = Vec::new();
                    merge_with_scan(&vocab, chunk, NONE, start, &mut |a, b, r| out.push((a, b, r)));
                    out
                };
                let from_bytes = parts(&|_| None);
                assert_eq!(parts(&|i| pairs.whole(&vocab, chunk, i)), from_bytes, "pairs: {chunk:?}");
                if !chars.is_empty() {
                    let start = |i| whole_at(&vocab, &chars, &pairs, chunk, i);
                    assert_eq!(parts(&start), from_bytes, "characters and pairs: {chunk:?}");
                    for i in (0..chunk.len()).filter(|&i| chunk[i] >= 0xC2) {
                        match chars.whole(chunk, i) {
                            Some(_) if !chars.whole_by_class(chunk, i) => inside += 1,
                            Some(_) => allowed += 1,
                            None => refused += 1,
                        }
                    }
                }
                chunks += 1;
                for i in (0..chunk.len()).filter(|&i| chunk[i..].len() >= 2 && vocab.get(&chunk[i..i + 2]) != NONE) {
                    match pairs.whole(&vocab, chunk, i) {
                        Some(_) => pairs_allowed += 1,
                        None if chunk[i..i + 2].is_ascii() => pairs_refused += 1,
                        None => {}
                    }
                }
            }
        }
        // The test means something only if characters and pairs started
        // whole (some characters by the exact bytes inside a word only), and
        // others were refused.
        assert!(
            allowed > 1000 && inside > 100 && refused > 1000,
            "{allowed} whole, {inside} whole by exact bytes, {refused} refused, in {chunks} chunks"
        );
        assert!(
            pairs_allowed > 1000 && pairs_refused > 1000,
            "{pairs_allowed} pairs whole, {pairs_refused} refused, in {chunks} chunks"
        );
    }

    #[test]
    fn heap_and_scan_agree() {
        let ranks = byte_ranks(&["aa", "ab", "aaab", "ba", "bab", "aaaa", "bb", "abab"]);
        let mut seed = 12345u64;
        // 32 and 33: either side of the scan's two array sizes.
        for len in [1usize, 2, 3, 5, 17, 32, 33, 64, 127, 128] {
            for _ in 0..50 {
                let s: Vec<u8> = (0..len)
                    .map(|_| {
                        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                        b"ab"[(seed >> 33) as usize % 2]
                    })
                    .collect();
                assert_eq!(parts(&ranks, &s, false), parts(&ranks, &s, true), "{s:?}");
            }
        }
    }

    #[test]
    fn long_runs_are_fast() {
        let ranks = byte_ranks(&["aa", "aaaa", "aaaaaaaa"]);
        let enc = Encoder::new(ranks, FxHashMap::default(), GPT4_PATTERN).unwrap();
        let ids = enc.encode_ordinary(&"a".repeat(1_000_000)).unwrap();
        assert_eq!(ids.len(), 125_000);
        assert!(ids.iter().all(|&i| i == 258));
    }

    /// A memo carried across texts (as `encode_batch` does) gives each text
    /// the ids it gets alone, also once the memo has started afresh.
    #[test]
    fn memo_across_texts() {
        let ranks = byte_ranks(&["th", "the", "he", "en", "an", "ant"]);
        let mut sp = FxHashMap::default();
        sp.insert("<|end|>".to_string(), 300);
        let enc = Encoder::new(ranks, sp, GPT4_PATTERN).unwrap();
        let allowed: FxHashSet<String> = ["<|end|>".to_string()].into_iter().collect();
        let long = "an".repeat(Memo::MAX_IDS);
        // (" anthemanthemanthem": a chunk too long for the memo's packed keys.)
        let texts = [
            "then anthem<|end|> theme",
            " then then",
            &long,
            "anthem then",
            " anthemanthemanthem anthemanthemanthem",
            " then<|end|> anthemanthemanthem",
        ];
        let mut memo = Memo::default();
        for t in texts {
            let mut ids = vec![7];
            enc.encode_into(t, &allowed, &mut memo, &mut ids).unwrap();
            assert_eq!(ids[1..], enc.encode(t, &allowed).unwrap()[..], "{:?}", &t[..t.len().min(20)]);
        }
        // The long chunk (MAX_IDS ids) filled the memo, so it started afresh;
        // the words after it are in it.
        assert!(memo.ids.len() < Memo::MAX_IDS && memo.get(b" then").is_some());
        assert!(memo.get(b" anthemanthemanthem").is_some() && memo.get(b" anthemanthemanthe").is_none());
    }

    #[test]
    fn specials() {
        let mut sp = FxHashMap::default();
        sp.insert("<|end|>".to_string(), 300);
        let enc = Encoder::new(byte_ranks(&[]), sp, GPT4_PATTERN).unwrap();
        let allowed: FxHashSet<String> = ["<|end|>".to_string()].into_iter().collect();
        assert_eq!(enc.encode("a<|end|>b", &allowed).unwrap(), vec![97, 300, 98]);
        // Not allowed: encoded as ordinary text.
        assert_eq!(enc.encode("a<|end|>", &FxHashSet::default()).unwrap(), enc.encode_ordinary("a<|end|>").unwrap());
        assert_eq!(enc.decode_bytes(&[97, 300]).unwrap(), b"a<|end|>");
        assert_eq!(enc.decode_bytes(&[99999]), Err(99999));
        assert_eq!(enc.find_special("xx<|end|>", &["<|end|>".to_string()]), Some("<|end|>"));
    }
}
