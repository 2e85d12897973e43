//! The run's connector settings ([`ConnectorConfig`]: the CLI's flags or a
//! server job's), passed to every connector, and what follows from them
//! for one table: its batch size, its paths inside a server's roots, a
//! scaled-out task's own file names.
//!
//! In: the run's flags and a table's [`ConnectorSpec`]. Out: settings.

use std::collections::BTreeMap;
use std::path::PathBuf;

use eddy_engine::graph::ConnectorSpec;

use crate::error::{ConnectorError, Result};
use crate::options::OptionValues;
use crate::roots::PathRoots;
use crate::settings::ConnectorSettings;
use crate::storage::Location;

/// File format of `--output`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum OutputFormat {
    /// `DIR/<sink>.ndjson`.
    #[default]
    Ndjson,
    /// `DIR/<sink>/part-00000.parquet`.
    Parquet,
}

/// Rows per source batch unless configured: small enough that a batch's
/// columns stay in the CPU's caches from one operator to the next and that
/// batches in flight between threads hold little memory (measured on the
/// window and join benchmarks against 8192: 10-30% faster, 15-40% less
/// peak memory; the whole reference pipeline a few percent slower at half
/// the memory), large enough that per-batch costs vanish.
pub const DEFAULT_BATCH_SIZE: usize = 2048;

/// Per-run connector settings (the CLI's flags).
#[derive(Debug, Clone)]
pub struct ConnectorConfig {
    /// `--input TABLE=PATH`: table name to NDJSON path (`-` = stdin).
    pub inputs: BTreeMap<String, String>,
    /// `--output DIR`.
    pub output_dir: Option<PathBuf>,
    /// `--format`.
    pub output_format: OutputFormat,
    /// Rows per source batch.
    pub batch_size: usize,
    /// Threads decoding each NDJSON source (1 = decode on the source's own thread).
    pub decode_threads: usize,
    /// Keeps file paths inside these directories (jobs submitted to a
    /// server); `None` lets a job use any path.
    pub roots: Option<PathRoots>,
    /// Scale-out: the number of the task this job is (`3` for `task-3`).
    /// Kafka sinks' transactional ids and file sinks' names carry it, so
    /// tasks never write over one another; exchange markers name it.
    pub task: Option<u32>,
    /// Where `view` sinks keep their results for readers (a server's
    /// views); `None` refuses `view` sinks.
    pub views: Option<crate::view::ViewCatalog>,
    /// What one connector alone reads, by type: where stdout sinks print
    /// ([`crate::stdout::StdoutTarget`], the process's output unless set),
    /// the partitions a group's task reads ([`crate::kafka::TaskPartitions`]).
    pub settings: ConnectorSettings,
}

impl Default for ConnectorConfig {
    fn default() -> Self {
        Self {
            inputs: BTreeMap::new(),
            output_dir: None,
            output_format: OutputFormat::Ndjson,
            batch_size: DEFAULT_BATCH_SIZE,
            decode_threads: std::thread::available_parallelism()
                .map(|n| n.get().min(4))
                .unwrap_or(1),
            roots: None,
            task: None,
            views: None,
            settings: ConnectorSettings::default(),
        }
    }
}

impl ConnectorConfig {
    /// Rows per batch of a table's reader (its `batch_size`, else the run's).
    pub fn batch_size(&self, spec: &ConnectorSpec) -> Result<usize> {
        Ok(OptionValues::new(&spec.options)
            .count("batch_size")?
            .unwrap_or(self.batch_size))
    }

    /// A file sink's path for this job: a task's own name beside the
    /// table's (`out.task-3.ndjson`, `dir/task-3/`).
    pub fn task_path(&self, path: PathBuf, directory: bool) -> PathBuf {
        let Some(task) = self.task.map(|t| format!("task-{t}")) else {
            return path;
        };
        if directory {
            return path.join(task);
        }
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let name = match path.extension() {
            Some(ext) => format!("{stem}.{task}.{}", ext.to_string_lossy()),
            None => format!("{stem}.{task}"),
        };
        path.with_file_name(name)
    }

    /// A file source's path, inside the data root when there is one
    /// (`file:///data/x` is `/data/x`, as Flink writes local paths).
    pub fn source_path(&self, spec: &ConnectorSpec) -> Result<String> {
        let path =
            OptionValues::new(&spec.options).required("path", "a file source needs a path")?;
        refuse_bucket(spec, path, "source")?;
        let path = local_path(path);
        match &self.roots {
            Some(roots) => Ok(roots.source(path)?.display().to_string()),
            None => Ok(path.to_string()),
        }
    }

    /// A file source's location: a bucket object as given, or a local path
    /// inside the data root when there is one.
    pub fn source_location(&self, spec: &ConnectorSpec) -> Result<Location> {
        let path =
            OptionValues::new(&spec.options).required("path", "a file source needs a path")?;
        let location = match &self.roots {
            Some(roots) => roots.source_location(local_path(path))?,
            None if crate::storage::is_bucket(path) => Location::parse(path)?,
            None => self.source_path(spec).map(Location::local)?,
        };
        self.configure_storage(&location, spec)?;
        Ok(location)
    }

    /// A file sink's location: a bucket prefix as given, or a local path
    /// inside the output root when there is one.
    pub fn sink_location(&self, spec: &ConnectorSpec) -> Result<Location> {
        let path = spec.options.get("path").ok_or_else(|| {
            ConnectorError::bad_option("path", format!("a {} sink needs a path", spec.connector))
        })?;
        let location = match &self.roots {
            Some(roots) => roots.sink_location(local_path(path))?,
            None if crate::storage::is_bucket(path) => Location::parse(path)?,
            None => self.sink_path(spec).map(Location::Local)?,
        };
        self.configure_storage(&location, spec)?;
        Ok(location)
    }

    /// Applies a table's `storage.` options to its location
    /// ([`crate::storage::configure`]). A server's jobs take none: the
    /// store's settings are the server's, or a job could point a prefix
    /// inside its roots at another store (or another job's prefix at its
    /// own), and the settings are shared by every job in the process.
    fn configure_storage(&self, location: &Location, spec: &ConnectorSpec) -> Result<()> {
        if self.roots.is_some() {
            if let Some((key, _)) = crate::storage::storage_options(&spec.options).first() {
                return Err(ConnectorError::bad_option(
                    &format!("{}{key}", crate::storage::STORAGE_PREFIX),
                    "a server's jobs use the server's storage settings (its environment); leave storage options out",
                ));
            }
        }
        crate::storage::configure(location, &spec.options)
    }

    /// `--output`'s location, if given.
    pub fn output_location(&self) -> Result<Option<Location>> {
        self.output_dir
            .as_ref()
            .map(|dir| Location::parse(&dir.to_string_lossy()))
            .transpose()
    }

    /// [`Self::task_path`] for a location.
    pub fn task_location(&self, location: Location, directory: bool) -> Location {
        match location {
            Location::Local(path) => Location::Local(self.task_path(path, directory)),
            bucket => match self.task {
                None => bucket,
                Some(task) if directory => bucket.join(&format!("task-{task}")),
                Some(task) => bucket.with_last(|name| match name.rsplit_once('.') {
                    Some((stem, ext)) => format!("{stem}.task-{task}.{ext}"),
                    None => format!("{name}.task-{task}"),
                }),
            },
        }
    }

    /// A file sink's path, inside the output root when there is one.
    pub fn sink_path(&self, spec: &ConnectorSpec) -> Result<PathBuf> {
        let path = spec.options.get("path").ok_or_else(|| {
            ConnectorError::bad_option("path", format!("a {} sink needs a path", spec.connector))
        })?;
        refuse_bucket(spec, path, "sink")?;
        let path = local_path(path);
        match &self.roots {
            Some(roots) => roots.sink(path),
            None => Ok(PathBuf::from(path)),
        }
    }
}

/// A bucket path where only a local one is taken, refused by name.
fn refuse_bucket(spec: &ConnectorSpec, path: &str, role: &str) -> Result<()> {
    if !crate::storage::is_bucket(path) {
        return Ok(());
    }
    let scheme = path.split("://").next().unwrap_or_default();
    Err(ConnectorError::bad_option(
        "path",
        format!(
            "a {} {role} takes a local path; {scheme}:// is not supported there yet",
            spec.connector
        ),
    ))
}

/// A path option as a local path: Flink's `file://` scheme dropped.
fn local_path(path: &str) -> &str {
    path.strip_prefix("file://").unwrap_or(path)
}
