//! How eddy reads a name: an unquoted identifier is folded to lower case,
//! a quoted one (`"dateTime"`, or Flink's and MySQL's `` `dateTime` ``) is
//! taken as written — DataFusion's rule, applied the same way to columns
//! in DDL, the `WATERMARK FOR` clause, keys and queries, so that a column
//! declared quoted is found by the same quoted name everywhere.
//!
//! In: a sqlparser identifier. Out: the name eddy and DataFusion use.
//!
//! Flink treats unquoted names case-sensitively; eddy folds them, so
//! `dateTime` unquoted is the column `datetime` (and an NDJSON key
//! `"dateTime"` does not fill it: quote the column to keep its case).

use datafusion::sql::sqlparser::ast::Ident;

/// The name `ident` stands for: folded to lower case unless quoted.
pub fn normalize(ident: &Ident) -> String {
    if ident.quote_style.is_some() {
        ident.value.clone()
    } else {
        ident.value.to_lowercase()
    }
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
}
