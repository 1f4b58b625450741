//! Count tables (`.bpec`, see `train/table.rs`) for the trainer's bindings:
//! its counts written to a descriptor Python opened, a table read into
//! counts, tables merged. Each runs with the GIL released and checks for
//! Ctrl-C every 2^20 entries.

use std::path::Path;

use super::errors::check_interrupt;
use crate::train::{table, ChunkCounts, Spill};

/// Writes `counts` (and the runs `spill` holds) as a table into the open
/// descriptor `fd` (`name` for errors). Returns (entries, total).
pub(super) fn save(counts: &mut ChunkCounts, spill: &mut Spill, fd: i32, name: &str) -> Result<(u64, u64), String> {
    let file = borrowed(fd);
    let mut out = table::TableWriter::new(&*file, name, spill.pattern())?;
    let mut n = 0u64;
    spill.sorted(counts, 1, |chunk, count| {
        n += 1;
        if n % (1 << 20) == 0 {
            check_interrupt()?;
        }
        out.add(chunk, count)
    })?;
    let (entries, total, _) = out.finish()?;
    Ok((entries, total))
}

/// Adds the entries of the table at `path` counted `min_frequency` times or
/// more to `counts`.
pub(super) fn load(path: &Path, min_frequency: u64, counts: &mut ChunkCounts) -> Result<(), String> {
    let _free = crate::ReturnFreedMemory::new();
    let mut table = table::TableReader::open(path)?;
    let mut n = 0u64;
    while let Some((chunk, count)) = table.next_entry()? {
        if count >= min_frequency {
            counts.add(chunk, count);
        }
        n += 1;
        if n % (1 << 20) == 0 {
            check_interrupt()?;
        }
    }
    Ok(())
}

/// Merges the tables at `paths` (one pattern) into a table written into the
/// open descriptor `fd` (`name` for errors). Returns the pattern, and
/// (entries, total) written.
pub(super) fn merge_files(paths: &[std::path::PathBuf], fd: i32, name: &str) -> Result<(String, u64, u64), String> {
    let tables = table::open_all(paths)?;
    let pattern = tables.first().map(|t| t.pattern().to_string()).ok_or("no count tables to merge")?;
    let file = borrowed(fd);
    let mut out = table::TableWriter::new(&*file, name, &pattern)?;
    let mut n = 0u64;
    table::merge(
        tables,
        |chunk, count| {
            n += 1;
            if n % (1 << 20) == 0 {
                check_interrupt()?;
            }
            out.add(chunk, count)
        },
        1,
    )?;
    let (entries, total, _) = out.finish()?;
    Ok((pattern, entries, total))
}

/// The caller's open descriptor as a `File` that is never closed here.
fn borrowed(fd: i32) -> std::mem::ManuallyDrop<std::fs::File> {
    use std::os::fd::FromRawFd;
    // SAFETY: the caller (Python) keeps `fd` open for the whole call, and
    // the `File` is never dropped, so it never closes a descriptor it does
    // not own.
    std::mem::ManuallyDrop::new(unsafe { std::fs::File::from_raw_fd(fd) })
}
