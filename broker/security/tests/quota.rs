//! Client quotas driven with explicit times (ms): Kafka's sampled-window rate, the
//! throttle time `(observed - quota) / quota * window` and its bound, windows shared by
//! the level that matched, sample expiry, unrecord, and the tracker's window cap.

use sluice_security::quota::rate::{SampledRate, throttle_time_ms};
use sluice_security::quota::{
    ClientQuotas, EntityName, QuotaConfig, QuotaEntity, QuotaKind, QuotaTracker,
};

const PRODUCE: QuotaKind = QuotaKind::ProducerByteRate;

fn user_quota(user: &str, bytes_per_second: f64) -> ClientQuotas {
    let mut q = ClientQuotas::default();
    let entity = QuotaEntity {
        user: Some(EntityName::Named(user.into())),
        client_id: None,
    };
    q.set(entity, PRODUCE, bytes_per_second).unwrap();
    q
}

fn tracker() -> QuotaTracker {
    QuotaTracker::new(QuotaConfig::default()).unwrap()
}

#[test]
fn a_first_burst_is_measured_over_the_minimum_window() {
    let quotas = user_quota("alice", 1000.0);
    let mut t = tracker();
    // 5000 bytes at t=0: the window counts as 10 full samples (10 s): 500 B/s, within quota.
    assert_eq!(t.record(&quotas, PRODUCE, "alice", "c", 5000, 0), 0);
    // 10000 more: 1500 B/s over 10 s, so (1500 - 1000) / 1000 * 10000 ms.
    assert_eq!(t.record(&quotas, PRODUCE, "alice", "c", 10_000, 0), 5000);
}

#[test]
fn rate_spans_samples_and_expires_after_the_whole_window() {
    let config = QuotaConfig::default();
    let mut rate = SampledRate::new();
    rate.record(&config, 1000.0, 0);
    rate.record(&config, 1000.0, 1500);
    // Oldest sample started at 0; 1.5 s elapsed is padded to 1 + 9 samples = 10.5 s.
    assert_eq!(rate.window_ms(&config, 1500), 10_500);
    let measured = rate.measure(&config, 1500);
    assert!((measured - 2000.0 / 10.5).abs() < 1e-9, "{measured}");
    // 11 s after its last event a sample is reset.
    assert_eq!(rate.measure(&config, 1500 + 11_000), 0.0);
    // After a full window of samples, the elapsed time is no longer padded.
    let mut busy = SampledRate::new();
    for second in 0..=20 {
        busy.record(&config, 100.0, second * 1000);
    }
    assert_eq!(
        busy.window_ms(&config, 20_000),
        10_000,
        "samples of 10..=20 s remain"
    );
    assert!((busy.measure(&config, 20_000) - 110.0).abs() < 1e-9);
}

#[test]
fn throttle_is_bounded_by_the_whole_window() {
    let config = QuotaConfig::default();
    assert_eq!(throttle_time_ms(&config, 1000.0, 1000.0, 10_000), 0);
    assert_eq!(throttle_time_ms(&config, 1100.0, 1000.0, 10_000), 1000);
    assert_eq!(
        throttle_time_ms(&config, 1e9, 1000.0, 10_000),
        11_000,
        "Kafka would say about 1e10 ms"
    );
    let quotas = user_quota("alice", 1000.0);
    let mut t = tracker();
    assert_eq!(t.record(&quotas, PRODUCE, "alice", "c", 1 << 40, 0), 11_000);
}

#[test]
fn a_user_quota_is_one_window_for_all_its_clients() {
    let quotas = user_quota("alice", 1000.0);
    let mut t = tracker();
    assert_eq!(t.record(&quotas, PRODUCE, "alice", "c1", 8000, 0), 0);
    assert_eq!(
        t.record(&quotas, PRODUCE, "alice", "c2", 8000, 0),
        6000,
        "16000 B over 10 s"
    );
    assert_eq!(t.len(), 1);
    assert_eq!(
        t.record(&quotas, PRODUCE, "bob", "c1", 1 << 30, 0),
        0,
        "no quota for bob"
    );
    assert_eq!(
        t.record(
            &quotas,
            QuotaKind::ConsumerByteRate,
            "alice",
            "c1",
            1 << 30,
            0
        ),
        0
    );
}

#[test]
fn a_client_id_default_quota_is_one_window_per_client_id() {
    let mut quotas = ClientQuotas::default();
    let entity = QuotaEntity {
        user: None,
        client_id: Some(EntityName::Default),
    };
    quotas.set(entity, PRODUCE, 1000.0).unwrap();
    let mut t = tracker();
    assert_eq!(t.record(&quotas, PRODUCE, "alice", "c1", 12_000, 0), 2000);
    assert_eq!(
        t.record(&quotas, PRODUCE, "bob", "c2", 5000, 0),
        0,
        "c2 has its own window"
    );
    assert_eq!(
        t.record(&quotas, PRODUCE, "bob", "c1", 1000, 0),
        3000,
        "all users of c1 share it"
    );
}

#[test]
fn unrecord_takes_back_a_throttled_fetch() {
    let mut quotas = ClientQuotas::default();
    let entity = QuotaEntity {
        user: Some(EntityName::Default),
        client_id: None,
    };
    quotas
        .set(entity, QuotaKind::ConsumerByteRate, 1000.0)
        .unwrap();
    let fetch = QuotaKind::ConsumerByteRate;
    let mut t = tracker();
    assert_eq!(t.record(&quotas, fetch, "u", "c", 20_000, 0), 10_000);
    t.unrecord(&quotas, fetch, "u", "c", 20_000, 0);
    assert_eq!(
        t.record(&quotas, fetch, "u", "c", 5000, 1),
        0,
        "the throttled bytes were taken back"
    );
    assert_eq!(
        t.max_value_in_quota_window(&quotas, fetch, "u", "c"),
        Some(10_000.0)
    );
    assert_eq!(
        t.max_value_in_quota_window(&quotas, PRODUCE, "u", "c"),
        None
    );
}

#[test]
fn idle_windows_expire() {
    let quotas = user_quota("alice", 1000.0);
    let mut t = tracker();
    t.record(&quotas, PRODUCE, "alice", "c", 10, 0);
    t.expire(10_999);
    assert_eq!(t.len(), 1);
    t.expire(11_000);
    assert!(t.is_empty());
}

#[test]
fn config_bounds_name_the_limit() {
    let bad = QuotaConfig {
        window_num: 0,
        window_size_seconds: 1,
    };
    assert!(QuotaTracker::new(bad).is_err());
    let bad = QuotaConfig {
        window_num: 11,
        window_size_seconds: 86_400,
    };
    let err = QuotaTracker::new(bad).unwrap_err();
    assert!(
        err.to_string().contains("QUOTA_WINDOW_SIZE_SECONDS_MAX"),
        "{err}"
    );
    let small = QuotaConfig {
        window_num: 2,
        window_size_seconds: 1,
    };
    let quotas = user_quota("alice", 1000.0);
    let mut t = QuotaTracker::new(small).unwrap();
    // Window of 1 sample (num - 1): 3000 B in 1 s is 2 s over; bounded by 2 s of window.
    assert_eq!(t.record(&quotas, PRODUCE, "alice", "c", 3000, 0), 2000);
}
