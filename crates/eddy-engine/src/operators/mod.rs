//! The built-in operators. Each file holds one operator: its immutable plan
//! (an [`crate::operator::OperatorPlan`]) and its per-run state (an
//! [`crate::operator::Operator`]).

pub mod calc;
pub mod interval_join;
pub mod join_state;
pub mod over;
pub mod union;
pub mod window_aggregate;
