//! Who a client is and what it may do: SaslHandshake and SaslAuthenticate (`sasl.rs`, with
//! the connection's SASL session: [`sasl`], called by `handle_sasl`), the ACL APIs
//! (`acls.rs`), the SCRAM user APIs (`users.rs`), the client quota APIs (`quotas.rs`) and
//! the delegation token APIs (`tokens.rs`). One `match` over their API keys each.

mod acls;
mod quotas;
mod sasl;
mod tokens;
mod users;

use kafka_protocol::messages::ApiKey;

use crate::authz::Authz;
use crate::clock::SharedClock;
use crate::sasl::{Services, Session};
use crate::security::Security;
use crate::wire::{Client, ConnectionContext, FrameError, Response};

use super::{Call, no_handler};

/// What an ACL, user or quota handler is given: who asks, what they may do, and the
/// security store (users, ACLs, quotas) it reads and appends to.
pub(super) struct Ctx<'a> {
    pub client: &'a Client,
    pub auth: Authz<'a>,
    pub security: &'a Security,
    /// What "now" is for delegation tokens' lifetimes.
    pub clock: &'a SharedClock,
}

/// Answers an ACL, user or quota request. SaslHandshake and SaslAuthenticate come through
/// [`sasl`] (the connection admits them apart, with its session), never here.
pub(super) fn dispatch(conn: &ConnectionContext, mut call: Call) -> Result<Response, FrameError> {
    let ctx = &Ctx {
        client: &conn.client,
        auth: Authz::new(&conn.broker.security, &conn.client),
        security: &conn.broker.security,
        clock: conn.broker.clock(),
    };
    let (answer, v) = (call.answer, call.read_as);
    match call.key {
        ApiKey::CreateAcls => answer.reply(&acls::create(ctx, call.request()?)),
        ApiKey::DescribeAcls => answer.reply(&acls::describe(ctx, call.request()?)),
        ApiKey::DeleteAcls => answer.reply(&acls::delete(ctx, call.request()?)),
        ApiKey::DescribeUserScramCredentials => {
            answer.reply(&users::describe(ctx, call.request()?))
        }
        ApiKey::AlterUserScramCredentials => answer.reply(&users::alter(ctx, call.request()?)),
        ApiKey::DescribeClientQuotas => answer.reply(&quotas::describe(ctx, call.request()?)),
        ApiKey::AlterClientQuotas => answer.reply(&quotas::alter(ctx, call.request()?)),
        ApiKey::CreateDelegationToken => answer.reply(&tokens::create(ctx, call.request()?, v)),
        ApiKey::RenewDelegationToken => answer.reply(&tokens::renew(ctx, call.request()?)),
        ApiKey::ExpireDelegationToken => answer.reply(&tokens::expire(ctx, call.request()?)),
        ApiKey::DescribeDelegationToken => answer.reply(&tokens::describe(ctx, call.request()?, v)),
        other => Err(no_handler(other)),
    }
}

/// Answers a SaslHandshake or SaslAuthenticate with the connection's SASL session; `true`:
/// close the connection once the answer is written.
pub(super) async fn sasl(
    conn: &mut ConnectionContext,
    session: &mut Session,
    mut call: Call,
) -> Result<(Response, bool), FrameError> {
    let (answer, v) = (call.answer, call.read_as);
    let broker = std::sync::Arc::clone(&conn.broker);
    let services = Services {
        config: &broker.config,
        security: &broker.security,
        metrics: &broker.metrics,
        clock: broker.clock(),
    };
    match call.key {
        ApiKey::SaslHandshake => {
            let (response, close) = sasl::handshake(services, session, &call.request()?, v);
            Ok((answer.reply(&response)?, close))
        }
        ApiKey::SaslAuthenticate => {
            let client = &mut conn.client;
            let (response, close) =
                sasl::authenticate((client, services), session, call.request()?).await;
            Ok((answer.reply(&response)?, close))
        }
        other => Err(FrameError::malformed(format!(
            "{other:?} is not a SASL request"
        ))),
    }
}
