//! Where jobs may read and write files when they are submitted by others
//! (`eddy serve --data-root D --output-root O`).
//!
//! In: a source's or sink's `path` option. Out: the absolute path it
//! names, or an error saying where it leads and why that is refused. A
//! relative path is taken relative to its root; the result, with `..` and
//! symbolic links followed, must lie inside the root and outside every
//! forbidden directory (the server's own state). A source's file must
//! exist; a sink's path may not exist yet, so its nearest existing ancestor
//! is resolved and the rest may not climb with `..`.
//!
//! A root may be a bucket prefix (`--output-root s3://lake/jobs`): a job's
//! path is then relative to it, or a bucket path inside it, never with
//! `..`; a bucket path is refused under a local root.

use std::path::{Component, Path, PathBuf};

use crate::error::{ConnectorError, Result};
use crate::storage::{is_bucket, Location};

/// Directories jobs may use.
#[derive(Debug, Clone)]
pub struct PathRoots {
    /// Sources read below this directory.
    pub data: PathBuf,
    /// Sinks write below this directory.
    pub output: PathBuf,
    /// Directories no job may touch, even inside a root.
    pub forbidden: Vec<PathBuf>,
}

fn canonical(path: &Path) -> Result<PathBuf> {
    path.canonicalize().map_err(|source| ConnectorError::Io {
        path: path.display().to_string(),
        source,
    })
}

/// The path with its existing part resolved (symbolic links, `..`) and the
/// rest appended; the rest must not contain `..`.
fn resolve_partly(path: &Path) -> Result<PathBuf> {
    let mut existing = path.to_path_buf();
    let mut rest = Vec::new();
    while !existing.exists() {
        let Some(name) = existing.file_name().map(|n| n.to_os_string()) else {
            return Err(ConnectorError::bad_option(
                "path",
                format!("'{}' cannot be resolved", path.display()),
            ));
        };
        rest.push(name);
        if !existing.pop() {
            break;
        }
    }
    let mut resolved = canonical(if existing.as_os_str().is_empty() {
        Path::new(".")
    } else {
        &existing
    })?;
    for name in rest.into_iter().rev() {
        let part = Path::new(&name);
        if part
            .components()
            .any(|c| !matches!(c, Component::Normal(_)))
        {
            return Err(ConnectorError::bad_option(
                "path",
                format!("'{}' climbs out with '..'", path.display()),
            ));
        }
        resolved.push(part);
    }
    Ok(resolved)
}

/// A bucket path under a local root: refused.
fn refuse_bucket(given: &str, root: &Path, what: &str) -> Result<()> {
    if !is_bucket(given) {
        return Ok(());
    }
    Err(ConnectorError::bad_option(
        "path",
        format!(
            "{what} path '{}': this server keeps jobs' files under {}, a local directory",
            shown(given),
            root.display()
        ),
    ))
}

/// A bucket path with any credentials in it left out.
fn shown(given: &str) -> String {
    match Location::parse(given) {
        Ok(location) => location.to_string(),
        Err(_) => given.split('@').next_back().unwrap_or_default().to_string(),
    }
}

/// `given` below the bucket prefix `root`: a path relative to it (no `..`,
/// nothing absolute), or a bucket path that lies inside it.
fn in_bucket(given: &str, root: &Path, what: &str) -> Result<Location> {
    let root_text = root.to_string_lossy().trim_end_matches('/').to_string();
    let outside = |why: &str| {
        ConnectorError::bad_option(
            "path",
            format!("{what} path '{}': {why} {root_text}", shown(given)),
        )
    };
    let full = if is_bucket(given) {
        given.to_string()
    } else if given.contains("://") || given.starts_with('/') {
        return Err(outside("is not below"));
    } else {
        format!("{root_text}/{given}")
    };
    let (scheme_and_bucket, rest) = match full.split_once("://") {
        Some((scheme, rest)) => (scheme, rest),
        None => return Err(outside("is not below")),
    };
    if rest.split('/').any(|part| part == ".." || part == ".") {
        return Err(outside("climbs out with '..' of"));
    }
    let normalized = format!("{scheme_and_bucket}://{}", rest.trim_end_matches('/'));
    if normalized != root_text && !normalized.starts_with(&format!("{root_text}/")) {
        return Err(outside("is outside"));
    }
    Location::parse(&normalized)
}

impl PathRoots {
    fn check(&self, given: &str, root: &Path, resolved: PathBuf, what: &str) -> Result<PathBuf> {
        let root = canonical(root)?;
        if !resolved.starts_with(&root) {
            return Err(ConnectorError::bad_option(
                "path",
                format!(
                    "{what} path '{given}' resolves to {}, outside {}",
                    resolved.display(),
                    root.display()
                ),
            ));
        }
        for forbidden in &self.forbidden {
            let forbidden = forbidden
                .canonicalize()
                .unwrap_or_else(|_| forbidden.clone());
            if resolved.starts_with(&forbidden) {
                return Err(ConnectorError::bad_option(
                    "path",
                    format!(
                        "{what} path '{given}' resolves to {}, inside the server's own files",
                        resolved.display()
                    ),
                ));
            }
        }
        Ok(resolved)
    }

    /// The file a source's `path` names; it must exist inside the data root.
    pub fn source(&self, given: &str) -> Result<PathBuf> {
        if given == "-" {
            return Err(ConnectorError::bad_option(
                "path",
                "a submitted job cannot read stdin",
            ));
        }
        let joined = self.data.join(given);
        let resolved = canonical(&joined).map_err(|_| {
            ConnectorError::bad_option(
                "path",
                format!(
                    "source path '{given}': no such file below {}",
                    self.data.display()
                ),
            )
        })?;
        self.check(given, &self.data, resolved, "source")
    }

    /// Where a source's `path` leads: below the data root, which may be a
    /// bucket prefix ([`PathRoots::in_bucket`]).
    pub fn source_location(&self, given: &str) -> Result<Location> {
        if is_bucket(&self.data.to_string_lossy()) {
            return in_bucket(given, &self.data, "source");
        }
        refuse_bucket(given, &self.data, "source")?;
        self.source(given).map(Location::Local)
    }

    /// Where a sink's `path` leads: below the output root, which may be a
    /// bucket prefix ([`PathRoots::in_bucket`]).
    pub fn sink_location(&self, given: &str) -> Result<Location> {
        if is_bucket(&self.output.to_string_lossy()) {
            return in_bucket(given, &self.output, "sink");
        }
        refuse_bucket(given, &self.output, "sink")?;
        self.sink(given).map(Location::Local)
    }

    /// The file or directory a sink's `path` names, inside the output root.
    pub fn sink(&self, given: &str) -> Result<PathBuf> {
        let joined = self.output.join(given);
        let resolved = resolve_partly(&joined)?;
        self.check(given, &self.output, resolved, "sink")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_roots_hold_jobs_inside_their_prefix() {
        let roots = PathRoots {
            data: PathBuf::from("s3://lake/in"),
            output: PathBuf::from("s3://lake/out/"),
            forbidden: Vec::new(),
        };
        let at = |given: &str| roots.sink_location(given).map(|l| l.to_string());
        assert_eq!(at("pay").unwrap(), "s3://lake/out/pay");
        assert_eq!(at("s3://lake/out/pay/x").unwrap(), "s3://lake/out/pay/x");
        for bad in [
            "s3://lake/outside",
            "s3://lake/out/../in",
            "../in",
            "/etc/x",
            "s3://other/out/pay",
            "file:///tmp/x",
        ] {
            let error = at(bad).unwrap_err().to_string();
            assert!(error.contains("s3://lake/out"), "{bad}: {error}");
        }
        assert_eq!(
            roots.source_location("o.ndjson").unwrap().to_string(),
            "s3://lake/in/o.ndjson"
        );
        let local = PathRoots {
            data: PathBuf::from("/srv/in"),
            output: PathBuf::from("/srv/out"),
            forbidden: Vec::new(),
        };
        let error = local
            .sink_location("s3://lake/out")
            .unwrap_err()
            .to_string();
        assert!(error.contains("a local directory"), "{error}");
    }

    #[test]
    fn paths_stay_inside_their_roots() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let output = dir.path().join("out");
        let state = dir.path().join("data/state");
        std::fs::create_dir_all(&state).unwrap();
        std::fs::create_dir_all(&output).unwrap();
        std::fs::write(data.join("in.ndjson"), "").unwrap();
        std::fs::write(dir.path().join("secret"), "").unwrap();
        std::fs::write(state.join("MANIFEST"), "").unwrap();
        #[cfg(unix)]
        std::os::unix::fs::symlink(dir.path().join("secret"), data.join("link")).unwrap();
        let roots = PathRoots {
            data: data.clone(),
            output: output.clone(),
            forbidden: vec![state],
        };

        assert!(roots.source("in.ndjson").is_ok());
        assert!(roots
            .source(&data.join("in.ndjson").display().to_string())
            .is_ok());
        for bad in [
            "../secret",
            "link",
            "state/MANIFEST",
            "missing.ndjson",
            "-",
            "/etc/passwd",
        ] {
            let error = roots.source(bad).unwrap_err().to_string();
            assert!(error.contains(bad) || bad == "-", "{bad}: {error}");
        }
        assert!(roots.sink("results/new.ndjson").is_ok());
        for bad in ["../escape.ndjson", "a/../../b", "/tmp/x"] {
            assert!(roots.sink(bad).is_err(), "{bad}");
        }
    }
}
