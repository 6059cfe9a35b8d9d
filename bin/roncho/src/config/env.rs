//! One environment variable's text read as the type its setting declares:
//! a number where the setting takes a number, a flag where it takes a flag,
//! text where it takes text. Nothing is guessed: `RONCHO_LLM_API_KEY=12345`
//! stays text because the setting is text, and `RONCHO_NATS_PARTITIONS=many`
//! is refused because the setting is a number.

use std::collections::HashMap;

use anyhow::{Context, bail};
use serde::de::value::{Error, MapDeserializer};
use serde::de::{DeserializeOwned, Error as _, IntoDeserializer, Unexpected, Visitor};
use serde::forward_to_deserialize_any;

/// Reads the settings `keys` of one section from their `RONCHO_*`
/// variables in `env` (`nats_url` from `RONCHO_NATS_URL`), each as the type
/// the setting takes. Empty values are unset.
pub(super) fn read_section<T: DeserializeOwned>(keys: &[&str], env: &HashMap<String, String>) -> anyhow::Result<T> {
    let mut set = Vec::new();
    for key in keys {
        let name = format!("RONCHO_{}", key.to_uppercase());
        let Some(value) = env.get(&name).filter(|value| !value.is_empty()) else {
            continue;
        };
        // Each alone first, so an error names its variable.
        if let Err(error) = T::deserialize(MapDeserializer::new(std::iter::once((*key, EnvText(value))))) {
            bail!("{name}=`{value}` is not valid: {error}");
        }
        set.push((*key, value.as_str()));
    }
    T::deserialize(MapDeserializer::new(
        set.into_iter().map(|(key, value)| (key, EnvText(value))),
    ))
    .context("reading RONCHO_* variables")
}

/// The text of one variable, as a serde deserializer.
#[derive(Debug, Clone, Copy)]
pub(super) struct EnvText<'de>(pub(super) &'de str);

impl<'de> EnvText<'de> {
    fn parsed<T: std::str::FromStr>(self, expected: &str) -> Result<T, Error> {
        self.0
            .trim()
            .parse()
            .map_err(|_| Error::invalid_value(Unexpected::Str(self.0), &expected))
    }
}

impl<'de> IntoDeserializer<'de, Error> for EnvText<'de> {
    type Deserializer = Self;

    fn into_deserializer(self) -> Self {
        self
    }
}

macro_rules! integers {
    ($($method:ident => $visit:ident: $ty:ty),* $(,)?) => {
        $(
            fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
                visitor.$visit(self.parsed::<$ty>("an integer")?)
            }
        )*
    };
}

impl<'de> serde::Deserializer<'de> for EnvText<'de> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_borrowed_str(self.0)
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_bool(self.parsed("true or false")?)
    }

    integers! {
        deserialize_u8 => visit_u64: u64,
        deserialize_u16 => visit_u64: u64,
        deserialize_u32 => visit_u64: u64,
        deserialize_u64 => visit_u64: u64,
        deserialize_i8 => visit_i64: i64,
        deserialize_i16 => visit_i64: i64,
        deserialize_i32 => visit_i64: i64,
        deserialize_i64 => visit_i64: i64,
    }

    fn deserialize_f32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_f64(visitor)
    }

    fn deserialize_f64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        let number: f64 = self.parsed("a number")?;
        if !number.is_finite() {
            return Err(Error::invalid_value(Unexpected::Str(self.0), &"a finite number"));
        }
        visitor.visit_f64(number)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_some(self)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(self, _name: &'static str, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        IntoDeserializer::<Error>::into_deserializer(self.0).deserialize_enum(name, variants, visitor)
    }

    forward_to_deserialize_any! {
        u128 i128 char str string bytes byte_buf unit unit_struct seq tuple
        tuple_struct map struct identifier ignored_any
    }
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    use super::EnvText;

    fn read<'de, T: Deserialize<'de>>(text: &'de str) -> Result<T, serde::de::value::Error> {
        T::deserialize(EnvText(text))
    }

    #[test]
    fn text_is_read_as_the_type_asked_for() {
        assert_eq!(read::<Option<u32>>("8").unwrap(), Some(8));
        assert_eq!(read::<String>("12345").unwrap(), "12345");
        assert!(read::<bool>("true").unwrap());
        assert_eq!(read::<f64>("0.25").unwrap(), 0.25);
        assert_eq!(read::<f64>("1").unwrap(), 1.0);
        assert_eq!(
            read::<std::net::SocketAddr>("127.0.0.1:9").unwrap(),
            "127.0.0.1:9".parse().unwrap()
        );
        assert!(read::<u32>("many").is_err());
        assert!(read::<u32>("-1").is_err());
        assert!(read::<bool>("1").is_err());
        assert!(read::<f64>("NaN").is_err());
        assert!(read::<f64>("inf").is_err());
    }
}
