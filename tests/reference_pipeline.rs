//! The reference pipeline: `eddy run queries/` on the built-in generator.
//!
//! - its output, sorted, is pinned by `tests/golden/reference.out`, and is the
//!   same for every batch size;
//! - the planted scenarios of the generator are present in the streams the
//!   later stages read (checked on the generator's own output).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::collections::BTreeMap;

use eddy_cli::job;
use eddy_connectors::generator::{GeneratedStream, Generator, GeneratorConfig};
use eddy_connectors::json_lines::encode_json_lines;

fn reference_output(batch_size: usize) -> common::Captured {
    reference_output_in_parallel(batch_size, 1)
}

fn reference_output_in_parallel(batch_size: usize, parallelism: usize) -> common::Captured {
    let files = job::load_sql(&[common::repo_root().join("queries")]).expect("queries/");
    common::run_captured_in_parallel(
        &files,
        &BTreeMap::new(),
        BTreeMap::new(),
        batch_size,
        parallelism,
    )
    .expect("reference run")
}

#[test]
fn reference_pipeline_matches_golden_for_every_batch_size() {
    let golden = common::repo_root().join("tests/golden/reference.out");
    let first = reference_output(8192);
    let lines = common::sorted(first.lines);
    common::check_golden(&golden, &lines);
    for (batch_size, parallelism) in [(1, 1), (5, 1), (64, 1), (5, 2), (64, 4)] {
        assert_eq!(
            common::sorted(reference_output_in_parallel(batch_size, parallelism).lines),
            lines,
            "batch size {batch_size}, parallelism {parallelism}"
        );
    }
    // The planted amount mismatch and unmatched payment, exactly as the seed prints them.
    for seed_line in [
        r#"ENRICHED> {"record_type": "enriched_payment", "payment_id": "pay-9001", "order_id": "order-9001", "paid_amount": 90.0, "method": "card", "payment_ts_ms": 1700000026157, "unmatched": false, "customer_id": "cust-003", "order_amount": 240.0, "country": "US", "amount_mismatch": true}"#,
        r#"ENRICHED> {"record_type": "enriched_payment", "payment_id": "pay-9002", "order_id": "order-DOES-NOT-EXIST", "paid_amount": 55.0, "method": "wallet", "payment_ts_ms": 1700000026557, "unmatched": true, "customer_id": null, "order_amount": null, "country": null, "amount_mismatch": false}"#,
    ] {
        assert!(lines.iter().any(|l| l == seed_line), "missing: {seed_line}");
    }
    // Every payment is enriched exactly once; only the planted ones are flagged.
    let enriched: Vec<&String> = lines
        .iter()
        .filter(|l| l.starts_with("ENRICHED> "))
        .collect();
    let payments = first
        .report
        .nodes
        .iter()
        .find(|n| n.name == "payments")
        .expect("payments source");
    assert_eq!(enriched.len() as u64, payments.metrics.rows_in);
    assert_eq!(
        enriched
            .iter()
            .filter(|l| l.contains("\"unmatched\": true"))
            .count(),
        1
    );
    assert_eq!(
        enriched
            .iter()
            .filter(|l| l.contains("\"amount_mismatch\": true"))
            .count(),
        1
    );
    // The join's state is empty once the inputs have ended.
    let join = first
        .report
        .nodes
        .iter()
        .find(|n| n.kind == "interval_join")
        .expect("join node");
    assert_eq!(join.metrics.state_rows, 0);
    assert_eq!(
        join.metrics.rows_in_by_input.iter().sum::<u64>(),
        join.metrics.rows_in
    );
    // Every planted anomaly fires with the seed's values, and nothing else fires.
    let anomalies: Vec<&String> = lines
        .iter()
        .filter(|l| l.starts_with("ANOMALY> ") || l.starts_with("DEVICE_ANOMALY> "))
        .collect();
    for expected in [
        r#"ANOMALY> {"record_type": "anomaly", "anomaly_type": "amount", "customer_id": "cust-001", "payment_id": "pay-9003", "order_id": "order-9003", "amount": 9800.0, "threshold": 130.87, "event_time": "2023-11-14T22:13:48.057Z"}"#,
        r#"ANOMALY> {"record_type": "anomaly", "anomaly_type": "velocity", "customer_id": "cust-004", "transaction_count": 5, "total_amount": 430.52, "window_start": "2023-11-14T22:13:33Z", "window_end": "2023-11-14T22:13:38Z"}"#,
        r#"DEVICE_ANOMALY> {"record_type": "anomaly", "anomaly_type": "device_fault_spike", "site_id": "site-b", "fault_count": 6, "threshold": 3, "window_start": "2023-11-14T22:13:50Z", "window_end": "2023-11-14T22:13:55Z"}"#,
        r#"DEVICE_ANOMALY> {"record_type": "anomaly", "anomaly_type": "device_reboot_loop", "device_id": "dev-300", "reboot_count": 4, "threshold": 3, "window_start": "2023-11-14T22:13:52Z", "window_end": "2023-11-14T22:13:57Z"}"#,
        r#"DEVICE_ANOMALY> {"record_type": "anomaly", "anomaly_type": "firmware_update_failure", "device_id": "dev-100", "site_id": "site-a", "failure_count": 1, "event_time": "2023-11-14T22:13:57.507Z"}"#,
    ] {
        assert!(
            anomalies.iter().any(|l| *l == expected),
            "missing: {expected}"
        );
    }
    let planted = |l: &&&String| {
        l.contains("\"cust-001\"") && l.contains("pay-9003")
            || l.contains("\"cust-004\"")
            || l.contains("\"site-b\"")
                && l.contains("device_fault_spike")
                && (l.contains("22:13:49Z\"") || l.contains("22:13:5"))
            || l.contains("\"dev-300\"")
            || l.contains("\"dev-100\"") && l.contains("firmware_update_failure")
    };
    let unexpected: Vec<&&String> = anomalies.iter().filter(|l| !planted(l)).collect();
    assert!(
        unexpected.is_empty(),
        "anomalies on clean data: {unexpected:?}"
    );
    assert_eq!(
        anomalies.len(),
        10,
        "amount, velocity, 5 fault-spike windows, reboot loop, 2 firmware failures"
    );
    // The late event, exactly as the seed prints it, and the four health alerts.
    for expected in [
        r#"LATE_EVENT> {"record_type": "device_event", "device_id": "dev-101", "site_id": "site-a", "event_type": "heartbeat", "status": "ok", "event_ts_ms": 1700000003507, "watermark_ms": 1700000039650, "lag_ms": 36143}"#,
        r#"HEALTH_ALERT> {"record_type": "health_alert", "reason": "throughput_below_floor", "severity": "warning", "gap_ms": 12650, "threshold_ms": 4000, "resumed_at": "2023-11-14T22:14:16.650Z"}"#,
        r#"HEALTH_ALERT> {"record_type": "health_alert", "reason": "late_event_spike", "severity": "warning", "window_start": "2023-11-14T22:13:20Z", "window_end": "2023-11-14T22:13:25Z", "late_events": 1, "ceiling": 0}"#,
        r#"HEALTH_ALERT> {"record_type": "health_alert", "reason": "watermark_lag_exceeded", "severity": "critical", "window_start": "2023-11-14T22:13:20Z", "window_end": "2023-11-14T22:13:25Z", "max_lag_ms": 36143, "threshold_ms": 5000}"#,
        r#"HEALTH_ALERT> {"record_type": "health_alert", "reason": "fault_rate_exceeded", "severity": "critical", "window_start": "2023-11-14T22:13:50Z", "window_end": "2023-11-14T22:13:55Z", "fault_count": 6, "ceiling": 4}"#,
    ] {
        assert!(lines.iter().any(|l| l == expected), "missing: {expected}");
    }
    assert_eq!(
        lines
            .iter()
            .filter(|l| l.starts_with("HEALTH_ALERT> "))
            .count(),
        4,
        "no alert fires on clean data"
    );
    assert_eq!(
        lines
            .iter()
            .filter(|l| l.starts_with("LATE_EVENT> "))
            .count(),
        1
    );
    // All seven seed streams are printed.
    for tag in [
        "ENRICHED",
        "METRICS",
        "ANOMALY",
        "DEVICE_METRICS",
        "DEVICE_ANOMALY",
        "LATE_EVENT",
        "HEALTH_ALERT",
    ] {
        assert!(
            lines.iter().any(|l| l.starts_with(&format!("{tag}> "))),
            "no {tag} line"
        );
    }
    // The planted late device event is diverted, not counted in any window.
    let devices = first
        .report
        .nodes
        .iter()
        .find(|n| n.name == "devices")
        .expect("devices source");
    assert_eq!(devices.metrics.late_rows, 1);
    assert_eq!(devices.metrics.bad_rows, 0);
}

fn stream_text(
    stream: GeneratedStream,
    seed: u64,
    count: Option<u64>,
    batch_size: usize,
) -> String {
    let mut generator = Generator::new(GeneratorConfig {
        stream,
        seed,
        rate: 2,
        count,
        batch_size,
    });
    let mut out = Vec::new();
    while let Some(batch) = generator.next_batch().expect("generate") {
        encode_json_lines(&batch, &mut out).expect("encode");
    }
    String::from_utf8(out).expect("utf8")
}

#[test]
fn generator_plants_every_seed_scenario() {
    let orders = stream_text(GeneratedStream::Orders, 7, None, 100);
    let payments = stream_text(GeneratedStream::Payments, 7, None, 100);
    let devices = stream_text(GeneratedStream::Devices, 7, None, 100);
    // Matched pairs: background order-0000 is paid by pay-0000.
    assert!(orders.contains("\"order_id\":\"order-0000\""));
    assert!(payments.contains("\"payment_id\":\"pay-0000\",\"order_id\":\"order-0000\""));
    // Amount mismatch, as in the seed's sample.
    assert!(orders.contains(
        "{\"order_id\":\"order-9001\",\"customer_id\":\"cust-003\",\"order_amount\":240.0,\"order_ts\":1700000025500,\"country\":\"US\"}"
    ));
    assert!(payments.contains(
        "{\"payment_id\":\"pay-9001\",\"order_id\":\"order-9001\",\"paid_amount\":90.0,\"payment_ts\":1700000026157,\"method\":\"card\"}"
    ));
    // Unmatched payment.
    assert!(payments.contains(
        "{\"payment_id\":\"pay-9002\",\"order_id\":\"order-DOES-NOT-EXIST\",\"paid_amount\":55.0,\"payment_ts\":1700000026557,\"method\":\"wallet\"}"
    ));
    assert!(!orders.contains("order-DOES-NOT-EXIST"));
    // Large amount for cust-001 after five ordinary payments.
    assert!(payments.contains("\"payment_id\":\"pay-9003\",\"order_id\":\"order-9003\",\"paid_amount\":9800.0,\"payment_ts\":1700000028057"));
    assert_eq!(orders.matches("\"customer_id\":\"cust-001\"").count(), 6);
    // Velocity burst: five cust-004 payments inside [13 s, 18 s).
    let burst: Vec<&str> = orders
        .lines()
        .filter(|l| l.contains("\"customer_id\":\"cust-004\""))
        .collect();
    assert_eq!(burst.len(), 5);
    // Site fault spike, reboot loop, firmware failures.
    let faults = devices
        .lines()
        .filter(|l| l.contains("\"site_id\":\"site-b\"") && l.contains("\"fault\""))
        .count();
    assert_eq!(faults, 8);
    let reboots = devices
        .lines()
        .filter(|l| l.contains("\"dev-300\"") && l.contains("\"reboot\""))
        .count();
    assert_eq!(reboots, 4);
    assert!(devices.contains("{\"device_id\":\"dev-100\",\"site_id\":\"site-a\",\"event_type\":\"firmware_update\",\"status\":\"failed\",\"event_ts\":1700000037507}"));
    // The late event arrives right after the event at 41 650 ms.
    let lines: Vec<&str> = devices.lines().collect();
    let late = lines
        .iter()
        .position(|l| l.contains("\"event_ts\":1700000003507"))
        .expect("late event");
    assert!(lines[late - 1].contains("\"event_ts\":1700000041650"));
    let max_before = lines[..late]
        .iter()
        .filter_map(|l| {
            l.rsplit("\"event_ts\":")
                .next()?
                .trim_end_matches('}')
                .parse::<i64>()
                .ok()
        })
        .max();
    assert_eq!(max_before, Some(1_700_000_041_650));
    // Throughput drop: no event of any stream strictly inside (44 000, 56 650).
    for (text, field) in [
        (&orders, "order_ts"),
        (&payments, "payment_ts"),
        (&devices, "event_ts"),
    ] {
        for line in text.lines() {
            let ts: i64 = line
                .split(&format!("\"{field}\":"))
                .nth(1)
                .and_then(|r| r.split([',', '}']).next())
                .and_then(|v| v.parse().ok())
                .expect("timestamp");
            assert!(
                !(1_700_000_044_000 < ts && ts < 1_700_000_056_650),
                "{line} falls into the planted gap"
            );
        }
    }
}

#[test]
fn generator_is_deterministic() {
    for stream in [
        GeneratedStream::Orders,
        GeneratedStream::Payments,
        GeneratedStream::Devices,
    ] {
        let a = stream_text(stream, 42, Some(3_000), 8192);
        assert_eq!(
            a,
            stream_text(stream, 42, Some(3_000), 77),
            "batch size must not matter"
        );
        assert_ne!(
            a,
            stream_text(stream, 43, Some(3_000), 8192),
            "the seed must matter"
        );
        assert_eq!(a.lines().count(), 3_000);
    }
}

/// `examples/match_recognize/fraud_rules.sql`: the pipeline's velocity rule
/// and a sequence rule as row patterns, on the same generator, find the
/// planted burst (as the hopping window does: customer, count, total) and
/// the planted large payment after a small one.
#[test]
fn match_recognize_fraud_rules_find_the_planted_payments() {
    let files =
        job::load_sql(&[common::repo_root().join("examples/match_recognize/fraud_rules.sql")])
            .expect("example");
    let expected = vec![
        r#"FRAUD> {"rule": "small_then_large", "customer_id": "cust-001", "payments": 6, "total_amount": 10348.3, "first_payment": "pay-9101", "last_payment": "pay-9003", "first_at": "2023-11-14T22:13:22.400Z", "last_at": "2023-11-14T22:13:48.057Z"}"#,
        r#"FRAUD> {"rule": "velocity", "customer_id": "cust-004", "payments": 5, "total_amount": 430.52, "first_payment": "pay-9201", "last_payment": "pay-9205", "first_at": "2023-11-14T22:13:33.100Z", "last_at": "2023-11-14T22:13:37.100Z"}"#,
    ];
    for (batch_size, parallelism) in [(8192, 1), (1, 1), (7, 2), (64, 4)] {
        let captured = common::run_captured_in_parallel(
            &files,
            &BTreeMap::new(),
            BTreeMap::new(),
            batch_size,
            parallelism,
        )
        .expect("example run");
        assert_eq!(
            common::sorted(captured.lines),
            expected,
            "batch size {batch_size}, parallelism {parallelism}"
        );
    }
    let pipeline = common::sorted(reference_output(8192).lines);
    assert!(
        pipeline.iter().any(|l| l.contains(r#""anomaly_type": "velocity", "customer_id": "cust-004", "transaction_count": 5, "total_amount": 430.52"#)),
        "the pipeline's velocity window finds the same burst"
    );
}
