//! Connector options, declared once: each connector lists its options as
//! [`OptionDecl`]s (name, kind of value, one line of docs), and from that
//! one list come the check that refuses a misspelt name (naming the
//! closest valid one and all of them), the check of each value's kind
//! before anything runs, the reference `eddy connectors` prints, and the
//! typed reading the connector does when it opens ([`OptionValues`]).
//!
//! In: a table's options (the engine's own table options,
//! [`TABLE_OPTIONS`], are allowed on every source). Out: `Ok` or a
//! [`ConnectorError::UnknownOption`] / [`ConnectorError::BadOption`];
//! typed values.
//!
//! ```
//! use std::collections::BTreeMap;
//! use eddy_connectors::options::{OptionDecl, OptionKind, OptionValues, validate};
//!
//! const OPTIONS: &[OptionDecl] = &[
//!     OptionDecl::new("rate", OptionKind::Count, "rows a second"),
//!     OptionDecl::new("realtime", OptionKind::Flag, "pace rows on the wall clock"),
//! ];
//! let mut given = BTreeMap::new();
//! given.insert("rate".to_string(), "500".to_string());
//! validate(OPTIONS, &given, "generator", eddy_connectors::Role::Source).unwrap();
//! let values = OptionValues::new(&given);
//! assert_eq!(values.count::<u32>("rate").unwrap(), Some(500));
//! assert!(!values.flag("realtime", false).unwrap());
//!
//! given.insert("rat".to_string(), "5".to_string());
//! let err = validate(OPTIONS, &given, "generator", eddy_connectors::Role::Source).unwrap_err();
//! assert!(err.to_string().contains("did you mean 'rate'?"));
//! ```

use std::collections::BTreeMap;
use std::time::Duration;

use eddy_engine::source::layout::TABLE_OPTIONS;
use eddy_engine::suggest::closest;

use crate::connector::Role;
use crate::error::{ConnectorError, Result};

/// The kind of value an option takes; checked before the job runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OptionKind {
    /// Any text.
    Text,
    /// A file or directory path.
    Path,
    /// A whole number, zero or more.
    Count,
    /// `true` or `false` (any case).
    Flag,
    /// A byte size with an optional unit (`64MB`, `1 GiB`, `500k`).
    Size,
    /// A duration (`10s`, `5 min`, `1h`).
    Duration,
    /// One of these words (any case).
    OneOf(&'static [&'static str]),
    /// A family of options: every name starting with the declared name
    /// (`properties.` for the Kafka client's own settings).
    Prefix,
    /// A family of options (by prefix, as [`OptionKind::Prefix`]) another
    /// engine takes and eddy refuses, saying why: it would not honour them.
    Refused(&'static str),
}

impl OptionKind {
    /// How the reference describes a value of this kind.
    pub fn describe(self) -> String {
        match self {
            Self::Text => "text".into(),
            Self::Path => "path".into(),
            Self::Count => "number".into(),
            Self::Flag => "true or false".into(),
            Self::Size => "size (64MB, 1GiB)".into(),
            Self::Duration => "duration (10s, 5 min)".into(),
            Self::OneOf(words) => words.join(", "),
            Self::Prefix => "options named by prefix".into(),
            Self::Refused(_) => "refused".into(),
        }
    }

    /// Checks `value` is of this kind.
    fn check(self, option: &str, value: &str) -> Result<()> {
        match self {
            Self::Text | Self::Path | Self::Prefix => Ok(()),
            Self::Refused(why) => Err(ConnectorError::bad_option(option, why)),
            Self::Count => parse_number::<u64>(value, option).map(|_| ()),
            Self::Flag => parse_flag(value, option).map(|_| ()),
            Self::Size => parse_size(value, option).map(|_| ()),
            Self::Duration => parse_duration(value, option).map(|_| ()),
            Self::OneOf(words) => {
                if words.iter().any(|w| w.eq_ignore_ascii_case(value.trim())) {
                    Ok(())
                } else {
                    Err(ConnectorError::bad_option(
                        option,
                        format!(
                            "'{value}' is not one of {}",
                            words
                                .iter()
                                .map(|w| format!("'{w}'"))
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    ))
                }
            }
        }
    }
}

/// One option a connector takes in a role.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OptionDecl {
    /// The option's name (for [`OptionKind::Prefix`], the prefix).
    pub name: &'static str,
    /// What it takes.
    pub kind: OptionKind,
    /// One line for the reference.
    pub doc: &'static str,
}

impl OptionDecl {
    /// An option.
    pub const fn new(name: &'static str, kind: OptionKind, doc: &'static str) -> Self {
        Self { name, kind, doc }
    }

    fn matches(&self, given: &str) -> bool {
        match self.kind {
            OptionKind::Prefix | OptionKind::Refused(_) => given.starts_with(self.name),
            _ => given == self.name,
        }
    }
}

/// Checks every option in `given` against `declared` (and, for a source,
/// the engine's table options): the name is known, the value of its kind.
pub fn validate(
    declared: &[OptionDecl],
    given: &BTreeMap<String, String>,
    connector: &str,
    role: Role,
) -> Result<()> {
    let engine: &[&str] = match role {
        Role::Source => &TABLE_OPTIONS,
        Role::Sink | Role::Lookup => &[],
    };
    for (option, value) in given {
        if let Some(decl) = declared.iter().find(|d| d.matches(option)) {
            decl.kind.check(option, value)?;
            continue;
        }
        if engine.contains(&option.as_str()) {
            continue;
        }
        let mut all: Vec<&str> = declared
            .iter()
            .map(|d| d.name)
            .chain(engine.iter().copied())
            .collect();
        all.sort_unstable();
        return Err(ConnectorError::UnknownOption {
            option: option.clone(),
            connector: connector.to_string(),
            role: role.name(),
            hint: hint(option, all.iter().copied()),
            valid: if all.is_empty() {
                "none".to_string()
            } else {
                all.join(", ")
            },
        });
    }
    Ok(())
}

/// `; did you mean '...'?` for the known name closest to `given`, or empty.
pub(crate) fn hint<'a>(given: &str, known: impl IntoIterator<Item = &'a str>) -> String {
    closest(given, known)
        .map(|name| format!("; did you mean '{name}'?"))
        .unwrap_or_default()
}

/// A table's options, read typed (after [`validate`], so a value of the
/// wrong kind is already refused; the readers still say why).
#[derive(Debug, Clone, Copy)]
pub struct OptionValues<'a> {
    given: &'a BTreeMap<String, String>,
}

impl<'a> OptionValues<'a> {
    /// The options of one table.
    pub fn new(given: &'a BTreeMap<String, String>) -> Self {
        Self { given }
    }

    /// The option's text, if set.
    pub fn text(&self, name: &str) -> Option<&'a str> {
        self.given.get(name).map(String::as_str)
    }

    /// The option's text lower-cased, if set (formats, modes).
    pub fn word(&self, name: &str) -> Option<String> {
        self.text(name).map(|v| v.trim().to_ascii_lowercase())
    }

    /// The option's text, or an error saying why it is needed.
    pub fn required(&self, name: &str, why: &str) -> Result<&'a str> {
        self.text(name)
            .ok_or_else(|| ConnectorError::bad_option(name, why.to_string()))
    }

    /// A number.
    pub fn count<T: std::str::FromStr>(&self, name: &str) -> Result<Option<T>> {
        self.text(name).map(|v| parse_number(v, name)).transpose()
    }

    /// A true/false option; `default` when not set.
    pub fn flag(&self, name: &str, default: bool) -> Result<bool> {
        match self.text(name) {
            Some(v) => parse_flag(v, name),
            None => Ok(default),
        }
    }

    /// A byte size.
    pub fn size(&self, name: &str) -> Result<Option<u64>> {
        self.text(name).map(|v| parse_size(v, name)).transpose()
    }

    /// A duration.
    pub fn duration(&self, name: &str) -> Result<Option<Duration>> {
        self.text(name).map(|v| parse_duration(v, name)).transpose()
    }
}

/// A true/false option of `options`; `default` when not set.
pub fn flag(options: &BTreeMap<String, String>, name: &str, default: bool) -> Result<bool> {
    OptionValues::new(options).flag(name, default)
}

pub(crate) fn parse_number<T: std::str::FromStr>(value: &str, option: &str) -> Result<T> {
    value
        .trim()
        .parse()
        .map_err(|_| ConnectorError::bad_option(option, format!("'{value}' is not a valid number")))
}

fn parse_flag(value: &str, option: &str) -> Result<bool> {
    match value.trim().to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        v => Err(ConnectorError::bad_option(
            option,
            format!("'{v}' is not true or false"),
        )),
    }
}

fn parse_duration(value: &str, option: &str) -> Result<Duration> {
    eddy_engine::time::parse_duration(value)
        .map_err(|e| ConnectorError::bad_option(option, e.to_string()))
}

/// A byte size: a number with an optional unit (`64MB`, `1 GiB`, `500k`).
fn parse_size(value: &str, option: &str) -> Result<u64> {
    eddy_engine::memory::parse_bytes(value)
        .map_err(|e| ConnectorError::bad_option(option, e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const DECLARED: &[OptionDecl] = &[
        OptionDecl::new("path", OptionKind::Path, ""),
        OptionDecl::new("rows", OptionKind::Count, ""),
        OptionDecl::new("every", OptionKind::Duration, ""),
        OptionDecl::new("bytes", OptionKind::Size, ""),
        OptionDecl::new("mode", OptionKind::OneOf(&["fast", "slow"]), ""),
        OptionDecl::new("properties.", OptionKind::Prefix, ""),
    ];

    fn given(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_misspelt_option_is_named_with_the_closest_and_every_valid_one() {
        let err = validate(
            DECLARED,
            &given(&[("idel_timeout", "1s")]),
            "x",
            Role::Source,
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("unknown option 'idel_timeout' for a x source"),
            "{err}"
        );
        assert!(err.contains("did you mean 'idle_timeout'?"), "{err}");
        assert!(err.contains("allowed_lateness, bad_rows, bytes, every, idle_timeout, late_rows, max_future_skew, mode, path, properties., rows"), "{err}");
        // The engine's table options belong to sources only.
        let err = validate(DECLARED, &given(&[("idle_timeout", "1s")]), "x", Role::Sink)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("unknown option 'idle_timeout' for a x sink"),
            "{err}"
        );
    }

    #[test]
    fn values_are_checked_by_their_declared_kind() {
        let ok = given(&[
            ("path", "a/b"),
            ("rows", "10"),
            ("every", "5 min"),
            ("bytes", "64MiB"),
            ("mode", "FAST"),
            ("properties.linger.ms", "5"),
        ]);
        validate(DECLARED, &ok, "x", Role::Sink).unwrap();
        for (option, value, why) in [
            ("rows", "ten", "'ten' is not a valid number"),
            ("rows", "-1", "'-1' is not a valid number"),
            ("every", "soon", "option 'every'"),
            ("bytes", "9 parsecs", "is not a size unit"),
            ("mode", "medium", "'medium' is not one of 'fast', 'slow'"),
        ] {
            let err = validate(DECLARED, &given(&[(option, value)]), "x", Role::Sink)
                .unwrap_err()
                .to_string();
            assert!(err.contains(why), "{option}={value}: {err}");
        }
    }

    #[test]
    fn values_read_typed() {
        let g = given(&[
            ("rows", " 7 "),
            ("bytes", "1k"),
            ("every", "2s"),
            ("f", "TRUE"),
        ]);
        let values = OptionValues::new(&g);
        assert_eq!(values.count::<usize>("rows").unwrap(), Some(7));
        assert_eq!(values.size("bytes").unwrap(), Some(1000));
        assert_eq!(
            values.duration("every").unwrap(),
            Some(Duration::from_secs(2))
        );
        assert!(values.flag("f", false).unwrap());
        assert!(values.flag("absent", true).unwrap());
        assert!(values.required("path", "needed").is_err());
    }
}
