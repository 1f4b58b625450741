//! The memo and its pool (`memo.rs`, `pool.rs`): the pool's cap, a memo's
//! growth and starting afresh, and long chunks' keys in one buffer.

use super::*;
use crate::encode::pool::{MemoPool, PooledMemo, DEFAULT_CAPACITY};

#[test]
fn the_pool_keeps_memos_within_its_cap() {
    let pool = MemoPool::new(1 << 20);
    pool.set_capacity(1 << 20);
    {
        let mut m = PooledMemo::new(&pool);
        m.insert(b"hello", &[1, 2]);
        m.insert(b"a chunk of more than fifteen bytes", &[3, 4, 5]);
    }
    let info = pool.info();
    assert_eq!((info.memos, info.entries, info.fresh), (1, 2, 1));
    assert!(info.bytes > 0 && info.bytes <= info.capacity);
    {
        let mut m = PooledMemo::new(&pool);
        assert_eq!(m.get(b"hello"), Some(&[1, 2][..]));
        assert_eq!(m.get(b"a chunk of more than fifteen bytes"), Some(&[3, 4, 5][..]));
        // Taken: a second call at the same time starts afresh.
        assert!(PooledMemo::new(&pool).is_empty());
    }
    assert_eq!(pool.info().reused, 1);
    // A memo too big for the cap is not kept.
    pool.set_capacity(50);
    {
        let mut m = PooledMemo::new(&pool);
        m.insert(b"hello", &[1, 2]);
    }
    assert_eq!(pool.info().memos, 0);
    pool.set_capacity(1 << 20);
    drop(PooledMemo::new(&pool)); // an empty memo is not kept
    assert_eq!(pool.info().memos, 0);
    pool.set_capacity(0);
    {
        let mut m = PooledMemo::new(&pool);
        m.insert(b"hello", &[1, 2]);
    }
    assert_eq!(pool.info().memos, 0);
}

/// By default the cap widens to a memo per thread that encoded at once, so
/// that the next call's threads each find theirs; a cap that is set stays
/// as set, whatever the threads.
#[test]
fn the_default_cap_has_room_for_a_memo_per_thread() {
    let per_memo = DEFAULT_CAPACITY / 4;
    let pool = MemoPool::new(per_memo);
    assert_eq!(pool.capacity(), DEFAULT_CAPACITY);
    // (With the table the threads share: a quarter of the default cap.)
    let shared = DEFAULT_CAPACITY / 4;
    // Each memo holds a chunk of 9 MiB: eight of them are past the
    // default cap of 64 MiB.
    let hold_9_mib = |m: &mut PooledMemo, k: usize| {
        let mut chunk = vec![b'x'; 9 << 20];
        chunk[0] = k as u8;
        m.insert(&chunk, &[k as Rank]);
    };
    {
        let mut out: Vec<PooledMemo> = (0..8).map(|_| PooledMemo::new(&pool)).collect();
        for (k, m) in out.iter_mut().enumerate() {
            hold_9_mib(m, k);
        }
        assert_eq!(pool.capacity(), 8 * per_memo + shared);
    }
    // All eight were kept, and eight threads that start together each find
    // one (none finds the pool's lock taken and starts afresh).
    assert_eq!(pool.info().memos, 8);
    let start = std::sync::Barrier::new(8);
    std::thread::scope(|s| {
        for _ in 0..8 {
            s.spawn(|| {
                start.wait();
                assert_eq!(PooledMemo::new(&pool).len(), 1);
            });
        }
    });
    assert_eq!((pool.info().reused, pool.info().memos, pool.capacity()), (8, 8, 8 * per_memo + shared));
    // Set, the cap is fixed: at 64 MiB, seven of the eight are kept, or
    // five beside the shared table's 16 MiB.
    pool.set_capacity(DEFAULT_CAPACITY);
    {
        let mut out: Vec<PooledMemo> = (0..8).map(|_| PooledMemo::new(&pool)).collect();
        for (k, m) in out.iter_mut().enumerate() {
            hold_9_mib(m, k);
        }
    }
    assert_eq!((pool.capacity(), pool.info().memos), (DEFAULT_CAPACITY, 5));
    assert!(pool.info().bytes <= DEFAULT_CAPACITY);
}

/// A chunk's key in the growth tests: distinct for each `k`, at most 15
/// bytes (the short map) or longer (the long one), and its ids.
fn chunk(k: usize) -> (Vec<u8>, Vec<Rank>) {
    let key = if k % 5 == 0 { format!("a longer chunk {k}") } else { format!("w{k}") };
    (key.into_bytes(), if k % 2 == 0 { vec![k as Rank] } else { vec![k as Rank, 7] })
}

/// Puts chunks 0..n in a fresh memo; before putting chunk k, looks up
/// chunk `back(k)` (if any) and checks its ids.
fn fill(n: usize, back: impl Fn(usize) -> Option<usize>) -> (Memo, Vec<u32>) {
    let mut m = Memo::default();
    let mut grown = vec![];
    for k in 0..n {
        if let Some(b) = back(k) {
            let (key, ids) = chunk(b);
            if let Some(found) = m.get(&key) {
                assert_eq!(found, &ids[..], "chunk {b} looked up before chunk {k}");
            }
        }
        let (key, ids) = chunk(k);
        m.insert(&key, &ids);
        grown.push(m.grown());
    }
    (m, grown)
}

/// A memo whose chunks from before the epoch keep being found doubles
/// its room at each fill, up to `MAX_GROWN` times, keeping every chunk
/// (with its ids); then it starts afresh.
#[test]
fn a_memo_grows_while_its_old_chunks_recur() {
    let epoch = Memo::EPOCH as usize;
    let most = Memo::MAX_CHUNKS << Memo::MAX_GROWN;
    // Chunk k looks up chunk k - epoch: one old chunk found per put.
    let (mut m, grown) = fill(most, |k| k.checked_sub(epoch));
    assert_eq!((m.len(), m.grown()), (most, Memo::MAX_GROWN));
    for k in [0, 1, 5, Memo::MAX_CHUNKS, most - 1] {
        let (key, ids) = chunk(k);
        assert_eq!(m.get(&key), Some(&ids[..]), "chunk {k}");
    }
    // It grew at each fill: 32k chunks (in use), 64k, 128k.
    for g in 0..Memo::MAX_GROWN {
        assert_eq!(grown[(Memo::MAX_CHUNKS << g) - 1], g);
        assert_eq!(grown[Memo::MAX_CHUNKS << g], g + 1);
    }
    let big = m.bytes();
    // One more: started afresh, its room kept (and never more).
    let (mut m, _) = fill(most + 1, |k| k.checked_sub(epoch));
    assert_eq!((m.len(), m.grown()), (1, 0));
    assert!(m.bytes() <= big, "{} > {big} bytes", m.bytes());
    let (key, ids) = chunk(most);
    assert_eq!(m.get(&key), Some(&ids[..]));
}

/// A memo whose old chunks are not found again (here: only the chunk
/// just put in is looked up, and chunks found fewer than `PAYS` times
/// an epoch) starts afresh at `MAX_CHUNKS`, as before growth existed.
#[test]
fn a_memo_whose_old_chunks_do_not_recur_starts_afresh() {
    let epoch = Memo::EPOCH as usize;
    let pays = Memo::PAYS as usize;
    let (m, grown) = fill(3 * Memo::MAX_CHUNKS + 1, |k| k.checked_sub(1));
    assert!(grown.iter().all(|&g| g == 0));
    assert_eq!(m.len(), 1);
    // Old chunks found, but one fewer than `PAYS` an epoch: still no
    // growth; each old chunk counts once however often it is found.
    let few = |k: usize| (k % epoch < pays - 1).then(|| k.checked_sub(epoch)).flatten();
    let (_, grown) = fill(3 * Memo::MAX_CHUNKS, few);
    assert!(grown.iter().all(|&g| g == 0));
    let (_, grown) = fill(3 * Memo::MAX_CHUNKS, |k| k.checked_sub(epoch).map(|b| b - b % 8));
    assert!(grown.iter().all(|&g| g == 0));
    // `PAYS` of them: it grows.
    let enough = |k: usize| (k % epoch < pays).then(|| k.checked_sub(epoch)).flatten();
    let (_, grown) = fill(Memo::MAX_CHUNKS + 1, enough);
    assert_eq!(grown[Memo::MAX_CHUNKS], 1);
}

/// Long chunks (16 bytes or more) share one buffer: each is found by its
/// whole bytes (not by a prefix or an extension of it, nor by bytes that
/// straddle two chunks in the buffer), none after the memo starts
/// afresh, and their bytes count in `bytes`.
#[test]
fn long_chunks_are_found_by_their_whole_bytes() {
    let base = b"0123456789abcdefghij".to_vec();
    let keys: Vec<Vec<u8>> = vec![
        base[..16].to_vec(),
        base.clone(),
        [&base[..], b"k"].concat(),
        base[4..].to_vec(),
        [&base[..16], &base[..16]].concat(),
    ];
    let mut m = Memo::default();
    for (i, k) in keys.iter().enumerate() {
        m.insert(k, &[i as Rank, 100]);
    }
    for (i, k) in keys.iter().enumerate() {
        assert_eq!(m.get(k), Some(&[i as Rank, 100][..]), "{:?}", String::from_utf8_lossy(k));
    }
    // In the buffer, keys[0] is followed by keys[1].
    for absent in [[&keys[0][..], &keys[1][..]].concat(), [&keys[0][1..], &keys[1][..1]].concat(), base[..17].to_vec()]
    {
        assert_eq!(m.get(&absent), None, "{:?}", String::from_utf8_lossy(&absent));
    }
    assert_eq!(m.len(), keys.len());
    assert!(m.bytes() >= keys.iter().map(Vec::len).sum::<usize>());
    m.start_afresh();
    assert!(keys.iter().all(|k| m.get(k).is_none()));
    m.insert(&keys[2], &[9]);
    assert_eq!(m.get(&keys[2]), Some(&[9][..]));
    assert_eq!(m.get(&keys[1]), None);
}

/// The ids limit starts a memo afresh even where it would grow.
#[test]
fn a_memo_full_of_ids_starts_afresh() {
    let mut m = Memo::default();
    let ids = vec![1; Memo::MAX_IDS / 4];
    for k in 0..4 {
        m.insert(format!("chunk {k}").as_bytes(), &ids);
    }
    m.insert(b"one more", &[5]);
    assert_eq!((m.len(), m.grown()), (1, 0));
    assert_eq!(m.get(b"one more"), Some(&[5][..]));
}
