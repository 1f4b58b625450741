//! Limits on input, and the errors given past them (docs/errors.md, "Limits").

use std::io::Read;
use std::path::Path;

/// The most bytes of a file held at once without a safe cut point (see
/// `split/pretokenize.rs`): a longer stretch (one word, number or white-space run
/// of 64 MiB, or a line that long under a custom pattern) is an error, not an
/// ever-growing buffer.
pub const MAX_UNCUT_BYTES: usize = 64 << 20;

/// The 1-based line of byte `offset` of the file at `path`, found by reading
/// the file again up to there. For error messages only; `None` for what
/// cannot be read again (stdin, a pipe: opening one again would wait or
/// take data).
pub fn line_of(path: &Path, offset: u64) -> Option<u64> {
    if !std::fs::metadata(path).ok()?.is_file() {
        return None;
    }
    let mut file = std::fs::File::open(path).ok()?;
    let mut buf = vec![0u8; 1 << 20];
    let mut left = offset;
    let mut lines = 1u64;
    while left > 0 {
        let want = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        let n = file.read(&mut buf[..want]).ok()?;
        if n == 0 {
            break;
        }
        lines += memchr::memchr_iter(b'\n', &buf[..n]).count() as u64;
        left -= n as u64;
    }
    Some(lines)
}

/// ", line N" for an error message, or nothing if the file cannot be re-read.
pub fn line_suffix(path: &Path, offset: u64) -> String {
    line_of(path, offset).map_or_else(String::new, |l| format!(" (line {l})"))
}

/// The error for a stretch of `len` bytes from `offset` with no safe cut point.
pub fn uncut_error(path: &Path, offset: u64, len: usize) -> String {
    format!(
        "{}: the {len} bytes from byte offset {offset}{} hold no point where the text can be cut \
         without changing its chunks (one word, number or white-space run, or under a custom \
         pattern one line, longer than {} MiB); bpe reads at most that much at once: break that \
         text into shorter lines",
        path.display(),
        line_suffix(path, offset),
        MAX_UNCUT_BYTES >> 20
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_numbers() {
        let dir = std::env::temp_dir().join(format!("bpe-limits-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("lines.txt");
        std::fs::write(&path, b"one\ntwo\nthree\n").unwrap();
        assert_eq!(line_of(&path, 0), Some(1));
        assert_eq!(line_of(&path, 4), Some(2));
        assert_eq!(line_of(&path, 9), Some(3));
        assert_eq!(line_of(&dir.join("missing"), 3), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
