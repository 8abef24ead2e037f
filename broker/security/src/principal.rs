//! Who a connection is: Kafka's `KafkaPrincipal` (`Type:name`, `User:alice`), the
//! anonymous principal of an unauthenticated listener, and the `super.users` list.
//!
//! Kafka parses a principal by splitting at the first `:` (`SecurityUtils.parseKafkaPrincipal`):
//! the type is everything before it, the name everything after (which may hold more
//! colons, as certificate subjects do). `super.users` is a `;`-separated list of such
//! strings (Kafka's `AclAuthorizer`/`StandardAuthorizer` config); blank entries are
//! skipped and surrounding whitespace trimmed, as Kafka trims them.

use std::collections::BTreeSet;
use std::fmt;

use crate::limits;

/// Kafka's `KafkaPrincipal.USER_TYPE`.
pub const USER_TYPE: &str = "User";

/// The name of Kafka's anonymous principal (`User:ANONYMOUS`): what a PLAINTEXT or SSL
/// connection without a client certificate authenticates as.
pub const ANONYMOUS_NAME: &str = "ANONYMOUS";

/// A principal: its type and name, formatted `Type:name`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct KafkaPrincipal {
    /// `User` for every principal Kafka's authenticators make.
    pub principal_type: String,
    /// The user name (SASL), or the certificate subject (mTLS).
    pub name: String,
}

/// A principal string that is not `Type:name` within the limits.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PrincipalError {
    /// No `:`, or an empty type or name.
    #[error("expected a string in format principalType:principalName but got {0:?}")]
    Format(String),
    /// The type or the name is over its limit.
    #[error("principal {what} of {len} bytes is over the limit of {max} bytes ({limit})")]
    TooLong {
        /// `type` or `name`.
        what: &'static str,
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
        /// The limit's name.
        limit: &'static str,
    },
    /// `super.users` has more entries than [`limits::SUPER_USERS_MAX`].
    #[error("super.users has {0} entries; the limit is {max} (SUPER_USERS_MAX)", max = limits::SUPER_USERS_MAX)]
    TooManySuperUsers(usize),
}

impl KafkaPrincipal {
    /// `User:<name>`.
    pub fn user(name: impl Into<String>) -> Self {
        Self {
            principal_type: USER_TYPE.to_owned(),
            name: name.into(),
        }
    }

    /// `User:ANONYMOUS`.
    pub fn anonymous() -> Self {
        Self::user(ANONYMOUS_NAME)
    }

    /// `User:*`, the wildcard principal of ACLs.
    pub fn wildcard_user() -> Self {
        Self::user("*")
    }

    /// Parses `Type:name`, splitting at the first `:`. Both parts must be non-empty and
    /// within [`limits::PRINCIPAL_TYPE_BYTES_MAX`] and [`limits::USER_NAME_BYTES_MAX`].
    pub fn parse(s: &str) -> Result<Self, PrincipalError> {
        let Some((principal_type, name)) = s.split_once(':') else {
            return Err(PrincipalError::Format(s.to_owned()));
        };
        if principal_type.is_empty() || name.is_empty() {
            return Err(PrincipalError::Format(s.to_owned()));
        }
        check_len(
            "type",
            principal_type.len(),
            limits::PRINCIPAL_TYPE_BYTES_MAX,
            "PRINCIPAL_TYPE_BYTES_MAX",
        )?;
        check_len(
            "name",
            name.len(),
            limits::USER_NAME_BYTES_MAX,
            "USER_NAME_BYTES_MAX",
        )?;
        Ok(Self {
            principal_type: principal_type.to_owned(),
            name: name.to_owned(),
        })
    }
}

fn check_len(
    what: &'static str,
    len: usize,
    max: usize,
    limit: &'static str,
) -> Result<(), PrincipalError> {
    if len > max {
        return Err(PrincipalError::TooLong {
            what,
            len,
            max,
            limit,
        });
    }
    Ok(())
}

impl fmt::Display for KafkaPrincipal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.principal_type, self.name)
    }
}

/// The principals named by `super.users`: always allowed, whatever the ACLs say.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SuperUsers {
    principals: BTreeSet<KafkaPrincipal>,
}

impl SuperUsers {
    /// Parses Kafka's `super.users` value: `User:admin;User:ops`.
    pub fn parse(value: &str) -> Result<Self, PrincipalError> {
        let entries: Vec<&str> = value
            .split(';')
            .map(str::trim)
            .filter(|e| !e.is_empty())
            .collect();
        if entries.len() > limits::SUPER_USERS_MAX {
            return Err(PrincipalError::TooManySuperUsers(entries.len()));
        }
        let principals = entries
            .into_iter()
            .map(KafkaPrincipal::parse)
            .collect::<Result<_, _>>()?;
        Ok(Self { principals })
    }

    /// Whether `principal` is a super user (compared as `Type:name`, like Kafka).
    pub fn contains(&self, principal: &KafkaPrincipal) -> bool {
        self.principals.contains(principal)
    }

    /// The super users, in order.
    pub fn iter(&self) -> impl Iterator<Item = &KafkaPrincipal> {
        self.principals.iter()
    }

    /// How many.
    pub fn len(&self) -> usize {
        self.principals.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.principals.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_format() {
        let cases = [
            ("User:alice", Some(("User", "alice"))),
            ("User:ANONYMOUS", Some(("User", "ANONYMOUS"))),
            ("User:CN=a,O=b:c", Some(("User", "CN=a,O=b:c"))),
            ("Group:*", Some(("Group", "*"))),
            ("alice", None),
            (":alice", None),
            ("User:", None),
            ("", None),
        ];
        for (input, want) in cases {
            let got = KafkaPrincipal::parse(input).ok();
            let got = got
                .as_ref()
                .map(|p| (p.principal_type.as_str(), p.name.as_str()));
            assert_eq!(got, want, "{input:?}");
            if want.is_some() {
                assert_eq!(KafkaPrincipal::parse(input).unwrap().to_string(), input);
            }
        }
        assert_eq!(KafkaPrincipal::anonymous().to_string(), "User:ANONYMOUS");
        assert_eq!(
            KafkaPrincipal::user("bob"),
            KafkaPrincipal::parse("User:bob").unwrap()
        );
    }

    #[test]
    fn parse_names_the_limit() {
        let long = format!("User:{}", "x".repeat(limits::USER_NAME_BYTES_MAX + 1));
        let err = KafkaPrincipal::parse(&long).unwrap_err();
        assert!(err.to_string().contains("USER_NAME_BYTES_MAX"), "{err}");
    }

    #[test]
    fn super_users_split_on_semicolons() {
        let su = SuperUsers::parse(" User:admin ; User:ops;;").unwrap();
        assert_eq!(su.len(), 2);
        assert!(su.contains(&KafkaPrincipal::user("admin")));
        assert!(su.contains(&KafkaPrincipal::user("ops")));
        assert!(!su.contains(&KafkaPrincipal::user("alice")));
        assert!(SuperUsers::parse("").unwrap().is_empty());
        // A comma is not a separator: Kafka would read one principal named "admin,User:ops".
        let one = SuperUsers::parse("User:admin,User:ops").unwrap();
        assert!(one.contains(&KafkaPrincipal::user("admin,User:ops")));
        assert!(SuperUsers::parse("admin").is_err());
        let many = vec!["User:a"; limits::SUPER_USERS_MAX + 1].join(";");
        assert!(matches!(
            SuperUsers::parse(&many),
            Err(PrincipalError::TooManySuperUsers(_))
        ));
    }
}
