//! Where each pair occurs: per pair, its count and the list of the words
//! that hold it; lists of more than two words are varint-packed, one after
//! another, in one shared byte array (the arena).

use super::words::{Pair, NO_WORD};

/// What we know about one pair: its count over all words and the words it
/// occurs in. The lists may name a word that has lost the pair since (it is
/// skipped when the pair is merged): removing entries would cost more than
/// skipping them. A word is never named twice in a row.
///
/// 20 bytes, aligned to 4, so a map bucket (pair and info) is 24 with `u16`
/// symbols: the map's buckets can be the largest single item of memory.
/// Most lists are short, so up to two word ids live in the record itself,
/// and longer lists in the shared [`Lists`] arena. (Earlier layouts and
/// their cost: docs/dev/performance.md, "Pair records".)
#[derive(Clone, Copy, Default)]
pub(super) struct PairInfo {
    /// The count over all words, as (low, high) halves of an `i64`: see above.
    pub(super) count: [u32; 2],
    /// Inline: the number of word ids in `slots`. In the arena: the bytes the
    /// list uses there, with [`IN_ARENA`] set.
    pub(super) len: u32,
    /// Inline: the word ids. In the arena: the list's offset and capacity, in bytes.
    pub(super) slots: [u32; INLINE],
}

pub(super) const INLINE: usize = 2;
pub(super) const IN_ARENA: u32 = 1 << 31;
// A cold pair's "no word" (`words::NO_WORD`) is the largest id without this bit.
const _: () = assert!(NO_WORD == IN_ARENA - 1);
// The layout the comment above promises.
const _: () = assert!(std::mem::size_of::<(Pair<u16>, PairInfo)>() == 24);

impl PairInfo {
    pub(super) fn count(&self) -> i64 {
        (u64::from(self.count[0]) | u64::from(self.count[1]) << 32) as i64
    }

    pub(super) fn set_count(&mut self, c: i64) {
        self.count = [c as u32, ((c as u64) >> 32) as u32];
    }

    /// Inline: the number of words; in the arena: the bytes used.
    pub(super) fn len(&self) -> usize {
        (self.len & !IN_ARENA) as usize
    }

    pub(super) fn in_arena(&self) -> bool {
        self.len & IN_ARENA != 0
    }
}

/// The word lists longer than [`INLINE`], one after another in one byte array.
///
/// **Encoding.** A list is sorted (see below), so it is stored as the gaps
/// between successive word ids, each a LEB128 varint (7 bits a byte),
/// followed by a 4-byte trailer holding the last id plus one (the next gap is
/// taken from it without decoding the list). Word `w` after last id `l` is
/// the gap `w - l` (`w + 1` for the first); a gap of zero is an escape,
/// followed by `w + 1` itself, for a word that comes before the last (see
/// below). The ids of a pair's words are a few hundred apart for frequent
/// pairs (one byte), and a few thousand for the rest (two): less than half
/// the bytes of `u32` ids (docs/dev/performance.md, "Word lists").
///
/// **Why sorted:** the byte pairs' lists are written in word order, and a
/// merge visits its words in the order of its list and gives each of its new
/// pairs their words in that order; a new pair's list is made during one merge
/// (it holds the new token) and grows in no other, except when a later merge
/// reaches the same bytes again and reuses the token's id. Only then does an
/// id come out of order, and the escape stores it.
///
/// **Why one array** and not a heap vector per list: the byte pairs' lists
/// are most entries at the start (11M of 12M on the scale file) and are
/// written once, exactly sized, in one pass; and lists that grow during
/// merging, each in a heap block of its own, left the allocator's pages
/// partly used as they grew and died. Here a list that outgrows its space moves to the end with
/// twice the capacity, and its old space is dead until [`Lists::compact`]
/// slides the live lists down over it, in place (a copy into a new array
/// would hold both at once), and gives the freed end back to the OS.
pub(super) struct Lists {
    pub(super) arena: Vec<u8>,
    /// Bytes of the arena that no list owns any more.
    pub(super) dead: usize,
}

/// The trailer of an arena list: the last word id plus one (0: none yet).
/// At the end, not the start, so adding a word reads and writes one place
/// (a header cost a second cache miss per word added to a short list).
pub(super) const TRAILER: usize = 4;

/// The bytes of `x` as a LEB128 varint.
#[inline]
pub(super) fn varint_len(x: u32) -> usize {
    match x {
        0..=0x7f => 1,
        0x80..=0x3fff => 2,
        0x4000..=0x1f_ffff => 3,
        0x20_0000..=0xfff_ffff => 4,
        _ => 5,
    }
}

/// The bytes of `word`'s entry in a list whose last id plus one is `next`.
pub(super) fn entry_len(next: u32, word: u32) -> usize {
    if word + 1 > next {
        varint_len(word + 1 - next)
    } else {
        1 + varint_len(word + 1)
    }
}

/// Writes `x` as a LEB128 varint at the start of `out`; returns its length.
#[inline]
pub(super) fn put_varint(mut x: u32, out: &mut [u8]) -> usize {
    let mut n = 0;
    while x >= 0x80 {
        out[n] = x as u8 | 0x80;
        x >>= 7;
        n += 1;
    }
    out[n] = x as u8;
    n + 1
}

/// Reads a LEB128 varint at `bytes[*i]`, moving `i` past it.
#[inline]
pub(super) fn get_varint(bytes: &[u8], i: &mut usize) -> u32 {
    let mut x = 0u32;
    let mut shift = 0;
    loop {
        let b = bytes[*i];
        *i += 1;
        x |= u32::from(b & 0x7f) << shift;
        if b < 0x80 {
            return x;
        }
        shift += 7;
    }
}

/// Writes `word`'s entry (`n` bytes) where a list's trailer (`next`) starts,
/// at `out[0]`, and the new trailer after it.
#[inline]
fn write_entry(out: &mut [u8], next: u32, word: u32, n: usize) {
    if word + 1 > next {
        put_varint(word + 1 - next, &mut out[..n]);
    } else {
        out[0] = 0; // the escape, then the id itself
        put_varint(word + 1, &mut out[1..n]);
    }
    out[n..n + TRAILER].copy_from_slice(&(word + 1).to_le_bytes());
}

/// [`Lists::push`] for a list sized to hold all its words (the first lists:
/// see `initial_pairs`), whose room lies in `stretch`, the part of the
/// arena from byte `base` on: parts of the arena are filled on several
/// cores at once. `next` is the list's last word plus one (0 while empty),
/// kept beside its record: the same as its trailer, which is written but
/// never read here, so that filling a list waits on no load from the arena
/// (a stretch is larger than the L2 cache, and there is a push per pair
/// occurrence).
#[inline]
pub(super) fn push_sized(stretch: &mut [u8], base: usize, info: &mut PairInfo, next: &mut u32, word: u32) {
    if *next == word + 1 {
        return;
    }
    if !info.in_arena() {
        let len = info.len();
        info.slots[len] = word; // (sized: a list of more words is in the arena)
        info.len += 1;
    } else {
        let (at, used) = (info.slots[0] as usize - base, info.len());
        let n = entry_len(*next, word);
        assert!(used + n <= info.slots[1] as usize, "a first list outgrew the room pass 1 gave it");
        write_entry(&mut stretch[at + used - TRAILER..], *next, word, n);
        info.len += n as u32;
    }
    *next = word + 1;
}

impl Lists {
    /// The trailer of a list that ends at `end`.
    pub(super) fn trailer(&self, end: usize) -> u32 {
        u32::from_le_bytes(self.arena[end - TRAILER..end].try_into().expect("4 bytes"))
    }

    /// Appends the words of `info`'s list to `out`, in list order.
    pub(super) fn read(&self, info: &PairInfo, out: &mut Vec<u32>) {
        if !info.in_arena() {
            out.extend_from_slice(&info.slots[..info.len()]);
            return;
        }
        let at = info.slots[0] as usize;
        let bytes = &self.arena[at..at + info.len() - TRAILER];
        let (mut i, mut next) = (0, 0u32); // next: the last id plus one
        while i < bytes.len() {
            match get_varint(bytes, &mut i) {
                0 => next = get_varint(bytes, &mut i),
                gap => next += gap,
            }
            out.push(next - 1);
        }
    }

    /// Adds `word` to `info`'s list, unless it is the list's last word.
    #[inline]
    pub(super) fn push(&mut self, info: &mut PairInfo, word: u32) -> Result<(), String> {
        if !info.in_arena() {
            let len = info.len();
            if len > 0 && info.slots[len - 1] == word {
                return Ok(());
            }
            if len < INLINE {
                info.slots[len] = word;
                info.len += 1;
                return Ok(());
            }
            // Full inline list: it moves to the arena, with room for as many
            // bytes again.
            let words = [info.slots[0], info.slots[1], word];
            let mut next = 0;
            let mut data = TRAILER;
            for w in words {
                data += entry_len(next, w);
                next = w + 1;
            }
            let cap = 2 * data - TRAILER;
            info.slots = [self.grow_from(cap, |_| {})?, cap as u32];
            info.len = IN_ARENA | TRAILER as u32;
            for w in words {
                self.append(info, w)?;
            }
            return Ok(());
        }
        self.append(info, word)
    }

    /// [`Lists::push`] for a list in the arena.
    #[inline]
    pub(super) fn append(&mut self, info: &mut PairInfo, word: u32) -> Result<(), String> {
        let (mut at, used, cap) = (info.slots[0] as usize, info.len(), info.slots[1] as usize);
        let next = self.trailer(at + used);
        if next == word + 1 {
            return Ok(());
        }
        let n = entry_len(next, word);
        if used + n > cap {
            at = self.relocate(info, n)?;
        }
        write_entry(&mut self.arena[at + used - TRAILER..], next, word, n);
        info.len += n as u32;
        Ok(())
    }

    /// Moves `info`'s list, too full for `n` bytes more, to the end of the
    /// arena with twice the room; returns its new offset. (Out of line: rare,
    /// and `append` is inlined into the loops that fill the lists.)
    #[cold]
    #[inline(never)]
    pub(super) fn relocate(&mut self, info: &mut PairInfo, n: usize) -> Result<usize, String> {
        let (from, used, cap) = (info.slots[0] as usize, info.len(), info.slots[1] as usize);
        let room = (2 * used).max(used + n);
        let at = self.grow_from(room, |arena| arena.extend_from_within(from..from + used))?;
        self.dead += cap;
        info.slots = [at, room as u32];
        Ok(at as usize)
    }

    /// Appends `cap` bytes for a list (its first bytes written by `copy`, the
    /// rest zero); returns their offset.
    pub(super) fn grow_from(&mut self, cap: usize, copy: impl FnOnce(&mut Vec<u8>)) -> Result<u32, String> {
        let at = self.arena.len();
        if at + cap > u32::MAX as usize {
            return Err("too many pair occurrences to train on (over 4 GB of word lists): \
                        train on a sample of the corpus"
                .into());
        }
        if at + cap > self.arena.capacity() {
            // By a half, not by Vec's doubling: this is a large array, and
            // the copy holds the old and the new one at once.
            self.arena.reserve_exact(cap.max(at / 2));
        }
        copy(&mut self.arena);
        self.arena.resize(at + cap, 0);
        Ok(at as u32)
    }

    /// Marks `info`'s list (if in the arena) as dead.
    pub(super) fn free(&mut self, info: &PairInfo) {
        if info.in_arena() {
            self.dead += info.slots[1] as usize;
        }
    }
}
