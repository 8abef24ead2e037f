"""kill -9 trials: a broker SIGKILLed at a random moment under real producers and a consumer
group loses nothing it acknowledged.

Each trial (machinery and checker in `kill9.py`) runs a fresh broker with one topic of 2-6
partitions and small segments, two confluent-kafka producers (acks=all; codec cycling none,
lz4, zstd, gzip, snappy; idempotence off and on) and a consumer-group member committing each
batch synchronously, SIGKILLs the broker after a pause drawn from a seeded RNG (some trials
mid-shutdown, after a SIGTERM; some kill it again just after the restart), restarts it on the
same data dir and port, lets the clients reconnect, retry and finish, then checks:
- every successful delivery report's record is at its partition and offset with its value;
- each partition's offsets run contiguously from 0 to the high watermark;
- every record read back was produced by the trial (values carry a unique id);
- every record the group member read, before or after the kill, is where it read it;
- every commit the broker acknowledged before the kill is still committed after the restart
  (and not beyond the high watermark); after the member drains the log, it is committed at
  the end of every partition;
- no record is acknowledged twice. A retried batch whose ack died with the broker may be
  stored twice (Sluice does not yet deduplicate idempotent producers): counted and printed.

`test_kill9_trials_with_fsync` runs with `sluice.acks.all.fsync=true` (the default);
`test_kill9_trials_page_cache_only` with it off: a SIGKILL does not take the page cache, so
acknowledged records survive a process crash either way (not a machine crash; see
docs/durability.md). Knobs: SLUICE_KILL9_TRIALS (fsync trials, default 20; a fifth as many,
at least 2, without fsync), SLUICE_KILL9_SEED (default 20261203) and SLUICE_KILL9_TRIAL (run
only the trial of that index). A failure names its seed and index; those two replay its plan
(the clients' timing is the machine's). A summary line per test goes to the terminal.
"""

from __future__ import annotations

import os
import shutil
import time

import pytest
from kill9 import BROKER_SETTINGS, Outcome, PinnedBroker, TrialPlan, run_trial

TRIALS = int(os.environ.get("SLUICE_KILL9_TRIALS", "20"))
CACHE_TRIALS = max(2, TRIALS // 5)
SEED = int(os.environ.get("SLUICE_KILL9_SEED", "20261203"))
# Replays one trial (by index) instead of the whole run.
ONLY_TRIAL = os.environ.get("SLUICE_KILL9_TRIAL")
# A trial takes about 5 s on a busy 2-core machine; the budget leaves room for slow ones.
TRIAL_BUDGET_S = 30


@pytest.fixture
def trial_brokers(tmp_path_factory, request):
    """`start(settings)` starts a PinnedBroker on a fresh data dir; `done(broker)` stops it
    (asserting exit 0) and removes its dir. Brokers left at teardown (a failed trial) are
    stopped and their logs printed; their data dirs stay for a look."""
    live: dict[int, tuple[PinnedBroker, object]] = {}

    def start(settings: dict[str, str]) -> PinnedBroker:
        root = tmp_path_factory.mktemp("kill9")
        (root / "data").mkdir()
        broker = PinnedBroker(root / "data", root / "broker.log", settings, {})
        live[id(broker)] = (broker, root)
        return broker.start()

    def done(broker: PinnedBroker):
        _, root = live.pop(id(broker))
        broker.stop()
        shutil.rmtree(root)

    yield start, done
    for broker, root in live.values():
        print(f"kill9: broker data dir kept at {root}\n{broker.log_tail()}")
        if broker.is_running():
            broker.kill()


def run_trials(trial_brokers, fsync: bool, count: int) -> tuple[list[Outcome], float]:
    start, done = trial_brokers
    settings = {**BROKER_SETTINGS, "sluice.acks.all.fsync": str(fsync).lower()}
    outcomes = []
    began = time.monotonic()
    for index in [int(ONLY_TRIAL)] if ONLY_TRIAL else range(count):
        plan = TrialPlan.draw(SEED, index, fsync)
        print(f"kill9 trial {index}: {plan.describe()}")
        broker = start(settings)
        outcome = run_trial(plan, broker)
        print(
            f"  stop={outcome.stop} acked={outcome.acked} phases(s)={ {k: round(v, 2) for k, v in outcome.phases.items()} }"
        )
        if outcome.duplicates:
            print(f"  {len(outcome.duplicates)} duplicates, e.g. {'; '.join(outcome.duplicates[:3])}")
        assert not outcome.violations, (
            f"kill9 trial {index} ({plan.describe()}; replay: SLUICE_KILL9_SEED={SEED} "
            f"SLUICE_KILL9_TRIAL={index}) found {len(outcome.violations)} violations:\n"
            + "\n".join(outcome.violations[:20])
        )
        done(broker)
        outcomes.append(outcome)
    return outcomes, time.monotonic() - began


def summarize(label: str, outcomes: list[Outcome], elapsed_s: float) -> str:
    dups = [d for o in outcomes for d in o.duplicates]
    first_acked = sum("first copy acked" in d for d in dups)
    return (
        f"kill9 summary ({label}): trials={len(outcomes)} kills={sum(o.kills for o in outcomes)} "
        f"(mid-shutdown: {sum(o.stop == 'term+kill' for o in outcomes)}, "
        f"shut down before the kill: {sum(o.stop == 'term' for o in outcomes)}) "
        f"records_acked_checked={sum(o.acked for o in outcomes)} "
        f"reads_checked={sum(o.reads for o in outcomes)} "
        f"commits_checked={sum(o.commits for o in outcomes)} "
        f"duplicates={len(dups)} (first copy acked: {first_acked}) "
        f"in_flight_at_kill={sum(o.in_flight_at_kill for o in outcomes)} seed={SEED} elapsed={elapsed_s:.0f}s"
    )


def assert_trials_meant_something(outcomes: list[Outcome]):
    assert all(o.acked > 0 and o.commits > 0 for o in outcomes), "a trial checked no acked record or commit"
    killed_mid_stream = sum(o.in_flight_at_kill > 0 for o in outcomes)
    assert killed_mid_stream >= len(outcomes) // 2, (
        f"only {killed_mid_stream} of {len(outcomes)} kills found records in flight: the kills missed the stream"
    )


@pytest.mark.timeout(60 + TRIAL_BUDGET_S * TRIALS)
def test_kill9_trials_with_fsync(trial_brokers, capsys):
    outcomes, elapsed = run_trials(trial_brokers, fsync=True, count=TRIALS)
    with capsys.disabled():
        print("\n" + summarize("sluice.acks.all.fsync=true", outcomes, elapsed))
    assert_trials_meant_something(outcomes)


@pytest.mark.timeout(60 + TRIAL_BUDGET_S * CACHE_TRIALS)
def test_kill9_trials_page_cache_only(trial_brokers, capsys):
    outcomes, elapsed = run_trials(trial_brokers, fsync=False, count=CACHE_TRIALS)
    with capsys.disabled():
        print("\n" + summarize("sluice.acks.all.fsync=false", outcomes, elapsed))
    assert_trials_meant_something(outcomes)
