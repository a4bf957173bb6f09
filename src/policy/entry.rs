//! A list entry of the configuration format: a plain string, or an object carrying the
//! same value and a comment (`{"path": …, "comment": …}`, `{"name": …}`).

use std::fmt;
use std::marker::PhantomData;

use schemars::JsonSchema;
use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};

/// A path, as a string or as {"path": …, "comment": …}.
pub type PathEntry = Entry<PathFields>;
/// A name (variable, domain), as a string or as {"name": …, "comment": …}.
pub type NameEntry = Entry<NameFields>;

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PathFields {
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NameFields {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
}

/// A list entry: a plain string, or an object carrying the same value and a comment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum Entry<T> {
    Plain(String),
    Explained(T),
}

/// The value of an entry, whichever way it was written.
pub trait EntryValue {
    fn value(&self) -> &str;
}

impl EntryValue for PathFields {
    fn value(&self) -> &str {
        &self.path
    }
}

impl EntryValue for NameFields {
    fn value(&self) -> &str {
        &self.name
    }
}

impl<T: EntryValue> Entry<T> {
    pub fn value(&self) -> &str {
        match self {
            Entry::Plain(value) => value,
            Entry::Explained(fields) => fields.value(),
        }
    }
}

impl<T: EntryValue> From<&str> for Entry<T> {
    fn from(value: &str) -> Self {
        Entry::Plain(value.to_string())
    }
}

// Untagged enums lose the inner error ("did not match any variant"); this keeps it, so a
// misspelled "comment" inside an entry is reported as exactly that.
impl<'de, T: Deserialize<'de>> Deserialize<'de> for Entry<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct EntryVisitor<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for EntryVisitor<T> {
            type Value = Entry<T>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string, or an object with the value and a \"comment\"")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Entry<T>, E> {
                Ok(Entry::Plain(v.to_string()))
            }
            fn visit_map<M: MapAccess<'de>>(self, map: M) -> Result<Entry<T>, M::Error> {
                T::deserialize(de::value::MapAccessDeserializer::new(map)).map(Entry::Explained)
            }
        }
        deserializer.deserialize_any(EntryVisitor(PhantomData))
    }
}
