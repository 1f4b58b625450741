//! Advice to the kernel about fresh buffers' pages: mapping them in one call
//! (`map_for_writing`), and huge pages for tables probed at random
//! (`advise_huge`); long runs of ids appended with streaming stores
//! (`append_streaming`); and a line prefetched for a look-up to come
//! (`prefetch`).
//!
//! The ids of a long text are written once, from start to end, into a
//! buffer that is fresh memory in a call that finds no freed memory to
//! reuse, the first of a process above all: the kernel maps each 4 KiB page
//! at its first write, a fault each (~2,500 for the ids of 10 MB of
//! English). `madvise(MADV_POPULATE_WRITE)` maps a whole range in one call,
//! without a trap per page (Linux 5.14 and later; elsewhere, or where the
//! kernel refuses, the pages fault one by one as before). A cold
//! `encode_to_numpy` of 10 MB of English took ~9% less time; the `str`'s
//! UTF-8 buffer mapped so as well gained nothing more. Measured:
//! docs/dev/performance.md, "Faulting in".

/// Buffers shorter than this fault page by page (a few pages cost less than
/// the call).
const MIN_BYTES: usize = 1 << 20;

/// Maps the pages that lie wholly within the `len` bytes at `ptr`, which
/// must be memory this process allocated for writing (a `Vec`'s spare
/// capacity, say). Their contents do not change: the pages are mapped as
/// writing them would map them, and nothing is written.
#[inline]
pub fn map_for_writing(ptr: *mut u8, len: usize) {
    #[cfg(target_os = "linux")]
    if len >= MIN_BYTES {
        // (A kernel with larger pages refuses a start not aligned to them:
        // EINVAL, and nothing happens.)
        const PAGE: usize = 4096;
        let start = (ptr as usize).saturating_add(PAGE - 1) & !(PAGE - 1);
        let end = (ptr as usize).saturating_add(len) & !(PAGE - 1);
        if end > start {
            // SAFETY: advice about pages inside an allocation of ours that
            // no one reads or writes meanwhile (the caller's promise);
            // POPULATE_WRITE maps them as a write fault would and keeps
            // their contents. Errors (an old kernel) are harmless: ignored.
            unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_POPULATE_WRITE) };
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (ptr, len);
}

/// Asks for transparent huge pages (2 MiB) for the whole huge pages that
/// lie within the `len` bytes at `ptr`, a fresh allocation of ours not yet
/// read: a table probed at random with 4 KiB pages misses the TLB on nearly
/// every probe. Advice only: the contents do not change, and a kernel
/// without THP (or one that refuses) leaves the pages as they are.
#[inline]
pub fn advise_huge(ptr: *mut u8, len: usize) {
    #[cfg(target_os = "linux")]
    {
        const HUGE: usize = 2 << 20;
        let start = (ptr as usize).saturating_add(HUGE - 1) & !(HUGE - 1);
        let end = (ptr as usize).saturating_add(len) & !(HUGE - 1);
        if end > start {
            // SAFETY: advice about whole pages inside an allocation of ours;
            // MADV_HUGEPAGE changes no contents. Errors are harmless: ignored.
            unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE) };
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (ptr, len);
}

/// Appends `ids` to `out`. Long runs (`MIN_STREAM` bytes and more) are
/// copied with non-temporal stores where the CPU has them (x86-64): the
/// destination's cache lines are written whole, not read first, and the
/// copy does not push the encoder's tables out of the cache. `encode_files`
/// hands every piece's ids to its output so (docs/dev/performance.md,
/// "The output copied with streaming stores").
pub fn append_streaming(out: &mut Vec<u32>, ids: &[u32]) {
    #[cfg(target_arch = "x86_64")]
    if std::mem::size_of_val(ids) >= MIN_STREAM {
        out.reserve(ids.len());
        let len = out.len();
        // SAFETY: `out` has room for `ids.len()` more after `len` (reserved
        // above); `stream_copy` writes exactly those, then they are counted.
        unsafe {
            stream_copy(ids, out.as_mut_ptr().add(len));
            out.set_len(len + ids.len());
        }
        return;
    }
    out.extend_from_slice(ids);
}

/// Copies shorter than this take the ordinary copy (the fence and the
/// alignment are not worth it for a few pages).
const MIN_STREAM: usize = 1 << 16;

/// Copies `src` to `dst` (room for `src.len()` values, not overlapping it):
/// 4-byte values up to a 16-byte boundary of `dst`, then 16 bytes at a time
/// with `movntdq` (SSE2, on every x86-64), then the rest, then a fence so
/// that the stores are visible before anything after it.
///
/// # Safety
/// `dst` must be valid for writing `src.len()` values that do not overlap
/// `src`.
#[cfg(target_arch = "x86_64")]
unsafe fn stream_copy(src: &[u32], dst: *mut u32) {
    use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_sfence, _mm_stream_si128};
    let n = src.len();
    let head = ((16 - (dst as usize & 15)) & 15) / 4;
    let head = head.min(n);
    // SAFETY: every index written is below `n` (the caller's room); `dst + head`
    // is 16-byte aligned for the streaming stores (4-byte values, so `dst` is
    // 4-byte aligned and the head is whole values).
    unsafe {
        std::ptr::copy_nonoverlapping(src.as_ptr(), dst, head);
        let mut i = head;
        while i + 4 <= n {
            let v = _mm_loadu_si128(src.as_ptr().add(i) as *const __m128i);
            _mm_stream_si128(dst.add(i) as *mut __m128i, v);
            i += 4;
        }
        std::ptr::copy_nonoverlapping(src.as_ptr().add(i), dst.add(i), n - i);
        _mm_sfence();
    }
}

/// Asks the CPU to bring `x` into cache (a hint; a no-op off x86-64): for a
/// look-up a little later (training's merges, the encoder's seen table).
#[inline(always)]
pub fn prefetch<T>(x: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch never faults and `x` is a valid reference.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(x as *const T as *const i8)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = x;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The streaming append gives what `extend_from_slice` gives, for runs
    /// below and above `MIN_STREAM`, whatever the destination's alignment
    /// (the head before a 16-byte boundary, the tail after the last 16
    /// bytes), into a vector with room and one that must grow.
    #[test]
    fn streaming_append_is_extend() {
        let n = MIN_STREAM / 4;
        for len in [0, 1, 3, 5, n - 1, n, n + 1, n + 2, n + 3, 3 * n + 7] {
            for before in 0..5 {
                let ids: Vec<u32> = (0..len as u32).map(|i| i.wrapping_mul(2_654_435_761)).collect();
                for room in [0, len + before] {
                    let mut want: Vec<u32> = (0..before as u32).collect();
                    want.extend_from_slice(&ids);
                    let mut got: Vec<u32> = Vec::with_capacity(room);
                    got.extend(0..before as u32);
                    append_streaming(&mut got, &ids);
                    assert_eq!(got, want, "{len} ids after {before}, room {room}");
                }
            }
        }
    }

    /// Mapping keeps what the buffer holds, whatever its alignment and
    /// length, and the buffer stays writable.
    #[test]
    fn mapping_keeps_contents() {
        for (len, offset) in [(MIN_BYTES, 0), (3 * MIN_BYTES + 123, 7), (MIN_BYTES - 1, 1), (10, 3)] {
            let mut v: Vec<u8> = (0..len + offset).map(|i| (i * 31 % 251) as u8).collect();
            map_for_writing(v[offset..].as_mut_ptr(), len);
            assert!(v.iter().enumerate().all(|(i, &b)| b == (i * 31 % 251) as u8), "{len} {offset}");
            v.iter_mut().for_each(|b| *b = 1);
            assert!(v.iter().all(|&b| b == 1));
        }
        let mut fresh: Vec<u32> = Vec::with_capacity(MIN_BYTES);
        map_for_writing(fresh.as_mut_ptr() as *mut u8, MIN_BYTES * 4);
        fresh.extend((0..MIN_BYTES as u32).rev());
        assert_eq!(fresh[0] as usize, MIN_BYTES - 1);
    }

    /// The pages of fresh memory are mapped (resident) after the call, and
    /// not before: memory straight from `mmap`, asked with `mincore`.
    #[cfg(target_os = "linux")]
    #[test]
    fn fresh_pages_are_mapped() {
        let len = 4 * MIN_BYTES;
        let resident = |p: *mut libc::c_void| {
            let mut vec = vec![0u8; len / 4096];
            // SAFETY: `p` is a mapping of `len` bytes; `vec` has a byte per page.
            assert_eq!(unsafe { libc::mincore(p, len, vec.as_mut_ptr()) }, 0);
            vec.iter().filter(|&&b| b & 1 != 0).count()
        };
        // SAFETY: a private anonymous mapping of our own, unmapped below.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED);
        assert_eq!(resident(p), 0);
        map_for_writing(p as *mut u8, len);
        let after = resident(p);
        // SAFETY: the mapping made above.
        unsafe { libc::munmap(p, len) };
        if after != len / 4096 {
            // Only a kernel that refuses the advice (before 5.14) may leave
            // them: asked directly on a page of its own.
            // SAFETY: as above, one page.
            let page = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    4096,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                )
            };
            // SAFETY: advice about the page just mapped, which nothing else uses.
            let refused = unsafe { libc::madvise(page, 4096, libc::MADV_POPULATE_WRITE) } != 0;
            // SAFETY: the page mapped above, no longer used.
            unsafe { libc::munmap(page, 4096) };
            assert!(refused, "{after} of {} pages mapped, though the kernel takes the advice", len / 4096);
            eprintln!("this kernel refuses MADV_POPULATE_WRITE: pages fault one by one");
        }
    }

    /// Huge-page advice keeps what a buffer holds, whatever its alignment
    /// and length (less than one huge page, several, an odd start).
    #[test]
    fn huge_page_advice_keeps_contents() {
        for (len, offset) in [(5 << 20, 0), ((4 << 20) + 123, 7), (1 << 20, 3), (0, 0)] {
            let mut v: Vec<u8> = (0..len + offset).map(|i| (i * 29 % 253) as u8).collect();
            advise_huge(v[offset..].as_mut_ptr(), len);
            assert!(v.iter().enumerate().all(|(i, &b)| b == (i * 29 % 253) as u8), "{len} {offset}");
        }
    }
}
