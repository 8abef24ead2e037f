//! FindCoordinator v0-2: this broker coordinates every consumer group (a single node).
//! Transaction coordinators (key type 1) are not implemented: COORDINATOR_NOT_AVAILABLE.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use kafka_protocol::protocol::StrBytes;

use crate::broker::NODE_ID;
use crate::connection::ConnectionContext;

/// Kafka's key type of a consumer group (1 is a transactional id).
const KEY_TYPE_GROUP: i8 = 0;

/// Answers FindCoordinator.
pub fn handle(
    ctx: &ConnectionContext,
    request: &FindCoordinatorRequest,
) -> FindCoordinatorResponse {
    let mut response = FindCoordinatorResponse::default();
    if request.key_type != KEY_TYPE_GROUP {
        response.error_code = ResponseError::CoordinatorNotAvailable.code();
        response.error_message = Some(StrBytes::from_static_str(
            "transactions are not supported by this broker",
        ));
        response.node_id = BrokerId(-1);
        response.port = -1;
        return response;
    }
    let advertised = ctx.broker.advertised();
    response.node_id = BrokerId(NODE_ID);
    response.host = StrBytes::from_string(advertised.host);
    response.port = i32::from(advertised.port);
    response
}
