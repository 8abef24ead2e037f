#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| sluice_storage::fuzz::replicated_append(data));
