//! The client properties: -X and --command-config merged in precedence order, each key
//! checked against the key table (used, ignored with a warning, refused), secrets kept out of
//! messages, the TLS and SASL views, and the key table kept in step with the help and the docs.

use std::path::{Path, PathBuf};

use clap::{Args as _, Command};

use super::keys::{KEYS, Use};
use super::{
    COMMAND_CONFIG_BYTES_MAX, ClientProperties, FileProperty, Identity, Origin, PROPERTIES_MAX,
    PropertyArgs, SecurityProtocol, read_command_config,
};

const FILE: &str = "/etc/sluice/client.properties";

fn flags(list: &[&str]) -> Vec<String> {
    list.iter().map(|f| (*f).to_owned()).collect()
}

fn parse(x: &[&str], file: Option<&str>) -> anyhow::Result<(ClientProperties, Vec<String>)> {
    ClientProperties::parse(&flags(x), file.map(|text| (Path::new(FILE), text)))
}

fn props(x: &[&str], file: Option<&str>) -> ClientProperties {
    parse(x, file).unwrap().0
}

fn error(x: &[&str], file: Option<&str>) -> String {
    format!("{:#}", parse(x, file).unwrap_err())
}

fn file_property(key: &str, path: &str, origin: Origin) -> FileProperty {
    FileProperty {
        path: PathBuf::from(path),
        key: key.into(),
        origin,
    }
}

fn line(line: usize) -> Origin {
    Origin::File {
        path: FILE.into(),
        line,
    }
}

#[test]
fn flags_win_over_the_file_and_later_wins_within_each() {
    let file = "security.protocol=SSL\nssl.ca.location=/a.pem\nssl.ca.location=/b.pem\n";
    let p = props(&[], Some(file));
    assert_eq!(p.security_protocol().unwrap().0, SecurityProtocol::Ssl);
    assert_eq!(
        p.tls().unwrap().ca,
        Some(file_property("ssl.ca.location", "/b.pem", line(3)))
    );
    let p = props(
        &[
            "security.protocol=sasl_ssl",
            "ssl.truststore.location = /c.pem ",
        ],
        Some(file),
    );
    assert_eq!(p.security_protocol().unwrap().0, SecurityProtocol::SaslSsl);
    // The two CA keys are synonyms: the last given wins, whatever its name.
    assert_eq!(
        p.tls().unwrap().ca,
        Some(file_property(
            "ssl.truststore.location",
            "/c.pem",
            Origin::Flag
        ))
    );
}

#[test]
fn unknown_and_refused_keys_are_errors_naming_the_key_and_where() {
    let err = error(&[], Some("# client\nssl.ca.locaton=/ca.pem\n"));
    assert!(
        err.contains("unknown client property ssl.ca.locaton")
            && err.contains(&format!("in {FILE} line 2")),
        "{err}"
    );
    let err = error(&["bootstrap.servers=h:1"], None);
    assert!(
        err.contains("bootstrap.servers") && err.contains("--brokers"),
        "{err}"
    );
    let err = error(&["enable.ssl.certificate.verification=false"], None);
    assert!(err.contains("not supported"), "{err}");
    let err = error(&["security.protocol"], None);
    assert!(err.contains("expected KEY=VALUE"), "{err}");
}

#[test]
fn bad_values_are_errors_naming_the_key() {
    let cases = [
        (
            "security.protocol=TLS",
            "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL",
        ),
        (
            "sasl.mechanism=GSSAPI",
            "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512",
        ),
        ("ssl.endpoint.identification.algorithm=ldap", "https"),
        ("ssl.truststore.type=JKS", "PEM"),
        ("ssl.keystore.type=PKCS12", "PEM"),
        ("ssl.ca.location=", "empty"),
        ("sasl.username=", "empty"),
    ];
    for (flag, says) in cases {
        let err = error(&[flag], None);
        let key = flag.split('=').next().unwrap();
        assert!(
            err.contains(key) && err.contains(says) && err.contains("from -X"),
            "{flag}: {err}"
        );
    }
    // PEM (any case) is what the type keys accept.
    props(&["ssl.truststore.type=pem", "ssl.keystore.type=PEM"], None);
}

#[test]
fn secrets_never_appear_in_messages() {
    for flag in [
        "ssl.truststore.password=sekrit",
        "ssl.keystore.password=sekrit",
        "sasl.jaas.config=x.PlainLoginModule required username=\"a\" password=\"sekrit",
        "no.such.key=sekrit",
    ] {
        let err = error(&[flag], None);
        assert!(!err.contains("sekrit"), "{flag}: {err}");
    }
    let p = props(&["sasl.password=sekrit", "ssl.key.password=sekrit"], None);
    assert!(!format!("{p:?}").contains("sekrit"));
    assert!(!format!("{:?}", p.sasl().unwrap()).contains("sekrit"));
}

#[test]
fn tuning_keys_are_dropped_with_a_warning() {
    let (p, warnings) = parse(
        &["request.timeout.ms=5000", "client.id=ops"],
        Some("ssl.protocol=TLSv1.2\n"),
    )
    .unwrap();
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert!(
        warnings[0].contains("ssl.protocol=TLSv1.2") && warnings[0].contains("rustls"),
        "{warnings:?}"
    );
    assert!(
        warnings[1].contains("request.timeout.ms") && warnings[1].contains("ignored"),
        "{warnings:?}"
    );
    assert_eq!(p.client_id(), Some("ops"));
    assert!(p.first_with_prefix("ssl.").is_none());
}

#[test]
fn the_client_certificate_is_a_keystore_or_a_certificate_and_key() {
    assert_eq!(props(&[], None).tls().unwrap().identity, None);
    let p = props(&["ssl.keystore.location=/ks.pem"], None);
    assert_eq!(
        p.tls().unwrap().identity,
        Some(Identity::Keystore(file_property(
            "ssl.keystore.location",
            "/ks.pem",
            Origin::Flag
        )))
    );
    let p = props(
        &["ssl.certificate.location=/c.crt", "ssl.key.location=/c.key"],
        None,
    );
    assert!(matches!(
        p.tls().unwrap().identity,
        Some(Identity::Pair { .. })
    ));
    let err = format!(
        "{:#}",
        props(&["ssl.certificate.location=/c.crt"], None)
            .tls()
            .unwrap_err()
    );
    assert!(err.contains("needs ssl.key.location"), "{err}");
    let err = format!(
        "{:#}",
        props(&["ssl.key.location=/c.key"], None).tls().unwrap_err()
    );
    assert!(err.contains("needs ssl.certificate.location"), "{err}");
    let both = props(
        &["ssl.keystore.location=/ks.pem", "ssl.key.location=/c.key"],
        None,
    );
    assert!(format!("{:#}", both.tls().unwrap_err()).contains("keep one"));
}

#[test]
fn the_host_name_check_is_on_unless_the_algorithm_is_empty() {
    assert!(props(&[], None).tls().unwrap().check_hostname);
    let https = props(&["ssl.endpoint.identification.algorithm=HTTPS"], None);
    assert!(https.tls().unwrap().check_hostname);
    for off in [
        "ssl.endpoint.identification.algorithm=",
        "ssl.endpoint.identification.algorithm=none",
    ] {
        assert!(!props(&[off], None).tls().unwrap().check_hostname, "{off}");
    }
    // The file's empty value, as Kafka's scripts write it.
    let file = props(&[], Some("ssl.endpoint.identification.algorithm=\n"));
    assert!(!file.tls().unwrap().check_hostname);
}

#[test]
fn jaas_config_gives_the_user_and_password_unless_a_later_key_does() {
    let jaas = "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n  username=\"alice\" \\\n  password=\"alice-secret\";\nsasl.mechanism=SCRAM-SHA-512\n";
    let sasl = props(&[], Some(jaas)).sasl().unwrap();
    assert_eq!(sasl.username.as_deref(), Some("alice"));
    assert_eq!(sasl.password.as_deref(), Some("alice-secret"));
    assert_eq!(sasl.mechanism.as_deref(), Some("SCRAM-SHA-512"));
    let sasl = props(&["sasl.username=bob", "sasl.mechanisms=plain"], Some(jaas))
        .sasl()
        .unwrap();
    assert_eq!(sasl.username.as_deref(), Some("bob"));
    assert_eq!(sasl.password.as_deref(), Some("alice-secret"));
    assert_eq!(sasl.mechanism.as_deref(), Some("PLAIN"));
    // A jaas config given after sasl.password wins over it.
    let sasl = props(
        &["sasl.jaas.config=x.PlainLoginModule required username=\"carol\" password=\"c\";"],
        Some("sasl.password=p\n"),
    )
    .sasl()
    .unwrap();
    assert_eq!(
        (sasl.username.as_deref(), sasl.password.as_deref()),
        (Some("carol"), Some("c"))
    );
    assert_eq!(
        props(&[], None).sasl().unwrap(),
        super::SaslProperties::default()
    );
}

#[test]
fn the_number_of_properties_is_bounded() {
    let many: Vec<String> = (0..=PROPERTIES_MAX)
        .map(|i| format!("client.id=c{i}"))
        .collect();
    let err = format!("{:#}", ClientProperties::parse(&many, None).unwrap_err());
    assert!(err.contains("PROPERTIES_MAX"), "{err}");
    let enough = &many[..PROPERTIES_MAX];
    assert!(ClientProperties::parse(enough, None).is_ok());
}

#[test]
fn the_command_config_file_is_bounded_and_named_in_errors() {
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big.properties");
    std::fs::write(&big, vec![b'#'; COMMAND_CONFIG_BYTES_MAX as usize + 1]).unwrap();
    let err = format!("{:#}", read_command_config(&big).unwrap_err());
    assert!(
        err.contains("COMMAND_CONFIG_BYTES_MAX") && err.contains("big.properties"),
        "{err}"
    );
    let missing = dir.path().join("missing.properties");
    let err = format!("{:#}", read_command_config(&missing).unwrap_err());
    assert!(err.contains("missing.properties"), "{err}");
    let good = dir.path().join("client.properties");
    std::fs::write(&good, "client.id: ops\n").unwrap();
    let args = PropertyArgs {
        properties: flags(&["client.id=x"]),
        command_config: Some(good),
        ..PropertyArgs::default()
    };
    assert_eq!(args.load().unwrap().client_id(), Some("x"));
}

#[test]
fn every_used_key_is_in_the_help_and_the_docs() {
    let help = PropertyArgs::augment_args(Command::new("t"))
        .render_long_help()
        .to_string();
    let docs = include_str!("../../../../docs/security.md");
    // Passwords other than SASL's exist to be refused or to explain an encrypted key; the
    // docs list them, the help does not.
    let help_skips = [
        "ssl.truststore.password",
        "ssl.keystore.password",
        "ssl.key.password",
    ];
    for key in KEYS {
        let used = matches!(key.used, Use::Used(_) | Use::Secret(_));
        if used && !help_skips.contains(&key.name) {
            assert!(help.contains(key.name), "{} is not in -X's help", key.name);
        }
        assert!(
            docs.contains(key.name),
            "{} is not in docs/security.md",
            key.name
        );
    }
}
