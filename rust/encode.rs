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
//! Step 2 has two implementations with the same result: a simple scan that
//! rescans all pairs after each merge (O(n²), fastest for the short chunks that
//! are the vast majority), and a heap over a linked list (O(n log n)) for long
//! chunks such as a million repeated characters, where the scan would take
//! hours.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use rustc_hash::{FxHashMap, FxHashSet};

use crate::pretokenize::Splitter;

pub type Rank = u32;

/// Chunks longer than this many bytes use the heap merge.
const LONG_CHUNK: usize = 128;

pub struct Encoder {
    /// Ordinary token bytes -> id.
    ranks: FxHashMap<Vec<u8>, Rank>,
    /// Special token text -> id.
    specials: FxHashMap<String, Rank>,
    /// id -> bytes, ordinary and special tokens alike (`None` for holes).
    decoder: Vec<Option<Box<[u8]>>>,
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
        let mut decoder: Vec<Option<Box<[u8]>>> = vec![None; max_id.map_or(0, |m| m as usize + 1)];
        for (bytes, &id) in &ranks {
            if decoder[id as usize].is_some() {
                return Err(format!("two tokens have id {id}"));
            }
            decoder[id as usize] = Some(bytes.clone().into_boxed_slice());
        }
        for (text, &id) in &specials {
            if decoder[id as usize].is_some() {
                return Err(format!("special token {text:?} has id {id}, which is already taken"));
            }
            decoder[id as usize] = Some(text.as_bytes().into());
        }
        let special_regex = if specials.is_empty() {
            None
        } else {
            let mut texts: Vec<&String> = specials.keys().collect();
            texts.sort_by(|a, b| b.len().cmp(&a.len()).then(a.cmp(b)));
            let alternation: Vec<String> = texts.iter().map(|t| regex::escape(t)).collect();
            Some(regex::Regex::new(&alternation.join("|")).map_err(|e| e.to_string())?)
        };
        Ok(Encoder { ranks, specials, decoder, splitter, special_regex })
    }

    pub fn splitter(&self) -> &Splitter {
        &self.splitter
    }

    /// Encodes one chunk's bytes, appending ids to `out`.
    pub fn encode_chunk(&self, chunk: &[u8], out: &mut Vec<Rank>) -> Result<(), String> {
        if let Some(&id) = self.ranks.get(chunk) {
            out.push(id);
            return Ok(());
        }
        let bounds = if chunk.len() > LONG_CHUNK {
            merge_with_heap(&self.ranks, chunk, Rank::MAX)
        } else {
            merge_with_scan(&self.ranks, chunk, Rank::MAX)
        };
        for w in bounds.windows(2) {
            let part = &chunk[w[0]..w[1]];
            match self.ranks.get(part) {
                Some(&id) => out.push(id),
                None => {
                    return Err(format!(
                        "the vocabulary has no token for the bytes {part:?}; a byte-level \
                         vocabulary must contain all 256 single bytes"
                    ))
                }
            }
        }
        Ok(())
    }

    /// Encodes text with no special-token handling (special token text is
    /// encoded as ordinary text).
    pub fn encode_ordinary(&self, text: &str) -> Result<Vec<Rank>, String> {
        let mut out = Vec::with_capacity(text.len() / 4);
        let mut err = None;
        self.splitter.for_each_chunk(text, |chunk| {
            if err.is_none() {
                if let Err(e) = self.encode_chunk(chunk.as_bytes(), &mut out) {
                    err = Some(e);
                }
            }
        })?;
        match err {
            Some(e) => Err(e),
            None => Ok(out),
        }
    }

    /// Encodes text, turning the special tokens in `allowed` into their ids;
    /// any other special token text is encoded as ordinary text. (Refusing
    /// disallowed special tokens is the caller's policy: see `find_special`.)
    pub fn encode(&self, text: &str, allowed: &FxHashSet<String>) -> Result<Vec<Rank>, String> {
        let Some(special_regex) = self.special_regex.as_ref().filter(|_| !allowed.is_empty()) else {
            return self.encode_ordinary(text);
        };
        let mut out = Vec::with_capacity(text.len() / 4);
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
            out.extend(self.encode_ordinary(&text[start..end])?);
            match next {
                Some(m) => {
                    out.push(self.specials[m.as_str()]);
                    start = m.end();
                    search = m.end();
                }
                None => break,
            }
        }
        Ok(out)
    }

    /// The first special token among `tokens` that occurs in `text`, if any.
    pub fn find_special<'a>(&self, text: &str, tokens: &'a [String]) -> Option<&'a str> {
        // Leftmost occurrence wins, as a reader scanning the text would report it.
        tokens
            .iter()
            .filter_map(|t| text.find(t.as_str()).map(|pos| (pos, t.as_str())))
            .min_by_key(|&(pos, t)| (pos, std::cmp::Reverse(t.len())))
            .map(|(_, t)| t)
    }

    pub fn decode_bytes(&self, ids: &[Rank]) -> Result<Vec<u8>, Rank> {
        let mut out = Vec::with_capacity(ids.len() * 4);
        for &id in ids {
            match self.decoder.get(id as usize) {
                Some(Some(bytes)) => out.extend_from_slice(bytes),
                _ => return Err(id),
            }
        }
        Ok(out)
    }

    pub fn token_bytes(&self, id: Rank) -> Option<&[u8]> {
        self.decoder.get(id as usize)?.as_deref()
    }

    /// Recovers the merge list of a rank-only vocabulary (a `.tiktoken` file
    /// has no merges): a token of rank r is the merge of the two parts that
    /// BPE makes of its bytes using only the ranks below r. Returns
    /// `(left, right, rank)` in rank order, or the first token (by rank) whose
    /// bytes do not come out as exactly two parts.
    pub fn recover_merges(&self) -> Result<Vec<(Rank, Rank, Rank)>, Rank> {
        let mut tokens: Vec<(&Vec<u8>, Rank)> =
            self.ranks.iter().filter(|(b, _)| b.len() >= 2).map(|(b, &r)| (b, r)).collect();
        tokens.sort_unstable_by_key(|&(_, r)| r);
        let mut merges = Vec::with_capacity(tokens.len());
        for (bytes, rank) in tokens {
            let bounds = if bytes.len() > LONG_CHUNK {
                merge_with_heap(&self.ranks, bytes, rank)
            } else {
                merge_with_scan(&self.ranks, bytes, rank)
            };
            if bounds.len() != 3 {
                return Err(rank);
            }
            let left = self.ranks.get(&bytes[..bounds[1]]).ok_or(rank)?;
            let right = self.ranks.get(&bytes[bounds[1]..]).ok_or(rank)?;
            merges.push((*left, *right, rank));
        }
        Ok(merges)
    }

    /// One more than the largest id.
    pub fn n_vocab(&self) -> usize {
        self.decoder.len()
    }
}

/// Rank of a byte string, `Rank::MAX` if it is not a token below `limit`.
#[inline]
fn rank_of(ranks: &FxHashMap<Vec<u8>, Rank>, bytes: &[u8], limit: Rank) -> Rank {
    match ranks.get(bytes) {
        Some(&r) if r < limit => r,
        _ => Rank::MAX,
    }
}

/// The O(n²) merge for short chunks. Returns the part boundaries: part k is
/// `chunk[b[k]..b[k+1]]`.
fn merge_with_scan(ranks: &FxHashMap<Vec<u8>, Rank>, chunk: &[u8], limit: Rank) -> Vec<usize> {
    let mut bounds: Vec<usize> = (0..=chunk.len()).collect();
    // pair[i]: rank of merging part i with part i+1.
    let mut pair: Vec<Rank> =
        (0..chunk.len().saturating_sub(1)).map(|i| rank_of(ranks, &chunk[i..i + 2], limit)).collect();
    loop {
        // Leftmost lowest rank (`min_by_key` keeps the first minimum).
        let Some((i, &r)) = pair.iter().enumerate().min_by_key(|&(_, &r)| r) else { break };
        if r == Rank::MAX {
            break;
        }
        // Parts i and i+1 become one: drop the boundary between them and the
        // pair that was merged; the pairs on either side see new neighbours.
        bounds.remove(i + 1);
        pair.remove(i);
        if i < pair.len() {
            pair[i] = rank_of(ranks, &chunk[bounds[i]..bounds[i + 2]], limit);
        }
        if i > 0 {
            pair[i - 1] = rank_of(ranks, &chunk[bounds[i - 1]..bounds[i + 1]], limit);
        }
    }
    bounds
}

/// The O(n log n) merge for long chunks: a doubly linked list of parts and a
/// min-heap of (rank, position) with lazy deletion. Same result as the scan:
/// the heap orders equal ranks by position, i.e. leftmost first.
fn merge_with_heap(ranks: &FxHashMap<Vec<u8>, Rank>, chunk: &[u8], limit: Rank) -> Vec<usize> {
    let n = chunk.len();
    // Parts are identified by their start offset; next[i] is the start of the
    // following part (n at the end), prev[i] the previous one.
    let mut next: Vec<usize> = (1..=n).collect();
    let mut prev: Vec<usize> = (0..n).map(|i| i.wrapping_sub(1)).collect();
    let mut alive = vec![true; n];
    // rank[i]: rank of merging part i with its next part.
    let mut rank: Vec<Rank> = (0..n)
        .map(|i| if i + 2 <= n { rank_of(ranks, &chunk[i..i + 2], limit) } else { Rank::MAX })
        .collect();
    let mut heap: BinaryHeap<Reverse<(Rank, usize)>> = rank
        .iter()
        .enumerate()
        .filter(|&(_, &r)| r != Rank::MAX)
        .map(|(i, &r)| Reverse((r, i)))
        .collect();
    let pair_rank = |next: &[usize], i: usize| -> Rank {
        let j = next[i];
        if j >= n {
            return Rank::MAX;
        }
        rank_of(ranks, &chunk[i..next[j]], limit)
    };
    while let Some(Reverse((r, i))) = heap.pop() {
        if !alive[i] || rank[i] != r {
            continue; // stale
        }
        let j = next[i];
        alive[j] = false;
        next[i] = next[j];
        if next[i] < n {
            prev[next[i]] = i;
        }
        rank[i] = pair_rank(&next, i);
        if rank[i] != Rank::MAX {
            heap.push(Reverse((rank[i], i)));
        }
        if i > 0 {
            let p = prev[i];
            rank[p] = pair_rank(&next, p);
            if rank[p] != Rank::MAX {
                heap.push(Reverse((rank[p], p)));
            }
        }
    }
    let mut bounds = Vec::new();
    let mut i = 0;
    while i < n {
        bounds.push(i);
        i = next[i];
    }
    bounds.push(n);
    bounds
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

    #[test]
    fn heap_and_scan_agree() {
        let ranks = byte_ranks(&["aa", "ab", "aaab", "ba", "bab", "aaaa", "bb", "abab"]);
        let mut seed = 12345u64;
        for len in [2usize, 3, 5, 17, 64, 129, 300] {
            for _ in 0..50 {
                let s: Vec<u8> = (0..len)
                    .map(|_| {
                        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                        b"ab"[(seed >> 33) as usize % 2]
                    })
                    .collect();
                assert_eq!(merge_with_scan(&ranks, &s, Rank::MAX), merge_with_heap(&ranks, &s, Rank::MAX), "{s:?}");
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
