//! The client's two SCRAM messages, parsed as strictly as Kafka's `ScramMessages`
//! regular expressions parse them, from untrusted bytes.
//!
//! client-first-message (Kafka's pattern, RFC 5802 section 7):
//! ```text
//! n,[a=<saslname>],n=<saslname>,r=<printable>[,<alpha>=<value>]*
//! ```
//! - the gs2 header must be `n` (no channel binding). `y` and `p=` are refused: Kafka
//!   supports no channel binding, and its pattern only matches `n`.
//! - `<saslname>` is ASCII 0x01-0x7F without `,`, where `=` appears only as `=2C` (`,`)
//!   or `=3D` (`=`): Kafka's `SASLNAME`, unescaped as `ScramFormatter.username` does.
//! - the nonce is printable ASCII 0x21-0x7E without `,` (Kafka's `PRINTABLE`).
//! - extensions are `name=value` with an alphabetic name and a 0x01-0x7F value without
//!   `,`; a repeated name keeps the last value (Kafka's `Utils.parseMap`).
//! - Kafka's pattern also lets a reserved `m=` attribute through and then drops it from
//!   the message it authenticates, so such a client always fails; we refuse it at once,
//!   as RFC 5802 says a server must.
//!
//! client-final-message:
//! ```text
//! c=<base64>,r=<printable>[,<alpha>=<value>]*,p=<base64>
//! ```
//! Base64 is the standard alphabet with padding, as Kafka's `BASE64` pattern and Java's
//! decoder take it.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

use crate::limits;

/// Kafka's `ScramLoginModule.TOKEN_AUTH_CONFIG`: the extension that marks a delegation
/// token login.
pub const TOKEN_AUTH_EXTENSION: &str = "tokenauth";

/// A message that does not parse. The text is for the server's log: the client only
/// sees Kafka's generic failure message (see [`crate::sasl::SaslError`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MessageError {
    /// Over [`limits::SASL_MESSAGE_BYTES_MAX`].
    #[error("SCRAM message of {0} bytes is over the limit of {max} bytes (SASL_MESSAGE_BYTES_MAX)", max = limits::SASL_MESSAGE_BYTES_MAX)]
    TooLong(usize),
    /// The client asked for channel binding (`y` or `p=`).
    #[error("SCRAM channel binding {0:?} is not supported; only gs2 header \"n\" is")]
    ChannelBinding(String),
    /// Anything else that does not match the grammar.
    #[error("Invalid SCRAM {message} message format: {reason}")]
    Format {
        /// `client first` or `client final`.
        message: &'static str,
        /// What was wrong.
        reason: &'static str,
    },
    /// A field over its limit.
    #[error("SCRAM {what} of {len} bytes is over the limit of {max} bytes ({limit})")]
    FieldTooLong {
        /// The field.
        what: &'static str,
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
        /// The limit's name.
        limit: &'static str,
    },
    /// More extensions than [`limits::SCRAM_EXTENSIONS_MAX`].
    #[error("SCRAM message has {0} extensions; the limit is {max} (SCRAM_EXTENSIONS_MAX)", max = limits::SCRAM_EXTENSIONS_MAX)]
    TooManyExtensions(usize),
}

fn first(reason: &'static str) -> MessageError {
    MessageError::Format {
        message: "client first",
        reason,
    }
}

fn last(reason: &'static str) -> MessageError {
    MessageError::Format {
        message: "client final",
        reason,
    }
}

/// A parsed client-first-message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientFirst {
    /// The user name, unescaped.
    pub username: String,
    /// The authorization id of the gs2 header, unescaped; empty when absent.
    pub authorization_id: String,
    /// The client's nonce.
    pub nonce: String,
    /// Extensions by name, sorted; the last value of a repeated name.
    pub extensions: Vec<(String, String)>,
    /// The gs2 header as sent (`n,,` or `n,a=<saslname>,`): the client-final message's
    /// channel binding must be its base64.
    pub gs2_header: String,
    /// The message after the gs2 header, as sent: it starts the auth message.
    pub bare: String,
}

impl ClientFirst {
    /// Parses a client-first-message.
    pub fn parse(bytes: &[u8]) -> Result<Self, MessageError> {
        if bytes.len() > limits::SASL_MESSAGE_BYTES_MAX {
            return Err(MessageError::TooLong(bytes.len()));
        }
        let text = std::str::from_utf8(bytes).map_err(|_| first("not UTF-8"))?;
        let mut parts = text.splitn(3, ',');
        let (cbind, authz, bare) = match (parts.next(), parts.next(), parts.next()) {
            (Some(c), Some(a), Some(b)) => (c, a, b),
            _ => return Err(first("no gs2 header")),
        };
        if cbind == "y" || cbind.starts_with("p=") {
            return Err(MessageError::ChannelBinding(cbind.to_owned()));
        }
        if cbind != "n" {
            return Err(first("gs2 header is not \"n\""));
        }
        let authorization_id = match authz {
            "" => String::new(),
            a => unescape(a.strip_prefix("a=").ok_or(first("bad authzid"))?)
                .ok_or(first("bad authzid"))?,
        };
        let mut fields = bare.split(',');
        let user = fields.next().unwrap_or_default();
        if user.starts_with("m=") {
            return Err(first("reserved m= attribute"));
        }
        let user = user.strip_prefix("n=").ok_or(first("no n= username"))?;
        let username = unescape(user).ok_or(first("bad username"))?;
        check_field(
            "username",
            username.len(),
            limits::USER_NAME_BYTES_MAX,
            "USER_NAME_BYTES_MAX",
        )?;
        let nonce = fields
            .next()
            .and_then(|f| f.strip_prefix("r="))
            .ok_or(first("no r= nonce"))?;
        check_nonce(nonce).map_err(first)?;
        let extensions =
            parse_extensions(fields).map_err(|e| e.unwrap_or(first("bad extension")))?;
        Ok(Self {
            username,
            authorization_id,
            nonce: nonce.to_owned(),
            extensions,
            gs2_header: format!("{cbind},{authz},"),
            bare: bare.to_owned(),
        })
    }

    /// The value of extension `name`.
    pub fn extension(&self, name: &str) -> Option<&str> {
        self.extensions
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// Whether `tokenauth` is true (Java's `Boolean.parseBoolean`: `true` in any case).
    pub fn token_authenticated(&self) -> bool {
        self.extension(TOKEN_AUTH_EXTENSION)
            .is_some_and(|v| v.eq_ignore_ascii_case("true"))
    }
}

/// A parsed client-final-message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientFinal {
    /// The decoded `c=` value: the gs2 header again (no channel binding data).
    pub channel_binding: Vec<u8>,
    /// The combined nonce.
    pub nonce: String,
    /// The decoded client proof.
    pub proof: Vec<u8>,
    /// The message up to (not including) `,p=`: it ends the auth message.
    pub without_proof: String,
}

impl ClientFinal {
    /// Parses a client-final-message.
    pub fn parse(bytes: &[u8]) -> Result<Self, MessageError> {
        if bytes.len() > limits::SASL_MESSAGE_BYTES_MAX {
            return Err(MessageError::TooLong(bytes.len()));
        }
        let text = std::str::from_utf8(bytes).map_err(|_| last("not UTF-8"))?;
        let (without_proof, proof) = text.rsplit_once(",p=").ok_or(last("no p= proof"))?;
        let mut fields = without_proof.split(',');
        let channel = fields
            .next()
            .and_then(|f| f.strip_prefix("c="))
            .ok_or(last("no c= channel binding"))?;
        let nonce = fields
            .next()
            .and_then(|f| f.strip_prefix("r="))
            .ok_or(last("no r= nonce"))?;
        check_nonce(nonce).map_err(last)?;
        parse_extensions(fields).map_err(|e| e.unwrap_or(last("bad extension")))?;
        Ok(Self {
            channel_binding: decode_base64(channel).ok_or(last("c= is not base64"))?,
            nonce: nonce.to_owned(),
            proof: decode_base64(proof).ok_or(last("p= is not base64"))?,
            without_proof: without_proof.to_owned(),
        })
    }
}

fn check_field(
    what: &'static str,
    len: usize,
    max: usize,
    limit: &'static str,
) -> Result<(), MessageError> {
    if len > max {
        return Err(MessageError::FieldTooLong {
            what,
            len,
            max,
            limit,
        });
    }
    Ok(())
}

/// Kafka's `PRINTABLE`: one or more of 0x21-0x7E without `,` (the split removed commas).
fn check_nonce(nonce: &str) -> Result<(), &'static str> {
    if nonce.is_empty() || nonce.len() > limits::SCRAM_NONCE_BYTES_MAX {
        return Err("nonce empty or over SCRAM_NONCE_BYTES_MAX");
    }
    if !nonce.bytes().all(|b| (0x21..=0x7E).contains(&b)) {
        return Err("nonce not printable ASCII");
    }
    Ok(())
}

/// `(,<alpha>=<value>)*`; `Err(None)` for a malformed one, `Err(Some(_))` for too many.
fn parse_extensions<'a>(
    fields: impl Iterator<Item = &'a str>,
) -> Result<Vec<(String, String)>, Option<MessageError>> {
    let mut out: Vec<(String, String)> = Vec::new();
    for (count, field) in fields.enumerate() {
        if count >= limits::SCRAM_EXTENSIONS_MAX {
            return Err(Some(MessageError::TooManyExtensions(count + 1)));
        }
        let (name, value) = field.split_once('=').ok_or(None)?;
        let name_ok = !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphabetic());
        let value_ok = !value.is_empty() && value.bytes().all(|b| (0x01..=0x7F).contains(&b));
        if !name_ok || !value_ok {
            return Err(None);
        }
        out.retain(|(k, _)| k != name);
        out.push((name.to_owned(), value.to_owned()));
    }
    out.sort();
    Ok(out)
}

/// Kafka's `SASLNAME` check and `ScramFormatter.username`: ASCII 0x01-0x7F, `=` only in
/// `=2C` or `=3D`.
fn unescape(saslname: &str) -> Option<String> {
    if saslname.is_empty() || !saslname.bytes().all(|b| (0x01..=0x7F).contains(&b)) {
        return None;
    }
    let mut out = String::with_capacity(saslname.len());
    let mut rest = saslname;
    while let Some(at) = rest.find('=') {
        out.push_str(&rest[..at]);
        let code = rest.get(at..at + 3)?;
        out.push(match code {
            "=2C" => ',',
            "=3D" => '=',
            _ => return None,
        });
        rest = &rest[at + 3..];
    }
    out.push_str(rest);
    Some(out)
}

fn decode_base64(s: &str) -> Option<Vec<u8>> {
    STANDARD.decode(s).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Some((username, authzid, nonce)), or None for a refused message.
    type Parsed<'a> = Option<(&'a str, &'a str, &'a str)>;

    #[test]
    fn client_first_table() {
        let cases: &[(&str, Parsed)] = &[
            (
                "n,,n=user,r=rOprNGfwEbeRWgbNEkqO",
                Some(("user", "", "rOprNGfwEbeRWgbNEkqO")),
            ),
            ("n,a=user,n=user,r=abc", Some(("user", "user", "abc"))),
            ("n,,n=a=2Cb=3Dc,r=x", Some(("a,b=c", "", "x"))),
            ("n,,n=user,r=x,tokenauth=true", Some(("user", "", "x"))),
            ("n,,n=a=3Xb,r=x", None),
            ("n,,n=a=2,r=x", None),
            ("n,,n=,r=x", None),
            ("n,,n=user,r=", None),
            ("n,,n=user,r=a b", None),
            ("n,,n=user", None),
            ("n,,r=x,n=user", None),
            ("n,,m=ext,n=user,r=x", None),
            ("n,,n=user,r=x,=v", None),
            ("n,,n=user,r=x,to-ken=v", None),
            ("n,,n=user,r=x,tokenauth=", None),
            ("n,,n=us\u{e9}r,r=x", None),
            ("x,,n=user,r=x", None),
            ("n,b=user,n=user,r=x", None),
            ("", None),
        ];
        for (msg, want) in cases {
            let got = ClientFirst::parse(msg.as_bytes()).ok();
            let got = got.as_ref().map(|m| {
                (
                    m.username.as_str(),
                    m.authorization_id.as_str(),
                    m.nonce.as_str(),
                )
            });
            assert_eq!(got, *want, "{msg:?}");
        }
    }

    #[test]
    fn client_first_keeps_the_bare_message_and_extensions() {
        let m = ClientFirst::parse(b"n,,n=u,r=x,tokenauth=TRUE,other=1,other=2").unwrap();
        assert_eq!(m.gs2_header, "n,,");
        assert_eq!(m.bare, "n=u,r=x,tokenauth=TRUE,other=1,other=2");
        assert_eq!(m.extension("other"), Some("2"));
        assert!(m.token_authenticated());
        assert!(
            !ClientFirst::parse(b"n,,n=u,r=x")
                .unwrap()
                .token_authenticated()
        );
    }

    #[test]
    fn channel_binding_is_refused() {
        for msg in ["y,,n=user,r=x", "p=tls-unique,,n=user,r=x"] {
            assert!(
                matches!(
                    ClientFirst::parse(msg.as_bytes()),
                    Err(MessageError::ChannelBinding(_))
                ),
                "{msg}"
            );
        }
    }

    #[test]
    fn limits_are_named() {
        let long = vec![b'a'; limits::SASL_MESSAGE_BYTES_MAX + 1];
        let err = ClientFirst::parse(&long).unwrap_err();
        assert!(err.to_string().contains("SASL_MESSAGE_BYTES_MAX"), "{err}");
        let user = "u".repeat(limits::USER_NAME_BYTES_MAX + 1);
        let err = ClientFirst::parse(format!("n,,n={user},r=x").as_bytes()).unwrap_err();
        assert!(err.to_string().contains("USER_NAME_BYTES_MAX"), "{err}");
        let ext = ",a=1".repeat(limits::SCRAM_EXTENSIONS_MAX + 1);
        let err = ClientFirst::parse(format!("n,,n=u,r=x{ext}").as_bytes()).unwrap_err();
        assert!(err.to_string().contains("SCRAM_EXTENSIONS_MAX"), "{err}");
    }

    #[test]
    fn client_final_table() {
        let ok = ClientFinal::parse(b"c=biws,r=abc,p=AAAA").unwrap();
        assert_eq!(ok.channel_binding, b"n,,");
        assert_eq!(
            (ok.nonce.as_str(), ok.proof.as_slice()),
            ("abc", &[0u8, 0, 0][..])
        );
        assert_eq!(ok.without_proof, "c=biws,r=abc");
        let with_ext = ClientFinal::parse(b"c=biws,r=abc,e=1,p=AAAA").unwrap();
        assert_eq!(with_ext.without_proof, "c=biws,r=abc,e=1");
        for bad in [
            "c=biws,r=abc",
            "c=biws,p=AAAA",
            "r=abc,c=biws,p=AAAA",
            "c=bi*s,r=abc,p=AAAA",
            "c=biws,r=abc,p=AAA",
            "c=biws,r=,p=AAAA",
            "c=biws,r=abc,x,p=AAAA",
        ] {
            assert!(ClientFinal::parse(bad.as_bytes()).is_err(), "{bad}");
        }
    }
}
