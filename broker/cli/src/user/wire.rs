//! `sluice user` against a running broker: AlterUserScramCredentials (the salted password
//! derived here, with a fresh random salt) and DescribeUserScramCredentials.

use anyhow::bail;
use bytes::Bytes;
use kafka_protocol::messages::alter_user_scram_credentials_request::{
    ScramCredentialDeletion, ScramCredentialUpsertion,
};
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsRequest,
};
use kafka_protocol::protocol::StrBytes;
use serde_json::{Value, json};
use sluice_security::rng::secure_random_string;
use sluice_security::scram::ScramMechanism;
use sluice_server::random::OsRng;

use super::{UserCommand, emit_users, parse_mechanism, read_password};
use crate::client::{Client, error_name};
use crate::common::{Output, emit};

pub(super) fn run(client: &mut Client, command: UserCommand, output: Output) -> anyhow::Result<()> {
    match command {
        UserCommand::Create {
            name,
            mechanism,
            iterations,
            ..
        } => {
            let mechanism = parse_mechanism(&mechanism)?;
            let password = read_password()?;
            let salt = secure_random_string(&mut OsRng).into_bytes();
            let salted = mechanism.hi(password.as_bytes(), &salt, iterations);
            let mut upsertion = ScramCredentialUpsertion::default();
            upsertion.name = StrBytes::from_string(name.clone());
            upsertion.mechanism = mechanism.type_code();
            upsertion.iterations = i32::try_from(iterations).unwrap_or(i32::MAX);
            upsertion.salt = Bytes::from(salt);
            upsertion.salted_password = Bytes::from(salted);
            let mut request = AlterUserScramCredentialsRequest::default();
            request.upsertions = vec![upsertion];
            check(&client.send(&request, 0)?)?;
            done(
                output,
                &name,
                mechanism,
                "created",
                json!({"iterations": iterations}),
            )
        }
        UserCommand::Delete { name, mechanism } => {
            let mechanism = parse_mechanism(&mechanism)?;
            let mut deletion = ScramCredentialDeletion::default();
            deletion.name = StrBytes::from_string(name.clone());
            deletion.mechanism = mechanism.type_code();
            let mut request = AlterUserScramCredentialsRequest::default();
            request.deletions = vec![deletion];
            check(&client.send(&request, 0)?)?;
            done(
                output,
                &name,
                mechanism,
                "deleted",
                json!({"deleted": true}),
            )
        }
        UserCommand::List => {
            let response = client.send(&DescribeUserScramCredentialsRequest::default(), 0)?;
            if response.error_code != 0 {
                bail!(
                    "listing users: {}: {}",
                    error_name(response.error_code),
                    response.error_message.as_deref().unwrap_or_default()
                );
            }
            let users: Vec<Value> = response
                .results
                .iter()
                .filter(|r| r.error_code == 0)
                .map(|r| {
                    let mechanisms: Vec<Value> = r
                        .credential_infos
                        .iter()
                        .filter_map(|c| {
                            let m = ScramMechanism::from_type_code(c.mechanism)?;
                            Some(json!({"mechanism": m.name(), "iterations": c.iterations}))
                        })
                        .collect();
                    json!({"user": r.user.as_str(), "mechanisms": mechanisms})
                })
                .collect();
            emit_users(output, users)
        }
    }
}

fn check(response: &AlterUserScramCredentialsResponse) -> anyhow::Result<()> {
    for r in &response.results {
        if r.error_code != 0 {
            bail!(
                "user {}: {}: {}",
                r.user.as_str(),
                error_name(r.error_code),
                r.error_message.as_deref().unwrap_or_default()
            );
        }
    }
    Ok(())
}

fn done(
    output: Output,
    name: &str,
    mechanism: ScramMechanism,
    what: &'static str,
    extra: Value,
) -> anyhow::Result<()> {
    let mut doc = json!({"user": name, "mechanism": mechanism.name()});
    if let (Some(doc), Some(extra)) = (doc.as_object_mut(), extra.as_object()) {
        doc.extend(extra.clone());
    }
    emit(output, &doc, |d| {
        format!(
            "user {} {what} ({})\n",
            d["user"].as_str().unwrap_or(""),
            mechanism.name()
        )
    })
}
