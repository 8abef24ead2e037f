//! Report to the broker's log through the host's `log` import.
//!
//! On wasm32 this calls `sluice:plugin/host@0.2.0#log`; natively (unit
//! tests) it writes to stderr.

/// Severity, as the WIT `log-level` enum (same discriminants).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Level {
    Debug = 0,
    Info = 1,
    Warn = 2,
    Error = 3,
}

pub fn debug(message: &str) {
    write(Level::Debug, message);
}

pub fn info(message: &str) {
    write(Level::Info, message);
}

pub fn warn(message: &str) {
    write(Level::Warn, message);
}

pub fn error(message: &str) {
    write(Level::Error, message);
}

#[cfg(target_arch = "wasm32")]
pub fn write(level: Level, message: &str) {
    // The canonical ABI lowering of `log: func(level: log-level, message:
    // string)`: the enum as i32, the string as (pointer, length) in our own
    // memory. This is the code wit-bindgen would generate for the import.
    #[link(wasm_import_module = "sluice:plugin/host@0.2.0")]
    unsafe extern "C" {
        #[link_name = "log"]
        fn host_log(level: i32, ptr: *const u8, len: usize);
    }
    // SAFETY: the pointer and length describe a live &str for the duration
    // of the call; the host only reads it.
    unsafe { host_log(level as i32, message.as_ptr(), message.len()) }
}

#[cfg(not(target_arch = "wasm32"))]
pub fn write(level: Level, message: &str) {
    eprintln!("[plugin {level:?}] {message}");
}
