//! Plugin parameters, their validation, and the plugin error.

use std::fmt;
use std::str::FromStr;

/// Why a plugin call failed; becomes the WIT `plugin-error`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub kind: ErrorKind,
    pub message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// `init` rejected the parameters.
    InvalidParams,
    /// A batch could not be processed.
    Failed,
}

impl Error {
    pub fn invalid_params(message: impl Into<String>) -> Self {
        Self {
            kind: ErrorKind::InvalidParams,
            message: message.into(),
        }
    }

    pub fn failed(message: impl Into<String>) -> Self {
        Self {
            kind: ErrorKind::Failed,
            message: message.into(),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.kind {
            ErrorKind::InvalidParams => "invalid parameters",
            ErrorKind::Failed => "failed",
        };
        write!(f, "{kind}: {}", self.message)
    }
}

impl std::error::Error for Error {}

/// The state of a stateful plugin, built once per instance from its
/// parameters.
pub trait Init: Sized {
    /// # Errors
    /// [`Error::invalid_params`] naming the parameter and what was expected.
    fn init(params: &Params) -> Result<Self, Error>;
}

/// The plugin's parameters: string key/value pairs, in the operator's order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Params {
    pairs: Vec<(String, String)>,
}

impl Params {
    pub fn new<K: Into<String>, V: Into<String>>(pairs: impl IntoIterator<Item = (K, V)>) -> Self {
        Self {
            pairs: pairs
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        }
    }

    /// The value of `key`, if given.
    #[must_use]
    pub fn get(&self, key: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The value of `key`.
    ///
    /// # Errors
    /// `invalid-params` when it is missing.
    pub fn require(&self, key: &str) -> Result<&str, Error> {
        self.get(key)
            .ok_or_else(|| Error::invalid_params(format!("missing required parameter `{key}`")))
    }

    /// The value of `key` parsed as `T`, or `default` when not given.
    ///
    /// # Errors
    /// `invalid-params` naming the key and the bad value.
    pub fn parse_or<T: FromStr>(&self, key: &str, default: T) -> Result<T, Error> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => v.parse().map_err(|_| {
                Error::invalid_params(format!(
                    "parameter `{key}` = `{v}` is not a valid {}",
                    short_type::<T>()
                ))
            }),
        }
    }

    /// Reject any key not in `known`, so a typo is an error, not a silently
    /// ignored setting.
    ///
    /// # Errors
    /// `invalid-params` naming the unknown key and the known ones.
    pub fn only(&self, known: &[&str]) -> Result<(), Error> {
        match self
            .pairs
            .iter()
            .find(|(k, _)| !known.contains(&k.as_str()))
        {
            None => Ok(()),
            Some((k, _)) if known.is_empty() => Err(Error::invalid_params(format!(
                "unknown parameter `{k}`: this plugin takes no parameters"
            ))),
            Some((k, _)) => Err(Error::invalid_params(format!(
                "unknown parameter `{k}`; known parameters: {}",
                known.join(", ")
            ))),
        }
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }
}

fn short_type<T>() -> &'static str {
    let name = std::any::type_name::<T>();
    name.rsplit("::").next().unwrap_or(name)
}

/// A stateless plugin's "state": accepts no parameters.
impl Init for () {
    fn init(params: &Params) -> Result<Self, Error> {
        params.only(&[])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_are_validated_with_named_errors() {
        let p = Params::new([("field", "$.a"), ("n", "x")]);
        assert_eq!(p.require("field").unwrap(), "$.a");
        assert!(p.require("nope").unwrap_err().message.contains("`nope`"));
        assert!(
            p.parse_or::<u32>("n", 1)
                .unwrap_err()
                .message
                .contains("`n` = `x`")
        );
        assert_eq!(p.parse_or::<u32>("m", 7).unwrap(), 7);
        assert!(
            p.only(&["field"])
                .unwrap_err()
                .message
                .contains("unknown parameter `n`")
        );
        assert!(<()>::init(&p).is_err());
        assert!(<()>::init(&Params::default()).is_ok());
    }
}
