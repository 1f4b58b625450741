//! A hash table from packed token bytes (`pack`, `pack_small`) to a value,
//! laid out for the one question the encoder asks per chunk: "is this a
//! token, and which?".
//!
//! `FxHashMap` (hashbrown) keeps its control bytes in one array and its
//! entries in another, so a look-up that hits reads two cache lines far
//! apart, and a miss walks a group of control bytes before it knows. Here
//! the entries are the table: open addressing with linear probing, the key
//! (never 0: a packed key holds its length in its top byte) inline beside
//! its value, an empty slot marked by key 0, at most three quarters full. A look-up is
//! one multiply, one shift and usually one slot: read the key, compare, done
//! (hit: the value is in the same line; miss: the slot is empty, or the
//! next one is).
//!
//! Multiplicative (Fibonacci) hashing takes the product's top bits, which
//! every bit of the key reaches: the bytes (low) and the length (top byte).

/// A key the table can hold: a packed byte string, never `EMPTY`.
pub(crate) trait Packed: Copy + Eq {
    const EMPTY: Self;
    /// A 64-bit hash whose top bits are well mixed.
    fn hash(self) -> u64;
}

/// 2^64 / the golden ratio, odd: the usual multiplier for Fibonacci hashing.
const K: u64 = 0x9E37_79B9_7F4A_7C15;

impl Packed for u64 {
    const EMPTY: u64 = 0;
    #[inline(always)]
    fn hash(self) -> u64 {
        self.wrapping_mul(K)
    }
}

impl Packed for u128 {
    const EMPTY: u128 = 0;
    #[inline(always)]
    fn hash(self) -> u64 {
        // The low half's bits spread by one multiply, then the high half
        // (bytes 8..15 and the length) joined and spread by a second.
        ((self as u64).wrapping_mul(K) ^ (self >> 64) as u64).wrapping_mul(K)
    }
}

#[derive(Clone, Copy)]
struct Slot<P, V> {
    key: P,
    value: V,
}

pub(crate) struct Table<P: Packed, V: Copy> {
    slots: Box<[Slot<P, V>]>,
    /// 64 - log2(slots): a hash's top bits are its slot.
    shift: u32,
    len: usize,
    /// What an empty slot holds as its value (never returned by `get`).
    blank: V,
}

/// Slots of a new table (a power of two).
const MIN_SLOTS: usize = 16;

impl<P: Packed, V: Copy> Table<P, V> {
    pub(crate) fn new(blank: V) -> Self {
        Table::with_slots(MIN_SLOTS, blank)
    }

    fn with_slots(n: usize, blank: V) -> Self {
        debug_assert!(n.is_power_of_two() && n >= 2);
        Table {
            slots: vec![Slot { key: P::EMPTY, value: blank }; n].into_boxed_slice(),
            shift: 64 - n.trailing_zeros(),
            len: 0,
            blank,
        }
    }

    /// The value of `key`, if it is there.
    #[inline(always)]
    pub(crate) fn get(&self, key: P) -> Option<V> {
        let mask = self.slots.len() - 1;
        let mut i = (key.hash() >> self.shift) as usize;
        loop {
            // (At most three quarters of the slots are full, so the probe ends at an
            // empty one.)
            let slot = &self.slots[i & mask];
            if slot.key == key {
                return Some(slot.value);
            }
            if slot.key == P::EMPTY {
                return None;
            }
            i = (i & mask) + 1;
        }
    }

    /// Asks the CPU to bring `key`'s first slot into cache, so that a
    /// `get` a little later finds it there (a no-op off x86-64).
    #[inline(always)]
    pub(crate) fn prefetch(&self, key: P) {
        let i = (key.hash() >> self.shift) as usize & (self.slots.len() - 1);
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            // SAFETY: a prefetch never faults, and the address is a slot's.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(self.slots.as_ptr().add(i) as *const i8) };
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = i;
    }

    /// Sets `key`'s value (`key` must not be `EMPTY`).
    pub(crate) fn insert(&mut self, key: P, value: V) {
        assert!(key != P::EMPTY, "a packed key is never 0");
        if 4 * (self.len + 1) > 3 * self.slots.len() {
            self.grow();
        }
        let mask = self.slots.len() - 1;
        let mut i = (key.hash() >> self.shift) as usize & mask;
        loop {
            let slot = &mut self.slots[i];
            if slot.key == key {
                slot.value = value;
                return;
            }
            if slot.key == P::EMPTY {
                *slot = Slot { key, value };
                self.len += 1;
                return;
            }
            i = (i + 1) & mask;
        }
    }

    fn grow(&mut self) {
        let old = std::mem::replace(self, Table::with_slots(2 * self.slots.len(), self.blank));
        for s in old.slots.iter().filter(|s| s.key != P::EMPTY) {
            self.insert(s.key, s.value);
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The slots (its memory is `capacity() * size_of` a slot).
    pub(crate) fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// Empties it, keeping its slots.
    pub(crate) fn clear(&mut self) {
        if self.len > 0 {
            self.slots.fill(Slot { key: P::EMPTY, value: self.blank });
            self.len = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustc_hash::FxHashMap;

    /// The table answers as a hash map does, for keys that collide in
    /// their slots and keys that do not, through growth, overwrites and
    /// clearing.
    #[test]
    fn agrees_with_a_hash_map() {
        let mut table: Table<u64, u32> = Table::new(u32::MAX);
        let mut wide: Table<u128, u32> = Table::new(u32::MAX);
        let mut map = FxHashMap::default();
        let mut x = 0x1234_5678_9abc_def0u64;
        for round in 0..3 {
            for i in 0..5000u32 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                // Keys like packed ones: a few low bytes and a length on
                // top; some share their low bytes, some are repeated.
                let key = (x & 0xff_ffff) | ((3 + (x >> 60) % 5) << 56);
                table.insert(key, i + round);
                wide.insert(key as u128 | (x as u128) << 64, i);
                map.insert(key, i + round);
                if i % 7 == 0 {
                    assert_eq!(table.get(key ^ 1 << 40), map.get(&(key ^ 1 << 40)).copied());
                }
            }
            assert_eq!(table.len(), map.len());
            assert!(4 * table.len() <= 3 * table.capacity());
            for (&k, &v) in &map {
                assert_eq!(table.get(k), Some(v));
            }
            table.clear();
            map.clear();
            assert_eq!(table.get(x | 1 << 56), None);
        }
        assert!(wide.len() > 0 && wide.get(5 << 120).is_none());
    }
}
