//! `PATTERN (...)` as sqlparser reads it, into the engine's [`Pattern`]:
//! variables numbered in order of appearance, `PERMUTE` expanded, `B*?`
//! (sqlparser's quantifier after a quantifier) read as reluctant.
//!
//! In: a parsed pattern. Out: the engine's pattern, or why not.

use datafusion::sql::sqlparser::ast::{
    MatchRecognizePattern, MatchRecognizeSymbol, RepetitionQuantifier,
};
use eddy_engine::operators::match_recognize::pattern::Pattern;

use super::Variables;

/// The most variables `PERMUTE` takes (it expands to every order).
const MAX_PERMUTE: usize = 5;

/// A pattern eddy does not run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum PatternRefusal {
    /// `^` or `$`.
    #[error("^ and $ (the start and end of a partition) are not supported: a stream's partition has no end")]
    Anchor,
    /// `{- ... -}`.
    #[error(
        "{{- ... -}} excludes rows from ALL ROWS PER MATCH output, which eddy does not produce"
    )]
    Exclusion,
    /// `PERMUTE` of too many variables.
    #[error("PERMUTE takes at most {MAX_PERMUTE} variables")]
    PermuteTooMany,
    /// `PERMUTE` of something other than variables.
    #[error("PERMUTE takes variables")]
    PermuteNonVariable,
    /// `{n,m}` with `n > m`.
    #[error("{{{n},{m}}}: the lower bound is above the upper")]
    BoundsReversed { n: u32, m: u32 },
    /// A quantifier allowing no repetition.
    #[error("{quantifier} repeats nothing")]
    RepeatsNothing { quantifier: String },
}

pub(super) fn to_pattern(
    pattern: &MatchRecognizePattern,
    variables: &mut Variables,
) -> std::result::Result<Pattern, PatternRefusal> {
    Ok(match pattern {
        MatchRecognizePattern::Symbol(MatchRecognizeSymbol::Named(ident)) => {
            Pattern::Var(variables.add(ident))
        }
        MatchRecognizePattern::Symbol(_) => return Err(PatternRefusal::Anchor),
        MatchRecognizePattern::Exclude(_) => return Err(PatternRefusal::Exclusion),
        MatchRecognizePattern::Permute(symbols) => {
            if symbols.len() > MAX_PERMUTE {
                return Err(PatternRefusal::PermuteTooMany);
            }
            let vars = symbols
                .iter()
                .map(|s| match s {
                    MatchRecognizeSymbol::Named(ident) => Ok(variables.add(ident)),
                    _ => Err(PatternRefusal::PermuteNonVariable),
                })
                .collect::<std::result::Result<Vec<_>, _>>()?;
            Pattern::Alternation(
                permutations(&vars)
                    .into_iter()
                    .map(|order| Pattern::Concat(order.into_iter().map(Pattern::Var).collect()))
                    .collect(),
            )
        }
        MatchRecognizePattern::Concat(parts) => Pattern::Concat(
            parts
                .iter()
                .map(|p| to_pattern(p, variables))
                .collect::<std::result::Result<_, _>>()?,
        ),
        MatchRecognizePattern::Group(inner) => to_pattern(inner, variables)?,
        MatchRecognizePattern::Alternation(branches) => Pattern::Alternation(
            branches
                .iter()
                .map(|p| to_pattern(p, variables))
                .collect::<std::result::Result<_, _>>()?,
        ),
        MatchRecognizePattern::Repetition(inner, quantifier) => {
            // `B*?`: sqlparser reads the `?` after a quantifier as a second
            // quantifier; written without parentheses it makes the first
            // reluctant.
            let (inner, quantifier, greedy) = match (inner.as_ref(), quantifier) {
                (
                    MatchRecognizePattern::Repetition(base, first),
                    RepetitionQuantifier::AtMostOne,
                ) => (base.as_ref(), first, false),
                _ => (inner.as_ref(), quantifier, true),
            };
            let (min, max) = match quantifier {
                RepetitionQuantifier::ZeroOrMore => (0, None),
                RepetitionQuantifier::OneOrMore => (1, None),
                RepetitionQuantifier::AtMostOne => (0, Some(1)),
                RepetitionQuantifier::Exactly(n) => (*n, Some(*n)),
                RepetitionQuantifier::AtLeast(n) => (*n, None),
                RepetitionQuantifier::AtMost(m) => (0, Some(*m)),
                RepetitionQuantifier::Range(n, m) => {
                    if n > m {
                        return Err(PatternRefusal::BoundsReversed { n: *n, m: *m });
                    }
                    (*n, Some(*m))
                }
            };
            if max == Some(0) {
                return Err(PatternRefusal::RepeatsNothing {
                    quantifier: quantifier.to_string(),
                });
            }
            Pattern::Repeat {
                inner: Box::new(to_pattern(inner, variables)?),
                min,
                max,
                greedy,
            }
        }
    })
}

/// Every order of `items`, in the order the standard prefers them
/// (lexicographic by position in the list).
fn permutations(items: &[usize]) -> Vec<Vec<usize>> {
    if items.len() <= 1 {
        return vec![items.to_vec()];
    }
    let mut out = Vec::new();
    for i in 0..items.len() {
        let mut rest = items.to_vec();
        let first = rest.remove(i);
        for mut tail in permutations(&rest) {
            tail.insert(0, first);
            out.push(tail);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::permutations;

    #[test]
    fn permutations_in_order() {
        assert_eq!(
            permutations(&[0, 1, 2]),
            vec![
                vec![0, 1, 2],
                vec![0, 2, 1],
                vec![1, 0, 2],
                vec![1, 2, 0],
                vec![2, 0, 1],
                vec![2, 1, 0]
            ]
        );
    }
}
