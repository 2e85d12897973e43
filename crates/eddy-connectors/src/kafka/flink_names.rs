//! Flink's Kafka option names, read as eddy's own, so a Flink table
//! definition runs as written.
//!
//! In: a Kafka table's options as written. Out: the same options with
//! Flink's names replaced by eddy's:
//!
//! | Flink | eddy |
//! |---|---|
//! | `scan.startup.mode` = `earliest-offset` / `latest-offset` | `start` = `earliest` / `latest` |
//! | `scan.startup.mode` = `timestamp` with `scan.startup.timestamp-millis` = N | `start` = N |
//! | `scan.bounded.mode` = `unbounded` / `latest-offset` | `stop` = `never` / `latest` |
//! | `sink.delivery-guarantee` = `exactly-once` / `at-least-once` / `none` | `delivery` = `exactly_once` / `at_least_once` / `at_least_once` |
//! | `sink.transactional-id-prefix` | `transactional_id` |
//!
//! Every `properties.` option goes to the Kafka client, so
//! `properties.bootstrap.servers` and `properties.group.id` need no
//! translation; a Java client property librdkafka names otherwise is
//! renamed ([`JAVA_CLIENT_PROPERTIES`]: `fetch.max.wait.ms`). A
//! table that names one setting both ways, or a Flink mode eddy does not
//! have (`group-offsets`, `specific-offsets`: eddy resumes from its own
//! checkpoints), is refused with the option's name.
//!
//! ```
//! use std::collections::BTreeMap;
//! use eddy_connectors::kafka::flink_names::as_eddy_names;
//!
//! let flink: BTreeMap<String, String> = [
//!     ("scan.startup.mode", "latest-offset"),
//!     ("scan.bounded.mode", "latest-offset"),
//! ]
//! .into_iter()
//! .map(|(k, v)| (k.to_string(), v.to_string()))
//! .collect();
//! let eddy = as_eddy_names(&flink).unwrap();
//! assert_eq!(eddy.get("start").map(String::as_str), Some("latest"));
//! assert_eq!(eddy.get("stop").map(String::as_str), Some("latest"));
//! ```

use std::collections::BTreeMap;

use crate::error::{ConnectorError, Result};

/// Flink's name for where a source starts.
pub const STARTUP_MODE: &str = "scan.startup.mode";
/// Flink's instant for `scan.startup.mode = 'timestamp'`.
pub const STARTUP_TIMESTAMP: &str = "scan.startup.timestamp-millis";
/// Flink's name for where a source ends.
pub const BOUNDED_MODE: &str = "scan.bounded.mode";
/// Flink's name for a sink's guarantee.
pub const DELIVERY_GUARANTEE: &str = "sink.delivery-guarantee";
/// Flink's name for a sink's transactional id.
pub const TRANSACTIONAL_ID_PREFIX: &str = "sink.transactional-id-prefix";

/// The startup modes eddy has.
pub const STARTUP_MODES: &[&str] = &["earliest-offset", "latest-offset", "timestamp"];
/// The bounded modes eddy has.
pub const BOUNDED_MODES: &[&str] = &["unbounded", "latest-offset"];
/// The delivery guarantees eddy has (`none` is written at least once).
pub const DELIVERY_GUARANTEES: &[&str] = &["exactly-once", "at-least-once", "none"];

/// Kafka client properties the Java client (Flink's) and librdkafka
/// (eddy's) name differently: Java's name, librdkafka's.
pub const JAVA_CLIENT_PROPERTIES: &[(&str, &str)] = &[(
    "properties.fetch.max.wait.ms",
    "properties.fetch.wait.max.ms",
)];

/// The options with Flink's names replaced by eddy's (see the module docs).
pub fn as_eddy_names(options: &BTreeMap<String, String>) -> Result<BTreeMap<String, String>> {
    let mut out = options.clone();
    if let Some(mode) = out.remove(STARTUP_MODE) {
        let timestamp = out.remove(STARTUP_TIMESTAMP);
        let start = match mode.trim().to_ascii_lowercase().as_str() {
            "earliest-offset" => "earliest".to_string(),
            "latest-offset" => "latest".to_string(),
            "timestamp" => timestamp.ok_or_else(|| {
                ConnectorError::bad_option(
                    STARTUP_TIMESTAMP,
                    format!("{STARTUP_MODE} = 'timestamp' needs {STARTUP_TIMESTAMP} (epoch milliseconds)"),
                )
            })?,
            other => {
                return Err(ConnectorError::bad_option(
                    STARTUP_MODE,
                    format!(
                        "'{other}' is not supported (use {}; a job resumes from its own checkpoints)",
                        STARTUP_MODES.join(", ")
                    ),
                ))
            }
        };
        put(&mut out, "start", STARTUP_MODE, start)?;
    } else if out.contains_key(STARTUP_TIMESTAMP) {
        return Err(ConnectorError::bad_option(
            STARTUP_TIMESTAMP,
            format!("only read with {STARTUP_MODE} = 'timestamp'"),
        ));
    }
    if let Some(mode) = out.remove(BOUNDED_MODE) {
        let stop = match mode.trim().to_ascii_lowercase().as_str() {
            "unbounded" => "never",
            "latest-offset" => "latest",
            other => {
                return Err(ConnectorError::bad_option(
                    BOUNDED_MODE,
                    format!(
                        "'{other}' is not supported (use {})",
                        BOUNDED_MODES.join(" or ")
                    ),
                ))
            }
        };
        put(&mut out, "stop", BOUNDED_MODE, stop.to_string())?;
    }
    if let Some(guarantee) = out.remove(DELIVERY_GUARANTEE) {
        let delivery = match guarantee.trim().to_ascii_lowercase().as_str() {
            "exactly-once" => "exactly_once",
            "at-least-once" | "none" => "at_least_once",
            other => {
                return Err(ConnectorError::bad_option(
                    DELIVERY_GUARANTEE,
                    format!("'{other}' is not {}", DELIVERY_GUARANTEES.join(", ")),
                ))
            }
        };
        put(
            &mut out,
            "delivery",
            DELIVERY_GUARANTEE,
            delivery.to_string(),
        )?;
    }
    if let Some(id) = out.remove(TRANSACTIONAL_ID_PREFIX) {
        put(&mut out, "transactional_id", TRANSACTIONAL_ID_PREFIX, id)?;
    }
    for (java, librdkafka) in JAVA_CLIENT_PROPERTIES {
        if let Some(value) = out.remove(*java) {
            put(&mut out, librdkafka, java, value)?;
        }
    }
    Ok(out)
}

/// Sets eddy's option `name` from Flink's `flink`, refusing a table that
/// sets both.
fn put(out: &mut BTreeMap<String, String>, name: &str, flink: &str, value: String) -> Result<()> {
    if out.contains_key(name) {
        return Err(ConnectorError::bad_option(
            flink,
            format!("'{name}' is set too: name the setting once"),
        ));
    }
    out.insert(name.to_string(), value);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn flink_names_become_eddy_names() {
        let out = as_eddy_names(&options(&[
            ("scan.startup.mode", "timestamp"),
            ("scan.startup.timestamp-millis", "1700000000000"),
            ("scan.bounded.mode", "unbounded"),
            ("sink.delivery-guarantee", "at-least-once"),
            ("sink.transactional-id-prefix", "tx"),
            ("properties.fetch.max.wait.ms", "10"),
            ("topic", "t"),
        ]))
        .unwrap();
        assert_eq!(
            out,
            options(&[
                ("start", "1700000000000"),
                ("stop", "never"),
                ("delivery", "at_least_once"),
                ("transactional_id", "tx"),
                ("properties.fetch.wait.max.ms", "10"),
                ("topic", "t"),
            ])
        );
        let out = as_eddy_names(&options(&[("scan.startup.mode", "EARLIEST-OFFSET")])).unwrap();
        assert_eq!(out, options(&[("start", "earliest")]));
        let out = as_eddy_names(&options(&[("sink.delivery-guarantee", "none")])).unwrap();
        assert_eq!(out, options(&[("delivery", "at_least_once")]));
    }

    #[test]
    fn eddy_names_pass_unchanged() {
        let given = options(&[("start", "latest"), ("stop", "latest"), ("topic", "t")]);
        assert_eq!(as_eddy_names(&given).unwrap(), given);
    }

    #[test]
    fn a_setting_named_both_ways_or_unknown_is_refused() {
        let err = as_eddy_names(&options(&[
            ("scan.startup.mode", "latest-offset"),
            ("start", "earliest"),
        ]))
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("scan.startup.mode") && err.contains("'start' is set too"),
            "{err}"
        );
        let err = as_eddy_names(&options(&[("scan.startup.mode", "group-offsets")]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("'group-offsets' is not supported"), "{err}");
        let err = as_eddy_names(&options(&[("scan.startup.mode", "timestamp")]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("scan.startup.timestamp-millis"), "{err}");
        let err = as_eddy_names(&options(&[("scan.startup.timestamp-millis", "5")]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("only read with scan.startup.mode"), "{err}");
        let err = as_eddy_names(&options(&[("scan.bounded.mode", "timestamp")]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("'timestamp' is not supported"), "{err}");
    }
}
