#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| sluice_storage::epoch::fuzz_epochs(data));
