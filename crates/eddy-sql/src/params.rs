//! `${NAME:default}` parameters in SQL text.
//!
//! In: the raw text of a file and the `--set NAME=VALUE` pairs. Out: the
//! text with every parameter replaced, plus a [`SourceMap`] that maps
//! positions in the substituted text back to the original, so that errors
//! point at what the user wrote. A parameter without a default and without a
//! `--set` is an error at its position.

use std::collections::{BTreeMap, BTreeSet};

use crate::error::{Position, Result, SqlError};

/// One replacement on a line: columns are 1-based, in characters.
#[derive(Debug, Clone)]
struct Replacement {
    new_start: u64,
    new_end: u64,
    old_start: u64,
    shift: i64,
}

/// Maps (line, column) in substituted text back to the original text.
#[derive(Debug, Clone, Default)]
pub struct SourceMap {
    file: String,
    lines: BTreeMap<u64, Vec<Replacement>>,
}

impl SourceMap {
    /// The position in the original file of `line:column` in substituted text.
    pub fn position(&self, line: u64, column: u64) -> Position {
        let mut original = column as i64;
        if let Some(replacements) = self.lines.get(&line) {
            for r in replacements {
                if column >= r.new_end {
                    original -= r.shift;
                } else if column >= r.new_start {
                    original = r.old_start as i64;
                    break;
                }
            }
        }
        Position {
            file: self.file.clone(),
            line,
            column: original.max(1) as u64,
        }
    }

    /// The file's name.
    pub fn file(&self) -> &str {
        &self.file
    }
}

/// Replaces parameters in `text`; records which names were used in `used`.
pub fn substitute(
    file: &str,
    text: &str,
    values: &BTreeMap<String, String>,
    used: &mut BTreeSet<String>,
) -> Result<(String, SourceMap)> {
    let mut out = String::with_capacity(text.len());
    let mut map = SourceMap {
        file: file.to_string(),
        lines: BTreeMap::new(),
    };
    for (index, full_line) in text.split_inclusive('\n').enumerate() {
        let line_no = index as u64 + 1;
        // Parameters in a `--` comment stay as written.
        let code_end = comment_start(full_line).unwrap_or(full_line.len());
        let (line, comment) = full_line.split_at(code_end);
        let mut rest = line;
        let mut old_col: u64 = 1;
        let mut new_col: u64 = 1;
        while let Some(start) = rest.find("${") {
            let before = &rest[..start];
            out.push_str(before);
            let before_chars = before.chars().count() as u64;
            old_col += before_chars;
            new_col += before_chars;
            let after = &rest[start + 2..];
            let Some(end) = after.find('}') else {
                return Err(SqlError::at(
                    &Position {
                        file: file.to_string(),
                        line: line_no,
                        column: old_col,
                    },
                    "unterminated parameter: expected '}' after '${'",
                ));
            };
            let body = &after[..end];
            let (name, default) = match body.split_once(':') {
                Some((n, d)) => (n.trim(), Some(d)),
                None => (body.trim(), None),
            };
            if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return Err(SqlError::at(
                    &Position {
                        file: file.to_string(),
                        line: line_no,
                        column: old_col,
                    },
                    format!("bad parameter name '{name}' (use letters, digits and '_')"),
                ));
            }
            used.insert(name.to_string());
            let value = match (values.get(name), default) {
                (Some(v), _) => v.as_str(),
                (None, Some(d)) => d,
                (None, None) => {
                    return Err(SqlError::at(
                        &Position {
                            file: file.to_string(),
                            line: line_no,
                            column: old_col,
                        },
                        format!("parameter ${{{name}}} has no default; pass --set {name}=VALUE"),
                    ))
                }
            };
            out.push_str(value);
            let old_len = body.chars().count() as u64 + 3;
            let new_len = value.chars().count() as u64;
            map.lines.entry(line_no).or_default().push(Replacement {
                new_start: new_col,
                new_end: new_col + new_len,
                old_start: old_col,
                shift: new_len as i64 - old_len as i64,
            });
            old_col += old_len;
            new_col += new_len;
            rest = &after[end + 1..];
        }
        out.push_str(rest);
        out.push_str(comment);
    }
    Ok((out, map))
}

/// Byte offset of a `--` comment in a line, ignoring `--` inside quotes.
fn comment_start(line: &str) -> Option<usize> {
    let mut quote: Option<char> = None;
    let mut previous_dash = false;
    for (i, c) in line.char_indices() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == '\'' || c == '"' => quote = Some(c),
            None if c == '-' && previous_dash => return Some(i - 1),
            None => {}
        }
        previous_dash = quote.is_none() && c == '-';
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn substitutes_defaults_and_sets() {
        let mut values = BTreeMap::new();
        values.insert("B".to_string(), "20".to_string());
        let mut used = BTreeSet::new();
        let (text, map) =
            substitute("f.sql", "x ${A:1} ${B:2} y\nz ${B}", &values, &mut used).unwrap();
        assert_eq!(text, "x 1 20 y\nz 20");
        assert_eq!(used.len(), 2);
        // 'y' is at column 8 in the new text and column 17 in the original.
        assert_eq!(map.position(1, 8).column, 17);
        assert_eq!(map.position(1, 3).column, 3);
    }

    #[test]
    fn comments_keep_their_parameters() {
        let (text, _) = substitute(
            "f.sql",
            "a -- ${X}\nb '--${Y:1}'",
            &BTreeMap::new(),
            &mut BTreeSet::new(),
        )
        .unwrap();
        assert_eq!(text, "a -- ${X}\nb '--1'");
    }

    #[test]
    fn missing_parameter_is_an_error_at_its_position() {
        let err = substitute(
            "f.sql",
            "select\n  ${NOPE}",
            &BTreeMap::new(),
            &mut BTreeSet::new(),
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "f.sql:2:3: parameter ${NOPE} has no default; pass --set NOPE=VALUE"
        );
    }
}
