//! The fetch loop of `sluice consume --group`: a group member (`member.rs`) that reads only
//! its assigned partitions, commits what it handled after every fetch and before every
//! rejoin, and leaves the group when it stops: after `-n` records, at the end with `-e`, or
//! on the first SIGINT/SIGTERM (a second one kills the process at once).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::bail;

use super::{self as consume, ConsumeArgs, Position};
use crate::client::Client;
use crate::member::Member;

/// How long a member with no partitions waits between looks at the rebalance flag.
const IDLE_WAIT: Duration = Duration::from_millis(200);

/// Set by the SIGINT/SIGTERM handler.
static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_stop_signal(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

/// Catches the first SIGINT and SIGTERM (then the default disposition returns, so a
/// second Ctrl-C ends a consumer stuck in a long JoinGroup).
fn install_stop_handler() -> anyhow::Result<()> {
    for signal in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: a zeroed sigaction is valid; the handler only stores to an atomic, which
        // is async-signal-safe.
        let installed = unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_stop_signal as *const () as libc::sighandler_t;
            action.sa_flags = libc::SA_RESETHAND;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(signal, &action, std::ptr::null_mut())
        };
        if installed != 0 {
            bail!(
                "installing the handler for signal {signal}: {}",
                std::io::Error::last_os_error()
            );
        }
    }
    Ok(())
}

/// Consumes `args.topic` as a member of `group`.
pub fn run(client: &mut Client, args: &ConsumeArgs, group: &str) -> anyhow::Result<()> {
    install_stop_handler()?;
    let mut member = Member::join(client, group, &args.topic)?;
    let consumed = consume(client, args, group, &mut member);
    // Leave even after an error, so the others need not wait for our session to expire.
    let left = member.leave(client);
    consumed.and(left)
}

fn consume(
    client: &mut Client,
    args: &ConsumeArgs,
    group: &str,
    member: &mut Member,
) -> anyhow::Result<()> {
    let mut positions = consume::start_positions(client, args, member.assigned(), Some(group))?;
    let mut committed = BTreeMap::new();
    let mut printed = 0u64;
    loop {
        if STOP.load(Ordering::Relaxed) || consume::done(args, printed, &positions) {
            break;
        }
        if member.rejoin_needed() {
            commit_progress(client, member, &positions, &mut committed)?;
            member.rejoin(client)?;
            positions = consume::start_positions(client, args, member.assigned(), Some(group))?;
            committed.clear();
            continue;
        }
        if positions.is_empty() {
            std::thread::sleep(IDLE_WAIT);
            continue;
        }
        consume::poll(client, args, &mut positions, &mut printed)?;
        commit_progress(client, member, &positions, &mut committed)?;
    }
    commit_progress(client, member, &positions, &mut committed)
}

/// Commits every position that moved since the last commit.
fn commit_progress(
    client: &mut Client,
    member: &Member,
    positions: &BTreeMap<i32, Position>,
    committed: &mut BTreeMap<i32, i64>,
) -> anyhow::Result<()> {
    let moved: BTreeMap<i32, i64> = positions
        .iter()
        .filter(|(p, pos)| committed.get(p) != Some(&pos.next))
        .map(|(&p, pos)| (p, pos.next))
        .collect();
    if member.commit(client, &moved)? {
        committed.extend(moved);
    }
    Ok(())
}
