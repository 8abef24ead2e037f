#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| sluice_cluster::fuzz::metadata_records(data));
