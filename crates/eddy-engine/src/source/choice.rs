//! A table option that takes one of a few words (`bad_rows`,
//! `late_rows`), and the error when it is given another.
//!
//! In: the text given and the words allowed. Out: [`NotOneOf`].

/// A value that is none of the words an option takes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("'{given}' is not one of {}", choices.iter().map(|c| format!("'{c}'")).collect::<Vec<_>>().join(", "))]
pub struct NotOneOf {
    /// The value given (trimmed, lower case).
    pub given: String,
    /// The words the option takes.
    pub choices: &'static [&'static str],
}
