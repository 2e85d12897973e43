//! A table's own settings for the store its path is in: `storage.KEY`
//! options, for a bucket that the environment does not describe (another
//! endpoint, region or account than the job's other tables).
//!
//! In: a table's bucket location and its options. Out: a store client
//! configured with them, which every later open of that prefix (or a
//! path below it) in the process uses: the sink's files, its checkpointed
//! staging names, a Delta table's log, read back by name.
//!
//! ```sql
//! CREATE TABLE archive (id BIGINT) WITH (
//!   connector = 'parquet', path = 's3://archive/events',
//!   'storage.endpoint' = 'https://s3.eu-central-1.example.com',
//!   'storage.region' = 'eu-central-1',
//!   'storage.access_key_id' = 'env:ARCHIVE_KEY_ID',
//!   'storage.secret_access_key' = 'env:ARCHIVE_SECRET');
//! ```
//!
//! Keys are the `object_store` crate's configuration keys for the scheme
//! (`AmazonS3ConfigKey`, `GoogleConfigKey`, `AzureConfigKey`: `endpoint`,
//! `region`, `allow_http`, `virtual_hosted_style_request`,
//! `google_service_account`, `azure_storage_account_name`, ...), applied
//! over the environment's. A value `env:NAME` is the environment variable
//! `NAME`, so that a secret is not written into the SQL (which the server
//! stores and shows). The options never enter a checkpoint's fingerprints:
//! rotating a credential keeps the state.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock};

use object_store::ObjectStore;

use super::bucket::build_client;
use super::Location;
use crate::error::{ConnectorError, Result};
use crate::options::{OptionDecl, OptionKind};

/// The prefix of a table's storage options.
pub const STORAGE_PREFIX: &str = "storage.";

/// The declaration connectors with a path list.
pub const STORAGE_OPTIONS: OptionDecl = OptionDecl::new(
    STORAGE_PREFIX,
    OptionKind::Prefix,
    "storage.KEY: the object store's own setting for this table's bucket (endpoint, region, \
     access_key_id, allow_http, google_service_account, azure_storage_account_name, ...), over \
     the environment's; a value env:NAME reads variable NAME",
);

/// A prefix configured by a table, and its client.
struct Configured {
    /// `scheme://bucket/prefix`, no trailing slash.
    prefix: String,
    /// The settings as given (values unresolved), to tell two tables that
    /// configure one prefix differently.
    given: Vec<(String, String)>,
    store: Arc<dyn ObjectStore>,
}

fn configured() -> &'static Mutex<Vec<Configured>> {
    static CONFIGURED: OnceLock<Mutex<Vec<Configured>>> = OnceLock::new();
    CONFIGURED.get_or_init(Default::default)
}

/// The `storage.` options of a table, prefix removed, in order.
pub fn storage_options(options: &BTreeMap<String, String>) -> Vec<(String, String)> {
    options
        .iter()
        .filter_map(|(key, value)| {
            key.strip_prefix(STORAGE_PREFIX)
                .map(|k| (k.to_ascii_lowercase(), value.clone()))
        })
        .collect()
}

/// Applies a table's `storage.` options to its location: for a bucket, a
/// client with them serves the prefix from now on; a local path takes
/// none. Errors: an unknown key for the scheme, an `env:` variable not
/// set, two tables configuring one prefix differently.
pub fn configure(location: &Location, options: &BTreeMap<String, String>) -> Result<()> {
    let given = storage_options(options);
    if given.is_empty() {
        return Ok(());
    }
    let Location::Bucket(bucket) = location else {
        return Err(ConnectorError::bad_option(
            &format!("{STORAGE_PREFIX}{}", given[0].0),
            format!("{location} is a local path: storage options are for a bucket (s3://, gs://, az://)"),
        ));
    };
    let prefix = bucket.to_string().trim_end_matches('/').to_string();
    let mut table = configured().lock().map_err(|_| {
        ConnectorError::bad_option("path", "the storage settings' lock was poisoned")
    })?;
    if let Some(existing) = table.iter().find(|c| c.prefix == prefix) {
        if existing.given == given {
            return Ok(());
        }
        return Err(ConnectorError::bad_option(
            &format!("{STORAGE_PREFIX}{}", given[0].0),
            format!("{prefix} is configured differently by another table; give them the same storage options"),
        ));
    }
    let mut settings = Vec::with_capacity(given.len());
    for (key, value) in &given {
        let value = match value.strip_prefix("env:") {
            Some(name) => std::env::var(name).map_err(|_| {
                ConnectorError::bad_option(
                    &format!("{STORAGE_PREFIX}{key}"),
                    format!("the environment variable {name} is not set"),
                )
            })?,
            None => value.clone(),
        };
        settings.push((key.clone(), value));
    }
    let store = build_client(&bucket.root(), &settings)?;
    table.push(Configured {
        prefix,
        given,
        store,
    });
    Ok(())
}

/// The client a table configured for `text` (`scheme://bucket/key...`)
/// or a prefix above it (the longest), if any.
pub(super) fn client_for(text: &str) -> Option<Arc<dyn ObjectStore>> {
    let text = text.trim_end_matches('/');
    let table = configured().lock().ok()?;
    table
        .iter()
        .filter(|c| text == c.prefix || text.starts_with(&format!("{}/", c.prefix)))
        .max_by_key(|c| c.prefix.len())
        .map(|c| c.store.clone())
}
