//! Settings of a run that one connector alone reads (where stdout sinks
//! print, the Kafka partitions a group's task reads), kept by type so the
//! run's [`crate::ConnectorConfig`] names no connector — the shape of
//! DataFusion's `SessionConfig` extensions.
//!
//! In: values a front end sets ([`ConnectorSettings::set`]). Out: the
//! value of a type, if one was set ([`ConnectorSettings::get`]).
//!
//! ```
//! use eddy_connectors::settings::ConnectorSettings;
//!
//! #[derive(Debug, PartialEq)]
//! struct Partitions(Vec<i32>);
//!
//! let mut settings = ConnectorSettings::default();
//! assert_eq!(settings.get::<Partitions>(), None);
//! settings.set(Partitions(vec![3]));
//! assert_eq!(settings.get::<Partitions>(), Some(&Partitions(vec![3])));
//! ```

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::Arc;

/// One value per type; cloning shares the values.
#[derive(Clone, Default)]
pub struct ConnectorSettings {
    values: HashMap<TypeId, Arc<dyn Any + Send + Sync>>,
}

impl ConnectorSettings {
    /// Sets the value of `T`, replacing any before.
    pub fn set<T: Any + Send + Sync>(&mut self, value: T) {
        self.values.insert(TypeId::of::<T>(), Arc::new(value));
    }

    /// These settings with the value of `T` set.
    pub fn with<T: Any + Send + Sync>(mut self, value: T) -> Self {
        self.set(value);
        self
    }

    /// The value of `T`, if one was set.
    pub fn get<T: Any + Send + Sync>(&self) -> Option<&T> {
        self.values
            .get(&TypeId::of::<T>())
            .and_then(|value| value.downcast_ref::<T>())
    }
}

impl std::fmt::Debug for ConnectorSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ConnectorSettings({} set)", self.values.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_per_type_replaced_by_the_last_set() {
        let mut settings = ConnectorSettings::default();
        settings.set(1u32);
        settings.set("where".to_string());
        settings.set(2u32);
        assert_eq!(settings.get::<u32>(), Some(&2));
        assert_eq!(settings.get::<String>().map(String::as_str), Some("where"));
        assert_eq!(settings.get::<i64>(), None);
        let shared = settings.clone();
        assert_eq!(shared.get::<u32>(), Some(&2));
    }
}
