//! Kafka's `sasl.jaas.config` for the PLAIN and SCRAM login modules, e.g.
//! `org.apache.kafka.common.security.scram.ScramLoginModule required username="alice"
//! password="alice-secret";`: one login module, a control flag, `name=value` options (a value
//! quoted with `"`, where `\` escapes the next character, or a bare word), and a `;`.
//! Only `username` and `password` are used. Errors never repeat the text (it holds a password).

/// The login modules whose `username`/`password` options Sluice's SASL client can use.
const LOGIN_MODULES: &[&str] = &["PlainLoginModule", "ScramLoginModule"];
/// JAAS control flags.
const CONTROL_FLAGS: &[&str] = &["required", "requisite", "sufficient", "optional"];

/// The credentials of a `sasl.jaas.config`.
#[derive(Clone, PartialEq, Eq)]
pub struct JaasLogin {
    pub username: String,
    pub password: String,
}

impl std::fmt::Debug for JaasLogin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JaasLogin")
            .field("username", &self.username)
            .finish_non_exhaustive()
    }
}

/// The username and password of `text`; an error says what is wrong without quoting it.
pub fn parse(text: &str) -> Result<JaasLogin, String> {
    let mut tokens = Tokens { rest: text };
    let module = tokens.word().ok_or("expected a login module class name")?;
    let class = module.rsplit('.').next().unwrap_or(module);
    if !LOGIN_MODULES.contains(&class) {
        return Err(format!(
            "login module {module} is not supported: use PlainLoginModule or ScramLoginModule"
        ));
    }
    let flag = tokens.word().unwrap_or_default();
    if !CONTROL_FLAGS.iter().any(|f| f.eq_ignore_ascii_case(flag)) {
        return Err(format!(
            "expected a control flag (required) after {class}, found {flag:?}"
        ));
    }
    let (mut username, mut password) = (None, None);
    while !tokens.end_of_module() {
        let (name, value) = tokens.option()?;
        match name {
            "username" => username = Some(value),
            "password" => password = Some(value),
            "tokenauth" if value.eq_ignore_ascii_case("true") => {
                return Err("tokenauth=true: Sluice has no delegation tokens".into());
            }
            _ => {}
        }
    }
    if !tokens.rest.trim().is_empty() {
        return Err("more than one login module (a client takes one)".into());
    }
    Ok(JaasLogin {
        username: username.ok_or(format!("{class} has no username=\"...\" option"))?,
        password: password.ok_or(format!("{class} has no password=\"...\" option"))?,
    })
}

/// A cursor over the text.
struct Tokens<'a> {
    rest: &'a str,
}

impl<'a> Tokens<'a> {
    /// The next run of characters up to a blank, `=` or `;`.
    fn word(&mut self) -> Option<&'a str> {
        self.rest = self.rest.trim_start();
        let end = self
            .rest
            .find(|c: char| c.is_whitespace() || c == '=' || c == ';')
            .unwrap_or(self.rest.len());
        let (word, rest) = self.rest.split_at(end);
        self.rest = rest;
        (!word.is_empty()).then_some(word)
    }

    /// True (and the `;` consumed) at the end of the module's options.
    fn end_of_module(&mut self) -> bool {
        self.rest = self.rest.trim_start();
        match self.rest.strip_prefix(';') {
            Some(rest) => {
                self.rest = rest;
                true
            }
            None => false,
        }
    }

    /// `name=value`, the value quoted or bare.
    fn option(&mut self) -> Result<(&'a str, String), String> {
        let name = self.word().ok_or("expected name=\"value\" or ;")?;
        self.rest = self.rest.trim_start();
        self.rest = self
            .rest
            .strip_prefix('=')
            .ok_or_else(|| format!("option {name} has no ="))?
            .trim_start();
        if let Some(quoted) = self.rest.strip_prefix('"') {
            return self
                .quoted(quoted)
                .map(|v| (name, v))
                .map_err(|e| format!("option {name}: {e}"));
        }
        let value = self
            .word()
            .ok_or_else(|| format!("option {name} has no value"))?;
        Ok((name, value.to_owned()))
    }

    /// A `"`-quoted value (its opening quote already taken from `text`).
    fn quoted(&mut self, text: &'a str) -> Result<String, String> {
        let mut value = String::new();
        let mut chars = text.char_indices();
        while let Some((at, c)) = chars.next() {
            match c {
                '"' => {
                    self.rest = &text[at + 1..];
                    return Ok(value);
                }
                '\\' => value.extend(chars.next().map(|(_, escaped)| escaped)),
                _ => value.push(c),
            }
        }
        Err("the quoted value is not closed".into())
    }
}

#[cfg(test)]
mod tests {
    use super::{JaasLogin, parse};

    fn login(username: &str, password: &str) -> JaasLogin {
        JaasLogin {
            username: username.into(),
            password: password.into(),
        }
    }

    #[test]
    fn plain_and_scram_modules_give_their_credentials() {
        let plain = r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="alice-secret";"#;
        assert_eq!(parse(plain).unwrap(), login("alice", "alice-secret"));
        let scram = "org.apache.kafka.common.security.scram.ScramLoginModule  REQUIRED\n  password = \"p w;\\\"x\"\n  username=bob ;  ";
        assert_eq!(parse(scram).unwrap(), login("bob", "p w;\"x"));
    }

    #[test]
    fn other_modules_and_missing_options_are_refused_without_quoting_the_password() {
        let err = parse("com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true;")
            .unwrap_err();
        assert!(err.contains("Krb5LoginModule"), "{err}");
        let err = parse(r#"x.PlainLoginModule required username="a";"#).unwrap_err();
        assert!(err.contains("password"), "{err}");
        let err =
            parse(r#"x.PlainLoginModule required username="a" password="sekrit"#).unwrap_err();
        assert!(
            err.contains("not closed") && !err.contains("sekrit"),
            "{err}"
        );
        let err = parse(r#"x.ScramLoginModule username="a" password="b";"#).unwrap_err();
        assert!(err.contains("control flag"), "{err}");
        let err =
            parse(r#"x.ScramLoginModule required username="a" password="b" tokenauth="true";"#)
                .unwrap_err();
        assert!(err.contains("delegation tokens"), "{err}");
        let two = r#"x.PlainLoginModule required username="a" password="b"; y.PlainLoginModule required username="c" password="d";"#;
        assert!(parse(two).unwrap_err().contains("more than one"));
        assert!(parse("").is_err());
    }

    #[test]
    fn debug_hides_the_password() {
        assert!(!format!("{:?}", login("a", "sekrit")).contains("sekrit"));
    }
}
