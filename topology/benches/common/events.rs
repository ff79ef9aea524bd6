//! Opening a benchmark's events file (`make_crawl.py`'s `events.jsonl`), shared by the
//! benchmarks and the figures scripts: they read plain JSON lines, and a compressed file is
//! refused with the way out (before, a gzipped stream read as no record gave rates of 0/s).

#![allow(dead_code)]

use std::fs::File;
use std::io::{BufRead as _, BufReader};

/// `path`, opened for reading by lines; an error if it is gzip- or zstd-compressed.
pub fn open(path: impl AsRef<std::path::Path>) -> std::io::Result<BufReader<File>> {
    let path = path.as_ref().display().to_string();
    let mut file = BufReader::new(File::open(&path)?);
    let start = file.fill_buf()?;
    if start.starts_with(&[0x1f, 0x8b]) || start.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("it is compressed (gzip or zstd); give it decompressed, e.g. `zcat {path} > events.jsonl`"),
        ));
    }
    Ok(file)
}
