//! Wire enums: a closed set of known values plus a fallback for the values a later 1.x
//! may add.
//!
//! Every enum of the protocol that may grow (error codes, risk and permission levels,
//! modes, stop reasons, statuses, …) is declared with the crate's `wire_enum!` macro. Such an enum:
//!
//! - is `#[non_exhaustive]` and has one variant per known value plus `Unknown(String)`;
//! - decodes any string: a known one to its variant, any other to `Unknown` with the
//!   raw string, so a host built against this version keeps working when a newer
//!   kernel sends a value it does not know;
//! - encodes `Unknown` back to the same string (round-trip);
//! - has a JSON Schema that says "one of the known values, or any other string", and
//!   TypeScript `KnownX | (string & {})` (with `KnownX` the union of the known values);
//! - has [`WireEnum`]: the known names, `parse` (known only), `from_wire` (any).
//!
//! Where the kernel *receives* a value (a command's payload, a tool's arguments) an
//! unknown value is an error as before: those fields decode through [`strict`]
//! (`REQUEST_INVALID` with `details.reason` `invalid_value`, or the tool's
//! `TOOL_ARGUMENTS_INVALID`), and their schema lists the known values only.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::de::{self, Deserializer, Visitor};

/// An enum of the protocol with known values and a fallback for unknown ones.
pub trait WireEnum: Sized + 'static {
    /// The wire names of the known values, in documentation order.
    const NAMES: &'static [&'static str];

    /// The known value with this wire name.
    fn parse(name: &str) -> Option<Self>;

    /// The value with this wire name: known, or `Unknown` keeping the name.
    fn from_wire(name: Cow<'_, str>) -> Self;

    /// The wire name (the raw one for an unknown value).
    fn as_str(&self) -> &str;

    /// Whether this is a value this version does not know.
    fn is_unknown(&self) -> bool;

    /// The schema of the known values only (no fallback).
    fn known_schema() -> Schema;
}

/// The sentence the generated schema and TypeScript add to every wire enum.
pub(crate) const FALLBACK_NOTE: &str = "Any other string is a value from a later 1.x \
that this version does not know: decoders keep it as it is (Rust: `Unknown`), and \
consumers treat it as unknown.";

/// Joins doc-comment lines as schemars does (one leading space dropped per line).
pub(crate) fn doc_text(lines: &[&str]) -> String {
    let text: Vec<&str> = lines
        .iter()
        .map(|l| l.strip_prefix(' ').unwrap_or(l))
        .collect();
    text.join("\n").trim().to_owned()
}

/// A JSDoc block as ts-rs writes one.
pub(crate) fn jsdoc(text: &str) -> String {
    let mut out = String::from("/**\n");
    for line in text.lines() {
        if line.is_empty() {
            out.push_str(" *\n");
        } else {
            out.push_str(" * ");
            out.push_str(line);
            out.push('\n');
        }
    }
    out.push_str(" */\n");
    out
}

/// The schema of a wire enum: `{description, oneOf: [{const, description}…]}` for the
/// known values, wrapped with the fallback when `lenient`.
pub(crate) fn enum_schema(doc: &str, values: &[(&str, &str)], lenient: bool) -> Schema {
    let branches: Vec<serde_json::Value> = values
        .iter()
        .map(|(name, doc)| {
            let mut branch = serde_json::json!({ "type": "string", "const": name });
            if !doc.is_empty() {
                branch["description"] = serde_json::Value::from(*doc);
            }
            branch
        })
        .collect();
    let value = if lenient {
        serde_json::json!({
            "description": doc,
            "anyOf": [
                { "oneOf": branches },
                { "type": "string", "description": FALLBACK_NOTE },
            ],
        })
    } else {
        serde_json::json!({ "description": doc, "oneOf": branches })
    };
    Schema::try_from(value).unwrap_or_default()
}

struct LenientVisitor<T>(PhantomData<T>);

impl<T: WireEnum> Visitor<'_> for LenientVisitor<T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<T, E> {
        Ok(T::from_wire(Cow::Borrowed(v)))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<T, E> {
        Ok(T::from_wire(Cow::Owned(v)))
    }
}

/// Decodes any string (the `Deserialize` of every wire enum).
pub(crate) fn lenient<'de, D: Deserializer<'de>, T: WireEnum>(d: D) -> Result<T, D::Error> {
    d.deserialize_str(LenientVisitor(PhantomData))
}

struct StrictVisitor<T>(PhantomData<T>);

impl<T: WireEnum> Visitor<'_> for StrictVisitor<T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("variant identifier")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<T, E> {
        T::parse(v).ok_or_else(|| E::unknown_variant(v, T::NAMES))
    }
}

/// Decoders for fields where only the known values are accepted: the payloads of
/// commands and the arguments of tools (what the kernel receives). An unknown value
/// fails as an unknown variant of a derived enum would (`unknown variant `x`, expected
/// one of …`).
pub mod strict {
    use super::*;

    /// A required field.
    pub fn one<'de, D: Deserializer<'de>, T: WireEnum>(d: D) -> Result<T, D::Error> {
        d.deserialize_str(StrictVisitor(PhantomData))
    }

    /// An optional field (`null` is `None`).
    pub fn opt<'de, D: Deserializer<'de>, T: WireEnum>(d: D) -> Result<Option<T>, D::Error> {
        struct Inner<T>(T);
        impl<'de, T: WireEnum> serde::Deserialize<'de> for Inner<T> {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                one(d).map(Inner)
            }
        }
        Ok(<Option<Inner<T>> as serde::Deserialize>::deserialize(d)?.map(|i| i.0))
    }
}

/// The schema of a field that accepts the known values only (`#[schemars(with =
/// "Known<T>")]`, or `Option<Known<T>>`).
#[derive(Debug)]
pub struct Known<T>(PhantomData<T>);

impl<T: WireEnum> JsonSchema for Known<T> {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        Cow::Owned(format!("Known{}", std::any::type_name::<T>()))
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        T::known_schema()
    }
}

/// Declares a wire enum (see the module documentation): its variants with their wire
/// names and docs, `Unknown(String)`, and every impl.
macro_rules! wire_enum {
    (
        $(#[doc = $doc:literal])*
        $(#[derive($($extra:ident),* $(,)?)])?
        pub enum $name:ident {
            $( $(#[doc = $vdoc:literal])* $variant:ident = $wire:literal ),* $(,)?
        }
    ) => {
        $(#[doc = $doc])*
        ///
        /// A value this version does not know (a later 1.x) decodes to `Unknown` with
        /// the raw string and encodes back to the same string.
        #[derive(Debug, Clone, PartialEq, Eq, Hash $($(, $extra)*)?)]
        #[non_exhaustive]
        pub enum $name {
            $( $(#[doc = $vdoc])* $variant, )*
            /// A value this version does not know, as it came on the wire.
            Unknown(String),
        }

        impl $name {
            /// Every known value, in documentation order.
            pub const ALL: &'static [$name] = &[$($name::$variant,)*];

            /// The wire name (the raw one for an unknown value).
            pub fn as_str(&self) -> &str {
                match self {
                    $($name::$variant => $wire,)*
                    $name::Unknown(raw) => raw,
                }
            }

            /// The known value with this wire name.
            pub fn parse(name: &str) -> Option<Self> {
                match name {
                    $($wire => Some($name::$variant),)*
                    _ => None,
                }
            }

            /// The value with this wire name: known, or `Unknown` keeping the name.
            pub fn from_wire(name: impl Into<String> + AsRef<str>) -> Self {
                Self::parse(name.as_ref()).unwrap_or_else(|| $name::Unknown(name.into()))
            }

            /// Whether this is a value this version does not know.
            pub fn is_unknown(&self) -> bool {
                matches!(self, $name::Unknown(_))
            }

            fn doc_text() -> String {
                $crate::wire::doc_text(&[$($doc),*])
            }

            fn values() -> Vec<(&'static str, String)> {
                vec![$(($wire, $crate::wire::doc_text(&[$($vdoc),*])),)*]
            }

            fn schema(lenient: bool) -> schemars::Schema {
                let values = Self::values();
                let pairs: Vec<(&str, &str)> =
                    values.iter().map(|(n, d)| (*n, d.as_str())).collect();
                $crate::wire::enum_schema(&Self::doc_text(), &pairs, lenient)
            }
        }

        impl $crate::wire::WireEnum for $name {
            const NAMES: &'static [&'static str] = &[$($wire,)*];

            fn parse(name: &str) -> Option<Self> {
                $name::parse(name)
            }

            fn from_wire(name: std::borrow::Cow<'_, str>) -> Self {
                match $name::parse(&name) {
                    Some(known) => known,
                    None => $name::Unknown(name.into_owned()),
                }
            }

            fn as_str(&self) -> &str {
                $name::as_str(self)
            }

            fn is_unknown(&self) -> bool {
                $name::is_unknown(self)
            }

            fn known_schema() -> schemars::Schema {
                Self::schema(false)
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                $crate::wire::lenient(d)
            }
        }

        impl schemars::JsonSchema for $name {
            fn schema_name() -> std::borrow::Cow<'static, str> {
                std::borrow::Cow::Borrowed(stringify!($name))
            }

            fn schema_id() -> std::borrow::Cow<'static, str> {
                std::borrow::Cow::Borrowed(concat!(module_path!(), "::", stringify!($name)))
            }

            fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
                Self::schema(true)
            }
        }

        impl ts_rs::TS for $name {
            type WithoutGenerics = Self;
            type OptionInnerType = Self;

            fn docs() -> Option<String> {
                let mut text = Self::doc_text();
                text.push_str("\n\n");
                text.push_str($crate::wire::FALLBACK_NOTE);
                Some($crate::wire::jsdoc(&text))
            }

            fn ident() -> String {
                stringify!($name).to_owned()
            }

            fn name() -> String {
                stringify!($name).to_owned()
            }

            fn inline() -> String {
                stringify!($name).to_owned()
            }

            fn inline_flattened() -> String {
                stringify!($name).to_owned()
            }

            fn decl() -> String {
                let known: Vec<String> = [$($wire),*].iter().map(|w| format!("\"{w}\"")).collect();
                format!(
                    "type {name} = Known{name} | (string & {{}});\n\n/** The values of `{name}` this version knows. */\nexport type Known{name} = {known};",
                    name = stringify!($name),
                    known = known.join(" | "),
                )
            }

            fn decl_concrete() -> String {
                <Self as ts_rs::TS>::decl()
            }

            fn output_path() -> Option<std::path::PathBuf> {
                Some(std::path::PathBuf::from(concat!(stringify!($name), ".ts")))
            }
        }
    };
}

pub(crate) use wire_enum;

/// Declares a wire struct that may gain fields in a minor version: it is
/// `#[non_exhaustive]` (other crates cannot build it with a struct literal) and gets
/// `new(…)` taking its fields that are not `Option`s, in order, with every `Option`
/// field at `None`, and one method per `Option` field, named after it, that sets it.
/// `new` takes a field of a one-word type other than `String` (numbers, flags, enums)
/// as that type, so that an integer literal gets the field's type, and any other field
/// as `impl Into<…>`.
macro_rules! growable {
    ($(#[$attr:meta])* pub struct $name:ident { $($body:tt)* }) => {
        $(#[$attr])*
        #[non_exhaustive]
        pub struct $name { $($body)* }

        crate::wire::growable!(@fields $name [] [] $($body)*);
    };
    (@fields $name:ident [$($req:tt)*] [$($opt:tt)*]
        $(#[$m:meta])* pub $f:ident : Option<$t:ty> $(, $($rest:tt)*)?) => {
        crate::wire::growable!(@fields $name [$($req)*] [$($opt)* ($f: Option<$t>)] $($($rest)*)?);
    };
    (@fields $name:ident [$($req:tt)*] [$($opt:tt)*]
        $(#[$m:meta])* pub $f:ident : String $(, $($rest:tt)*)?) => {
        crate::wire::growable!(@fields $name [$($req)* ($f [impl Into<String>] [$f.into()])] [$($opt)*] $($($rest)*)?);
    };
    (@fields $name:ident [$($req:tt)*] [$($opt:tt)*]
        $(#[$m:meta])* pub $f:ident : $t:ident $(, $($rest:tt)*)?) => {
        crate::wire::growable!(@fields $name [$($req)* ($f [$t] [$f])] [$($opt)*] $($($rest)*)?);
    };
    (@fields $name:ident [$($req:tt)*] [$($opt:tt)*]
        $(#[$m:meta])* pub $f:ident : $t:ty $(, $($rest:tt)*)?) => {
        crate::wire::growable!(@fields $name [$($req)* ($f [impl Into<$t>] [$f.into()])] [$($opt)*] $($($rest)*)?);
    };
    (@fields $name:ident [$(($rf:ident [$($rt:tt)*] [$($rv:tt)*]))*] [$(($of:ident : $ot:ty))*]) => {
        impl $name {
            /// A value with these fields; every `Option` field is `None` (set it with
            /// the method named after it).
            #[allow(clippy::new_without_default, clippy::too_many_arguments)]
            pub fn new($($rf: $($rt)*),*) -> Self {
                Self { $($rf: $($rv)*,)* $($of: None,)* }
            }

            $(
                #[doc = concat!("Sets `", stringify!($of), "` (takes the value itself or an `Option`).")]
                #[must_use]
                pub fn $of(mut self, value: impl Into<$ot>) -> Self {
                    self.$of = value.into();
                    self
                }
            )*
        }
    };
}

pub(crate) use growable;

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use crate::types::RiskLevel;

    #[test]
    fn unknown_values_round_trip_and_known_ones_stay_known() {
        let known: RiskLevel = serde_json::from_str("\"high\"").unwrap();
        assert_eq!(known, RiskLevel::High);
        let unknown: RiskLevel = serde_json::from_str("\"catastrophic\"").unwrap();
        assert_eq!(unknown, RiskLevel::Unknown("catastrophic".into()));
        assert!(unknown.is_unknown());
        assert_eq!(serde_json::to_string(&unknown).unwrap(), "\"catastrophic\"");
        let from_value: RiskLevel = serde_json::from_value(serde_json::json!("x\"y")).unwrap();
        assert_eq!(serde_json::to_value(&from_value).unwrap(), "x\"y");
        assert!(serde_json::from_str::<RiskLevel>("3").is_err());
        assert!(RiskLevel::High < RiskLevel::Unknown(String::new()));
    }

    #[test]
    fn strict_fields_refuse_unknown_values_like_a_derived_enum() {
        #[derive(serde::Deserialize, Debug)]
        struct S {
            #[serde(deserialize_with = "super::strict::one")]
            #[allow(dead_code)]
            risk: RiskLevel,
            #[serde(default, deserialize_with = "super::strict::opt")]
            other: Option<RiskLevel>,
        }
        let err = serde_json::from_str::<S>(r#"{"risk":"nope"}"#).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("unknown variant `nope`, expected one of `low`, `medium`, `high`"),
            "{err}"
        );
        let err = serde_json::from_str::<S>(r#"{"risk":1}"#).unwrap_err();
        assert!(err.to_string().starts_with("invalid type"), "{err}");
        let ok = serde_json::from_str::<S>(r#"{"risk":"low","other":null}"#).unwrap();
        assert_eq!(ok.other, None);
        let ok = serde_json::from_str::<S>(r#"{"risk":"low","other":"high"}"#).unwrap();
        assert_eq!(ok.other, Some(RiskLevel::High));
        assert!(serde_json::from_str::<S>(r#"{"risk":"low","other":"x"}"#).is_err());
    }
}
