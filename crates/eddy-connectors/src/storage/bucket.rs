//! A prefix in an object store, with the blocking calls eddy's sinks,
//! sources and checkpoints make on it.
//!
//! In: `scheme://bucket/prefix`. Out: objects under the prefix, named
//! relative to it (`country=US/part-...parquet`). Every call waits for
//! its request on the storage threads ([`super::io`]); the store client
//! retries transient failures (with backoff, up to its retry timeout)
//! before a call fails.

use std::collections::HashMap;
use std::fmt;
use std::path::Path as LocalPath;
use std::sync::{Arc, Mutex, OnceLock};

use futures::TryStreamExt;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};
use tokio::io::AsyncWriteExt;

use super::io::{block, start, Started};
use crate::error::{ConnectorError, Result};

/// Bytes an upload sends in one request; larger files go as multipart
/// uploads of parts this size.
const UPLOAD_PART_BYTES: usize = 8 << 20;

/// A prefix in a bucket (see the module docs).
#[derive(Clone)]
pub struct Bucket {
    /// `s3://bucket` (no credentials, no query).
    root: String,
    /// The key prefix, without a trailing slash.
    prefix: String,
    store: Arc<dyn ObjectStore>,
}

/// An object under a bucket prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Object {
    /// Its key relative to the prefix (`a/b.parquet`).
    pub name: String,
    /// Its size in bytes.
    pub size: u64,
    /// When it was last written (ms since the epoch).
    pub modified_ms: i64,
}

impl Bucket {
    /// Opens `scheme://bucket/prefix`, with the store's credentials from the
    /// environment. Clients are shared per bucket within the process.
    pub fn open(text: &str) -> Result<Self> {
        let (root, prefix) = Self::parse(text)?;
        // A table's own settings for this prefix or one above it, else
        // the environment's client of the bucket.
        let store = match super::table_options::client_for(&format!("{root}/{prefix}")) {
            Some(store) => store,
            None => client(&root)?,
        };
        Ok(Self {
            store,
            root,
            prefix,
        })
    }

    /// `scheme://bucket/prefix` as (`scheme://bucket`, `prefix`).
    fn parse(text: &str) -> Result<(String, String)> {
        let url = url::Url::parse(text).map_err(|e| bad_path(text, &e.to_string()))?;
        if !url.username().is_empty() || url.password().is_some() {
            return Err(ConnectorError::bad_option(
                "path",
                format!(
                    "{}://{}: credentials do not belong in a path; set AWS_ACCESS_KEY_ID and \
                     AWS_SECRET_ACCESS_KEY (or the store's own variables) instead",
                    url.scheme(),
                    url.host_str().unwrap_or_default()
                ),
            ));
        }
        let host = url.host_str().unwrap_or_default();
        if host.is_empty() {
            return Err(bad_path(text, "no bucket named after the scheme"));
        }
        let root = format!("{}://{host}", url.scheme());
        let prefix = url.path().trim_matches('/').to_string();
        Ok((root, prefix))
    }

    /// Opens `scheme://bucket/prefix` with a client of its own configured by
    /// `options` (the store's configuration keys, `aws_endpoint`,
    /// `aws_access_key_id`, ...) on top of the environment.
    pub fn with_options<K: AsRef<str>, V: Into<String>>(
        text: &str,
        options: impl IntoIterator<Item = (K, V)>,
    ) -> Result<Self> {
        let (root, prefix) = Self::parse(text)?;
        let url = url::Url::parse(&root).map_err(|e| bad_path(text, &e.to_string()))?;
        let options: Vec<(String, String)> = std::env::vars()
            .filter(|(key, _)| {
                key.starts_with("AWS_") || key.starts_with("GOOGLE_") || key.starts_with("AZURE_")
            })
            .map(|(key, value)| (key.to_ascii_lowercase(), value))
            .chain(
                options
                    .into_iter()
                    .map(|(key, value)| (key.as_ref().to_ascii_lowercase(), value.into())),
            )
            .collect();
        let (store, _) = object_store::parse_url_opts(&url, options)
            .map_err(|e| bad_path(text, &e.to_string()))?;
        Ok(Self {
            store: Arc::from(store),
            root,
            prefix,
        })
    }

    /// `scheme://bucket`.
    pub(super) fn root(&self) -> String {
        self.root.clone()
    }

    /// The location of `name` under this prefix.
    pub fn join(&self, name: &str) -> Self {
        let name = name.trim_matches('/');
        let prefix = match (self.prefix.is_empty(), name.is_empty()) {
            (_, true) => self.prefix.clone(),
            (true, false) => name.to_string(),
            (false, false) => format!("{}/{name}", self.prefix),
        };
        Self {
            prefix,
            ..self.clone()
        }
    }

    /// The location with its last component renamed.
    pub fn with_last(&self, rename: impl FnOnce(&str) -> String) -> Self {
        let (parent, last) = match self.prefix.rsplit_once('/') {
            Some((parent, last)) => (format!("{parent}/"), last),
            None => (String::new(), self.prefix.as_str()),
        };
        Self {
            prefix: format!("{parent}{}", rename(last)),
            ..self.clone()
        }
    }

    fn key(&self, name: &str) -> Path {
        let name = name.trim_matches('/');
        if name.is_empty() {
            Path::from(self.prefix.as_str())
        } else if self.prefix.is_empty() {
            Path::from(name)
        } else {
            Path::from(format!("{}/{name}", self.prefix))
        }
    }

    fn fail(&self, name: &str) -> impl Fn(object_store::Error) -> ConnectorError + Send + 'static {
        let location = self.join(name).to_string();
        move |source| ConnectorError::Storage {
            location: location.clone(),
            source,
        }
    }

    /// Writes `bytes` as the object `name` (replacing one there).
    pub fn put(&self, name: &str, bytes: Vec<u8>) -> Result<()> {
        let (store, key, fail) = (self.store.clone(), self.key(name), self.fail(name));
        block(async move {
            store
                .put(&key, PutPayload::from(bytes))
                .await
                .map(|_| ())
                .map_err(fail)
        })
    }

    /// Writes `bytes` as the object `name` unless one is there already;
    /// `false` when it was (two writers never both create it).
    pub fn put_if_absent(&self, name: &str, bytes: Vec<u8>) -> Result<bool> {
        let (store, key, fail) = (self.store.clone(), self.key(name), self.fail(name));
        block(async move {
            let options = PutOptions {
                mode: PutMode::Create,
                ..PutOptions::default()
            };
            match store.put_opts(&key, PutPayload::from(bytes), options).await {
                Ok(_) => Ok(true),
                Err(object_store::Error::AlreadyExists { .. }) => Ok(false),
                Err(e) => Err(fail(e)),
            }
        })
    }

    /// Uploads the local file `from` as the object `name`: one request for
    /// a small file, a multipart upload for a large one. The object
    /// appears whole or not at all.
    pub fn upload(&self, from: &LocalPath, name: &str) -> Result<()> {
        let (store, key, fail) = (self.store.clone(), self.key(name), self.fail(name));
        let from = from.to_path_buf();
        block(async move {
            let io = |e: std::io::Error| ConnectorError::Io {
                path: from.display().to_string(),
                source: e,
            };
            let mut file = tokio::fs::File::open(&from).await.map_err(io)?;
            let mut upload =
                object_store::buffered::BufWriter::with_capacity(store, key, UPLOAD_PART_BYTES);
            let copied = tokio::io::copy(&mut file, &mut upload).await;
            let finished = match copied {
                Ok(_) => upload.shutdown().await,
                Err(e) => {
                    let _ = upload.abort().await;
                    Err(e)
                }
            };
            finished.map_err(|e| match e.downcast::<object_store::Error>() {
                Ok(store_error) => fail(store_error),
                Err(e) => io(e),
            })
        })
    }

    /// The object `name`'s bytes; `None` when there is none.
    pub fn get(&self, name: &str) -> Result<Option<Vec<u8>>> {
        let (store, key, fail) = (self.store.clone(), self.key(name), self.fail(name));
        block(async move {
            match store.get(&key).await {
                Ok(found) => found.bytes().await.map(|b| Some(b.to_vec())).map_err(fail),
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(fail(e)),
            }
        })
    }

    /// The size of the object `name` in bytes.
    pub fn size(&self, name: &str) -> Result<u64> {
        let (store, key, fail) = (self.store.clone(), self.key(name), self.fail(name));
        block(async move { store.head(&key).await.map(|m| m.size).map_err(fail) })
    }

    /// When the object `name` was last written (ms since the epoch).
    pub fn modified_ms(&self, name: &str) -> Result<i64> {
        let (store, key, fail) = (self.store.clone(), self.key(name), self.fail(name));
        block(async move {
            store
                .head(&key)
                .await
                .map(|m| m.last_modified.timestamp_millis())
                .map_err(fail)
        })
    }

    /// Starts reading bytes `range` of the object `name`.
    pub(crate) fn start_range(
        &self,
        name: &str,
        range: std::ops::Range<u64>,
    ) -> Result<Started<Vec<u8>>> {
        let (store, key, fail) = (self.store.clone(), self.key(name), self.fail(name));
        start(async move {
            store
                .get_range(&key, range)
                .await
                .map(|b| b.to_vec())
                .map_err(fail)
        })
    }

    /// Whether the object `name` exists.
    pub fn exists(&self, name: &str) -> Result<bool> {
        let (store, key, fail) = (self.store.clone(), self.key(name), self.fail(name));
        block(async move {
            match store.head(&key).await {
                Ok(_) => Ok(true),
                Err(object_store::Error::NotFound { .. }) => Ok(false),
                Err(e) => Err(fail(e)),
            }
        })
    }

    /// Copies the object `from` to `to` (within this prefix).
    pub fn copy(&self, from: &str, to: &str) -> Result<()> {
        let (store, fail) = (self.store.clone(), self.fail(to));
        let (from, to) = (self.key(from), self.key(to));
        block(async move { store.copy(&from, &to).await.map_err(fail) })
    }

    /// Removes the object `name` (one already gone is fine).
    pub fn delete(&self, name: &str) -> Result<()> {
        let (store, key, fail) = (self.store.clone(), self.key(name), self.fail(name));
        block(async move {
            match store.delete(&key).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
                Err(e) => Err(fail(e)),
            }
        })
    }

    /// Every object under the prefix, recursively, sorted by name.
    pub fn list(&self) -> Result<Vec<Object>> {
        let (store, fail) = (self.store.clone(), self.fail(""));
        let prefix = self.key("");
        let strip = if self.prefix.is_empty() {
            0
        } else {
            self.prefix.len() + 1
        };
        let mut found = block(async move {
            let listed: Vec<_> = store
                .list(Some(&prefix))
                .try_collect()
                .await
                .map_err(fail)?;
            Ok(listed)
        })?
        .into_iter()
        .filter_map(|meta| {
            let key = meta.location.to_string();
            let name = key.get(strip..)?.to_string();
            (!name.is_empty()).then_some(Object {
                name,
                size: meta.size,
                modified_ms: meta.last_modified.timestamp_millis(),
            })
        })
        .collect::<Vec<_>>();
        found.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(found)
    }
}

impl fmt::Display for Bucket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.prefix.is_empty() {
            write!(f, "{}", self.root)
        } else {
            write!(f, "{}/{}", self.root, self.prefix)
        }
    }
}

impl fmt::Debug for Bucket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Bucket({self})")
    }
}

fn bad_path(text: &str, why: &str) -> ConnectorError {
    // The text may hold credentials: name the scheme and host only.
    let shown = text
        .split_once("://")
        .map(|(scheme, rest)| {
            let host = rest.split(['/', '?']).next().unwrap_or_default();
            let host = host.rsplit('@').next().unwrap_or_default();
            format!("{scheme}://{host}")
        })
        .unwrap_or_default();
    ConnectorError::bad_option("path", format!("{shown}: {why}"))
}

/// How long a request is retried before it fails: a streaming job rides
/// out a store that is away for up to about a minute (a restart, a
/// network blip) instead of failing at the client's default of ten quick
/// retries (under two seconds); past that it fails, naming the object,
/// and resumes from its last checkpoint when started again.
fn retries() -> object_store::RetryConfig {
    object_store::RetryConfig {
        backoff: object_store::BackoffConfig {
            init_backoff: std::time::Duration::from_millis(200),
            max_backoff: std::time::Duration::from_secs(5),
            base: 2.0,
        },
        max_retries: 24,
        retry_timeout: std::time::Duration::from_secs(90),
    }
}

/// The client of the store at `root` (`s3://bucket`), built once per
/// process from the store's standard environment variables.
fn client(root: &str) -> Result<Arc<dyn ObjectStore>> {
    static CLIENTS: OnceLock<Mutex<HashMap<String, Arc<dyn ObjectStore>>>> = OnceLock::new();
    let clients = CLIENTS.get_or_init(Default::default);
    let mut clients = clients
        .lock()
        .map_err(|_| bad_path(root, "the store clients' lock was poisoned"))?;
    if let Some(client) = clients.get(root) {
        return Ok(client.clone());
    }
    let store = build_client(root, &[])?;
    clients.insert(root.to_string(), store.clone());
    Ok(store)
}

/// A new client of the store at `root` (`s3://bucket`): the store's
/// standard environment variables, then `settings` (its configuration
/// keys and values, a table's `storage.` options) over them. Errors: a key
/// the store does not have.
pub(super) fn build_client(
    root: &str,
    settings: &[(String, String)],
) -> Result<Arc<dyn ObjectStore>> {
    let scheme = root.split("://").next().unwrap_or_default();
    let unknown = |key: &str| {
        ConnectorError::bad_option(
            &format!("{}{key}", super::table_options::STORAGE_PREFIX),
            format!("not a setting of {scheme}:// stores (see object_store's configuration keys)"),
        )
    };
    // Each store's builder takes the same steps; its keys are its own.
    macro_rules! build {
        ($builder:expr) => {
            with_settings(
                $builder.with_url(root).with_retry(retries()),
                settings,
                |b, key, value| b.with_config(key, value),
                &unknown,
            )?
            .build()
            .map(|s| Box::new(s) as Box<dyn ObjectStore>)
        };
    }
    let built = match scheme {
        "s3" | "s3a" => build!(object_store::aws::AmazonS3Builder::from_env()),
        "gs" => build!(object_store::gcp::GoogleCloudStorageBuilder::from_env()),
        _ => build!(object_store::azure::MicrosoftAzureBuilder::from_env()),
    };
    let store = built.map_err(|e| bad_path(root, &e.to_string()))?;
    Ok(Arc::from(store))
}

/// `builder` with each of `settings` applied by `with` (its key parsed as
/// the store's configuration key `K`; `unknown` says why one is not).
fn with_settings<B, K: std::str::FromStr>(
    builder: B,
    settings: &[(String, String)],
    with: impl Fn(B, K, &str) -> B,
    unknown: &dyn Fn(&str) -> ConnectorError,
) -> Result<B> {
    settings.iter().try_fold(builder, |builder, (key, value)| {
        let key = key.parse::<K>().map_err(|_| unknown(key))?;
        Ok(with(builder, key, value))
    })
}
