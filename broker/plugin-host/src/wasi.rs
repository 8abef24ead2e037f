//! WASI for guests that import it (componentize-py and componentize-js guests do; our Rust
//! SDK's do not), deny by default. The linker gets wasmtime-wasi's preview 2 `wasi:cli`
//! world, each part giving a plugin nothing of the broker's: clocks and randomness (allowed,
//! documented), an empty environment and no arguments, a closed stdin, stdout and stderr
//! captured into the plugin's own log, the filesystem with **no preopened directory**, and
//! sockets with **every address, protocol and name lookup refused**. Guests' runtimes import
//! all of these whether they use them or not (componentize-py imports `wasi:sockets/*` in
//! every build), so they are linked and deny at run time: there is no descriptor to open a
//! file from, and every socket is refused. Anything outside that world (`wasi:http`,
//! `wasi:config`, a made-up interface) is not linked: a component importing it is refused at
//! deploy by [`check_imports`], with a message that names the import.
//!
//! A component that imports no WASI keeps the fast path: its store never builds a
//! `WasiCtx` (the context is made on first use, `HostState::wasi`).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use wasmtime::Result;
use wasmtime::component::{HasData, HasSelf, Linker, Resource, ResourceTable};
use wasmtime_wasi::p2::bindings::{cli, clocks, filesystem, random, sockets};
use wasmtime_wasi::p2::{DynOutputStream, OutputStream, Pollable, StreamError};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

pub(crate) use wasmtime_wasi::p2::bindings::cli::{stderr, stdout};

use crate::bindings::LogLevel;
use crate::error::RegistryError;
use crate::limits;

/// The WASI interfaces a plugin may import (any `0.2.x` version: wasmtime matches a guest's
/// older patch level to the linked one). Everything else is refused at deploy.
pub const WASI_ALLOWED: &[&str] = &[
    "wasi:clocks/wall-clock",
    "wasi:clocks/monotonic-clock",
    "wasi:random/random",
    "wasi:random/insecure",
    "wasi:random/insecure-seed",
    "wasi:cli/environment",
    "wasi:cli/exit",
    "wasi:cli/stdin",
    "wasi:cli/stdout",
    "wasi:cli/stderr",
    "wasi:cli/terminal-input",
    "wasi:cli/terminal-output",
    "wasi:cli/terminal-stdin",
    "wasi:cli/terminal-stdout",
    "wasi:cli/terminal-stderr",
    "wasi:io/error",
    "wasi:io/poll",
    "wasi:io/streams",
    "wasi:filesystem/types",
    "wasi:filesystem/preopens",
    "wasi:sockets/network",
    "wasi:sockets/instance-network",
    "wasi:sockets/tcp",
    "wasi:sockets/tcp-create-socket",
    "wasi:sockets/udp",
    "wasi:sockets/udp-create-socket",
    "wasi:sockets/ip-name-lookup",
];

/// The host's own imports, in every supported version: `log`, and the types-only interface
/// a component may import for its record batches.
const SLUICE_IMPORTS: &[&str] = &["sluice:plugin/host", "sluice:plugin/types"];

/// Links the allowed WASI interfaces (synchronous bindings: a plugin call never awaits)
/// for a store whose data `T` gives the WASI context and the captured stdio.
pub(crate) fn add_to_linker<T>(linker: &mut Linker<T>) -> Result<()>
where
    T: WasiView + cli::stdout::Host + cli::stderr::Host + 'static,
{
    use wasmtime_wasi::cli::{WasiCli, WasiCliView};
    use wasmtime_wasi::clocks::{WasiClocks, WasiClocksView};
    use wasmtime_wasi::filesystem::{WasiFilesystem, WasiFilesystemView};
    use wasmtime_wasi::random::WasiRandom;
    use wasmtime_wasi::sockets::{WasiSockets, WasiSocketsView};
    let l = linker;
    clocks::wall_clock::add_to_linker::<T, WasiClocks>(l, T::clocks)?;
    clocks::monotonic_clock::add_to_linker::<T, WasiClocks>(l, T::clocks)?;
    random::random::add_to_linker::<T, WasiRandom>(l, |t| t.ctx().ctx.random())?;
    random::insecure::add_to_linker::<T, WasiRandom>(l, |t| t.ctx().ctx.random())?;
    random::insecure_seed::add_to_linker::<T, WasiRandom>(l, |t| t.ctx().ctx.random())?;
    cli::exit::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::environment::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::stdin::add_to_linker::<T, WasiCli>(l, T::cli)?;
    // stdout and stderr are ours: lines into the plugin's log.
    cli::stdout::add_to_linker::<T, HasSelf<T>>(l, |t| t)?;
    cli::stderr::add_to_linker::<T, HasSelf<T>>(l, |t| t)?;
    cli::terminal_input::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::terminal_output::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::terminal_stdin::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::terminal_stdout::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::terminal_stderr::add_to_linker::<T, WasiCli>(l, T::cli)?;
    filesystem::preopens::add_to_linker::<T, WasiFilesystem>(l, T::filesystem)?;
    use wasmtime_wasi::p2::bindings::sync;
    sync::filesystem::types::add_to_linker::<T, WasiFilesystem>(l, T::filesystem)?;
    // Sockets: every use refused at run time (`WasiParts::new`).
    let network = wasmtime_wasi::p2::bindings::sockets::network::LinkOptions::default();
    sockets::network::add_to_linker::<T, WasiSockets>(l, &network, T::sockets)?;
    sockets::instance_network::add_to_linker::<T, WasiSockets>(l, T::sockets)?;
    sockets::tcp_create_socket::add_to_linker::<T, WasiSockets>(l, T::sockets)?;
    sockets::ip_name_lookup::add_to_linker::<T, WasiSockets>(l, T::sockets)?;
    sync::sockets::tcp::add_to_linker::<T, WasiSockets>(l, T::sockets)?;
    sync::sockets::udp::add_to_linker::<T, WasiSockets>(l, T::sockets)?;
    sync::sockets::udp_create_socket::add_to_linker::<T, WasiSockets>(l, T::sockets)?;
    sync::io::error::add_to_linker::<T, Io>(l, |t| t.ctx().table)?;
    sync::io::poll::add_to_linker::<T, Io>(l, |t| t.ctx().table)?;
    sync::io::streams::add_to_linker::<T, Io>(l, |t| t.ctx().table)?;
    Ok(())
}

/// The `wasi:io` interfaces work on the store's resource table.
struct Io;

impl HasData for Io {
    type Data<'a> = &'a mut ResourceTable;
}

/// Refuses a component that imports anything but the host's `log` and the allowed WASI
/// interfaces (`imports`: its top-level import names, read before compiling), naming the
/// first such import. Says whether it imports WASI.
///
/// # Errors
/// [`RegistryError::Imports`] naming the import.
pub(crate) fn check_imports(imports: &[String]) -> Result<bool, RegistryError> {
    let mut wasi = false;
    for name in imports {
        let unversioned = name.split('@').next().unwrap_or(name);
        if SLUICE_IMPORTS.contains(&unversioned) {
            continue;
        }
        if WASI_ALLOWED.contains(&unversioned) {
            wasi = true;
            continue;
        }
        return Err(RegistryError::Imports(format!(
            "`{name}` (plugins get the sluice:plugin/host log and, of WASI preview 2, \
             wasi:cli's world with nothing reachable: clocks, random, an empty environment, \
             stdio into the plugin log, a filesystem with no preopened directory, sockets \
             that refuse every address; docs/plugins.md, \"WASI\")"
        )));
    }
    Ok(wasi)
}

/// A store's WASI context, made when the guest first calls into WASI.
pub(crate) struct WasiParts {
    ctx: WasiCtx,
    table: ResourceTable,
    /// What the guest wrote to stdout and stderr, as lines for the plugin log.
    pub(crate) stdio: Arc<Stdio>,
}

impl WasiParts {
    pub(crate) fn new() -> Self {
        // The builder's defaults are most of the deny-by-default we want: closed stdin, no
        // environment, no arguments, no preopens, every socket address refused;
        // stdout/stderr are linked by us. Sockets and name lookups are refused outright.
        let mut builder = WasiCtx::builder();
        builder
            .allow_blocking_current_thread(false)
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false);
        Self {
            ctx: builder.build(),
            table: ResourceTable::new(),
            stdio: Arc::default(),
        }
    }
}

impl std::fmt::Debug for WasiParts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WasiParts").finish_non_exhaustive()
    }
}

impl WasiParts {
    /// The context and resource table, as wasmtime-wasi's host functions take them.
    pub(crate) fn view(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.ctx,
            table: &mut self.table,
        }
    }

    /// A new stdout (`level` info) or stderr (warn) stream into the plugin's log.
    pub(crate) fn stdio_stream(&mut self, level: LogLevel) -> Result<Resource<DynOutputStream>> {
        let stream: DynOutputStream = Box::new(StdioStream {
            stdio: Arc::clone(&self.stdio),
            level,
        });
        Ok(self.table.push(stream)?)
    }
}

/// Lines written to a guest's stdout (logged at `info`) and stderr (`warn`), waiting for
/// the end of the call to go through the plugin log's limits like the guest's own `log`
/// calls. Bounded: `STDIO_LINES_PENDING_MAX` lines, each cut at `LOG_MESSAGE_BYTES_MAX`; the
/// rest are counted.
#[derive(Debug, Default)]
pub(crate) struct Stdio {
    inner: Mutex<StdioInner>,
}

#[derive(Debug, Default)]
struct StdioInner {
    lines: VecDeque<(LogLevel, String)>,
    /// The unfinished last line of stdout (0) and stderr (1).
    partial: [Vec<u8>; 2],
    dropped: u32,
}

impl Stdio {
    fn write(&self, level: LogLevel, bytes: &[u8]) {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let which = usize::from(level != LogLevel::Info);
        for piece in bytes.split_inclusive(|&b| b == b'\n') {
            let ends = piece.last() == Some(&b'\n');
            let partial = &mut inner.partial[which];
            let room = limits::LOG_MESSAGE_BYTES_MAX.saturating_sub(partial.len());
            let body = if ends {
                &piece[..piece.len() - 1]
            } else {
                piece
            };
            partial.extend_from_slice(&body[..body.len().min(room)]);
            if ends || partial.len() >= limits::LOG_MESSAGE_BYTES_MAX {
                let line = std::mem::take(partial);
                inner.push(level, line);
            }
        }
    }

    /// The lines written since the last call, and how many were cut by the bound.
    pub(crate) fn take(&self) -> (Vec<(LogLevel, String)>, u32) {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let dropped = std::mem::take(&mut inner.dropped);
        (inner.lines.drain(..).collect(), dropped)
    }
}

impl StdioInner {
    fn push(&mut self, level: LogLevel, line: Vec<u8>) {
        if self.lines.len() >= limits::STDIO_LINES_PENDING_MAX {
            self.dropped = self.dropped.saturating_add(1);
            return;
        }
        let line = String::from_utf8_lossy(&line)
            .trim_end_matches('\r')
            .to_owned();
        self.lines.push_back((level, line));
    }
}

/// A guest's stdout or stderr.
struct StdioStream {
    stdio: Arc<Stdio>,
    level: LogLevel,
}

#[wasmtime_wasi::async_trait]
impl Pollable for StdioStream {
    async fn ready(&mut self) {}
}

impl OutputStream for StdioStream {
    fn write(&mut self, bytes: Bytes) -> Result<(), StreamError> {
        self.stdio.write(self.level, &bytes);
        Ok(())
    }

    fn flush(&mut self) -> Result<(), StreamError> {
        Ok(())
    }

    fn check_write(&mut self) -> Result<usize, StreamError> {
        Ok(limits::STDIO_WRITE_BYTES_MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stdio_splits_lines_and_cuts_long_ones() {
        let stdio = Stdio::default();
        stdio.write(LogLevel::Info, b"one\ntw");
        stdio.write(LogLevel::Warn, b"err\n");
        stdio.write(LogLevel::Info, b"o\r\n");
        let long = vec![b'x'; limits::LOG_MESSAGE_BYTES_MAX + 10];
        stdio.write(LogLevel::Info, &long);
        let (lines, dropped) = stdio.take();
        assert_eq!(dropped, 0);
        assert_eq!(lines[0], (LogLevel::Info, "one".to_owned()));
        assert_eq!(lines[1], (LogLevel::Warn, "err".to_owned()));
        assert_eq!(lines[2], (LogLevel::Info, "two".to_owned()));
        assert_eq!(lines[3].1.len(), limits::LOG_MESSAGE_BYTES_MAX);
        assert_eq!(lines.len(), 4, "the cut tail is not a line of its own");
    }

    #[test]
    fn stdio_is_bounded() {
        let stdio = Stdio::default();
        let many = "x\n".repeat(limits::STDIO_LINES_PENDING_MAX + 5);
        stdio.write(LogLevel::Info, many.as_bytes());
        let (lines, dropped) = stdio.take();
        assert_eq!(lines.len(), limits::STDIO_LINES_PENDING_MAX);
        assert_eq!(dropped, 5);
    }
}
