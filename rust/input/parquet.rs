//! Parquet shards read in Rust (the `parquet` crate, without Arrow): one
//! column of strings, row group by row group, into the same `Batch`es as
//! JSON Lines records (`records.rs`), so the counting pipelines read both
//! alike, a file per thread, with no Python in the loop and no pyarrow
//! needed. Each row is one document.
//!
//! **Why not pyarrow:** through pyarrow every batch crossed into Python and
//! back (one reader thread, one Rust call per 64 MB batch whose counts were
//! then merged into the total on one core), and each fresh 64 MB batch
//! page-faulted in: training from Parquet took 1.5x the time of the same
//! text as a plain file, and ~500 MB of memory (docs/dev/performance.md,
//! "Reading records").
//!
//! The column is named as a JSON Lines field is: `text`, or `meta.body`
//! for a field of a struct column (a top-level column whose name holds a
//! dot is found too). It must hold strings (`BYTE_ARRAY` annotated UTF-8),
//! not repeated. A null row (or a null struct above it), or one whose bytes
//! are not UTF-8, is a bad record: an error naming the file and the row
//! (from 0, as pyarrow numbers them), or with `skip_bad` skipped and
//! counted. A file that the crate cannot read is one line naming it.

use std::fs::File;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use parquet::basic::{ConvertedType, LogicalType, Type as PhysicalType};
use parquet::column::reader::{get_typed_column_reader, ColumnReaderImpl};
use parquet::data_type::{ByteArray, ByteArrayType};
use parquet::file::reader::{FileReader, SerializedFileReader};

use super::name;
use super::records::Batch;

/// File names read as Parquet (as `bpe/sources.py` names them).
const SUFFIXES: [&str; 3] = [".parquet", ".pq", ".parq"];

/// Rows decoded at a time.
const ROWS: usize = 1024;

/// Whether `path` is read as Parquet: by its name, as `bpe/sources.py`
/// names formats (which sends other files it is told are Parquet to
/// pyarrow).
pub fn is_parquet(path: &Path) -> bool {
    path.to_str().map(str::to_lowercase).is_some_and(|p| SUFFIXES.iter().any(|s| p.ends_with(s)))
}

/// The rows of one column of a Parquet file, in batches.
pub struct ParquetRecords<'a> {
    path: &'a Path,
    file: SerializedFileReader<File>,
    /// The column's index among the leaves, and its definition level when
    /// the row has a value.
    column: usize,
    max_def: i16,
    /// The next row group to open, and the reader of the current one.
    group: usize,
    reader: Option<ColumnReaderImpl<ByteArrayType>>,
    /// The number of the next row, from 0.
    row: u64,
    skip_bad: bool,
    /// Rows skipped as bad (with `skip_bad`).
    pub skipped: u64,
    /// Bytes of the file not yet counted in `read` (progress): each row
    /// group's as it is opened, the rest (footer) at the end.
    unread: u64,
    read: &'a AtomicU64,
    defs: Vec<i16>,
    values: Vec<ByteArray>,
}

impl<'a> ParquetRecords<'a> {
    /// Opens `path` and finds the column `field` (`["text"]`, `["meta",
    /// "body"]`).
    pub fn open(path: &'a Path, field: &[String], skip_bad: bool, read: &'a AtomicU64) -> Result<Self, String> {
        let failed = |e: &dyn std::fmt::Display| cannot_read(path, e);
        let handle = File::open(path).map_err(|e| failed(&e))?;
        let size = handle.metadata().map_err(|e| failed(&e))?.len();
        let file = SerializedFileReader::new(handle).map_err(|e| failed(&e))?;
        let schema = file.metadata().file_metadata().schema_descr_ptr();
        let dotted = field.join(".");
        let column = (0..schema.num_columns())
            .find(|&i| {
                let parts = schema.column(i).path().parts().to_vec();
                parts == field || parts == [dotted.clone()]
            })
            .ok_or_else(|| {
                let names: Vec<String> = schema.columns().iter().map(|c| c.path().string()).collect();
                format!(
                    "{} has no column {dotted:?}; its columns: {} (name the text column with --text-field, \
                     text_field= in Python)",
                    name(path),
                    if names.is_empty() { "none".to_string() } else { names.join(", ") }
                )
            })?;
        let col = schema.column(column);
        let text = col.physical_type() == PhysicalType::BYTE_ARRAY
            && (matches!(col.logical_type_ref(), Some(LogicalType::String))
                || col.converted_type() == ConvertedType::UTF8);
        if !text || col.max_rep_level() > 0 {
            let what = if col.max_rep_level() > 0 { "a list".to_string() } else { describe_type(&col) };
            return Err(format!(
                "{}: column {dotted:?} holds {what}, not text (name the text column with --text-field)",
                name(path)
            ));
        }
        Ok(ParquetRecords {
            path,
            file,
            column,
            max_def: col.max_def_level(),
            group: 0,
            reader: None,
            row: 0,
            skip_bad,
            skipped: 0,
            unread: size,
            read,
            defs: Vec::new(),
            values: Vec::new(),
        })
    }

    /// The next batch of about `batch_bytes` of text (filling `buffer`,
    /// emptied first, as `Records::next_batch_in` does); `None` at the end.
    /// `Batch::lines` holds the rows' numbers.
    pub fn next_batch_in(&mut self, batch_bytes: usize, mut buffer: String) -> Result<Option<Batch>, String> {
        buffer.clear();
        let mut batch = Batch { file: 0, text: buffer, ends: Vec::new(), lines: Vec::new() };
        while batch.text.len() < batch_bytes {
            if self.reader.is_none() && !self.next_group()? {
                break;
            }
            let reader = self.reader.as_mut().expect("a row group is open");
            self.defs.clear();
            self.values.clear();
            let (rows, _, _) = reader
                .read_records(ROWS, Some(&mut self.defs), None, &mut self.values)
                .map_err(|e| cannot_read(self.path, &e))?;
            if rows == 0 {
                self.reader = None; // this row group is done
                continue;
            }
            let mut values = self.values.iter();
            for k in 0..rows {
                let row = self.row;
                self.row += 1;
                // Without a definition level (a required column) every row has a value.
                if self.max_def > 0 && self.defs[k] < self.max_def {
                    bad(self.path, row, "is null, not a text", self.skip_bad, &mut self.skipped)?;
                    continue;
                }
                let Some(value) = values.next() else {
                    return Err(cannot_read(self.path, &"fewer values than rows in a column chunk"));
                };
                let bytes = value.data();
                match super::utf8(bytes) {
                    Ok(text) => {
                        batch.text.push_str(text);
                        batch.ends.push(batch.text.len());
                        batch.lines.push(row);
                    }
                    Err(e) => {
                        let at = e.valid_up_to();
                        bad(
                            self.path,
                            row,
                            &format!("is not valid UTF-8 at byte {at}"),
                            self.skip_bad,
                            &mut self.skipped,
                        )?;
                    }
                }
            }
        }
        Ok((!batch.is_empty()).then_some(batch))
    }

    /// Opens the next row group's column; false when there is none left
    /// (the rest of the file then counts as read).
    fn next_group(&mut self) -> Result<bool, String> {
        if self.group == self.file.num_row_groups() {
            self.read.fetch_add(std::mem::take(&mut self.unread), Relaxed);
            return Ok(false);
        }
        let group = self.file.get_row_group(self.group).map_err(|e| cannot_read(self.path, &e))?;
        let bytes = group.metadata().compressed_size().max(0) as u64;
        let column = group.get_column_reader(self.column).map_err(|e| cannot_read(self.path, &e))?;
        self.reader = Some(get_typed_column_reader::<ByteArrayType>(column));
        self.group += 1;
        let bytes = bytes.min(self.unread);
        self.unread -= bytes;
        self.read.fetch_add(bytes, Relaxed);
        Ok(true)
    }
}

/// `records::read_batches` for one Parquet file (file number `k`): its
/// batches to `send`; returns the rows skipped.
#[allow(clippy::too_many_arguments)]
pub fn read_batches(
    path: &Path,
    k: usize,
    field: &[String],
    skip_bad: bool,
    batch_bytes: usize,
    read: &AtomicU64,
    buffer: &mut impl FnMut() -> String,
    send: &mut impl FnMut(Batch) -> Result<(), String>,
) -> Result<u64, String> {
    let mut rows = ParquetRecords::open(path, field, skip_bad, read)?;
    while let Some(mut batch) = rows.next_batch_in(batch_bytes, buffer())? {
        batch.file = k;
        send(batch)?;
    }
    Ok(rows.skipped)
}

/// The one-line error for a file the crate cannot read (its message's
/// first line).
fn cannot_read(path: &Path, e: &dyn std::fmt::Display) -> String {
    let message = e.to_string();
    let first = message.lines().next().unwrap_or("unreadable");
    format!("cannot read {} as Parquet: {first}", name(path))
}

/// Row `row` is bad for reason `why`: an error, or with `skip_bad` one more
/// skipped.
fn bad(path: &Path, row: u64, why: &str, skip_bad: bool, skipped: &mut u64) -> Result<(), String> {
    if !skip_bad {
        return Err(format!(
            "{}, row {row}: the record {why}; fix or drop that row, or pass --skip-bad (skip_bad=True) to \
             skip bad records and count them",
            name(path)
        ));
    }
    *skipped += 1;
    Ok(())
}

/// A column's type, for the message that it is not text.
fn describe_type(col: &parquet::schema::types::ColumnDescriptor) -> String {
    match (col.physical_type(), col.logical_type_ref()) {
        (PhysicalType::BYTE_ARRAY, None) if col.converted_type() == ConvertedType::NONE => "binary".to_string(),
        (_, Some(logical)) => format!("{logical:?}"),
        (physical, None) => format!("{physical}"),
    }
}
