//! Wall-clock time for the broker, in one place.
//!
//! Every module that stamps or ages something (record batches, offset commits, group
//! sessions, views, fences, producer ids) reads the time here, so none of them imports
//! `broker.rs` just for the clock.

/// Wall-clock milliseconds since the Unix epoch (0 if the clock reads before 1970).
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

#[cfg(test)]
mod tests {
    use super::now_ms;

    #[test]
    fn now_ms_is_after_2020_and_does_not_go_backwards_between_reads() {
        let first = now_ms();
        let second = now_ms();
        assert!(
            first > 1_577_836_800_000,
            "clock reads {first} ms, before 2020"
        );
        assert!(second >= first, "{second} ms read after {first} ms");
    }
}
