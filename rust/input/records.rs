//! JSON Lines: one JSON object per line, one document per object, its text
//! in a field (`"text"` by default; `a.b` for a nested one). The shards of
//! FineWeb, The Stack, RedPajama and Dolma are such files, usually
//! compressed (`open` in `mod.rs` decompresses).
//!
//! Only the text field is decoded: the other fields (URLs, metadata, often
//! half of a record) are skipped without being built, and the text is
//! appended straight into the batch being filled: by a fast path of our own
//! (`json_fast.rs`) for nearly every record, else by serde_json
//! (`json_serde.rs`).
//!
//! A record that has no such field, whose field is not a string, or that is
//! not JSON, is a bad record: by default an error naming the file, the line
//! and its byte offset (in the decompressed data); with `skip_bad` it is
//! skipped and counted. Bytes that are not UTF-8 are refused the same way
//! (JSON text is UTF-8).

use std::io::{BufRead, Read};
use std::path::Path;

use super::{json_fast, json_serde, name};

/// Records read at once: about this many bytes of text.
pub const BATCH_BYTES: usize = 8 << 20;

/// The longest line (one record) held: a longer one is a bad record, so
/// that memory stays bounded whatever the file holds (docs/errors.md, "Limits").
pub const MAX_RECORD_BYTES: usize = 256 << 20;

/// A batch of documents: their texts one after another in `text`, document
/// k being `text[ends[k-1]..ends[k]]`, from line `lines[k]` of file `file`.
#[derive(Debug, Default)]
pub struct Batch {
    pub file: usize,
    pub text: String,
    pub ends: Vec<usize>,
    pub lines: Vec<u64>,
}

impl Batch {
    pub fn docs(&self) -> impl Iterator<Item = &str> {
        let mut start = 0;
        self.ends.iter().map(move |&end| {
            let doc = &self.text[start..end];
            start = end;
            doc
        })
    }

    pub fn len(&self) -> usize {
        self.ends.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }
}

/// Reads the records of one JSON Lines stream in batches.
pub struct Records<'a, R: BufRead> {
    input: R,
    path: &'a Path,
    /// The field's path: `["text"]`, or `["a", "b"]` for `a.b`.
    field: &'a [String],
    skip_bad: bool,
    /// Lines read so far, and the byte offset of the next one.
    line: u64,
    offset: u64,
    /// Records skipped as bad (with `skip_bad`).
    pub skipped: u64,
    line_buf: Vec<u8>,
    done: bool,
    /// `MAX_RECORD_BYTES` (tests make it small).
    max_record: usize,
}

impl<'a, R: BufRead> Records<'a, R> {
    pub fn new(input: R, path: &'a Path, field: &'a [String], skip_bad: bool) -> Self {
        Records {
            input,
            path,
            field,
            skip_bad,
            line: 0,
            offset: 0,
            skipped: 0,
            line_buf: Vec::new(),
            done: false,
            max_record: MAX_RECORD_BYTES,
        }
    }

    /// Bytes of input read so far.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The next batch of about `batch_bytes` of text; `None` at the end.
    pub fn next_batch(&mut self, batch_bytes: usize) -> Result<Option<Batch>, String> {
        self.next_batch_in(batch_bytes, String::new())
    }

    /// `next_batch`, filling `buffer` (emptied first) when it is large
    /// enough: a buffer given back by the batch's consumer has its pages
    /// already, where a fresh one page-faults each of them again (a quarter
    /// of a million faults per GB of records, measured).
    pub fn next_batch_in(&mut self, batch_bytes: usize, mut buffer: String) -> Result<Option<Batch>, String> {
        if self.done {
            return Ok(None);
        }
        // Room for the whole batch at once: growing it by doubling copied
        // and page-faulted it again at each step.
        let room = batch_bytes + (64 << 10);
        buffer.clear();
        if buffer.capacity() < room {
            buffer = String::with_capacity(room);
        }
        let mut batch = Batch { text: buffer, ..Batch::default() };
        while batch.text.len() < batch_bytes {
            // A line wholly in the reader's buffer (nearly all of them) is
            // read where it lies, not copied into `line_buf` first.
            let buf = match self.input.fill_buf() {
                Ok(buf) => buf,
                Err(_) if self.skip_bad => {
                    self.skipped += 1;
                    self.done = true;
                    break;
                }
                Err(e) => return Err(self.cannot_read(&e)),
            };
            if let Some(k) = memchr::memchr(b'\n', buf).filter(|&k| k < self.max_record) {
                self.line += 1;
                let at = self.offset;
                self.offset += k as u64 + 1;
                let added = add_record(&buf[..k], self.field, self.line, &mut batch);
                self.input.consume(k + 1);
                if let Err(why) = added {
                    self.bad_record(at, why)?;
                }
                continue;
            }
            self.line_buf.clear();
            // At most one byte past the cap is read: enough to know the line is too long.
            let read = (&mut self.input).take(self.max_record as u64 + 1).read_until(b'\n', &mut self.line_buf);
            let n = match read {
                Ok(n) => n,
                // A damaged or truncated compressed stream: what came before
                // it stands; with `skip_bad` the rest of the file counts as
                // one bad record.
                Err(_) if self.skip_bad => {
                    self.skipped += 1;
                    self.done = true;
                    break;
                }
                Err(e) => return Err(self.cannot_read(&e)),
            };
            if n == 0 {
                self.done = true;
                break;
            }
            self.line += 1;
            let at = self.offset;
            self.offset += n as u64;
            if n > self.max_record && self.line_buf.last() != Some(&b'\n') {
                // Read past the rest of the line a buffer at a time, holding none of it.
                let rest = skip_line(&mut self.input).map_err(|e| format!("cannot read {}: {e}", name(self.path)))?;
                self.offset += rest;
                if !self.skip_bad {
                    return Err(format!(
                        "{}: line {} (byte offset {at}) is longer than {} bytes, the most one record may hold; \
                         pass --skip-bad (skip_bad=True) to skip such records",
                        name(self.path),
                        self.line,
                        self.max_record
                    ));
                }
                self.skipped += 1;
                continue;
            }
            if let Err(why) = add_record(&self.line_buf, self.field, self.line, &mut batch) {
                self.bad_record(at, why)?;
            }
        }
        Ok(if batch.is_empty() && self.done { None } else { Some(batch) })
    }

    fn cannot_read(&self, e: &std::io::Error) -> String {
        format!(
            "cannot read {} after line {} (byte offset {} of its data): {e}; pass --skip-bad \
             (skip_bad=True) to keep the records before it",
            name(self.path),
            self.line,
            self.offset
        )
    }

    /// The record of the current line, at byte offset `at`, is bad for
    /// reason `why`: an error, or with `skip_bad` one more skipped.
    fn bad_record(&mut self, at: u64, why: String) -> Result<(), String> {
        if !self.skip_bad {
            return Err(format!(
                "{}: line {} (byte offset {at}): {why}; fix the record, or pass --skip-bad \
                 (skip_bad=True) to skip bad records and count them",
                name(self.path),
                self.line
            ));
        }
        self.skipped += 1;
        Ok(())
    }
}

/// Reads the records of `paths` (JSON Lines, compressed or not, `-` is
/// stdin; or Parquet, `parquet.rs`) in batches of about `batch_bytes` and hands them to `send` in
/// order, each filling a buffer from `buffer` (a spare one given back, or
/// an empty one). `read` counts the bytes read from the files (compressed
/// ones as stored), for progress. Returns the number of bad records skipped
/// in each file (with `skip_bad`); stops at the first error, the reader's or
/// `send`'s. The one loop over record files: encoding (`for_each_batch`)
/// and counting (`train::count_records_into`) both read through it.
pub fn read_batches(
    paths: &[std::path::PathBuf],
    field: &[String],
    skip_bad: bool,
    batch_bytes: usize,
    read: &std::sync::atomic::AtomicU64,
    mut buffer: impl FnMut() -> String,
    mut send: impl FnMut(Batch) -> Result<(), String>,
) -> Result<Vec<u64>, String> {
    let mut skipped = vec![0; paths.len()];
    for (k, path) in paths.iter().enumerate() {
        if super::parquet::is_parquet(path) {
            skipped[k] =
                super::parquet::read_batches(path, k, field, skip_bad, batch_bytes, read, &mut buffer, &mut send)?;
            continue;
        }
        let input = std::io::BufReader::with_capacity(1 << 20, super::open_counted(path, read)?);
        let mut records = Records::new(input, path, field, skip_bad);
        while let Some(mut batch) = records.next_batch_in(batch_bytes, buffer())? {
            batch.file = k;
            send(batch)?;
        }
        skipped[k] = records.skipped;
    }
    Ok(skipped)
}

/// `read_batches` on a thread of its own while `each` works on the batch
/// before (a queue of two), so reading and decompressing overlap the work.
pub fn for_each_batch(
    paths: &[std::path::PathBuf],
    field: &[String],
    skip_bad: bool,
    batch_bytes: usize,
    read: &std::sync::atomic::AtomicU64,
    mut each: impl FnMut(Batch) -> Result<(), String>,
) -> Result<Vec<u64>, String> {
    let (send, batches) = std::sync::mpsc::sync_channel::<Result<Batch, String>>(2);
    std::thread::scope(|scope| {
        let reader = scope.spawn(move || -> Result<Vec<u64>, ()> {
            let sent = read_batches(paths, field, skip_bad, batch_bytes, read, String::new, |batch| {
                // Fails only when `each` failed and the receiver is gone: stop reading.
                send.send(Ok(batch)).map_err(|_| String::new())
            });
            sent.map_err(|e| {
                let _ = send.send(Err(e));
            })
        });
        let mut outcome = Ok(());
        for batch in batches.iter() {
            outcome = batch.and_then(&mut each);
            if outcome.is_err() {
                break;
            }
        }
        drop(batches); // the reader's next send fails: it stops
        let skipped = reader.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        // An error of the reader was sent to `each`'s loop, which returns it.
        outcome.map(|()| skipped.unwrap_or_default())
    })
}

/// Reads up to and including the next newline, keeping nothing; the bytes read.
fn skip_line(input: &mut impl BufRead) -> std::io::Result<u64> {
    let mut skipped = 0;
    loop {
        let buf = input.fill_buf()?;
        if buf.is_empty() {
            return Ok(skipped);
        }
        let (n, found) = match memchr::memchr(b'\n', buf) {
            Some(k) => (k + 1, true),
            None => (buf.len(), false),
        };
        input.consume(n);
        skipped += n as u64;
        if found {
            return Ok(skipped);
        }
    }
}

/// Adds the record of `line` (line number `line_no`, with or without its
/// line end) to `batch`; a blank line holds none. On a bad record, says
/// why and leaves `batch` as it was.
fn add_record(line: &[u8], field: &[String], line_no: u64, batch: &mut Batch) -> Result<(), String> {
    let line = trim_line_end(line);
    if line.iter().all(u8::is_ascii_whitespace) {
        return Ok(()); // blank lines (a trailing one above all) hold no record
    }
    let before = batch.text.len();
    match field_text(line, field, &mut batch.text) {
        Ok(()) => {
            batch.ends.push(batch.text.len());
            batch.lines.push(line_no);
            Ok(())
        }
        Err(why) => {
            batch.text.truncate(before);
            Err(why)
        }
    }
}

fn trim_line_end(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// Appends the text of `field` of the JSON object `line` to `out`, or says
/// what is wrong with the record.
///
/// The fast path (`json_fast.rs`) reads nearly every record; serde_json
/// (`json_serde.rs`) decides whatever it gives up on, and says what is
/// wrong with a bad one.
fn field_text(line: &[u8], field: &[String], out: &mut String) -> Result<(), String> {
    let text = super::utf8(line).map_err(|e| format!("not valid UTF-8 at byte {} of the line", e.valid_up_to()))?;
    if json_fast::field_text(text, field, out) {
        return Ok(());
    }
    json_serde::field_text(text, field, out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(jsonl: &str, field: &str, skip_bad: bool, batch: usize) -> Result<(Vec<String>, u64), String> {
        let field: Vec<String> = field.split('.').map(String::from).collect();
        let path = Path::new("x.jsonl");
        let mut r = Records::new(jsonl.as_bytes(), path, &field, skip_bad);
        let mut docs = vec![];
        while let Some(b) = r.next_batch(batch)? {
            docs.extend(b.docs().map(String::from));
        }
        Ok((docs, r.skipped))
    }

    #[test]
    fn the_field_of_each_record() {
        let jsonl = "{\"id\": 1, \"text\": \"hello\\nworld\", \"meta\": {\"text\": \"no\"}}\n\
                     {\"text\": \"caf\\u00e9 \\ud83d\\ude00\", \"x\": [1, {\"a\": 2}]}\r\n\
                     \n\
                     {\"text\": \"\"}\n\
                     {\"meta\": {\"lang\": \"en\", \"body\": {\"text\": \"deep\"}}, \"text\": \"top\"}";
        for batch in [1, 5, 1 << 20] {
            let (docs, skipped) = read(jsonl, "text", false, batch).unwrap();
            assert_eq!(docs, ["hello\nworld", "café 😀", "", "top"]);
            assert_eq!(skipped, 0);
        }
        let (docs, _) = read("{\"meta\": {\"body\": {\"text\": \"deep\"}}}\n", "meta.body.text", false, 10).unwrap();
        assert_eq!(docs, ["deep"]);
    }

    #[test]
    fn a_record_past_the_cap_is_bad_not_held() {
        let field = vec!["text".to_string()];
        let jsonl = format!("{{\"text\": \"a\"}}\n{{\"text\": \"{}\"}}\n{{\"text\": \"b\"}}\n", "x".repeat(100));
        for (skip, want) in [(false, Err(())), (true, Ok(vec!["a", "b"]))] {
            let mut r = Records::new(
                std::io::BufReader::with_capacity(16, jsonl.as_bytes()),
                Path::new("l.jsonl"),
                &field,
                skip,
            );
            r.max_record = 50;
            let mut docs = vec![];
            let got = loop {
                match r.next_batch(1 << 20) {
                    Ok(Some(b)) => docs.extend(b.docs().map(String::from)),
                    Ok(None) => break Ok(docs),
                    Err(e) => break Err(e),
                }
            };
            match (got, want) {
                (Ok(docs), Ok(want)) => {
                    assert_eq!((docs, r.skipped), (want.iter().map(|s| s.to_string()).collect(), 1))
                }
                (Err(e), Err(())) => assert!(e.contains("line 2 (byte offset 14) is longer than 50 bytes"), "{e}"),
                (got, _) => panic!("{got:?}"),
            }
        }
    }

    /// The slow path alone (serde_json), as `field_text` was before the fast one.
    fn slow(line: &str, field: &[String]) -> Result<String, String> {
        let mut out = String::new();
        json_serde::field_text(line, field, &mut out).map(|()| out)
    }

    /// A random JSON value, `depth` levels at most; keys often "text".
    fn value(r: &mut impl FnMut() -> u64, depth: u32, out: &mut String) {
        const STRS: [&str; 12] = [
            "text",
            "plain words",
            "caf\u{e9} \u{1f600}",
            "a\\nb\\\"c\\\\",
            "\\u00e9\\u0041",
            "\\ud83d\\ude00",
            "\\ud800",
            "tab\\there",
            "\\/\\b\\f\\r",
            "",
            "\u{7f}\u{80}\u{10ffff}",
            "x\\u12",
        ];
        match r() % if depth == 0 { 6 } else { 8 } {
            0 => out.push_str(["true", "false", "null", "tru", "nul"][(r() % 5) as usize]),
            1 => out.push_str(["0", "-1", "12.5", "1e9", "-0.0E+2", "01", "1.", "-", "2e"][(r() % 9) as usize]),
            2..=5 => {
                out.push('"');
                out.push_str(STRS[(r() % STRS.len() as u64) as usize]);
                out.push('"');
            }
            6 => {
                out.push('[');
                for i in 0..r() % 4 {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    value(r, depth - 1, out);
                }
                out.push(']');
            }
            _ => {
                out.push('{');
                for i in 0..r() % 4 {
                    if i > 0 {
                        out.push(',');
                    }
                    let key = ["text", "meta", "a", "te\\u0078t", "b"][(r() % 5) as usize];
                    out.push_str(&format!(" \"{key}\" : "));
                    value(r, depth - 1, out);
                }
                out.push('}');
            }
        }
    }

    /// The fast path never disagrees with serde_json: on random records
    /// (nested, escaped, duplicate keys, bad numbers and literals, lone
    /// surrogates) and on the same records with a byte changed, where it
    /// gives a text serde_json gives the same, and where it gives up it
    /// leaves the batch as it was. It takes most good records.
    #[test]
    fn the_fast_path_agrees_with_serde_json() {
        let mut r = crate::split::lexer::tests::rng(0x9e37_79b9_7f4a_7c15);
        let fields: [Vec<String>; 2] = [vec!["text".into()], vec!["meta".into(), "text".into()]];
        let (mut good, mut fast) = (0, 0);
        for i in 0..200_000 {
            let mut line = String::from(if i % 7 == 0 { "  {" } else { "{" });
            for k in 0..1 + r() % 4 {
                if k > 0 {
                    line.push(',');
                }
                let key = ["text", "meta", "id", "text"][(r() % 4) as usize];
                line.push_str(&format!("\"{key}\":"));
                value(&mut r, 3, &mut line);
            }
            line.push_str(["}", "} ", "}\t", "", "}}", "},"][(r() % 12).min(5) as usize]);
            let mut bytes = line.into_bytes();
            if i % 3 == 0 && !bytes.is_empty() {
                let at = (r() % bytes.len() as u64) as usize;
                match r() % 3 {
                    0 => bytes[at] = b"\"\\{}[],:0e \x01"[(r() % 12) as usize],
                    1 => drop(bytes.remove(at)),
                    _ => bytes.insert(at, b"\"\\{}[],:0e \x01"[(r() % 12) as usize]),
                }
            }
            let Ok(line) = std::str::from_utf8(&bytes) else { continue };
            for field in &fields {
                let want = slow(line, field);
                let mut out = String::from("before");
                if json_fast::field_text(line, field, &mut out) {
                    assert_eq!(Ok(&out["before".len()..]), want.as_deref(), "{line}");
                    fast += 1;
                } else {
                    assert_eq!(out, "before", "{line}");
                }
                good += want.is_ok() as usize;
            }
        }
        assert!(good > 5_000 && fast * 2 > good, "the fast path took {fast} of {good} good records");
    }

    #[test]
    fn bad_records_are_named_or_skipped() {
        let jsonl = "{\"text\": \"ok\"}\n{\"txt\": \"no field\"}\n{\"text\": 5}\nnot json\n{\"text\": \"a\"} 2\n{\"text\": null}\n{\"text\": [\"a\"]}\n";
        let err = read(jsonl, "text", false, 100).unwrap_err();
        assert!(err.starts_with("x.jsonl: line 2 (byte offset 15): no field \"text\""), "{err}");
        let (docs, skipped) = read(jsonl, "text", true, 100).unwrap();
        assert_eq!((docs, skipped), (vec!["ok".to_string()], 6));
        for (line, want) in [
            ("{\"text\": 5}", "field \"text\" is a number, not a string"),
            ("{\"text\": null}", "is null, not a string"),
            ("{\"text\": {}}", "is an object"),
            ("not json", "not valid JSON"),
            ("[1, 2]", "not a JSON object"),
            ("{\"text\": \"a\"} 2", "not one JSON object"),
            ("{\"text\": \"a", "not valid JSON"),
        ] {
            let err = read(line, "text", false, 100).unwrap_err();
            assert!(err.contains(want), "{line}: {err}");
        }
        let mut bytes = b"{\"text\": \"ok\"}\n{\"text\": \"caf".to_vec();
        bytes.extend_from_slice(b"\xe9\"}\n");
        let field = vec!["text".to_string()];
        let mut r = Records::new(&bytes[..], Path::new("l.jsonl"), &field, false);
        let err = r.next_batch(100).unwrap_err();
        assert!(err.contains("line 2 (byte offset 15): not valid UTF-8"), "{err}");
    }
}
