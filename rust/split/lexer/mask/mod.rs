//! The mask lexer: chunk starts found 64 bytes at a time with bit algebra,
//! the exact lexers (`split/lexer/gpt.rs`) for whatever the algebra cannot decide.
//!
//! Why: the exact lexers decide each chunk with a few branches on its first
//! bytes and then scan its run (~79 instructions a chunk on English, whose
//! chunks average 4.4 bytes). Most chunks of English and code are short
//! ASCII runs, and for ASCII each pattern's cuts depend on the classes of a
//! byte and of one or two bytes before it (and, for white space, on where
//! its run ends): a few dozen operations on 64-bit masks find them for 64
//! bytes at once, and the lexer then pops one chunk per set bit
//! (`trailing_zeros`, clear the lowest bit), with no branch on the chunk's
//! kind.
//!
//! How (`Text::tile_masks`): at a chunk start, classify the next 64 bytes
//! into bitmasks (`classify.rs`: SSE2 or AVX2), derive the bytes where
//! chunks start and those the algebra cannot decide (`rules.rs`), and hand
//! out the chunks that end before the first undecided byte. The chunk that
//! starts last before it is then either the start of the next window (when
//! only the window's end stopped the algebra), or handed to the exact lexer,
//! which goes on chunk by chunk until it is past the undecided byte (a byte
//! of a character the masks do not know, white space before one, a
//! contraction or white-space run at the window's end, a chunk longer than
//! the window). Every window starts at a chunk start, so it needs nothing
//! from before it: no pattern looks behind. The last 63 bytes of the text
//! (and texts shorter than 64 bytes) take the exact lexer, so the algebra
//! never meets the end of the text (`\s++$`).
//!
//! A chunk that reaches the window's end from far before it (a run of white
//! space, a long word) is scanned to its end 16 bytes at a time instead
//! (white space, and GPT-2's and GPT-4's words: `long_white`,
//! `Window::letter_run`), or given to the exact lexer.
//!
//! The masks know ASCII, and the longer characters that English has most:
//! the letters of Latin-1 (`é`, `æ`) and the punctuation of U+2010..=U+203F
//! (`“ ” ’ — …`), see `classify::known_high`. Anything else is the exact
//! lexer's.
//!
//! Exactness: the exact lexer is the reference (and itself tested against
//! fancy-regex); the tests (`tests.rs`) compare the two on random
//! texts built to put every kind of run across window edges, on adversarial
//! texts and on the corpora (and `fuzzing::pretokenize` on whatever the
//! fuzzer finds), and every rule in `rules.rs` says why it is the
//! pattern's. Texts mostly of characters the masks do not know (most of
//! FLORES-200) find little to decide: after windows that end within a few
//! bytes, the exact lexer runs alone for a while (`SCALAR_STRETCH`), so such
//! text pays for a window only every few hundred bytes.
//!
//! Measurements: docs/dev/performance.md, "Lexing, mask lexer".

mod classify;
mod rules;
#[cfg(test)]
mod tests;

use super::Text;
use classify::{known_high, Classify};
#[cfg(target_arch = "x86_64")]
use classify::{Avx2, Sse2};

pub(crate) use rules::{Gpt2, Gpt4, Gpt4o, Qwen2, Rules};

/// Bytes per window.
const WINDOW: usize = 64;

/// What the mask lexer did on this thread (tests only): windows made, and
/// chunks handed out by the masks and by the exact lexer.
#[cfg(test)]
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Stats {
    pub windows: usize,
    pub mask_chunks: usize,
    pub exact_chunks: usize,
}

#[cfg(test)]
thread_local! {
    pub(crate) static STATS: std::cell::Cell<Stats> = const { std::cell::Cell::new(Stats { windows: 0, mask_chunks: 0, exact_chunks: 0 }) };
}

#[cfg(test)]
fn count(f: impl FnOnce(&mut Stats)) {
    STATS.with(|s| {
        let mut v = s.get();
        f(&mut v);
        s.set(v);
    });
}

/// How far the exact lexer goes alone after a window that ended (by an
/// undecided byte) within `SPARSE` bytes of its start, i.e. on text where
/// bytes >= 0x80 are close together: doubled after each such window in a
/// row (up to 16 times), reset by one that decides more.
const SCALAR_STRETCH: usize = 64;
const SPARSE: u32 = 16;

/// A window's last chunk that starts more than this many bytes before its
/// horizon goes to the exact lexer (see `tile_masks`).
const LONG: u32 = 24;

/// Which implementation lexes: the mask lexer with a given classifier, or
/// the exact lexer alone (for tests and measurements).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Engine {
    Exact,
    #[cfg(target_arch = "x86_64")]
    Sse2,
    #[cfg(target_arch = "x86_64")]
    Avx2,
    /// The portable byte-by-byte classifier (the tests' reference for the
    /// SIMD ones).
    #[cfg(test)]
    Bytewise,
}

impl Engine {
    /// The fastest this CPU has: AVX2, else SSE2 (x86_64), else the exact
    /// lexer alone. `BPE_LEXER=exact` or `=sse2` in the environment (read
    /// once) picks a slower one, to compare them in one build.
    #[inline]
    pub(crate) fn best() -> Engine {
        use std::sync::atomic::{AtomicU8, Ordering};
        static BEST: AtomicU8 = AtomicU8::new(0);
        let code = match BEST.load(Ordering::Relaxed) {
            0 => {
                let code = Self::detect();
                BEST.store(code, Ordering::Relaxed);
                code
            }
            code => code,
        };
        match code {
            #[cfg(target_arch = "x86_64")]
            2 => Engine::Sse2,
            #[cfg(target_arch = "x86_64")]
            3 => Engine::Avx2,
            _ => Engine::Exact,
        }
    }

    /// `best`'s engine, as 1 (exact), 2 (SSE2) or 3 (AVX2).
    #[cold]
    fn detect() -> u8 {
        let asked = std::env::var("BPE_LEXER").unwrap_or_default();
        if asked == "exact" || !cfg!(target_arch = "x86_64") {
            return 1;
        }
        #[cfg(target_arch = "x86_64")]
        // Each feature `window_avx2` is compiled for, asked for: a VM may
        // offer AVX2 and hide BMI, and an instruction the CPU lacks kills
        // the process.
        if asked != "sse2"
            && std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("bmi1")
            && std::arch::is_x86_feature_detected!("bmi2")
            && std::arch::is_x86_feature_detected!("lzcnt")
            && std::arch::is_x86_feature_detected!("popcnt")
        {
            return 3;
        }
        2
    }
}

/// A window's chunk starts and undecided bytes, with a classifier: the
/// classes (`classify.rs`), then the rules (`rules.rs`).
///
/// # Safety
/// The CPU must have what `C` uses.
#[inline(always)]
unsafe fn window<C: Classify, R: Rules>(w: &[u8; WINDOW]) -> (u64, u64) {
    // SAFETY: the CPU has what `C` uses (this function's contract).
    let mut m = unsafe { C::classify(w) };
    if m.high != 0 {
        // SAFETY: as above.
        known_high(&mut m, unsafe { C::high_bytes(w) });
    }
    R::starts(&m, w)
}

/// How the lexing loop gets a window's starts: inlined (SSE2, the plain
/// classifier), or by a call of a function compiled for AVX2.
///
/// Why a call: compiled for AVX2 as a whole, with the exact lexer and the
/// caller's closure inlined into it, the loop took ~38 more instructions
/// per chunk of the exact lexer (text of combining marks with GPT-4o: 12%
/// more), and had to clear the upper halves of the vector registers
/// (`vzeroupper`) before each call it makes. A call per window costs a few
/// instructions per ~60 bytes. (And not a `#[target_feature]` on `classify`
/// alone: LLVM did not inline it through the generic loop, see
/// `classify.rs`.)
trait Window {
    /// # Safety
    /// The CPU must have what the implementation uses.
    unsafe fn starts<R: Rules>(w: &[u8; WINDOW]) -> (u64, u64);

    /// The end of the run of ASCII white space from `from`, and the end of
    /// its last newline if it has one; None if the run reaches a byte >=
    /// 0x80 or the last `(b.len() - from) % 16` bytes (`classify::white_run`).
    ///
    /// # Safety
    /// As for `starts`.
    #[inline(always)]
    unsafe fn white_run(b: &[u8], from: usize) -> Option<(usize, Option<usize>)> {
        #[cfg(target_arch = "x86_64")]
        return classify::white_run_sse2(b, from);
        #[cfg(not(target_arch = "x86_64"))]
        return classify::white_run(b, from);
    }

    /// The end of the run of ASCII letters from `from` (`ascii::letters_end`,
    /// 16 bytes at a time).
    ///
    /// # Safety
    /// As for `starts`.
    #[inline(always)]
    unsafe fn letter_run(b: &[u8], from: usize) -> usize {
        #[cfg(target_arch = "x86_64")]
        return classify::letter_run_sse2(b, from);
        #[cfg(not(target_arch = "x86_64"))]
        return crate::split::ascii::letters_end(b, from);
    }
}

#[cfg(target_arch = "x86_64")]
impl Window for Sse2 {
    #[inline(always)]
    unsafe fn starts<R: Rules>(w: &[u8; WINDOW]) -> (u64, u64) {
        // SAFETY: SSE2 is part of x86_64.
        unsafe { window::<Sse2, R>(w) }
    }
}

#[cfg(target_arch = "x86_64")]
impl Window for Avx2 {
    #[inline(always)]
    unsafe fn starts<R: Rules>(w: &[u8; WINDOW]) -> (u64, u64) {
        // SAFETY: the caller's promise (`Window::starts`): the CPU has what
        // `Avx2` uses, which `Engine::best` checked before choosing it.
        unsafe { window_avx2::<R>(w) }
    }
}

/// `window` compiled for AVX2 (and BMI1/2: `trailing_zeros`, clearing the
/// lowest bit in one instruction each).
///
/// # Safety
/// The CPU must have AVX2, BMI1, BMI2, LZCNT and POPCNT (`Engine::best`
/// checks each).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,bmi1,bmi2,lzcnt,popcnt")]
unsafe fn window_avx2<R: Rules>(w: &[u8; WINDOW]) -> (u64, u64) {
    // SAFETY: the CPU has AVX2 and the rest (this function's contract), all
    // that `Avx2` uses.
    unsafe { window::<Avx2, R>(w) }
}

#[cfg(test)]
impl Window for classify::Bytewise {
    #[inline(always)]
    unsafe fn starts<R: Rules>(w: &[u8; WINDOW]) -> (u64, u64) {
        // SAFETY: `Bytewise` is plain Rust: any CPU has what it uses.
        unsafe { window::<classify::Bytewise, R>(w) }
    }

    unsafe fn white_run(b: &[u8], from: usize) -> Option<(usize, Option<usize>)> {
        classify::white_run(b, from)
    }

    unsafe fn letter_run(b: &[u8], from: usize) -> usize {
        crate::split::ascii::letters_end(b, from)
    }
}

impl<'a> Text<'a> {
    /// Calls `f` on each chunk, with `engine`; `next` gives the end of the
    /// chunk at `i` (the exact lexer), `R` the same pattern's mask rules.
    #[inline(always)]
    pub(super) fn tile_with<R: Rules>(
        &self,
        engine: Engine,
        f: impl FnMut(&'a str),
        next: impl Fn(&Self, usize) -> usize,
    ) {
        match engine {
            Engine::Exact => self.tile(f, next),
            // SAFETY: SSE2 is part of x86_64.
            #[cfg(target_arch = "x86_64")]
            Engine::Sse2 => unsafe { self.tile_masks::<Sse2, R>(f, next) },
            // SAFETY: `Engine::best` picks AVX2 only where the CPU has it
            // (and the tests only where `best` did).
            #[cfg(target_arch = "x86_64")]
            Engine::Avx2 => unsafe { self.tile_masks::<Avx2, R>(f, next) },
            // SAFETY: plain Rust.
            #[cfg(test)]
            Engine::Bytewise => unsafe { self.tile_masks::<classify::Bytewise, R>(f, next) },
        }
    }

    /// The mask lexer (see the module's comment).
    ///
    /// Each turn: the exact lexer up to `exact_to` (`exact_until`, a loop
    /// of its own), then a window, whose decided chunks are handed out here
    /// and which says how far the exact lexer must go next. (With both in
    /// one loop and one call of `f`, the exact lexer's chunks took ~25 more
    /// instructions each: 15% more on text of combining marks, where the
    /// exact lexer takes nearly every chunk.)
    ///
    /// # Safety
    /// The CPU must have what `C` uses.
    #[inline(always)]
    unsafe fn tile_masks<C: Window, R: Rules>(&self, mut f: impl FnMut(&'a str), next: impl Fn(&Self, usize) -> usize) {
        let n = self.b.len();
        // The next chunk starts here.
        let mut start = 0;
        // The exact lexer goes on until a chunk starts here or later (<= n).
        let mut exact_to = 0;
        // Windows in a row that ended early (see `SCALAR_STRETCH`).
        let mut sparse_windows = 0;
        loop {
            if start < exact_to {
                let last;
                (start, last) = self.exact_until(start, exact_to, &mut f, &next);
                if start - last >= WINDOW && start < n {
                    // After a chunk this long (a run of white space,
                    // punctuation or letters), the exact lexer goes on a
                    // while: often the next window would find nothing
                    // either ("1000 spaces, x" again and again: ~10% faster).
                    exact_to = (start + WINDOW).min(n);
                    continue;
                }
            }
            if n - start < WINDOW {
                // The text's last bytes, or its end.
                if start == n {
                    return;
                }
                exact_to = n;
                continue;
            }
            // SAFETY: `start + 64 <= n`: 64 bytes of the text.
            let w = unsafe { &*(self.b.as_ptr().add(start) as *const [u8; WINDOW]) };
            // SAFETY: the CPU has what `C` uses (this function's contract).
            let (starts, undecided) = unsafe { C::starts::<R>(w) };
            #[cfg(test)]
            count(|s| s.windows += 1);
            // Bit 63 is always undecided: u <= 63.
            let u = undecided.trailing_zeros();
            // Chunk ends: the decided starts after byte 0.
            let mut found = starts & ((1u64 << u) - 1) & !1;
            // Where the last chunk found starts (0 if none was).
            let last = 63 - (found | 1).leading_zeros();
            if u < 63 {
                // The exact lexer takes over at `last`, and goes on until it
                // is past the undecided byte; further on text where such
                // bytes are close together.
                exact_to = start + u as usize + 1;
                if u < SPARSE {
                    sparse_windows = (sparse_windows + 1).min(4);
                    exact_to = (exact_to + (SCALAR_STRETCH << sparse_windows)).min(n);
                } else {
                    sparse_windows = 0;
                }
            } else {
                sparse_windows = 0;
            }
            // A chunk that starts this far from the horizon and reaches it is
            // long (white space, a long word): rather than a window that
            // would find nothing, a run of white space is scanned to its end
            // (`long_white`), and so is a word of GPT-2 or GPT-4; anything
            // else is the exact lexer's. (Long runs took the exact lexer's
            // 8-byte scans, and how fast those came out depended on where the
            // linker put their loops: one 10 MB word 12% slower than before
            // in one build, 10% faster in another.)
            let long = u == 63 && last < 63 - LONG;
            let base = start;
            while found != 0 {
                let end = base + found.trailing_zeros() as usize;
                #[cfg(test)]
                count(|s| s.mask_chunks += 1);
                debug_assert!(start < end && end <= n && self.s.is_char_boundary(end));
                // SAFETY: `start` is a char boundary (as above) and `end`,
                // after it in the window, too: every byte of the window
                // before `u` is ASCII or in a character that `known_high`
                // knows, whole, and the rules put starts only at the first
                // byte of a character (a letter's second byte follows a
                // letter byte, a punctuation character's second and third
                // a punctuation byte).
                f(unsafe { self.s.get_unchecked(start..end) });
                start = end;
                found &= found - 1;
            }
            if long {
                match self.b[start] {
                    // SAFETY: the CPU has what `C` uses (this function's contract).
                    b'\t'..=b'\r' | b' ' => match unsafe { self.long_white::<C, R>(start, &mut f) } {
                        Some(next) => start = next,
                        None => exact_to = start + 1,
                    },
                    b'a'..=b'z' | b'A'..=b'Z' if R::LETTER_RUNS => {
                        // GPT-2's and GPT-4's chunk at a letter is `\p{L}++`:
                        // its ASCII letters 16 bytes at a time, the rest as
                        // the exact lexer goes on (`Text::letters`).
                        // SAFETY: the CPU has what `C` uses (this function's contract).
                        let end = self.ascii_then(unsafe { C::letter_run(self.b, start) }, super::L);
                        #[cfg(test)]
                        count(|s| s.mask_chunks += 1);
                        debug_assert!(start < end && end <= n && self.s.is_char_boundary(end));
                        // SAFETY: `start` is a char boundary, and so is the
                        // end of a letter run, as the exact lexer finds it.
                        f(unsafe { self.s.get_unchecked(start..end) });
                        start = end;
                    }
                    _ => exact_to = start + 1,
                }
            }
        }
    }

    /// A run of white space from `a` (a chunk start) that goes on past a
    /// window: its end and last newline found 16 bytes at a time
    /// (`Window::white_run`), its chunks handed to `f` by the pattern's
    /// rules for white space; returns where the next chunk starts. None
    /// (for the exact lexer) if the run is a single character (then it is a
    /// prefix, or `\s` alone), or ends at a byte >= 0x80 (which may go on
    /// with it: U+00A0, U+3000...) or near the end of the text (`\s++$`).
    ///
    /// Why: long runs of spaces, such as padding, took the exact lexer's
    /// 8-byte scan, and a window at each run that found nothing; whether
    /// that came out faster than before depended on where the linker put
    /// that scan's loop ("1000 spaces, x" again and again: 3-11% slower,
    /// in the exact lexer alone as much).
    ///
    /// The rules, for a run `[a, b)` that does not end the text, with `r`
    /// the end of its last newline (GPT-4, GPT-4o; `a` if none, and always
    /// for GPT-2): `[a, r)` is one chunk (`\s*[\r\n]`, `\s*[\r\n]+`: the
    /// greedy `\s*` backs off to the last newline); then `\s+(?!\S)` leaves
    /// the last character for the next chunk: `[r, b - 1)` is a chunk if not
    /// empty, and the next one starts at `b - 1` (or at `b` if `r == b`).
    ///
    /// # Safety
    /// The CPU must have what `C` uses.
    #[inline(never)]
    unsafe fn long_white<C: Window, R: Rules>(&self, a: usize, f: &mut impl FnMut(&'a str)) -> Option<usize> {
        // SAFETY: the CPU has what `C` uses (this function's contract).
        let (b, newline) = unsafe { C::white_run(self.b, a) }?;
        if b - a < 2 {
            return None;
        }
        let r = if R::NEWLINE_CUT { newline.unwrap_or(a) } else { a };
        let mut emit = |from: usize, to: usize| {
            #[cfg(test)]
            count(|s| s.mask_chunks += 1);
            debug_assert!(from < to && to <= self.b.len() && self.s.is_char_boundary(to));
            // SAFETY: `a` is a char boundary, and the run's bytes are ASCII.
            f(unsafe { self.s.get_unchecked(from..to) })
        };
        if r > a {
            emit(a, r);
        }
        if b - r >= 2 {
            emit(r, b - 1);
            return Some(b - 1);
        }
        Some(r)
    }

    /// The exact lexer from `start` (a chunk start) until a chunk starts at
    /// `stop` or later; returns where, and where the last chunk started. A
    /// function of its own, not inlined: the loop of `Text::tile`, compiled
    /// much as there. (Inlined into the mask lexer's loop, with that loop's
    /// variables live around it, it took 8 more instructions per chunk: 3-4%
    /// slower on text of combining marks, which the exact lexer takes nearly
    /// all of.)
    #[inline(never)]
    fn exact_until(
        &self,
        mut start: usize,
        stop: usize,
        f: &mut impl FnMut(&'a str),
        next: &impl Fn(&Self, usize) -> usize,
    ) -> (usize, usize) {
        let mut last = start;
        while start < stop {
            let end = next(self, start);
            #[cfg(test)]
            count(|s| s.exact_chunks += 1);
            debug_assert!(start < end && end <= self.b.len() && self.s.is_char_boundary(end));
            // SAFETY: the exact lexer's ends are char boundaries after
            // `start`, in the text (see `Text::tile`); so is `start`, 0 or
            // the last end (of either lexer).
            f(unsafe { self.s.get_unchecked(start..end) });
            last = start;
            start = end;
        }
        (start, last)
    }
}
