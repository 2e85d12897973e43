//! The connectors eddy has, in one list ([`Registry::standard`]): adding a
//! connector is its module and one line here. Looking a name up, checking
//! a table's connector and options, and the reference (`eddy connectors`)
//! all read this list.
//!
//! In: a table's [`ConnectorSpec`] and role. Out: its [`Connector`], or an
//! error naming the closest known connector or option.
//!
//! ```
//! use eddy_connectors::{Registry, Role};
//!
//! let registry = Registry::standard();
//! assert_eq!(registry.get("print").unwrap().name(), "stdout");
//! assert!(registry.names(Role::Source).contains(&"kafka"));
//! assert!(registry.reference().contains("## generator"));
//! ```

use std::collections::BTreeMap;
use std::sync::Arc;

use eddy_engine::graph::ConnectorSpec;
use eddy_engine::source::layout::TABLE_OPTIONS;

use crate::config::ConnectorConfig;
use crate::connector::{Connector, Role};
use crate::error::{ConnectorError, Result};
use crate::options::{hint, validate};
use crate::{
    blackhole, datagen, delta, file, generator, kafka, nexmark, parquet, postgres, stdin, stdout,
    values, view,
};

/// See the module docs.
#[derive(Debug, Clone)]
pub struct Registry {
    connectors: Arc<[Box<dyn Connector>]>,
}

impl Default for Registry {
    fn default() -> Self {
        Self::standard()
    }
}

impl Registry {
    /// Every connector eddy has.
    pub fn standard() -> Self {
        Self::of(vec![
            Box::new(file::FileConnector),
            Box::new(stdin::StdinConnector),
            Box::new(generator::GeneratorConnector::default()),
            Box::new(nexmark::NexmarkConnector),
            Box::new(datagen::DatagenConnector),
            Box::new(values::ValuesConnector),
            Box::new(kafka::KafkaConnector::default()),
            Box::new(postgres::PostgresCdcConnector::default()),
            Box::new(postgres::JdbcConnector::default()),
            Box::new(stdout::StdoutConnector),
            Box::new(parquet::ParquetConnector),
            Box::new(delta::DeltaConnector::default()),
            Box::new(blackhole::BlackholeConnector),
            Box::new(view::ViewConnector),
        ])
    }

    /// A registry of these connectors.
    pub fn of(connectors: Vec<Box<dyn Connector>>) -> Self {
        Self {
            connectors: connectors.into(),
        }
    }

    /// Every connector's [`Connector::report`] lines.
    pub fn report(&self) -> Vec<String> {
        self.connectors.iter().flat_map(|c| c.report()).collect()
    }

    /// The connector a table names (by name or alias).
    pub fn get(&self, name: &str) -> Option<&dyn Connector> {
        self.connectors
            .iter()
            .find(|c| c.name() == name || c.aliases().contains(&name))
            .map(|c| c.as_ref())
    }

    /// Drops the pushed-down filter of every source of `graph` whose
    /// connector does not use it ([`Connector::uses_filter`]).
    pub fn drop_unused_filters(&self, graph: &mut eddy_engine::graph::JobGraph) {
        for node in &mut graph.nodes {
            if let eddy_engine::graph::NodeKind::Source { spec, .. } = &mut node.kind {
                if !self.get(&spec.connector).is_some_and(|c| c.uses_filter()) {
                    spec.filter = None;
                }
            }
        }
    }

    /// The names of the connectors that can play `role`.
    pub fn names(&self, role: Role) -> Vec<&'static str> {
        self.connectors
            .iter()
            .filter(|c| c.options(role).is_some())
            .map(|c| c.name())
            .collect()
    }

    /// The connector of `spec` in `role`, or an error naming the closest
    /// that can play it.
    pub fn connector(&self, spec: &ConnectorSpec, role: Role) -> Result<&dyn Connector> {
        match self.get(&spec.connector) {
            Some(c) if c.options(role).is_some() => Ok(c),
            Some(_) => Err(ConnectorError::NotInRole {
                connector: spec.connector.clone(),
                role: role.name(),
                known: self.names(role).join(", "),
            }),
            None => {
                let names = self.connectors.iter().filter(|c| c.options(role).is_some());
                let spellings: Vec<&str> = names
                    .flat_map(|c| std::iter::once(c.name()).chain(c.aliases().iter().copied()))
                    .collect();
                Err(ConnectorError::UnknownConnector {
                    connector: spec.connector.clone(),
                    role: role.name(),
                    hint: hint(&spec.connector, spellings),
                    known: self.names(role).join(", "),
                })
            }
        }
    }

    /// Checks a table: its connector plays `role`, every option is one it
    /// declares with a value of its kind, and the connector's own checks.
    pub fn check(&self, config: &ConnectorConfig, spec: &ConnectorSpec, role: Role) -> Result<()> {
        self.validate(spec, role)?.check(config, spec, role)
    }

    /// The first part of [`Registry::check`]: the connector plays `role`
    /// and every option is one it declares, with a value of its kind.
    pub fn validate(&self, spec: &ConnectorSpec, role: Role) -> Result<&dyn Connector> {
        let connector = self.connector(spec, role)?;
        let declared = connector.options(role).unwrap_or_default();
        validate(declared, &spec.options, &spec.connector, role)?;
        Ok(connector)
    }

    /// The reference of every connector and its options, as Markdown.
    pub fn reference(&self) -> String {
        let mut out = format!(
            "# Connectors\n\n`CREATE TABLE t (...) WITH ('connector' = 'NAME', ...)`. \
             Generated from the connectors' declarations (`eddy connectors`).\n\n\
             Every source also takes the engine's table options: {} \
             (lateness, idleness, bad rows, late rows and skew; see docs/SQL.md).\n",
            TABLE_OPTIONS
                .iter()
                .map(|o| format!("`{o}`"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        for c in self.connectors.iter() {
            out.push_str(&format!("\n## {}\n\n{}\n", c.name(), c.summary()));
            if !c.aliases().is_empty() {
                out.push_str(&format!("\nAlso named: {}.\n", c.aliases().join(", ")));
            }
            for role in Role::ALL {
                let Some(options) = c.options(role) else {
                    continue;
                };
                out.push_str(&format!("\nAs a {}:", role.name()));
                if options.is_empty() {
                    out.push_str(" no options.\n");
                    continue;
                }
                out.push_str("\n\n| option | value | |\n|---|---|---|\n");
                for o in options {
                    out.push_str(&format!(
                        "| `{}` | {} | {} |\n",
                        o.name,
                        o.kind.describe(),
                        o.doc
                    ));
                }
            }
        }
        out
    }
}

/// The planner's questions, answered by the connector a table names: a
/// lookup join reads by key the tables of connectors that play
/// [`Role::Lookup`]; the rest each connector says of itself.
impl eddy_engine::graph::ConnectorFacts for Registry {
    fn looked_up_by_key(&self, connector: &str) -> bool {
        self.get(connector)
            .is_some_and(|c| c.options(Role::Lookup).is_some())
    }

    fn reads_changes_by_key(&self, connector: &str, options: &BTreeMap<String, String>) -> bool {
        self.get(connector)
            .is_some_and(|c| c.reads_changes_by_key(options))
    }

    fn records_have_keys(&self, connector: &str) -> bool {
        self.get(connector).is_some_and(|c| c.records_have_keys())
    }

    fn metadata_keys(
        &self,
        connector: &str,
    ) -> &'static [(&'static str, eddy_engine::source::ChangeMetadata)] {
        self.get(connector).map_or(&[], |c| c.metadata_keys())
    }

    fn explain_sink(&self, spec: &ConnectorSpec) -> Option<String> {
        self.get(&spec.connector)?.explain_sink(spec)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use datafusion::arrow::datatypes::Schema;

    use super::*;

    fn spec(connector: &str, options: &[(&str, &str)]) -> ConnectorSpec {
        ConnectorSpec {
            table: "t".into(),
            connector: connector.into(),
            options: options
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>(),
            schema: Arc::new(Schema::empty()),
            declared_at: None,
            primary_key: Vec::new(),
            filter: None,
            unread_columns: Vec::new(),
            explain: None,
        }
    }

    fn check(s: &ConnectorSpec, role: Role) -> Result<()> {
        Registry::standard().check(&ConnectorConfig::default(), s, role)
    }

    #[test]
    fn a_misspelt_option_is_named_with_the_closest_and_every_valid_one() {
        let err = check(
            &spec("file", &[("path", "x"), ("idel_timeout", "1s")]),
            Role::Source,
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("unknown option 'idel_timeout'"), "{err}");
        assert!(err.contains("did you mean 'idle_timeout'?"), "{err}");
        assert!(err.contains("allowed_lateness, bad_rows, batch_size, format, idle_timeout, json.timestamp-format.standard, late_rows, max_future_skew, max_line_bytes, path"), "{err}");
        assert!(check(&spec("file", &[("path", "x")]), Role::Source).is_ok());
        let err = check(&spec("parquet", &[("tag", "x")]), Role::Sink)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("unknown option 'tag' for a parquet sink"),
            "{err}"
        );
    }

    #[test]
    fn an_unknown_connector_is_named_with_a_hint_and_the_known_ones() {
        let err = check(&spec("generater", &[]), Role::Source)
            .unwrap_err()
            .to_string();
        assert!(err.contains("did you mean 'generator'?"), "{err}");
        assert!(
            err.contains(
                "(sources: file, stdin, generator, nexmark, datagen, values, kafka, postgres-cdc, parquet, delta)"
            ),
            "{err}"
        );
        let err = check(&spec("generator", &[]), Role::Sink)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("connector 'generator': it cannot be a sink (sinks: file, kafka, jdbc, stdout, parquet, delta, blackhole, view)"),
            "{err}"
        );
    }

    #[test]
    fn a_value_of_the_wrong_kind_is_refused_before_anything_opens() {
        let err = check(&spec("generator", &[("rate", "fast")]), Role::Source)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("option 'rate': 'fast' is not a valid number"),
            "{err}"
        );
        let err = check(
            &spec("parquet", &[("path", "o"), ("compression", "lzma")]),
            Role::Sink,
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("option 'compression'"), "{err}");
    }

    #[test]
    fn every_connector_is_found_by_its_names_and_documented() {
        let registry = Registry::standard();
        let reference = registry.reference();
        for name in [
            "file",
            "ndjson",
            "filesystem",
            "stdin",
            "generator",
            "nexmark",
            "values",
            "kafka",
            "stdout",
            "print",
            "parquet",
            "blackhole",
        ] {
            let c = registry.get(name).unwrap_or_else(|| panic!("{name}"));
            assert!(reference.contains(&format!("## {}", c.name())), "{name}");
        }
        assert!(registry.get("nothing").is_none());
    }
}
