//! What clients of the PostgreSQL port declared: tables, views and
//! functions (eddy's DDL, kept as written and put before every job the
//! port starts), and which job holds each materialized view. Kept in
//! `STATE_DIR/pg/catalog.json`, so a restarted server knows them again
//! (the views' jobs resume with the server's other jobs), and written
//! through to the state bucket with `--state-dir s3://...`, so a server
//! started on another machine does too.
//!
//! In: declarations and drops. Out: the DDL text a job starts with, the
//! job of a view, and errors PostgreSQL clients understand (a name taken,
//! a name unknown).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use super::statements::ObjectKind;
use crate::state_bucket::{StateBucket, SESSION_CATALOG};

/// One declared table, view or function.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Declared {
    /// What it is.
    pub kind: ObjectKind,
    /// Its name, as written.
    pub name: String,
    /// The statement.
    pub sql: String,
}

/// One materialized view.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MaterializedView {
    /// Its name, as written.
    pub name: String,
    /// The job that keeps it.
    pub job: String,
    /// Its query.
    pub query: String,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Stored {
    declared: Vec<Declared>,
    views: Vec<MaterializedView>,
}

/// Why a declaration or drop was refused.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// The name is taken.
    #[error("{kind} \"{name}\" already exists")]
    Exists {
        /// What holds the name.
        kind: &'static str,
        /// The name.
        name: String,
    },
    /// Nothing has the name.
    #[error("{kind} \"{name}\" does not exist")]
    Missing {
        /// What was asked for.
        kind: &'static str,
        /// The name.
        name: String,
    },
    /// The catalog could not be written to the state bucket.
    #[error("the session catalog was not written to the state bucket: {0}")]
    Bucket(String),
    /// The catalog could not be saved.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
}

/// See the module docs.
#[derive(Debug)]
pub struct SessionCatalog {
    path: PathBuf,
    stored: Mutex<Stored>,
    /// Written through to, after the local file (`--state-dir s3://...`).
    bucket: Option<Arc<StateBucket>>,
}

fn same(a: &str, b: &str) -> bool {
    a.eq_ignore_ascii_case(b)
}

fn kind_name(kind: ObjectKind) -> &'static str {
    match kind {
        ObjectKind::Table => "table",
        ObjectKind::View => "view",
        ObjectKind::Function => "function",
        ObjectKind::MaterializedView => "materialized view",
    }
}

impl SessionCatalog {
    /// The catalog kept under `state_dir` (empty when there is none yet),
    /// each change also written to `bucket` (whose copy the server put in
    /// `state_dir` as it started).
    pub fn open(state_dir: &Path, bucket: Option<Arc<StateBucket>>) -> Result<Self, CatalogError> {
        let path = state_dir.join(SESSION_CATALOG);
        let stored = match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| CatalogError::Io {
                path: path.display().to_string(),
                source: std::io::Error::new(std::io::ErrorKind::InvalidData, e),
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Stored::default(),
            Err(source) => {
                return Err(CatalogError::Io {
                    path: path.display().to_string(),
                    source,
                })
            }
        };
        Ok(Self {
            path,
            stored: Mutex::new(stored),
            bucket,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Stored> {
        self.stored.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn save(&self, stored: &Stored) -> Result<(), CatalogError> {
        let io = |source| CatalogError::Io {
            path: self.path.display().to_string(),
            source,
        };
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        let bytes = serde_json::to_vec_pretty(stored)
            .map_err(|e| io(std::io::Error::new(std::io::ErrorKind::InvalidData, e)))?;
        let temporary = self.path.with_extension("json.tmp");
        std::fs::write(&temporary, &bytes).map_err(io)?;
        std::fs::rename(&temporary, &self.path).map_err(io)?;
        match &self.bucket {
            Some(bucket) => bucket
                .put_session_catalog(bytes)
                .map_err(|e| CatalogError::Bucket(e.to_string())),
            None => Ok(()),
        }
    }

    /// What holds `name` (tables, views and materialized views share
    /// names; functions have their own).
    fn holder(stored: &Stored, kind: ObjectKind, name: &str) -> Option<&'static str> {
        let relation = kind != ObjectKind::Function;
        stored
            .declared
            .iter()
            .find(|d| same(&d.name, name) && (d.kind != ObjectKind::Function) == relation)
            .map(|d| kind_name(d.kind))
            .or_else(|| {
                (relation && stored.views.iter().any(|v| same(&v.name, name)))
                    .then_some("materialized view")
            })
    }

    /// Whether `name` is taken by something of `kind`'s namespace.
    pub fn check_free(&self, kind: ObjectKind, name: &str) -> Result<(), CatalogError> {
        match Self::holder(&self.lock(), kind, name) {
            Some(held) => Err(CatalogError::Exists {
                kind: held,
                name: name.to_string(),
            }),
            None => Ok(()),
        }
    }

    /// Keeps a declaration.
    pub fn declare(&self, declared: Declared) -> Result<(), CatalogError> {
        let mut stored = self.lock();
        if let Some(held) = Self::holder(&stored, declared.kind, &declared.name) {
            return Err(CatalogError::Exists {
                kind: held,
                name: declared.name,
            });
        }
        stored.declared.push(declared);
        self.save(&stored)
    }

    /// Forgets a declaration; whether there was one.
    pub fn drop_declared(&self, kind: ObjectKind, name: &str) -> Result<bool, CatalogError> {
        let mut stored = self.lock();
        let before = stored.declared.len();
        stored
            .declared
            .retain(|d| !(d.kind == kind && same(&d.name, name)));
        if stored.declared.len() == before {
            return Ok(false);
        }
        self.save(&stored)?;
        Ok(true)
    }

    /// Every declaration, in order, as one SQL text (each statement ends
    /// with `;` and a new line).
    pub fn ddl(&self) -> String {
        self.lock()
            .declared
            .iter()
            .map(|d| format!("{};\n", d.sql))
            .collect()
    }

    /// Records the job of a materialized view.
    pub fn add_view(&self, view: MaterializedView) -> Result<(), CatalogError> {
        let mut stored = self.lock();
        if let Some(held) = Self::holder(&stored, ObjectKind::MaterializedView, &view.name) {
            return Err(CatalogError::Exists {
                kind: held,
                name: view.name,
            });
        }
        stored.views.push(view);
        self.save(&stored)
    }

    /// The materialized view `name`, if any.
    pub fn view(&self, name: &str) -> Option<MaterializedView> {
        self.lock()
            .views
            .iter()
            .find(|v| same(&v.name, name))
            .cloned()
    }

    /// Every materialized view.
    pub fn views(&self) -> Vec<MaterializedView> {
        self.lock().views.clone()
    }

    /// Forgets materialized view `name`.
    pub fn remove_view(&self, name: &str) -> Result<(), CatalogError> {
        let mut stored = self.lock();
        stored.views.retain(|v| !same(&v.name, name));
        self.save(&stored)
    }

    /// The declared table `name`, if any (a source a client tried to
    /// query directly).
    pub fn table(&self, name: &str) -> Option<Declared> {
        self.lock()
            .declared
            .iter()
            .find(|d| d.kind == ObjectKind::Table && same(&d.name, name))
            .cloned()
    }

    /// The name's kind, for a missing-name error.
    pub fn missing(kind: ObjectKind, name: &str) -> CatalogError {
        CatalogError::Missing {
            kind: kind_name(kind),
            name: name.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_shared_by_relations_and_kept_across_opens() {
        let dir = tempfile::tempdir().expect("a directory");
        let catalog = SessionCatalog::open(dir.path(), None).expect("opens");
        let table = Declared {
            kind: ObjectKind::Table,
            name: "orders".into(),
            sql: "CREATE TABLE orders (n BIGINT) WITH ('connector' = 'file')".into(),
        };
        catalog.declare(table.clone()).expect("declares");
        let taken = catalog
            .add_view(MaterializedView {
                name: "ORDERS".into(),
                job: "j".into(),
                query: "SELECT 1".into(),
            })
            .expect_err("a table holds the name");
        assert_eq!(taken.to_string(), "table \"ORDERS\" already exists");
        catalog
            .declare(Declared {
                kind: ObjectKind::Function,
                name: "orders".into(),
                sql: "CREATE FUNCTION orders() ...".into(),
            })
            .expect("functions have names of their own");
        catalog
            .add_view(MaterializedView {
                name: "totals".into(),
                job: "j".into(),
                query: "SELECT 1".into(),
            })
            .expect("adds");

        let reopened = SessionCatalog::open(dir.path(), None).expect("reopens");
        assert!(reopened.ddl().starts_with("CREATE TABLE orders"));
        assert_eq!(reopened.view("Totals").expect("kept").job, "j");
        assert!(reopened
            .drop_declared(ObjectKind::Table, "orders")
            .expect("drops"));
        assert!(!reopened
            .drop_declared(ObjectKind::Table, "orders")
            .expect("drops nothing"));
        reopened.remove_view("totals").expect("removes");
        assert!(reopened.views().is_empty());
    }
}
