//! An object in a bucket read as a byte stream (`std::io::Read`), from a
//! byte offset to its end: what the NDJSON source reads a bucket's file
//! through.
//!
//! In: a bucket, an object's name, where to start. Out: its bytes, fetched
//! as ranged reads of [`CHUNK_BYTES`], the next one requested while the
//! current one is consumed.

use std::io::Read;

use super::io::Started;
use super::Bucket;
use crate::error::Result;

/// Bytes one ranged read fetches.
pub const CHUNK_BYTES: u64 = 8 << 20;

/// See the module docs.
pub struct ObjectReader {
    bucket: Bucket,
    name: String,
    size: u64,
    /// Where the next request starts.
    next: u64,
    chunk: Vec<u8>,
    at: usize,
    ahead: Option<Started<Vec<u8>>>,
}

impl ObjectReader {
    /// Reads `name` in `bucket` from byte `offset`.
    pub fn open(bucket: &Bucket, name: &str, offset: u64) -> Result<Self> {
        let size = bucket.size(name)?;
        let mut reader = Self {
            bucket: bucket.clone(),
            name: name.to_string(),
            size,
            next: offset.min(size),
            chunk: Vec::new(),
            at: 0,
            ahead: None,
        };
        reader.request()?;
        Ok(reader)
    }

    /// The object's size when it was opened.
    pub fn size(&self) -> u64 {
        self.size
    }

    fn request(&mut self) -> Result<()> {
        if self.next < self.size {
            let end = (self.next + CHUNK_BYTES).min(self.size);
            self.ahead = Some(self.bucket.start_range(&self.name, self.next..end)?);
            self.next = end;
        }
        Ok(())
    }
}

impl Read for ObjectReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.at == self.chunk.len() {
            let Some(ahead) = self.ahead.take() else {
                return Ok(0);
            };
            self.chunk = ahead.wait().map_err(std::io::Error::other)?;
            self.at = 0;
            self.request().map_err(std::io::Error::other)?;
        }
        let n = buf.len().min(self.chunk.len() - self.at);
        buf[..n].copy_from_slice(&self.chunk[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}
