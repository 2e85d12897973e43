//! "Did you mean ...?": the closest of a set of known names to a misspelt
//! one, for error messages about options, functions and tables.

use datafusion::common::utils::datafusion_strsim::levenshtein;

/// The known name closest to `given` (case-insensitive edit distance), if it
/// is close enough to be a likely typo: at most a third of its length, and
/// at most 3 edits.
///
/// ```
/// use eddy_engine::suggest::closest;
/// let options = ["idle_timeout", "allowed_lateness", "path"];
/// assert_eq!(closest("idel_timeout", options), Some("idle_timeout"));
/// assert_eq!(closest("colour", options), None);
/// ```
pub fn closest<'a>(given: &str, known: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let given = given.to_lowercase();
    let limit = (given.chars().count() / 3).clamp(1, 3);
    known
        .into_iter()
        .map(|name| (levenshtein(&given, &name.to_lowercase()), name))
        .filter(|(distance, _)| *distance <= limit)
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, name)| name)
}
