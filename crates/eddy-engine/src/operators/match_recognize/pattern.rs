//! Row patterns (`PATTERN (A B+ C?)`) and the matcher that runs them.
//!
//! In: a [`Pattern`] over variable numbers. Out: a [`Program`] whose
//! [`Program::run`] finds the preferred match starting at a row.
//!
//! The program is a backtracking machine in the style of regular-expression
//! engines: a `Split` tries its first branch and keeps the second to come
//! back to, so branches are tried in the SQL standard's order of preference
//! (a greedy quantifier prefers one more iteration, a reluctant one (`*?`,
//! `+?`, `??`, `{n,m}?`) one fewer, an alternation its leftmost branch). The
//! first path that reaches the end of the pattern is the match.
//!
//! Rows arrive over time, so a run can also end undecided: when the
//! preferred path needs a row that has not been released yet, no less
//! preferred path may be taken instead ([`Outcome::Pending`]); the run is
//! repeated once more rows are in, or once none can come (end of input, or
//! the match's `WITHIN` interval passed).

use crate::error::{EngineError, Result};

/// A row pattern over variables (numbered as the plan's `variables`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pattern {
    /// One row the variable's condition accepts.
    Var(usize),
    /// The parts in sequence.
    Concat(Vec<Pattern>),
    /// The first branch that leads to a match, leftmost preferred.
    Alternation(Vec<Pattern>),
    /// `inner` repeated between `min` and `max` (unbounded: `None`) times.
    Repeat {
        /// The repeated part.
        inner: Box<Pattern>,
        /// Fewest repetitions.
        min: u32,
        /// Most repetitions.
        max: Option<u32>,
        /// Prefer more repetitions (greedy) or fewer (reluctant).
        greedy: bool,
    },
}

impl Pattern {
    /// Whether the pattern can match no rows at all.
    pub fn can_be_empty(&self) -> bool {
        match self {
            Pattern::Var(_) => false,
            Pattern::Concat(parts) => parts.iter().all(Pattern::can_be_empty),
            Pattern::Alternation(branches) => branches.iter().any(Pattern::can_be_empty),
            Pattern::Repeat { inner, min, .. } => *min == 0 || inner.can_be_empty(),
        }
    }

    /// The variable every match's first row is mapped to, if there is one
    /// (`A B`, `A+ B`; not `A? B` nor `(A | B) C`).
    pub fn first_variable(&self) -> Option<usize> {
        match self {
            Pattern::Var(v) => Some(*v),
            Pattern::Concat(parts) => parts.first().and_then(Pattern::first_variable),
            Pattern::Alternation(branches) => {
                let first = branches.first()?.first_variable()?;
                branches
                    .iter()
                    .all(|b| b.first_variable() == Some(first))
                    .then_some(first)
            }
            Pattern::Repeat { inner, min, .. } if *min > 0 => inner.first_variable(),
            Pattern::Repeat { .. } => None,
        }
    }

    /// The variables the pattern uses.
    pub fn variables(&self, out: &mut Vec<usize>) {
        match self {
            Pattern::Var(v) => {
                if !out.contains(v) {
                    out.push(*v)
                }
            }
            Pattern::Concat(parts) | Pattern::Alternation(parts) => {
                parts.iter().for_each(|p| p.variables(out))
            }
            Pattern::Repeat { inner, .. } => inner.variables(out),
        }
    }

    /// The pattern as SQL, with `names` for the variables.
    pub fn display(&self, names: &[String]) -> String {
        match self {
            Pattern::Var(v) => names.get(*v).cloned().unwrap_or_else(|| format!("#{v}")),
            Pattern::Concat(parts) => parts
                .iter()
                .map(|p| p.display(names))
                .collect::<Vec<_>>()
                .join(" "),
            Pattern::Alternation(branches) => format!(
                "({})",
                branches
                    .iter()
                    .map(|p| p.display(names))
                    .collect::<Vec<_>>()
                    .join(" | ")
            ),
            Pattern::Repeat {
                inner,
                min,
                max,
                greedy,
            } => {
                let inner = match inner.as_ref() {
                    Pattern::Concat(_) => format!("({})", inner.display(names)),
                    other => other.display(names),
                };
                let quantifier = match (min, max) {
                    (0, None) => "*".to_string(),
                    (1, None) => "+".to_string(),
                    (0, Some(1)) => "?".to_string(),
                    (n, None) => format!("{{{n},}}"),
                    (n, Some(m)) if n == m => format!("{{{n}}}"),
                    (n, Some(m)) => format!("{{{n},{m}}}"),
                };
                let reluctant = if *greedy { "" } else { "?" };
                format!("{inner}{quantifier}{reluctant}")
            }
        }
    }
}

/// One instruction of a compiled pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Inst {
    /// The next row must be accepted by this variable's condition.
    Var(u16),
    /// Try the first target; come back to the second if it fails.
    Split(u32, u32),
    /// Go on at the target.
    Jmp(u32),
    /// The pattern is complete.
    Match,
}

/// The most instructions a pattern compiles to (`{n,m}` copies its part).
pub const MAX_PROGRAM: usize = 10_000;

/// The most steps one run may take (a pattern that backtracks without end
/// fails the job with this named rather than hanging it).
pub const MAX_STEPS: u64 = 10_000_000;

/// A compiled pattern.
#[derive(Debug, Clone)]
pub struct Program {
    insts: Vec<Inst>,
}

/// How a run from a start row ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The preferred match: the variable of each row from the start row on.
    Match(Vec<u16>),
    /// No match starts at the row.
    NoMatch,
    /// The preferred path needs a row not yet available.
    Pending,
}

/// Why a pattern cannot be compiled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatternRefusal {
    /// The whole pattern can match no rows.
    #[error("the pattern can match no rows at all; every match needs at least one row (use + rather than * on its only part)")]
    MatchesNothing,
    /// A part repeated without bound can match no rows.
    #[error("a part repeated without bound can match no rows; it would repeat forever")]
    EmptyRepeat,
    /// More variables than a program numbers.
    #[error("too many pattern variables")]
    TooManyVariables,
    /// Too many steps once counted repetitions are written out.
    #[error("the pattern is too large once its counted repetitions are written out ({steps} steps; at most {MAX_PROGRAM})")]
    TooLarge { steps: usize },
}

impl Program {
    /// Compiles `pattern`. Patterns that can match no rows are refused
    /// (an empty match has no rows to report or skip past), as is a part
    /// repeated without bound that can itself match no rows.
    pub fn compile(pattern: &Pattern) -> std::result::Result<Self, PatternRefusal> {
        if pattern.can_be_empty() {
            return Err(PatternRefusal::MatchesNothing);
        }
        let mut insts = Vec::new();
        emit(pattern, &mut insts)?;
        insts.push(Inst::Match);
        if insts.len() > MAX_PROGRAM {
            return Err(PatternRefusal::TooLarge { steps: insts.len() });
        }
        Ok(Program { insts })
    }

    /// Runs the pattern from a start row. `available` rows from the start
    /// may be read; `complete` says no more will come. `accept(var, path)`
    /// says whether the variable's condition holds for the row at
    /// `path.len() - 1` from the start, `path` being the variables of the
    /// rows so far with that row tentatively mapped to `var`.
    pub fn run(
        &self,
        available: usize,
        complete: bool,
        mut accept: impl FnMut(usize, &[u16]) -> Result<bool>,
    ) -> Result<Outcome> {
        let mut path: Vec<u16> = Vec::new();
        let mut stack: Vec<(u32, usize)> = vec![(0, 0)];
        let mut steps: u64 = 0;
        while let Some((start_pc, path_len)) = stack.pop() {
            path.truncate(path_len);
            let mut pc = start_pc as usize;
            loop {
                steps += 1;
                if steps > MAX_STEPS {
                    return Err(EngineError::operator(
                        "match_recognize",
                        format!("the pattern took more than {MAX_STEPS} steps to decide one start row; bound its repetitions ({{n,m}}) or add WITHIN"),
                    ));
                }
                match self.insts[pc] {
                    Inst::Match => return Ok(Outcome::Match(path)),
                    Inst::Jmp(target) => pc = target as usize,
                    Inst::Split(first, second) => {
                        stack.push((second, path.len()));
                        pc = first as usize;
                    }
                    Inst::Var(var) => {
                        if path.len() >= available {
                            if complete {
                                break;
                            }
                            return Ok(Outcome::Pending);
                        }
                        path.push(var);
                        if accept(var as usize, &path)? {
                            pc += 1;
                        } else {
                            path.pop();
                            break;
                        }
                    }
                }
            }
        }
        Ok(Outcome::NoMatch)
    }
}

fn here(insts: &[Inst]) -> u32 {
    insts.len() as u32
}

fn emit(pattern: &Pattern, insts: &mut Vec<Inst>) -> std::result::Result<(), PatternRefusal> {
    if insts.len() > MAX_PROGRAM {
        return Ok(());
    }
    match pattern {
        Pattern::Var(v) => {
            let v = u16::try_from(*v).map_err(|_| PatternRefusal::TooManyVariables)?;
            insts.push(Inst::Var(v));
        }
        Pattern::Concat(parts) => {
            for part in parts {
                emit(part, insts)?;
            }
        }
        Pattern::Alternation(branches) => {
            let mut jumps = Vec::new();
            for (i, branch) in branches.iter().enumerate() {
                if i + 1 == branches.len() {
                    emit(branch, insts)?;
                } else {
                    let split = insts.len();
                    insts.push(Inst::Split(here(insts) + 1, 0));
                    emit(branch, insts)?;
                    jumps.push(insts.len());
                    insts.push(Inst::Jmp(0));
                    let next = here(insts);
                    insts[split] = Inst::Split(split as u32 + 1, next);
                }
            }
            let end = here(insts);
            for jump in jumps {
                insts[jump] = Inst::Jmp(end);
            }
        }
        Pattern::Repeat {
            inner,
            min,
            max,
            greedy,
        } => {
            if max.is_none() && inner.can_be_empty() {
                return Err(PatternRefusal::EmptyRepeat);
            }
            for _ in 0..*min {
                emit(inner, insts)?;
                if insts.len() > MAX_PROGRAM {
                    return Ok(());
                }
            }
            // A split between one more repetition and going on, in the
            // quantifier's order of preference.
            let split_to = |body: u32, exit: u32| {
                if *greedy {
                    Inst::Split(body, exit)
                } else {
                    Inst::Split(exit, body)
                }
            };
            match max {
                None => {
                    let split = insts.len();
                    insts.push(Inst::Split(0, 0));
                    emit(inner, insts)?;
                    insts.push(Inst::Jmp(split as u32));
                    insts[split] = split_to(split as u32 + 1, here(insts));
                }
                Some(max) => {
                    let mut splits = Vec::new();
                    for _ in *min..*max {
                        splits.push(insts.len());
                        insts.push(Inst::Split(0, 0));
                        emit(inner, insts)?;
                        if insts.len() > MAX_PROGRAM {
                            return Ok(());
                        }
                    }
                    let end = here(insts);
                    for split in splits {
                        insts[split] = split_to(split as u32 + 1, end);
                    }
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn var(v: usize) -> Pattern {
        Pattern::Var(v)
    }

    fn repeat(inner: Pattern, min: u32, max: Option<u32>, greedy: bool) -> Pattern {
        Pattern::Repeat {
            inner: Box::new(inner),
            min,
            max,
            greedy,
        }
    }

    /// Runs over rows given as the set of variables each row satisfies.
    fn run(pattern: &Pattern, rows: &[&[usize]], complete: bool) -> Outcome {
        let program = Program::compile(pattern).unwrap();
        program
            .run(rows.len(), complete, |var, path| {
                Ok(rows[path.len() - 1].contains(&var))
            })
            .unwrap()
    }

    #[test]
    fn greedy_takes_most_and_waits_for_more() {
        // A B+ over a b b: greedy wants a third B.
        let p = Pattern::Concat(vec![var(0), repeat(var(1), 1, None, true)]);
        assert_eq!(run(&p, &[&[0], &[1], &[1]], false), Outcome::Pending);
        assert_eq!(
            run(&p, &[&[0], &[1], &[1]], true),
            Outcome::Match(vec![0, 1, 1])
        );
        assert_eq!(
            run(&p, &[&[0], &[1], &[1], &[0]], false),
            Outcome::Match(vec![0, 1, 1])
        );
    }

    #[test]
    fn reluctant_takes_fewest() {
        let p = Pattern::Concat(vec![var(0), repeat(var(1), 1, None, false)]);
        assert_eq!(
            run(&p, &[&[0], &[1], &[1]], false),
            Outcome::Match(vec![0, 1])
        );
        // A B*? C: as few B as reach a C.
        let p = Pattern::Concat(vec![var(0), repeat(var(1), 0, None, false), var(2)]);
        assert_eq!(
            run(&p, &[&[0], &[1, 2], &[1, 2]], true),
            Outcome::Match(vec![0, 2])
        );
    }

    #[test]
    fn alternation_prefers_the_left_branch_and_backtracks() {
        // (A B | A C) D over a c d.
        let p = Pattern::Concat(vec![
            Pattern::Alternation(vec![
                Pattern::Concat(vec![var(0), var(1)]),
                Pattern::Concat(vec![var(0), var(2)]),
            ]),
            var(3),
        ]);
        assert_eq!(
            run(&p, &[&[0], &[2], &[3]], false),
            Outcome::Match(vec![0, 2, 3])
        );
        assert_eq!(run(&p, &[&[0], &[4], &[3]], false), Outcome::NoMatch);
    }

    #[test]
    fn counted_repetition() {
        let p = repeat(var(0), 2, Some(3), true);
        assert_eq!(run(&p, &[&[0]], true), Outcome::NoMatch);
        assert_eq!(
            run(&p, &[&[0], &[0], &[1]], false),
            Outcome::Match(vec![0, 0])
        );
        assert_eq!(
            run(&p, &[&[0], &[0], &[0], &[0]], false),
            Outcome::Match(vec![0, 0, 0])
        );
        assert_eq!(p.display(&["A".into()]), "A{2,3}");
    }

    #[test]
    fn a_pattern_that_can_match_nothing_is_refused() {
        assert_eq!(
            Program::compile(&repeat(var(0), 0, None, true)).err(),
            Some(PatternRefusal::MatchesNothing)
        );
        let nested = Pattern::Concat(vec![
            var(0),
            repeat(repeat(var(1), 0, Some(1), true), 0, None, true),
        ]);
        assert!(Program::compile(&nested).is_err());
    }

    #[test]
    fn a_pattern_too_large_is_refused() {
        let p = repeat(repeat(var(0), 100, Some(100), true), 200, Some(200), true);
        assert!(matches!(
            Program::compile(&p),
            Err(PatternRefusal::TooLarge { .. })
        ));
    }
}
