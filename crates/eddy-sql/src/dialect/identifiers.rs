//! How eddy reads a name. By default an unquoted identifier is folded to
//! lower case and a quoted one (`"dateTime"`, or Flink's and MySQL's
//! `` `dateTime` ``) is taken as written — DataFusion's (and PostgreSQL's)
//! rule, applied the same way to tables, columns in DDL, the `WATERMARK
//! FOR` clause, keys and queries, so that a column declared quoted is found
//! by the same quoted name everywhere.
//!
//! Flink reads every name as written, quoted or not (`dateTime` and
//! `` `dateTime` `` are one column, `DATETIME` another). `SET
//! 'sql.case-sensitive' = 'true'` switches to that rule for the statements
//! after it (DataFusion's `datafusion.sql_parser.enable_ident_normalization
//! = false` says the same); eddy keeps it in the session's DataFusion
//! options, so the query planner and eddy's own DDL read names alike.
//!
//! In: a sqlparser identifier and the rule. Out: the name eddy and
//! DataFusion use.

use datafusion::common::config::ConfigOptions;
use datafusion::sql::sqlparser::ast::{Ident, ObjectName};

/// How unquoted names are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IdentifierCase {
    /// Folded to lower case (the default; DataFusion's rule).
    #[default]
    Fold,
    /// As written (Flink's rule).
    Sensitive,
}

impl IdentifierCase {
    /// The rule a session's options say.
    pub fn of(options: &ConfigOptions) -> Self {
        if options.sql_parser.enable_ident_normalization {
            Self::Fold
        } else {
            Self::Sensitive
        }
    }

    /// Writes the rule into a session's options.
    pub fn apply(self, options: &mut ConfigOptions) {
        options.sql_parser.enable_ident_normalization = self == Self::Fold;
    }

    /// The name `ident` stands for.
    pub fn name(self, ident: &Ident) -> String {
        if ident.quote_style.is_some() || self == Self::Sensitive {
            ident.value.clone()
        } else {
            ident.value.to_lowercase()
        }
    }

    /// The name a table's (possibly qualified) name stands for: its parts
    /// read by the rule, joined by `.`.
    pub fn object_name(self, name: &ObjectName) -> String {
        name.0
            .iter()
            .map(|part| match part.as_ident() {
                Some(ident) => self.name(ident),
                None => part.to_string(),
            })
            .collect::<Vec<_>>()
            .join(".")
    }
}

/// The name `ident` stands for under the default rule (folded unless
/// quoted): for rewrites made before any `SET` is read, which only compare
/// names among themselves.
pub fn normalize(ident: &Ident) -> String {
    IdentifierCase::Fold.name(ident)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoted_names_keep_their_case_and_others_fold() {
        assert_eq!(normalize(&Ident::new("dateTime")), "datetime");
        assert_eq!(normalize(&Ident::with_quote('`', "dateTime")), "dateTime");
        assert_eq!(normalize(&Ident::with_quote('"', "Bid")), "Bid");
    }

    #[test]
    fn case_sensitive_names_are_read_as_written() {
        let case = IdentifierCase::Sensitive;
        assert_eq!(case.name(&Ident::new("dateTime")), "dateTime");
        assert_eq!(case.name(&Ident::with_quote('`', "dateTime")), "dateTime");
        let mut options = ConfigOptions::default();
        case.apply(&mut options);
        assert_eq!(IdentifierCase::of(&options), case);
        let name = ObjectName::from(vec![Ident::new("Db"), Ident::new("Bid")]);
        assert_eq!(case.object_name(&name), "Db.Bid");
        assert_eq!(IdentifierCase::Fold.object_name(&name), "db.bid");
    }
}
