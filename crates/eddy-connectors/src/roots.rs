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

use std::path::{Component, Path, PathBuf};

use crate::error::{ConnectorError, Result};

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
