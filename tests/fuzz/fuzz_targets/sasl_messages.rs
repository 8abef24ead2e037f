#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| sluice_security::fuzz::sasl_messages(data));
