//! Count tables (`table.rs`): written and read back, merged, and every
//! kind of damage named with its file and byte offset.

use super::*;
use crate::split::patterns::{GPT2_PATTERN, GPT4_PATTERN};
use crate::train::testing::TempDir;

fn write(path: &Path, pattern: &str, entries: &[(&[u8], u64)]) {
    let mut w = TableWriter::create(path, pattern).unwrap();
    for (c, n) in entries {
        w.add(c, *n).unwrap();
    }
    w.finish().unwrap();
}

fn read(path: &Path) -> Result<Vec<(Vec<u8>, u64)>, String> {
    let mut r = TableReader::open(path)?;
    let mut got = Vec::new();
    while let Some((c, n)) = r.next_entry()? {
        got.push((c.to_vec(), n));
    }
    Ok(got)
}

const ENTRIES: &[(&[u8], u64)] = &[
    (b"", 3),
    (b"\0", 1),
    (b" the", 1 << 40),
    (b" their", 7),
    (b" them", 1),
    (b" theme", 300),
    (b"a", u64::MAX - (1 << 41)),
    (b"\xe6\x97\xa5\xe6\x9c\xac", 2),
];

#[test]
fn tables_round_trip() {
    let dir = TempDir::new("round");
    let path = dir.0.join("t.bpec");
    for pattern in [GPT4_PATTERN, "a\nb c", ""] {
        write(&path, pattern, ENTRIES);
        let got = read(&path).unwrap();
        let want: Vec<(Vec<u8>, u64)> = ENTRIES.iter().map(|(c, n)| (c.to_vec(), *n)).collect();
        assert_eq!(got, want);
        assert_eq!(TableReader::open(&path).unwrap().pattern(), pattern);
    }
    write(&path, GPT4_PATTERN, &[]);
    assert_eq!(read(&path).unwrap(), vec![]);
    let bytes = std::fs::read(&path).unwrap();
    assert!(bytes.starts_with(format!("bpe-counts v1\npattern {} {GPT4_PATTERN}\n", GPT4_PATTERN.len()).as_bytes()));
}

/// A run (`spill.rs`) reads back as its table does, with every check but
/// the checksum's; the checksum it leaves out keeps it from passing for a
/// table.
#[test]
fn runs_round_trip_without_a_checksum() {
    let dir = TempDir::new("run");
    let (table, run) = (dir.0.join("t.bpec"), dir.0.join("r.bpec"));
    write(&table, GPT4_PATTERN, ENTRIES);
    let mut w = TableWriter::create_run(&run, GPT4_PATTERN).unwrap();
    for (c, n) in ENTRIES {
        w.add(c, *n).unwrap();
    }
    w.finish().unwrap();
    let (t, r) = (std::fs::read(&table).unwrap(), std::fs::read(&run).unwrap());
    assert_eq!(t[..t.len() - 8], r[..r.len() - 8], "the same bytes up to the checksum");
    let mut reader = TableReader::open_run(&run).unwrap();
    let mut got = Vec::new();
    while let Some((c, n)) = reader.next_entry().unwrap() {
        got.push((c.to_vec(), n));
    }
    assert_eq!(got, read(&table).unwrap());
    let err = read(&run).unwrap_err();
    assert!(err.contains("the checksum does not match"), "{err}");
}

#[test]
fn shared_prefix_counts_the_bytes_in_common() {
    let words: Vec<Vec<u8>> = (0..40).map(|n| (0..n).map(|k| b"abcab"[k % 5]).collect()).collect();
    for a in &words {
        for b in words.iter().chain([b"abcabcabcabcabcabx".to_vec()].iter()) {
            let slow = a.iter().zip(b).take_while(|(x, y)| x == y).count();
            assert_eq!(shared_prefix(a, b), slow, "{a:?} {b:?}");
        }
    }
}

/// A file cut short anywhere, or with any one byte changed, is refused,
/// naming the file and an offset.
#[test]
fn truncated_and_corrupted_tables_are_refused() {
    let dir = TempDir::new("bad");
    let good = dir.0.join("good.bpec");
    write(&good, GPT4_PATTERN, ENTRIES);
    let bytes = std::fs::read(&good).unwrap();
    let bad = dir.0.join("bad.bpec");
    let name = bad.display().to_string();
    for cut in 0..bytes.len() {
        std::fs::write(&bad, &bytes[..cut]).unwrap();
        let err = read(&bad).unwrap_err();
        assert!(err.starts_with(&name), "{err}");
        assert!(err.contains("truncated") || err.contains("empty") || err.contains("not a bpe count"), "{cut}: {err}");
    }
    for at in 0..bytes.len() {
        for flip in [1u8, 0x80] {
            let mut changed = bytes.clone();
            changed[at] ^= flip;
            std::fs::write(&bad, &changed).unwrap();
            let err = read(&bad).unwrap_err();
            assert!(
                err.starts_with(&name) && (err.contains("byte offset") || err.contains("not a bpe count")),
                "{at}: {err}"
            );
        }
    }
    let mut longer = bytes.clone();
    longer.push(0);
    std::fs::write(&bad, &longer).unwrap();
    let err = read(&bad).unwrap_err();
    assert_eq!(
        err,
        format!(
            "{name} is corrupted at byte offset {}: there are bytes after the checksum; copy it again, or count again",
            bytes.len()
        )
    );
}

#[test]
fn another_version_or_format_is_named() {
    let dir = TempDir::new("version");
    let path = dir.0.join("v2.bpec");
    std::fs::write(&path, b"bpe-counts v2\npattern 1 x\n").unwrap();
    let err = read(&path).unwrap_err();
    assert!(
        err.contains("is a bpe count table of version v2 (byte offset 12), which this bpe cannot read (it reads v1)"),
        "{err}"
    );
    std::fs::write(&path, b"bpe-tokenizer v1\n").unwrap();
    assert!(read(&path).unwrap_err().contains("is not a bpe count table"));
}

fn merged(paths: &[PathBuf], out: &Path, min: u64) -> Vec<u8> {
    let tables = open_all(paths).unwrap();
    let pattern = tables[0].pattern().to_string();
    let mut w = TableWriter::create(out, &pattern).unwrap();
    merge(tables, |c, n| w.add(c, n), min).unwrap();
    w.finish().unwrap();
    std::fs::read(out).unwrap()
}

/// Merging sums the counts of equal chunks; the bytes written do not
/// depend on the order or grouping of the tables merged.
#[test]
fn merging_is_associative_and_commutative() {
    let dir = TempDir::new("merge");
    let p = |n: &str| dir.0.join(n);
    write(&p("a"), GPT4_PATTERN, &[(b" a", 1), (b" b", 2), (b"c", 5)]);
    write(&p("b"), GPT4_PATTERN, &[(b" b", 3), (b"cc", 1)]);
    write(&p("c"), GPT4_PATTERN, &[(b"", 1), (b" a", 1), (b"cc", 1), (b"d", 9)]);
    let abc = merged(&[p("a"), p("b"), p("c")], &p("abc"), 1);
    assert_eq!(merged(&[p("c"), p("a"), p("b")], &p("cab"), 1), abc);
    merged(&[p("a"), p("b")], &p("ab"), 1);
    assert_eq!(merged(&[p("ab"), p("c")], &p("ab_c"), 1), abc);
    merged(&[p("b"), p("c")], &p("bc"), 1);
    assert_eq!(merged(&[p("bc"), p("a")], &p("bc_a"), 1), abc);
    let want: Vec<(Vec<u8>, u64)> = [(&b""[..], 1), (b" a", 2), (b" b", 5), (b"c", 5), (b"cc", 2), (b"d", 9)]
        .iter()
        .map(|(c, n)| (c.to_vec(), *n))
        .collect();
    assert_eq!(read(&p("abc")).unwrap(), want);
    merged(&[p("a"), p("b"), p("c")], &p("min"), 3);
    assert_eq!(read(&p("min")).unwrap(), vec![(b" b".to_vec(), 5), (b"c".to_vec(), 5), (b"d".to_vec(), 9)]);
    write(&p("gpt2"), GPT2_PATTERN, &[(b"x", 1)]);
    let err = open_all(&[p("a"), p("gpt2")]).err().unwrap();
    assert!(err.contains("they were counted with different split patterns (gpt4 and gpt2)"), "{err}");
}
