#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| sluice_server::fuzz::cluster_frames(data));
