//! Every bound the security core enforces, with its unit and why.
//!
//! Hard limits (`*_MAX`, `*_MIN`) cap what grows from client input or from a record read
//! back from the log; errors that hit one name it and its value. Defaults (`DEFAULT_*`)
//! are Kafka's broker defaults.

/// Fewest PBKDF2 iterations a SCRAM credential may use: Kafka's
/// `ScramMechanism.minIterations` (4096, RFC 7677's recommended minimum). A credential
/// below it is refused when stored and when a client authenticates against it.
pub const SCRAM_ITERATIONS_MIN: u32 = 4096;

/// Most PBKDF2 iterations a SCRAM credential may use: Kafka's
/// `ScramMechanism.maxIterations` (16384). Bounds the CPU one PLAIN login against a stored
/// SCRAM credential costs the broker (it recomputes the salted password).
pub const SCRAM_ITERATIONS_MAX: u32 = 16384;

/// Largest SASL message (a SCRAM client-first or client-final message, or a PLAIN
/// message) the parsers read, in bytes. A real message is a user name, a nonce, a proof
/// and a few extensions, well under 1 KiB; Kafka bounds the frame with
/// `sasl.server.max.receive.size` (512 KiB), we bound what we parse much tighter.
pub const SASL_MESSAGE_BYTES_MAX: usize = 8 * 1024;

/// Longest user name (a SCRAM `n=` after unescaping, a PLAIN authcid, a credential's
/// user), in bytes. RFC 4616 says a server MUST accept 255 octets; 1 KiB leaves room for
/// the long names some identity providers make.
pub const USER_NAME_BYTES_MAX: usize = 1024;

/// Longest PLAIN password, in bytes (RFC 4616 asks for 255; long generated secrets fit).
pub const PASSWORD_BYTES_MAX: usize = 1024;

/// Longest SCRAM client nonce, in bytes. Clients send 24 to 48 printable characters.
pub const SCRAM_NONCE_BYTES_MAX: usize = 256;

/// Most SCRAM extensions (`,name=value` after the nonce) one client-first message may
/// carry. Kafka knows one (`tokenauth`); clients send none or one.
pub const SCRAM_EXTENSIONS_MAX: usize = 16;

/// Longest stored SCRAM salt, in bytes. Kafka's salts are about 26 bytes; RFC 5802 sets
/// no bound, so an AlterUserScramCredentials salt above this is refused.
pub const SCRAM_SALT_BYTES_MAX: usize = 1024;

/// Shortest stored SCRAM salt, in bytes. An empty salt makes every user's salted
/// password the same function of the password alone.
pub const SCRAM_SALT_BYTES_MIN: usize = 1;

/// Longest principal type (`User`), in bytes.
pub const PRINCIPAL_TYPE_BYTES_MAX: usize = 64;

/// Most entries in `super.users`. Super users are a handful of operator identities.
pub const SUPER_USERS_MAX: usize = 1000;

/// Longest ACL resource name (literal or prefix), in bytes. Topic names stop at 249 and
/// our group ids at 255; 1 KiB covers transactional ids and Sluice's own resources.
pub const ACL_RESOURCE_NAME_BYTES_MAX: usize = 1024;

/// Longest ACL host (an IP literal or `*`), in bytes.
pub const ACL_HOST_BYTES_MAX: usize = 255;

/// Most ACL bindings the authorizer holds. Kafka has no bound; an authorize call looks at
/// the bindings of one resource (and its prefixes), so memory, not time, is what this caps.
pub const ACLS_MAX: usize = 100_000;

/// Most SCRAM credentials (user, mechanism) the state holds.
pub const SCRAM_CREDENTIALS_MAX: usize = 100_000;

/// Longest client id in a quota entity, in bytes (Kafka's client id is an i16 string).
pub const QUOTA_CLIENT_ID_BYTES_MAX: usize = 1024;

/// Most quota entities (user, client-id, or both, defaults included) with a quota set.
pub const QUOTA_ENTITIES_MAX: usize = 100_000;

/// Most sampled windows the quota tracker keeps at once (one per quota key in use: a user,
/// a client id or a pair). Idle windows are dropped first; past the cap a request is
/// measured against a fresh window of its own (module docs of [`crate::quota`]).
pub const QUOTA_WINDOWS_MAX: usize = 100_000;

/// Kafka's `quota.window.num` default: samples kept per quota window.
pub const DEFAULT_QUOTA_WINDOW_NUM: u32 = 11;

/// Kafka's `quota.window.size.seconds` default: length of one sample, in seconds.
pub const DEFAULT_QUOTA_WINDOW_SIZE_SECONDS: u32 = 1;

/// Most samples `quota.window.num` may name (each tracked window holds this many + 1).
pub const QUOTA_WINDOW_NUM_MAX: u32 = 1000;

/// Longest `quota.window.size.seconds`, in seconds (1 hour).
pub const QUOTA_WINDOW_SIZE_SECONDS_MAX: u32 = 3600;

/// Longest throttle time the quota tracker returns, in milliseconds, whatever the
/// configured window: it also fits Kafka's i32 `throttle_time_ms`. The tracker bounds a
/// throttle by the whole sampled window first (`quota.window.num` *
/// `quota.window.size.seconds`, 11 s by default): after that long every sample that
/// caused the violation has expired, so waiting longer cannot lower the measured rate.
pub const THROTTLE_TIME_MS_MAX: u32 = 3_600_000;

/// Largest encoded security record, in bytes. The largest record is a SCRAM credential
/// (a user name, a salt and two 64-byte keys) or an ACL binding (three bounded strings):
/// both fit in well under 8 KiB.
pub const SECURITY_RECORD_BYTES_MAX: usize = 16 * 1024;

/// Most delegation tokens stored at once. Each is a few hundred bytes of state and costs
/// one HMAC when a Renew or Expire looks a token up by its HMAC; Kafka sets no bound, so a
/// user could otherwise grow the broker's memory one CreateDelegationToken at a time.
pub const DELEGATION_TOKENS_MAX: usize = 10_000;

/// Most renewers one delegation token names (Kafka sets no bound; real tokens name one or
/// two). Bounded so the token's record fits in [`SECURITY_RECORD_BYTES_MAX`].
pub const TOKEN_RENEWERS_MAX: usize = 8;

/// Longest delegation token id read back from a record, in bytes (ours are 22 characters;
/// Kafka's are the same base64 UUIDs).
pub const TOKEN_ID_BYTES_MAX: usize = 64;

const _: () = assert!(SCRAM_ITERATIONS_MIN <= SCRAM_ITERATIONS_MAX);
const _: () = assert!(SCRAM_SALT_BYTES_MIN <= SCRAM_SALT_BYTES_MAX);
const _: () = assert!(USER_NAME_BYTES_MAX < SASL_MESSAGE_BYTES_MAX);
const _: () = assert!(SCRAM_NONCE_BYTES_MAX < SASL_MESSAGE_BYTES_MAX);
const _: () = assert!(USER_NAME_BYTES_MAX + PASSWORD_BYTES_MAX < SASL_MESSAGE_BYTES_MAX);
// Every string of a record is written with a u16 length.
const _: () = assert!(USER_NAME_BYTES_MAX + PRINCIPAL_TYPE_BYTES_MAX < u16::MAX as usize);
const _: () = assert!(ACL_RESOURCE_NAME_BYTES_MAX <= u16::MAX as usize);
const _: () = assert!(SCRAM_SALT_BYTES_MAX <= u16::MAX as usize);
const _: () = assert!(QUOTA_CLIENT_ID_BYTES_MAX <= u16::MAX as usize);
// The largest credential and ACL records fit in one record.
const _: () =
    assert!(USER_NAME_BYTES_MAX + SCRAM_SALT_BYTES_MAX + 2 * 64 + 32 < SECURITY_RECORD_BYTES_MAX);
const _: () = assert!(
    ACL_RESOURCE_NAME_BYTES_MAX
        + PRINCIPAL_TYPE_BYTES_MAX
        + USER_NAME_BYTES_MAX
        + ACL_HOST_BYTES_MAX
        + 32
        < SECURITY_RECORD_BYTES_MAX
);
const _: () = assert!(
    (QUOTA_WINDOW_NUM_MAX as u64) * (QUOTA_WINDOW_SIZE_SECONDS_MAX as u64) * 1000
        <= i64::MAX as u64
);
const _: () = assert!(THROTTLE_TIME_MS_MAX <= i32::MAX as u32);
// The largest token record (id, two principals, every renewer, three times) fits in one record.
const _: () = assert!(
    TOKEN_ID_BYTES_MAX
        + (TOKEN_RENEWERS_MAX + 2) * (PRINCIPAL_TYPE_BYTES_MAX + 1 + USER_NAME_BYTES_MAX + 2)
        + 64
        < SECURITY_RECORD_BYTES_MAX
);
