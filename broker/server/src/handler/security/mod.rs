//! Who a client is and what it may do: SaslHandshake and SaslAuthenticate (`sasl.rs`, with
//! the connection's SASL session: [`sasl`], called by `handle_sasl`), the ACL APIs
//! (`acls.rs`), the SCRAM user APIs (`users.rs`) and the client quota APIs (`quotas.rs`).
//! One `match` over their API keys each.

mod acls;
mod quotas;
mod sasl;
mod users;

use kafka_protocol::messages::ApiKey;

use crate::sasl::Session;
use crate::wire::{ConnectionContext, FrameError, Response};

use super::{Call, no_handler};

/// Answers an ACL, user or quota request. SaslHandshake and SaslAuthenticate come through
/// [`sasl`] (the connection admits them apart, with its session), never here.
pub(super) fn dispatch(ctx: &ConnectionContext, mut call: Call) -> Result<Response, FrameError> {
    let answer = call.answer;
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
        other => Err(no_handler(other)),
    }
}

/// Answers a SaslHandshake or SaslAuthenticate with the connection's SASL session; `true`:
/// close the connection once the answer is written.
pub(super) async fn sasl(
    ctx: &mut ConnectionContext,
    session: &mut Session,
    mut call: Call,
) -> Result<(Response, bool), FrameError> {
    let (answer, v) = (call.answer, call.read_as);
    match call.key {
        ApiKey::SaslHandshake => {
            let (response, close) = sasl::handshake(ctx, session, &call.request()?, v);
            Ok((answer.reply(&response)?, close))
        }
        ApiKey::SaslAuthenticate => {
            let (response, close) = sasl::authenticate(ctx, session, call.request()?).await;
            Ok((answer.reply(&response)?, close))
        }
        other => Err(FrameError::malformed(format!(
            "{other:?} is not a SASL request"
        ))),
    }
}
