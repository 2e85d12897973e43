//! A Parquet file to read, on the local disk or in a bucket, as the
//! parquet crate's [`ChunkReader`]: the footer and the column chunks a read
//! needs are fetched by ranged reads, so projection and row-group pruning
//! save requests on a bucket as they save disk reads locally.
//!
//! In: a file's path (`/data/x.parquet` or `s3://lake/x.parquet`). Out: its
//! bytes on demand.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use datafusion::parquet::errors::ParquetError;
use datafusion::parquet::file::reader::{ChunkReader, Length};

use crate::error::Result;
use crate::sinks::io_error;
use crate::storage::{Bucket, Location, ObjectReader};

/// See the module docs.
pub enum ParquetInput {
    /// A local file.
    Local(File),
    /// An object in a bucket, of `size` bytes.
    Object {
        /// Where it is.
        object: Bucket,
        /// Its size when opened.
        size: u64,
    },
}

impl ParquetInput {
    /// Opens the file at `path`.
    pub fn open(path: &Path) -> Result<Self> {
        match Location::parse(&path.to_string_lossy())? {
            Location::Local(local) => File::open(&local)
                .map(Self::Local)
                .map_err(|e| io_error(&local, e)),
            Location::Bucket(object) => {
                let size = object.size("")?;
                Ok(Self::Object { object, size })
            }
        }
    }

    /// Another handle on the same file.
    pub fn try_clone(&self) -> std::io::Result<Self> {
        Ok(match self {
            Self::Local(file) => Self::Local(file.try_clone()?),
            Self::Object { object, size } => Self::Object {
                object: object.clone(),
                size: *size,
            },
        })
    }
}

impl Length for ParquetInput {
    fn len(&self) -> u64 {
        match self {
            Self::Local(file) => Length::len(file),
            Self::Object { size, .. } => *size,
        }
    }
}

impl ChunkReader for ParquetInput {
    type T = Box<dyn Read + Send>;

    fn get_read(&self, start: u64) -> datafusion::parquet::errors::Result<Self::T> {
        match self {
            Self::Local(file) => {
                let mut reader = file.try_clone()?;
                reader.seek(SeekFrom::Start(start))?;
                Ok(Box::new(std::io::BufReader::new(reader)))
            }
            Self::Object { object, .. } => ObjectReader::open(object, "", start)
                .map(|r| Box::new(r) as Box<dyn Read + Send>)
                .map_err(|e| ParquetError::External(Box::new(e))),
        }
    }

    fn get_bytes(
        &self,
        start: u64,
        length: usize,
    ) -> datafusion::parquet::errors::Result<bytes::Bytes> {
        match self {
            Self::Local(file) => file.get_bytes(start, length),
            Self::Object { object, .. } => {
                let bytes = object
                    .start_range("", start..start + length as u64)
                    .and_then(|started| started.wait())
                    .map_err(|e| ParquetError::External(Box::new(e)))?;
                if bytes.len() != length {
                    return Err(ParquetError::EOF(format!(
                        "{object}: expected {length} bytes at {start}, read {}",
                        bytes.len()
                    )));
                }
                Ok(bytes.into())
            }
        }
    }
}
