//! PostgreSQL's `pgoutput` logical decoding messages (protocol version 1),
//! decoded from the bytes of one replication `XLogData` message.
//!
//! In: the payload of a change message (the replication client has taken
//! out `Begin` and `Commit`). Out: a [`Change`] borrowing its column values
//! from the payload: a relation's description (sent before the first change
//! to it in a session, and again after its schema changes), an insert, an
//! update, a delete, a truncate, or a message eddy has no use for. Values
//! are in PostgreSQL's text form (the stream is started without `binary`).
//!
//! ```
//! use eddy_connectors::postgres::pgoutput::{decode, Change, Value};
//!
//! // Insert into relation 16384 of one text value "7".
//! let mut bytes = vec![b'I', 0, 0, 0x40, 0, b'N', 0, 1, b't', 0, 0, 0, 1, b'7'];
//! let Change::Insert { relation, new } = decode(&bytes).unwrap() else { panic!() };
//! assert_eq!((relation, new), (16384, vec![Value::Text(b"7")]));
//! bytes.truncate(9);
//! assert!(decode(&bytes).is_err());
//! ```

/// A column as a relation message describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelationColumn {
    /// Part of the replica identity (the primary key, usually).
    pub key: bool,
    /// The column's name.
    pub name: String,
    /// The type's OID.
    pub type_oid: u32,
}

/// A relation message: which table an OID is, and its columns in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Relation {
    /// The relation's OID, which changes refer to it by.
    pub id: u32,
    /// Its schema.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// `d` default (the primary key), `f` full, `i` an index, `n` nothing.
    pub replica_identity: u8,
    /// Its columns, in the order changes list values.
    pub columns: Vec<RelationColumn>,
}

/// One column value of a changed row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Value<'a> {
    /// SQL NULL.
    Null,
    /// A TOASTed value the change left as it was: not sent.
    Unchanged,
    /// The value in PostgreSQL's text output form.
    Text(&'a [u8]),
}

/// One decoded message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change<'a> {
    /// A relation's description.
    Relation(Relation),
    /// A new row.
    Insert {
        /// The relation's OID.
        relation: u32,
        /// The row.
        new: Vec<Value<'a>>,
    },
    /// A changed row: the old row's identity (key columns, or the whole
    /// row under `REPLICA IDENTITY FULL`) when the key changed or the
    /// identity is full, and the new row.
    Update {
        /// The relation's OID.
        relation: u32,
        /// The old row (only its identity columns are set when `key_only`).
        old: Option<Vec<Value<'a>>>,
        /// Whether `old` holds only the identity columns.
        key_only: bool,
        /// The new row.
        new: Vec<Value<'a>>,
    },
    /// A deleted row, by its identity.
    Delete {
        /// The relation's OID.
        relation: u32,
        /// The old row (only its identity columns are set when `key_only`).
        old: Vec<Value<'a>>,
        /// Whether `old` holds only the identity columns.
        key_only: bool,
    },
    /// `TRUNCATE` of these relations.
    Truncate {
        /// The relations' OIDs.
        relations: Vec<u32>,
    },
    /// A type, origin or logical message: nothing for a table's rows.
    Other,
}

/// Why a message could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError(pub String);

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "malformed pgoutput message: {}", self.0)
    }
}

/// Decodes one message. See the module docs.
pub fn decode(bytes: &[u8]) -> Result<Change<'_>, DecodeError> {
    let mut r = Bytes { rest: bytes };
    let tag = r.u8()?;
    Ok(match tag {
        b'R' => {
            let id = r.u32()?;
            let namespace = r.cstring()?;
            let name = r.cstring()?;
            let replica_identity = r.u8()?;
            let count = r.u16()?;
            let mut columns = Vec::with_capacity(count as usize);
            for _ in 0..count {
                let flags = r.u8()?;
                let name = r.cstring()?;
                let type_oid = r.u32()?;
                let _type_modifier = r.u32()?;
                columns.push(RelationColumn {
                    key: flags & 1 == 1,
                    name,
                    type_oid,
                });
            }
            Change::Relation(Relation {
                id,
                namespace,
                name,
                replica_identity,
                columns,
            })
        }
        b'I' => {
            let relation = r.u32()?;
            r.expect(b'N')?;
            Change::Insert {
                relation,
                new: r.tuple()?,
            }
        }
        b'U' => {
            let relation = r.u32()?;
            let (old, key_only) = match r.u8()? {
                b'N' => (None, false),
                marker @ (b'K' | b'O') => {
                    let old = r.tuple()?;
                    r.expect(b'N')?;
                    (Some(old), marker == b'K')
                }
                other => return Err(unexpected(other, "K, O or N")),
            };
            Change::Update {
                relation,
                old,
                key_only,
                new: r.tuple()?,
            }
        }
        b'D' => {
            let relation = r.u32()?;
            let key_only = match r.u8()? {
                b'K' => true,
                b'O' => false,
                other => return Err(unexpected(other, "K or O")),
            };
            Change::Delete {
                relation,
                old: r.tuple()?,
                key_only,
            }
        }
        b'T' => {
            let count = r.u32()?;
            let _options = r.u8()?;
            let relations = (0..count).map(|_| r.u32()).collect::<Result<_, _>>()?;
            Change::Truncate { relations }
        }
        b'Y' | b'O' | b'M' => Change::Other,
        other => {
            return Err(DecodeError(format!(
                "unknown message tag '{}'",
                other as char
            )))
        }
    })
}

fn unexpected(byte: u8, wanted: &str) -> DecodeError {
    DecodeError(format!("found '{}' where {wanted} belongs", byte as char))
}

/// A cursor over a message's bytes.
struct Bytes<'a> {
    rest: &'a [u8],
}

impl<'a> Bytes<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if self.rest.len() < n {
            return Err(DecodeError(format!(
                "ends {} bytes early",
                n - self.rest.len()
            )));
        }
        let (head, tail) = self.rest.split_at(n);
        self.rest = tail;
        Ok(head)
    }

    fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }

    fn u16(&mut self) -> Result<u16, DecodeError> {
        let b = self.take(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }

    fn u32(&mut self) -> Result<u32, DecodeError> {
        let b = self.take(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn expect(&mut self, byte: u8) -> Result<(), DecodeError> {
        match self.u8()? {
            b if b == byte => Ok(()),
            other => Err(unexpected(other, &(byte as char).to_string())),
        }
    }

    fn cstring(&mut self) -> Result<String, DecodeError> {
        let end = self
            .rest
            .iter()
            .position(|&b| b == 0)
            .ok_or_else(|| DecodeError("a name without its terminating zero".into()))?;
        let text = String::from_utf8_lossy(&self.rest[..end]).into_owned();
        self.rest = &self.rest[end + 1..];
        Ok(text)
    }

    fn tuple(&mut self) -> Result<Vec<Value<'a>>, DecodeError> {
        let count = self.u16()?;
        let mut values = Vec::with_capacity(count as usize);
        for _ in 0..count {
            values.push(match self.u8()? {
                b'n' => Value::Null,
                b'u' => Value::Unchanged,
                b't' | b'b' => {
                    let len = self.u32()? as usize;
                    Value::Text(self.take(len)?)
                }
                other => return Err(unexpected(other, "n, u, t or b")),
            });
        }
        Ok(values)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tuple(values: &[Option<&str>]) -> Vec<u8> {
        let mut out = (values.len() as u16).to_be_bytes().to_vec();
        for v in values {
            match v {
                None => out.push(b'n'),
                Some(text) => {
                    out.push(b't');
                    out.extend_from_slice(&(text.len() as u32).to_be_bytes());
                    out.extend_from_slice(text.as_bytes());
                }
            }
        }
        out
    }

    #[test]
    fn relations_name_their_key_columns_and_types() {
        let mut m = vec![b'R', 0, 0, 0, 9];
        m.extend_from_slice(b"public\0orders\0d");
        m.extend_from_slice(&2u16.to_be_bytes());
        m.push(1);
        m.extend_from_slice(b"id\0");
        m.extend_from_slice(&20u32.to_be_bytes());
        m.extend_from_slice(&u32::MAX.to_be_bytes());
        m.push(0);
        m.extend_from_slice(b"note\0");
        m.extend_from_slice(&25u32.to_be_bytes());
        m.extend_from_slice(&u32::MAX.to_be_bytes());
        let Ok(Change::Relation(r)) = decode(&m) else {
            panic!("not a relation")
        };
        assert_eq!(
            (r.id, r.namespace.as_str(), r.name.as_str()),
            (9, "public", "orders")
        );
        assert_eq!(r.replica_identity, b'd');
        assert_eq!(
            r.columns,
            vec![
                RelationColumn {
                    key: true,
                    name: "id".into(),
                    type_oid: 20
                },
                RelationColumn {
                    key: false,
                    name: "note".into(),
                    type_oid: 25
                },
            ]
        );
    }

    #[test]
    fn an_update_that_moves_its_key_carries_the_old_key() {
        let mut m = vec![b'U', 0, 0, 0, 9, b'K'];
        m.extend(tuple(&[Some("1"), None]));
        m.push(b'N');
        m.extend(tuple(&[Some("2"), Some("x")]));
        let Ok(Change::Update {
            relation,
            old,
            key_only,
            new,
        }) = decode(&m)
        else {
            panic!("not an update")
        };
        assert_eq!(relation, 9);
        assert!(key_only);
        assert_eq!(old, Some(vec![Value::Text(b"1"), Value::Null]));
        assert_eq!(new, vec![Value::Text(b"2"), Value::Text(b"x")]);
    }

    #[test]
    fn deletes_unchanged_toast_and_truncates_decode() {
        let mut m = vec![b'D', 0, 0, 0, 9, b'O'];
        m.extend(tuple(&[Some("1"), Some("a")]));
        assert!(matches!(
            decode(&m),
            Ok(Change::Delete {
                key_only: false,
                ..
            })
        ));
        let mut u = vec![b'U', 0, 0, 0, 9, b'N', 0, 2, b't', 0, 0, 0, 1, b'1', b'u'];
        let Ok(Change::Update { new, old: None, .. }) = decode(&u) else {
            panic!("not an update")
        };
        assert_eq!(new[1], Value::Unchanged);
        u[5] = b'X';
        assert!(decode(&u).unwrap_err().to_string().contains("'X'"));
        let t = [b'T', 0, 0, 0, 2, 0, 0, 0, 0, 9, 0, 0, 0, 10];
        assert_eq!(
            decode(&t),
            Ok(Change::Truncate {
                relations: vec![9, 10]
            })
        );
    }
}
