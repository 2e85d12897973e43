//! The upsert step driven through the `Operator` trait.

use datafusion::physical_expr::expressions::col;

use super::*;
use crate::operators::testing::{changes, keyed, kv_schema};

fn plan() -> ChangelogNormalizePlan {
    let schema = changelog::updating_schema(&kv_schema(), &["k".to_string()]);
    ChangelogNormalizePlan {
        keys: vec![col("k", &schema).unwrap()],
        schema,
    }
}

#[test]
fn upserts_and_deletes_become_a_changelog_with_the_old_rows() {
    let mut op = plan().create().unwrap();
    let mut out = Collector::default();
    // upsert a=1, b=5, a=2, a=2 again; delete b; delete c (never held).
    op.on_batch(
        0,
        keyed(
            &["a", "b", "a", "a", "b", "c"],
            &[1, 5, 2, 2, 0, 0],
            Some(&[2, 2, 2, 2, 3, 3]),
        ),
        &mut out,
    )
    .unwrap();
    assert_eq!(
        changes(&mut out),
        ["+I a 1", "+I b 5", "-U a 1", "+U a 2", "-D b 5"]
    );
    assert_eq!(op.late_rows(), 1, "the delete of c");
    let mut restored = crate::operators::testing::restored(&plan(), op.as_mut());
    restored
        .on_batch(0, keyed(&["a"], &[0], Some(&[3])), &mut out)
        .unwrap();
    assert_eq!(changes(&mut out), ["-D a 2"]);
}

#[test]
fn its_keys_move_to_the_instance_that_owns_them_at_another_parallelism() {
    use crate::key_groups::KeyGroups;
    use crate::operators::testing::rescaled_instance;
    use crate::rescale::KeyRange;
    let groups = KeyGroups::default();
    let keys = ["a", "b", "c", "d", "e", "f", "g", "h"];
    let values: Vec<i64> = (1..=8).collect();
    // Two instances, each upserting the keys routed to it.
    let batch = keyed(&keys, &values, Some(&[2; 8]));
    let column = batch.column(0).clone();
    let owners = crate::partition::instance_rows(&[column], 8, 2, groups).unwrap();
    let mut parts = Vec::new();
    for instance in 0..2u32 {
        let mask: datafusion::arrow::array::BooleanArray =
            owners.iter().map(|&o| Some(o == instance)).collect();
        let mut op = plan().create().unwrap();
        let mut out = Collector::default();
        let mine = datafusion::arrow::compute::filter_record_batch(&batch, &mask).unwrap();
        op.on_batch(0, mine, &mut out).unwrap();
        // One unmatched delete each, counted once after the move.
        op.on_batch(0, keyed(&["zz"], &[0], Some(&[3])), &mut out)
            .unwrap();
        parts.push(op.snapshot().unwrap());
    }
    // Three instances now: deleting every key gives its row back once.
    let mut deleted = Vec::new();
    let mut unmatched = 0;
    for instance in 0..3u32 {
        let range = KeyRange::of_instance(groups, instance, 3);
        // The old instances' state a resumed job hands over to this one.
        let mut op = rescaled_instance(&plan(), &parts, groups, instance, 3, 2);
        unmatched += op.late_rows();
        let mut out = Collector::default();
        let column = batch.column(0).clone();
        let mine: datafusion::arrow::array::BooleanArray =
            range.mask(&[column], 8).unwrap().iter().collect();
        let deletes = keyed(&keys, &[0; 8], Some(&[3; 8]));
        op.on_batch(
            0,
            datafusion::arrow::compute::filter_record_batch(&deletes, &mine).unwrap(),
            &mut out,
        )
        .unwrap();
        deleted.extend(changes(&mut out));
    }
    deleted.sort();
    let expected: Vec<String> = keys
        .iter()
        .zip(&values)
        .map(|(k, v)| format!("-D {k} {v}"))
        .collect();
    assert_eq!(deleted, expected);
    assert_eq!(unmatched, 2, "each old instance's count, carried once");
}

#[test]
fn a_checkpoint_hands_over_the_keys_upserted_and_deleted_since_the_last() {
    use crate::operators::testing::{binary_pairs as pairs, with_change};
    use crate::state::StateTable;
    let mut op = plan().create().unwrap();
    let mut out = Collector::default();
    let keys = ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l"];
    op.on_batch(0, keyed(&keys, &[1; 12], Some(&[2; 12])), &mut out)
        .unwrap();
    let mut first = op.snapshot_incremental().unwrap();
    assert!(first.keyed[0].change.is_none(), "the first is whole");
    let whole = first.take_table("current").unwrap();
    // a changes, b goes, z comes and goes and comes back, c is
    // upserted with the row it has.
    op.on_batch(
        0,
        keyed(
            &["a", "b", "z", "z", "z", "c"],
            &[9, 0, 1, 0, 2, 1],
            Some(&[2, 3, 2, 3, 2, 2]),
        ),
        &mut out,
    )
    .unwrap();
    let mut second = op.snapshot_incremental().unwrap();
    let change = second.keyed[0].change.clone().expect("a change");
    assert_eq!(change.base, first.keyed[0].serial);
    let changed = second.take_table("current").unwrap();
    assert_eq!(changed.num_rows(), 2, "a and z (c's row is the one it had)");
    assert_eq!(change.removed.num_rows(), 2, "b and z");
    let read_back = with_change(whole, changed, &second.keyed[0]);
    let now = op.snapshot().unwrap().take_table("current").unwrap();
    assert_eq!(pairs(&read_back), pairs(&now));
    assert_eq!(read_back.num_rows(), 12);

    // Nothing since: an empty change; restored from what was read
    // back, it goes on as the original.
    let third = op.snapshot_incremental().unwrap();
    assert_eq!(third.tables[0].batch.num_rows(), 0);
    changes(&mut out);
    let mut restored = plan().create().unwrap();
    restored
        .restore(StateSnapshot {
            meta: second.meta.clone(),
            tables: vec![StateTable {
                name: "current".into(),
                batch: read_back,
            }],
            keyed: Vec::new(),
            files: Vec::new(),
        })
        .unwrap();
    for op in [&mut op, &mut restored] {
        op.on_batch(0, keyed(&["z", "b"], &[0, 0], Some(&[3, 3])), &mut out)
            .unwrap();
        assert_eq!(changes(&mut out), ["-D z 2"]);
    }
    assert!(restored.snapshot_incremental().unwrap().keyed[0]
        .change
        .is_none());
}

/// Upserts and deletes of keys on disk and in memory, through one
/// operator that spills after every batch and one that never does: the
/// same changes, the same rows held (counted on disk and in memory
/// alike), and a checkpoint of the spilled one (whole, even when asked
/// for the changes) that restores to the same.
#[test]
fn spilled_keys_come_back_for_their_next_row_with_the_same_changes() {
    use crate::spill::{SpillConfig, SpillSpace};
    let space = std::sync::Arc::new(SpillSpace::new(SpillConfig::default()));
    let mut whole = plan().create().unwrap();
    let mut spilling = plan().create().unwrap();
    // 2: upsert, 3: delete.
    let batches: [(&[&str], &[i64], &[i8]); 4] = [
        (&["a", "b", "c"], &[1, 2, 3], &[2, 2, 2]),
        // a changes, b is deleted, c rewritten as it was, d new, e never held.
        (
            &["a", "b", "c", "d", "e"],
            &[5, 0, 3, 4, 0],
            &[2, 3, 2, 2, 3],
        ),
        // b back, a twice in one batch, d deleted.
        (&["b", "a", "a", "d"], &[7, 6, 8, 0], &[2, 2, 2, 3]),
        (&["c", "a"], &[9, 0], &[2, 3]),
    ];
    let (mut a, mut b) = (Collector::default(), Collector::default());
    for (i, (keys, values, kinds)) in batches.iter().enumerate() {
        for (op, out) in [(&mut whole, &mut a), (&mut spilling, &mut b)] {
            op.on_batch(0, keyed(keys, values, Some(kinds)), out)
                .unwrap();
        }
        assert_eq!(changes(&mut a), changes(&mut b), "batch {i}");
        assert_eq!(whole.state_rows(), spilling.state_rows(), "batch {i}");
        assert_eq!(whole.late_rows(), spilling.late_rows(), "batch {i}");
        assert!(spilling.spill(&space).unwrap(), "batch {i}");
        assert_eq!(spilling.state_bytes(), 0);
    }
    let stats = spilling.spill_stats();
    assert!(stats.written_bytes > 0 && stats.read_bytes > 0, "{stats:?}");
    let incremental = spilling.snapshot_incremental().unwrap();
    assert!(incremental.keyed.is_empty(), "whole once spilled");
    let mut restored = crate::operators::testing::restored(&plan(), spilling.as_mut());
    // Deleting every key gives back the rows held: b 7, c 9.
    let deletes = keyed(&["a", "b", "c", "d"], &[0; 4], Some(&[3; 4]));
    for (op, out) in [
        (&mut whole, &mut a),
        (&mut spilling, &mut b),
        (&mut restored, &mut Collector::default()),
    ] {
        op.on_batch(0, deletes.clone(), out).unwrap();
        let mut got = changes(out);
        got.sort();
        assert_eq!(got, ["-D b 7", "-D c 9"]);
        assert_eq!(op.state_rows(), 0);
    }
}
