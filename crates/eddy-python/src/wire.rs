//! The frames eddy and a Python worker exchange (the worker's side is
//! `worker.py`; the two change together).
//!
//! A frame is an 8-byte little-endian payload length, then the payload:
//! one byte saying what it is, then its fields. Numbers are little-endian;
//! a buffer is aligned to 8 bytes from the payload's start, then its
//! length (u64) and its bytes.
//!
//! A column is its kind (u8, 7 bytes padding), length (u64), null count
//! (u64), then its buffers in Arrow's layout with offset 0: the validity
//! bitmap (empty when there are no nulls), then the values (a bitmap for
//! booleans), or for text and bytes the i32 offsets and the data. The
//! worker builds pyarrow arrays on the received bytes as they are, and
//! eddy builds Arrow arrays on the reply's bytes (checked in full: a
//! worker cannot hand eddy invalid UTF-8 or offsets out of range).
//!
//! | request      | fields                                                      |
//! |--------------|-------------------------------------------------------------|
//! | `HELLO`      | JSON: `{config?, functions: [...]}` (added to those loaded) |
//! | `CALL`       | function (u32), columns (u32), rows (u64), the columns      |
//! | `AGG_UPDATE` | function, retract (u8), columns (u32), states, groups, columns |
//! | `AGG_MERGE`  | function, states, groups, incoming states                   |
//! | `AGG_FINISH` | function, states                                            |
//! | `AGG_STEPS`  | function, finish (u8), steps (u32), one state, then per step: retract (u8), rows (u64), columns (u32), the columns |
//!
//! Replies: `OK` (JSON), `RESULT` or `STATES` (a column, for `AGG_STEPS`
//! with finish the value's column after it, then the rows
//! that raised: count (u32), each row (u64) and message (u32 length,
//! UTF-8)), or `ERROR` (kind u8, UTF-8 message).

use datafusion::arrow::array::ArrayData;
use datafusion::arrow::array::{make_array, Array, ArrayRef, AsArray};
use datafusion::arrow::buffer::{BooleanBuffer, Buffer, NullBuffer};
use datafusion::arrow::datatypes::DataType;
use datafusion::arrow::error::ArrowError;

use crate::definition::{Kind, UnsupportedType};

pub(crate) const HELLO: u8 = 1;
pub(crate) const CALL: u8 = 2;
pub(crate) const AGG_UPDATE: u8 = 3;
pub(crate) const AGG_MERGE: u8 = 4;
pub(crate) const AGG_FINISH: u8 = 5;
pub(crate) const AGG_STEPS: u8 = 6;

pub(crate) const OK: u8 = 10;
pub(crate) const RESULT: u8 = 11;
pub(crate) const STATES: u8 = 12;
pub(crate) const ERROR: u8 = 13;

/// `ERROR` kind of a definition that did not load (1: the function
/// raised, 3: it returned a wrong value).
pub(crate) const E_DEFINITION: u8 = 2;

/// What is wrong with a frame: one a worker sent that does not make
/// sense, or a column eddy cannot send.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// The payload ended before what it announced.
    #[error("the worker's reply ended early")]
    EndedEarly,
    /// A length that does not fit this machine (`what`: a buffer, a column).
    #[error("{0} too large")]
    TooLarge(&'static str),
    /// A fixed-width column with no values buffer.
    #[error("a fixed-width column without values")]
    NoValues,
    /// A column of a type Python functions do not take.
    #[error(transparent)]
    Type(#[from] UnsupportedType),
    /// A column of another kind than expected.
    #[error("the worker sent a column of kind {kind} where {expected} was expected")]
    KindMismatch {
        /// The kind sent.
        kind: u8,
        /// The type expected.
        expected: DataType,
    },
    /// A validity bitmap with fewer bits than the column has rows.
    #[error("a validity bitmap shorter than its column")]
    ShortBitmap,
    /// Buffers that do not make a valid Arrow column.
    #[error("the worker sent an invalid column: {0}")]
    InvalidColumn(ArrowError),
    /// A reply of another kind than the request asks for.
    #[error("unexpected reply {0}")]
    UnexpectedReply(u8),
    /// A reply with another number of values than asked for.
    #[error("{found} {what} for {expected} {of}")]
    Count {
        /// How many came.
        found: usize,
        /// Of what (`values`, `states`).
        what: &'static str,
        /// How many were asked for.
        expected: usize,
        /// Of what (`rows`, `groups`).
        of: &'static str,
    },
    /// Something the exchange needs is not there (`no value came back`).
    #[error("{0}")]
    Missing(&'static str),
}

/// A request being written.
#[derive(Debug)]
pub(crate) struct Frame {
    bytes: Vec<u8>,
}

impl Frame {
    pub(crate) fn new(op: u8) -> Self {
        let mut bytes = Vec::with_capacity(4096);
        bytes.extend_from_slice(&[0; 8]);
        bytes.push(op);
        Self { bytes }
    }

    /// The frame, length prefix filled in.
    pub(crate) fn finish(mut self) -> Vec<u8> {
        let len = (self.bytes.len() - 8) as u64;
        self.bytes[..8].copy_from_slice(&len.to_le_bytes());
        self.bytes
    }

    pub(crate) fn u8(&mut self, v: u8) {
        self.bytes.push(v);
    }

    pub(crate) fn u32(&mut self, v: u32) {
        self.bytes.extend_from_slice(&v.to_le_bytes());
    }

    pub(crate) fn u64(&mut self, v: u64) {
        self.bytes.extend_from_slice(&v.to_le_bytes());
    }

    pub(crate) fn raw(&mut self, data: &[u8]) {
        self.bytes.extend_from_slice(data);
    }

    fn align(&mut self) {
        let payload = self.bytes.len() - 8;
        let pad = (8 - payload % 8) % 8;
        self.bytes.resize(self.bytes.len() + pad, 0);
    }

    fn buffer(&mut self, data: &[u8]) {
        self.align();
        self.u64(data.len() as u64);
        self.raw(data);
    }

    /// Writes `array` (of a type [`Kind::of`] accepts).
    pub(crate) fn column(&mut self, array: &dyn Array) -> Result<(), FrameError> {
        let kind = Kind::of(array.data_type())?;
        let len = array.len();
        self.align();
        self.u8(kind as u8);
        self.raw(&[0; 7]);
        self.u64(len as u64);
        self.u64(array.null_count() as u64);
        match array.nulls().filter(|n| n.null_count() > 0) {
            Some(nulls) => self.buffer(nulls.inner().sliced().as_slice()),
            None => self.buffer(&[]),
        }
        match kind {
            Kind::Bool => self.buffer(array.as_boolean().values().sliced().as_slice()),
            Kind::Utf8 => {
                let a = array.as_string::<i32>();
                self.offsets_and_data(a.value_offsets(), a.value_data());
            }
            Kind::Binary => {
                let a = array.as_binary::<i32>();
                self.offsets_and_data(a.value_offsets(), a.value_data());
            }
            fixed => {
                let data = array.to_data();
                let width = fixed.width();
                let start = data.offset() * width;
                let values = data.buffers().first().ok_or(FrameError::NoValues)?;
                self.buffer(&values.as_slice()[start..start + len * width]);
            }
        }
        Ok(())
    }

    fn offsets_and_data(&mut self, offsets: &[i32], data: &[u8]) {
        let first = offsets.first().copied().unwrap_or(0);
        let last = offsets.last().copied().unwrap_or(0);
        self.align();
        self.u64((offsets.len() * 4) as u64);
        if first == 0 {
            for o in offsets {
                self.bytes.extend_from_slice(&o.to_le_bytes());
            }
        } else {
            for o in offsets {
                self.bytes.extend_from_slice(&(o - first).to_le_bytes());
            }
        }
        self.buffer(&data[first as usize..last as usize]);
    }
}

/// A reply being read.
#[derive(Debug)]
pub(crate) struct Reply {
    payload: Buffer,
    pos: usize,
}

impl Reply {
    pub(crate) fn new(payload: Vec<u8>) -> Self {
        Self {
            payload: Buffer::from_vec(payload),
            pos: 1,
        }
    }

    pub(crate) fn op(&self) -> u8 {
        self.payload.as_slice().first().copied().unwrap_or(0)
    }

    fn take(&mut self, n: usize) -> Result<&[u8], FrameError> {
        let end = self.pos.checked_add(n).filter(|e| *e <= self.payload.len());
        let end = end.ok_or(FrameError::EndedEarly)?;
        let bytes = &self.payload.as_slice()[self.pos..end];
        self.pos = end;
        Ok(bytes)
    }

    pub(crate) fn u8(&mut self) -> Result<u8, FrameError> {
        Ok(self.take(1)?[0])
    }

    pub(crate) fn u32(&mut self) -> Result<u32, FrameError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub(crate) fn u64(&mut self) -> Result<u64, FrameError> {
        let b = self.take(8)?;
        let mut a = [0; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }

    /// The rest of the payload as text.
    pub(crate) fn rest_text(&mut self) -> String {
        let rest = &self.payload.as_slice()[self.pos.min(self.payload.len())..];
        self.pos = self.payload.len();
        String::from_utf8_lossy(rest).into_owned()
    }

    pub(crate) fn text(&mut self, n: usize) -> Result<String, FrameError> {
        Ok(String::from_utf8_lossy(self.take(n)?).into_owned())
    }

    pub(crate) fn align(&mut self) {
        self.pos = (self.pos + 7) & !7;
    }

    fn buffer(&mut self) -> Result<Buffer, FrameError> {
        self.align();
        let n = usize::try_from(self.u64()?).map_err(|_| FrameError::TooLarge("a buffer"))?;
        let start = self.pos;
        self.take(n)?;
        Ok(self.payload.slice_with_length(start, n))
    }

    /// Reads a column that must be of type `data_type`.
    pub(crate) fn column(&mut self, data_type: &DataType) -> Result<ArrayRef, FrameError> {
        self.align();
        let kind = self.u8()?;
        self.take(7)?;
        let expected = Kind::of(data_type)?;
        if kind != expected as u8 {
            return Err(FrameError::KindMismatch {
                kind,
                expected: data_type.clone(),
            });
        }
        let len = usize::try_from(self.u64()?).map_err(|_| FrameError::TooLarge("a column"))?;
        let nulls = self.u64()?;
        let validity = self.buffer()?;
        let mut builder = ArrayData::builder(data_type.clone()).len(len);
        if nulls > 0 {
            if validity.len() * 8 < len {
                return Err(FrameError::ShortBitmap);
            }
            builder = builder.nulls(Some(NullBuffer::new(BooleanBuffer::new(validity, 0, len))));
        }
        builder = builder.add_buffer(self.buffer()?);
        if matches!(expected, Kind::Utf8 | Kind::Binary) {
            builder = builder.add_buffer(self.buffer()?);
        }
        let data = builder
            .align_buffers(true)
            .build()
            .map_err(FrameError::InvalidColumn)?;
        Ok(make_array(data))
    }
}

/// Casts `array` to `target` when it is not of that type already.
pub(crate) fn as_type(array: ArrayRef, target: &DataType) -> datafusion::error::Result<ArrayRef> {
    if array.data_type() == target {
        Ok(array)
    } else {
        Ok(datafusion::arrow::compute::cast(&array, target)?)
    }
}

/// An empty column of `data_type` (no call is made for no rows).
pub(crate) fn empty(data_type: &DataType) -> ArrayRef {
    datafusion::arrow::array::new_empty_array(data_type)
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{
        BooleanArray, Date32Array, Float64Array, Int32Array, StringArray, TimestampMillisecondArray,
    };
    use std::sync::Arc;

    /// Columns written as a request reads back as a reply: the two share
    /// one layout.
    fn round_trip(array: ArrayRef) -> ArrayRef {
        let mut frame = Frame::new(RESULT);
        frame.column(array.as_ref()).unwrap();
        let bytes = frame.finish();
        let mut reply = Reply::new(bytes[8..].to_vec());
        assert_eq!(reply.op(), RESULT);
        reply.column(array.data_type()).unwrap()
    }

    #[test]
    fn columns_with_nulls_and_offsets_survive_the_trip() {
        let arrays: Vec<ArrayRef> = vec![
            Arc::new(Int32Array::from(vec![
                Some(1),
                None,
                Some(-3),
                Some(4),
                None,
            ])),
            Arc::new(Float64Array::from(vec![
                Some(1.5),
                None,
                Some(f64::NAN),
                Some(-0.0),
            ])),
            Arc::new(BooleanArray::from(vec![
                Some(true),
                None,
                Some(false),
                Some(true),
                Some(true),
            ])),
            Arc::new(StringArray::from(vec![
                Some("a"),
                None,
                Some(""),
                Some("Zoë 🚀"),
                Some("xyz"),
            ])),
            Arc::new(TimestampMillisecondArray::from(vec![
                Some(1_700_000_000_123),
                None,
            ])),
            Arc::new(Date32Array::from(vec![Some(19_000), None, Some(-5)])),
        ];
        for array in arrays {
            assert_eq!(round_trip(Arc::clone(&array)).to_data(), array.to_data());
            // A slice starts mid-bitmap and mid-offsets.
            let slice = array.slice(1, array.len() - 1);
            let back = round_trip(Arc::clone(&slice));
            assert_eq!(back.len(), slice.len());
            assert!(
                back.to_data() == slice.to_data(),
                "{slice:?} came back as {back:?}"
            );
        }
    }

    #[test]
    fn a_reply_that_lies_is_refused() {
        let array: ArrayRef = Arc::new(StringArray::from(vec!["ab", "cd"]));
        let mut frame = Frame::new(RESULT);
        frame.column(array.as_ref()).unwrap();
        let mut bytes = frame.finish()[8..].to_vec();
        // The last data byte becomes invalid UTF-8.
        let last = bytes.len() - 1;
        bytes[last] = 0xff;
        let error = Reply::new(bytes).column(&DataType::Utf8).unwrap_err();
        assert!(matches!(error, FrameError::InvalidColumn(_)), "{error}");
        let mut truncated = Frame::new(RESULT);
        truncated.column(array.as_ref()).unwrap();
        let bytes = truncated.finish();
        let error = Reply::new(bytes[8..bytes.len() - 3].to_vec())
            .column(&DataType::Utf8)
            .unwrap_err();
        assert!(matches!(error, FrameError::EndedEarly), "{error}");
        let error = Reply::new(bytes[8..].to_vec())
            .column(&DataType::Int64)
            .unwrap_err();
        assert!(
            matches!(
                &error,
                FrameError::KindMismatch {
                    expected: DataType::Int64,
                    ..
                }
            ),
            "{error}"
        );
        assert!(
            error.to_string().contains("where Int64 was expected"),
            "{error}"
        );
    }
}
