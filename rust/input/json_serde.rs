//! A JSON Lines record's text field by serde_json: the slow path of
//! `records.rs`, for whatever the fast one (`json_fast.rs`) gives up on
//! (escaped keys, `\u` surrogates, deep nesting, bad records), and the
//! one that says what is wrong with a bad record.
//!
//! Only the text field is decoded: the other fields are skipped by serde's
//! `IgnoredAny` without being built, and the text is appended straight
//! into the batch being filled.

use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};

/// Appends the text of `field` of the JSON object `text` to `out`, or says
/// what is wrong with the record.
pub(super) fn field_text(text: &str, field: &[String], out: &mut String) -> Result<(), String> {
    let mut de = serde_json::Deserializer::from_str(text);
    let found = Field { path: field, out }.deserialize(&mut de).map_err(|e| bad_json(e, field))?;
    de.end().map_err(|e| format!("not one JSON object: {e}"))?;
    let name = || field.join(".");
    match found {
        Found::Text => Ok(()),
        Found::Missing => Err(format!("no field {:?}", name())),
        Found::Other(kind) => Err(format!("field {:?} is {kind}, not a string", name())),
        Found::NotObject(kind) => {
            Err(format!("not a JSON object with a string field {:?} (found {kind} on the way)", name()))
        }
    }
}

fn bad_json(e: serde_json::Error, field: &[String]) -> String {
    if e.is_data() {
        format!("not a JSON object with a string field {:?} ({e})", field.join("."))
    } else {
        format!("not valid JSON ({e})")
    }
}

/// What the field turned out to be.
enum Found {
    Text,
    Missing,
    /// The field is there, but not a string.
    Other(&'static str),
    /// Something on the way to it (the line itself, or `a` of `a.b`) is not an object.
    NotObject(&'static str),
}

/// Walks an object down `path`, appending the string at its end to `out`.
struct Field<'p, 'o> {
    path: &'p [String],
    out: &'o mut String,
}

impl<'de> DeserializeSeed<'de> for Field<'_, '_> {
    type Value = Found;

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<Found, D::Error> {
        if self.path.is_empty() {
            de.deserialize_any(TextValue(self.out))
        } else {
            de.deserialize_any(ObjectValue(self))
        }
    }
}

/// The value at the end of the path: a string is appended; anything else is named.
struct TextValue<'o>(&'o mut String);

macro_rules! other {
    ($($method:ident($($t:ty)?) => $kind:expr),* $(,)?) => {$(
        fn $method<E: serde::de::Error>(self $(, _: $t)?) -> Result<Found, E> {
            Ok(Found::Other($kind))
        }
    )*};
}

macro_rules! not_object {
    ($($method:ident($($t:ty)?) => $kind:expr),* $(,)?) => {$(
        fn $method<E: serde::de::Error>(self $(, _: $t)?) -> Result<Found, E> {
            Ok(Found::NotObject($kind))
        }
    )*};
}

impl<'de> Visitor<'de> for TextValue<'_> {
    type Value = Found;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string")
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Found, E> {
        self.0.push_str(v);
        Ok(Found::Text)
    }

    other! {
        visit_bool(bool) => "a boolean",
        visit_i64(i64) => "a number",
        visit_u64(u64) => "a number",
        visit_f64(f64) => "a number",
        visit_unit() => "null",
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Found, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Found::Other("an array"))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Found, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Found::Other("an object"))
    }
}

/// An object on the way: the entry named `path[0]` is followed, the others skipped.
struct ObjectValue<'p, 'o>(Field<'p, 'o>);

impl<'de> Visitor<'de> for ObjectValue<'_, '_> {
    type Value = Found;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Found, A::Error> {
        let Field { path, out } = self.0;
        let mut found = Found::Missing;
        let mut out = Some(out);
        while let Some(key) = map.next_key::<Key<'de>>()? {
            match out.take() {
                Some(o) if key.as_str() == path[0] => {
                    found = map.next_value_seed(Field { path: &path[1..], out: o })?
                }
                o => {
                    out = o;
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(found)
    }

    not_object! {
        visit_bool(bool) => "a boolean",
        visit_i64(i64) => "a number",
        visit_u64(u64) => "a number",
        visit_f64(f64) => "a number",
        visit_str(&str) => "a string",
        visit_unit() => "null",
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Found, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Found::NotObject("an array"))
    }
}

/// A key, borrowed from the line when it has no escapes (the usual case:
/// no allocation per key of every record).
enum Key<'de> {
    Borrowed(&'de str),
    Owned(String),
}

impl Key<'_> {
    fn as_str(&self) -> &str {
        match self {
            Key::Borrowed(s) => s,
            Key::Owned(s) => s,
        }
    }
}

impl<'de> serde::Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(de: D) -> Result<Key<'de>, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_borrowed_str<E: serde::de::Error>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key::Borrowed(v))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key::Owned(v.to_string()))
            }
        }
        de.deserialize_str(KeyVisitor)
    }
}
