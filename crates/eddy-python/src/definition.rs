//! What a `CREATE FUNCTION ... LANGUAGE PYTHON` declares.
//!
//! In: the declaration's parts (name, argument and return types, body,
//! `WITH` options) as the SQL front end read them. Out: a checked
//! [`FunctionDefinition`], and the JSON a worker loads it from.

use std::path::PathBuf;
use std::time::Duration;

use datafusion::arrow::datatypes::{DataType, TimeUnit};

use crate::error::{PythonError, Result};

/// A scalar function or an aggregate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FunctionKind {
    /// Called per row (or per batch, vectorized): one value per row.
    Scalar,
    /// A class with `accumulate`, `merge`, `finish` and optionally
    /// `retract`: one value per group.
    Aggregate,
}

/// Where the function's code is.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum FunctionBody {
    /// `AS $$ ... $$`: Python source that defines a function (or, for an
    /// aggregate, a class) of the SQL function's name.
    Inline(String),
    /// `AS 'module:attribute'`: imported from the job's function path.
    Module {
        /// The module (dotted).
        module: String,
        /// The function or class in it.
        attribute: String,
    },
}

/// What a row whose call raised becomes (option `on_error`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum OnError {
    /// The value is NULL, and the row is counted with Python's message
    /// (`eddy run`'s summary, the API's job view). For an aggregate, the
    /// row is left out of its group.
    #[default]
    Null,
    /// The job fails with the traceback.
    Fail,
}

/// The default per-call time limit (option `timeout`).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// A Python function as declared.
///
/// ```
/// use datafusion::arrow::datatypes::DataType;
/// use eddy_python::{FunctionBody, FunctionDefinition, FunctionKind};
///
/// let mut f = FunctionDefinition::new(
///     "gcd",
///     FunctionKind::Scalar,
///     vec![DataType::Int64, DataType::Int64],
///     DataType::Int64,
///     FunctionBody::Inline("def gcd(a, b):\n    while b:\n        a, b = b, a % b\n    return a\n".into()),
/// )
/// .unwrap();
/// f.set_option("timeout", "5s").unwrap();
/// assert!(f.set_option("on_error", "explode").unwrap_err().to_string().contains("'null' or 'fail'"));
/// assert!(FunctionDefinition::new("f", FunctionKind::Scalar, vec![], DataType::Decimal128(10, 2),
///     FunctionBody::Inline(String::new())).is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FunctionDefinition {
    /// The SQL name (as the planner resolves it).
    pub name: String,
    /// Scalar or aggregate.
    pub kind: FunctionKind,
    /// Argument types, in order.
    pub args: Vec<DataType>,
    /// Return type.
    pub returns: DataType,
    /// The code.
    pub body: FunctionBody,
    /// Called once per batch with pyarrow arrays (`vectorized = true`).
    pub vectorized: bool,
    /// What a raising row becomes.
    pub on_error: OnError,
    /// The longest one call (one batch) may take before the job fails.
    pub timeout: Duration,
}

impl FunctionDefinition {
    /// Checks the types and the name.
    pub fn new(
        name: &str,
        kind: FunctionKind,
        args: Vec<DataType>,
        returns: DataType,
        body: FunctionBody,
    ) -> Result<Self> {
        let identifier = |s: &str| {
            s.chars()
                .next()
                .is_some_and(|c| c.is_alphabetic() || c == '_')
                && s.chars().all(|c| c.is_alphanumeric() || c == '_')
        };
        if matches!(body, FunctionBody::Inline(_)) && !identifier(name) {
            return Err(PythonError::Declaration(format!(
                "'{name}' is not a Python identifier, so its body cannot define it; name the function with letters, digits and underscores"
            )));
        }
        if let FunctionBody::Module { module, attribute } = &body {
            if module.is_empty() || !module.split('.').all(identifier) || !identifier(attribute) {
                return Err(PythonError::Declaration(format!(
                    "'{module}:{attribute}' does not name a module and a function in it (write AS 'package.module:function')"
                )));
            }
        }
        if kind == FunctionKind::Aggregate && args.is_empty() {
            // Where DataFusion folds rows one group at a time (OVER,
            // updating aggregates) an aggregate without arguments would see
            // no rows at all.
            return Err(PythonError::Declaration(format!(
                "aggregate {name} takes no argument; an aggregate takes at least one (count rows with count(*))"
            )));
        }
        for (i, t) in args.iter().enumerate() {
            Kind::of(t).map_err(|e| {
                PythonError::Declaration(format!("{name}: argument {}: {e}", i + 1))
            })?;
        }
        Kind::of(&returns)
            .map_err(|e| PythonError::Declaration(format!("{name}: return type: {e}")))?;
        Ok(Self {
            name: name.to_string(),
            kind,
            args,
            returns,
            body,
            vectorized: false,
            on_error: OnError::default(),
            timeout: DEFAULT_TIMEOUT,
        })
    }

    /// Applies one `WITH (key = 'value')` option; the error says what the
    /// option takes.
    pub fn set_option(&mut self, key: &str, value: &str) -> std::result::Result<(), OptionRefusal> {
        let bad = |option: &'static str, takes: &'static str| OptionRefusal::BadValue {
            option,
            takes,
            value: value.to_string(),
        };
        match key.to_ascii_lowercase().as_str() {
            "vectorized" => {
                self.vectorized = match value.trim().to_ascii_lowercase().as_str() {
                    "true" => true,
                    "false" => false,
                    _ => return Err(bad("vectorized", "true or false")),
                };
                if self.vectorized && self.kind == FunctionKind::Aggregate {
                    return Err(OptionRefusal::VectorizedAggregate);
                }
            }
            "on_error" => {
                self.on_error = match value.trim().to_ascii_lowercase().as_str() {
                    "null" => OnError::Null,
                    "fail" => OnError::Fail,
                    _ => return Err(bad("on_error", "'null' or 'fail'")),
                };
            }
            "timeout" => {
                self.timeout = parse_seconds(value)
                    .ok_or_else(|| bad("timeout", "a duration such as '30s' or '500ms'"))?;
            }
            other => {
                return Err(OptionRefusal::Unknown {
                    option: other.to_string(),
                })
            }
        }
        Ok(())
    }

    /// Whether an aggregate's code defines `retract`, judged from its
    /// source (the inline body, or the module's file found on `paths`)
    /// without running it: updating queries and sliding OVER frames need
    /// it, and the planner chooses before any Python runs.
    pub fn retracts(&self, paths: &[PathBuf]) -> bool {
        let source = match &self.body {
            FunctionBody::Inline(source) => source.clone(),
            FunctionBody::Module { module, .. } => {
                let relative = module.replace('.', "/");
                paths
                    .iter()
                    .flat_map(|p| {
                        [
                            p.join(format!("{relative}.py")),
                            p.join(&relative).join("__init__.py"),
                        ]
                    })
                    .find_map(|p| std::fs::read_to_string(p).ok())
                    .unwrap_or_default()
            }
        };
        source
            .lines()
            .any(|l| l.trim_start().starts_with("def retract("))
    }

    /// The worker's description of this function.
    pub(crate) fn to_json(&self) -> serde_json::Value {
        let kind = |t: &DataType| Kind::of(t).map(|k| k as u8).unwrap_or(0);
        let mut spec = serde_json::json!({
            "name": self.name,
            "kind": match self.kind { FunctionKind::Scalar => "scalar", FunctionKind::Aggregate => "aggregate" },
            "vectorized": self.vectorized,
            "on_error": match self.on_error { OnError::Null => "null", OnError::Fail => "fail" },
            "args": self.args.iter().map(kind).collect::<Vec<_>>(),
            "returns": kind(&self.returns),
        });
        match &self.body {
            FunctionBody::Inline(source) => spec["source"] = source.clone().into(),
            FunctionBody::Module { module, attribute } => {
                spec["module"] = module.clone().into();
                spec["attr"] = attribute.clone().into();
            }
        }
        spec
    }
}

fn parse_seconds(text: &str) -> Option<Duration> {
    let text = text.trim().to_ascii_lowercase();
    let split = text.find(|c: char| !c.is_ascii_digit() && c != '.')?;
    let (number, unit) = text.split_at(split);
    let number: f64 = number.parse().ok()?;
    let seconds = match unit.trim() {
        "ms" => number / 1000.0,
        "s" | "sec" | "second" | "seconds" => number,
        "min" | "minute" | "minutes" => number * 60.0,
        _ => return None,
    };
    (seconds > 0.0 && seconds.is_finite()).then(|| Duration::from_secs_f64(seconds))
}

/// How a column travels to and from a worker (the worker's `Kind`
/// constants have the same numbers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Kind {
    Bool = 1,
    I8 = 2,
    I16 = 3,
    I32 = 4,
    I64 = 5,
    F32 = 6,
    F64 = 7,
    Utf8 = 8,
    Binary = 9,
    TimestampS = 10,
    TimestampMs = 11,
    TimestampUs = 12,
    TimestampNs = 13,
    Date32 = 14,
    U8 = 15,
    U16 = 16,
    U32 = 17,
    U64 = 18,
}

/// A type Python functions do not take.
/// Why a Python function's `WITH` option is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OptionRefusal {
    /// A value the option does not take.
    #[error("option {option} takes {takes}, not '{value}'")]
    BadValue {
        option: &'static str,
        takes: &'static str,
        value: String,
    },
    /// `vectorized = 'true'` on an aggregate.
    #[error("aggregates are called row by row; vectorized applies to scalar functions")]
    VectorizedAggregate,
    /// No such option.
    #[error(
        "unknown option '{option}' for a Python function (options: vectorized, on_error, timeout)"
    )]
    Unknown { option: String },
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0} is not a type Python functions take (they take BOOLEAN, integers, FLOAT, DOUBLE, VARCHAR, BYTEA, TIMESTAMP and DATE)")]
pub struct UnsupportedType(pub DataType);

impl Kind {
    pub(crate) fn of(t: &DataType) -> std::result::Result<Kind, UnsupportedType> {
        Ok(match t {
            DataType::Boolean => Kind::Bool,
            DataType::Int8 => Kind::I8,
            DataType::Int16 => Kind::I16,
            DataType::Int32 => Kind::I32,
            DataType::Int64 => Kind::I64,
            DataType::UInt8 => Kind::U8,
            DataType::UInt16 => Kind::U16,
            DataType::UInt32 => Kind::U32,
            DataType::UInt64 => Kind::U64,
            DataType::Float32 => Kind::F32,
            DataType::Float64 => Kind::F64,
            DataType::Utf8 => Kind::Utf8,
            DataType::Binary => Kind::Binary,
            DataType::Timestamp(TimeUnit::Second, _) => Kind::TimestampS,
            DataType::Timestamp(TimeUnit::Millisecond, _) => Kind::TimestampMs,
            DataType::Timestamp(TimeUnit::Microsecond, _) => Kind::TimestampUs,
            DataType::Timestamp(TimeUnit::Nanosecond, _) => Kind::TimestampNs,
            DataType::Date32 => Kind::Date32,
            other => return Err(UnsupportedType(other.clone())),
        })
    }

    /// Bytes per value of a fixed-width kind (0 for the others).
    pub(crate) fn width(self) -> usize {
        match self {
            Kind::I8 | Kind::U8 => 1,
            Kind::I16 | Kind::U16 => 2,
            Kind::I32 | Kind::U32 | Kind::F32 | Kind::Date32 => 4,
            Kind::I64
            | Kind::U64
            | Kind::F64
            | Kind::TimestampS
            | Kind::TimestampMs
            | Kind::TimestampUs
            | Kind::TimestampNs => 8,
            Kind::Bool | Kind::Utf8 | Kind::Binary => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inline(source: &str) -> FunctionDefinition {
        FunctionDefinition::new(
            "f",
            FunctionKind::Aggregate,
            vec![DataType::Float64],
            DataType::Float64,
            FunctionBody::Inline(source.into()),
        )
        .unwrap()
    }

    #[test]
    fn retract_is_seen_in_the_source() {
        assert!(inline("class f:\n    def retract(self, x):\n        pass\n").retracts(&[]));
        assert!(!inline("class f:\n    def accumulate(self, x):\n        pass\n").retracts(&[]));
    }

    #[test]
    fn an_aggregate_takes_an_argument() {
        let error = FunctionDefinition::new(
            "n",
            FunctionKind::Aggregate,
            vec![],
            DataType::Int64,
            FunctionBody::Inline("class n: pass".into()),
        )
        .unwrap_err();
        assert!(error.to_string().contains("takes at least one"), "{error}");
    }

    #[test]
    fn timeouts_parse() {
        assert_eq!(parse_seconds("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(parse_seconds("2 s"), Some(Duration::from_secs(2)));
        assert_eq!(parse_seconds("1min"), Some(Duration::from_secs(60)));
        assert_eq!(parse_seconds("0s"), None);
        assert_eq!(parse_seconds("soon"), None);
    }

    #[test]
    fn names_and_modules_are_checked() {
        let body = |s: &str| FunctionBody::Inline(s.into());
        assert!(FunctionDefinition::new(
            "my-f",
            FunctionKind::Scalar,
            vec![],
            DataType::Int64,
            body("")
        )
        .is_err());
        let module = |m: &str, a: &str| FunctionBody::Module {
            module: m.into(),
            attribute: a.into(),
        };
        assert!(FunctionDefinition::new(
            "f",
            FunctionKind::Scalar,
            vec![],
            DataType::Int64,
            module("a.b", "c")
        )
        .is_ok());
        assert!(FunctionDefinition::new(
            "f",
            FunctionKind::Scalar,
            vec![],
            DataType::Int64,
            module("a..b", "c")
        )
        .is_err());
    }
}
