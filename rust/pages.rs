//! Advice to the kernel about fresh buffers' pages: mapping them in one call
//! (`map_for_writing`), and huge pages for tables probed at random
//! (`advise_huge`).
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

#[cfg(test)]
mod tests {
    use super::*;

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
