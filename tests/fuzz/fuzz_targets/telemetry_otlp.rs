#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| sluice_server::fuzz::telemetry_otlp(data));
