//! What a join keeps of its inputs: the columns its keys, remaining
//! condition, event times and the SELECT above it read ([`UsedColumns`]),
//! and each side's schema narrowed to them ([`pruned`]). The join applies
//! the narrowing to every batch on arrival (`JoinInput`).

use std::sync::Arc;

use datafusion::common::{DFSchema, DFSchemaRef};
use datafusion::logical_expr::{Expr, Join};

use super::condition::JoinTime;

/// Which input columns a join uses: the ones its output's reader needs,
/// its keys, its remaining condition and its time columns.
pub(super) struct UsedColumns {
    pub(super) left: Vec<bool>,
    pub(super) right: Vec<bool>,
}

impl UsedColumns {
    pub(super) fn of(
        join: &Join,
        needed: Option<&[bool]>,
        left_keys: &[Expr],
        right_keys: &[Expr],
        residual: &[Expr],
        time: Option<JoinTime>,
    ) -> UsedColumns {
        let (left_schema, right_schema) = (join.left.schema(), join.right.schema());
        let width = left_schema.fields().len();
        let all = UsedColumns {
            left: vec![true; width],
            right: vec![true; right_schema.fields().len()],
        };
        let Some(needed) = needed.filter(|n| n.len() == join.schema.fields().len()) else {
            return all;
        };
        // Marks over the join's columns: the left input's, then the right's.
        let mut used = needed.to_vec();
        // A column a condition names that cannot be placed keeps them all.
        let mut mark = |exprs: &[Expr], schema: &DFSchema, offset: usize| {
            for column in exprs.iter().flat_map(Expr::column_refs) {
                match schema.index_of_column(column) {
                    Ok(i) => used[offset + i] = true,
                    Err(_) => return false,
                }
            }
            true
        };
        let placed = mark(left_keys, left_schema, 0)
            && mark(right_keys, right_schema, width)
            && mark(residual, &join.schema, 0);
        if !placed {
            return all;
        }
        if let Some(time) = time {
            used[time.left_time] = true;
            used[width + time.right_time] = true;
        }
        let right = used.split_off(width);
        let mut used = UsedColumns { left: used, right };
        // A side keeps at least one column, so its batches keep their rows.
        for flags in [&mut used.left, &mut used.right] {
            if !flags.iter().any(|&f| f) {
                if let Some(first) = flags.first_mut() {
                    *first = true;
                }
            }
        }
        used
    }
}

/// `schema` narrowed to the columns `used` marks, and their numbers in
/// `schema`, in order (the whole schema when that drops none or the
/// narrowed one cannot be built).
pub(super) fn pruned(schema: &DFSchema, used: &[bool]) -> (DFSchemaRef, Vec<usize>) {
    let all = || (Arc::new(schema.clone()), (0..used.len()).collect());
    let kept: Vec<usize> = (0..used.len()).filter(|&i| used[i]).collect();
    if kept.len() == used.len() {
        return all();
    }
    let fields = kept
        .iter()
        .map(|&i| {
            let (qualifier, field) = schema.qualified_field(i);
            (qualifier.cloned(), Arc::clone(field))
        })
        .collect();
    match DFSchema::new_with_metadata(fields, schema.metadata().clone()) {
        Ok(narrowed) => (Arc::new(narrowed), kept),
        Err(_) => all(),
    }
}
