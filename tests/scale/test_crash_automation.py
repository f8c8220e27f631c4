"""The crash automation a `watch --pool` sets up (deployments/pool.py) on the session's Prefect server.

A `watch --pool` starting again, or one on another pool, must not reset the crash automation when it
already holds the window asked for: updating it gives its trigger a new id, and the server forgets the
silences the old trigger was timing, so a run whose worker died just before would stay Running for good
(seen with a 40 s window: still Running 120 s after the kill). A different window does update it.
And watches starting at once on a server without the automations leave one of each, not one per watch.
Every Crashed the crash automation sets is rescheduled, a repeat of one silence's too, and a run its worker
reported Crashed, or one past its reschedules, is not.
"""

from __future__ import annotations

import contextvars
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest

from deployments.pool import (
    CRASH_AFTER,
    CRASH_AUTOMATION,
    HEARTBEAT_TAG,
    RESCHEDULE_AUTOMATION,
    RESCHEDULES,
    crash_message,
    ensure_automations,
)
from tests.support.waiting import API_POLL_SECONDS, wait_until

pytestmark = pytest.mark.prefect_server
# `watch --pool` processes starting at the same moment, as threads.
WATCHES = 4


def triggers() -> dict[str, tuple[str, float]]:
    """The id the server gave each of the two automations' triggers (new on every update; the client's
    model leaves it out) and its window in seconds, by automation name."""
    from prefect.client.orchestration import get_client

    found = {}
    with get_client(sync_client=True) as client:
        for name in (CRASH_AUTOMATION, RESCHEDULE_AUTOMATION):
            [automation] = client.read_automations_by_name(name)
            stored = client.request("GET", "/automations/{id}", path_params={"id": automation.id}).json()
            found[name] = (stored["trigger"]["id"], stored["trigger"]["within"])
    return found


def test_the_crash_automation_is_updated_only_when_its_window_changes(prefect_server) -> None:
    ensure_automations(CRASH_AFTER)
    before = triggers()
    ensure_automations(CRASH_AFTER)
    assert triggers() == before, "a watch asking for the same window reset the server's crash timers"
    try:
        ensure_automations(CRASH_AFTER + timedelta(seconds=20))
        changed = triggers()
        assert changed[CRASH_AUTOMATION][1] == (CRASH_AFTER + timedelta(seconds=20)).total_seconds()
        assert changed[CRASH_AUTOMATION][0] != before[CRASH_AUTOMATION][0]
        # The reschedule trigger has no window: it reacts to every Crashed the crash automation sets.
        assert changed[RESCHEDULE_AUTOMATION][1] == 0
    finally:
        # The other tests on this server expect the default window.
        ensure_automations(CRASH_AFTER)


def test_watches_starting_at_once_on_a_new_server_leave_one_automation_of_each(prefect_server) -> None:
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        for name in (CRASH_AUTOMATION, RESCHEDULE_AUTOMATION):
            for automation in client.read_automations_by_name(name):
                client.delete_automation(automation.id)
    starting = threading.Barrier(WATCHES)

    def start() -> None:
        starting.wait()
        ensure_automations(CRASH_AFTER)

    try:
        with ThreadPoolExecutor(WATCHES) as watches:
            for started in [watches.submit(contextvars.copy_context().run, start) for _ in range(WATCHES)]:
                started.result()
        with get_client(sync_client=True) as client:
            counts = {name: len(client.read_automations_by_name(name))
                      for name in (CRASH_AUTOMATION, RESCHEDULE_AUTOMATION)}
        assert counts == {CRASH_AUTOMATION: 1, RESCHEDULE_AUTOMATION: 1}
    finally:
        ensure_automations(CRASH_AFTER)


def test_a_watch_whose_automation_another_deletes_before_its_update_updates_the_one_left(
    prefect_server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three watches start at once on a server without the automations, two asking for other windows: C
    creates X; A finds X (and means to update it to its window); B, which found none either, creates W
    and, W's id being the least, deletes X. A's update of X then meets a 404: it must update W, not fail
    `watch` at its start."""
    from prefect.client.orchestration import SyncPrefectClient, get_client

    from deployments.pool import crash_and_reschedule_automations

    other_window = CRASH_AFTER + timedelta(seconds=20)
    ensure_automations(other_window)  # watch C's
    update = SyncPrefectClient.update_automation
    meanwhile = []

    def deleted_meanwhile(self: SyncPrefectClient, automation_id, automation) -> None:
        if not meanwhile:
            # Watch B: its own, then the one A found goes.
            [crash, _] = crash_and_reschedule_automations(other_window)
            meanwhile.append(self.create_automation(crash))
            self.delete_automation(automation_id)
        update(self, automation_id, automation)

    monkeypatch.setattr(SyncPrefectClient, "update_automation", deleted_meanwhile)
    try:
        ensure_automations(CRASH_AFTER)  # watch A's
        monkeypatch.undo()
        assert meanwhile
        assert triggers()[CRASH_AUTOMATION][1] == CRASH_AFTER.total_seconds()
        with get_client(sync_client=True) as client:
            assert [a.id for a in client.read_automations_by_name(CRASH_AUTOMATION)] == meanwhile
    finally:
        monkeypatch.undo()
        ensure_automations(CRASH_AFTER)


def test_every_crashed_the_crash_automation_sets_is_rescheduled_and_a_workers_is_not(prefect_server) -> None:
    """Prefect's automations act at least once: under load the crash automation marked one dead worker's
    run Crashed twice, the second time about 0.1 s after the first, and that second Crashed can land
    before the run's reschedule or after it (seen: Crashed, Rescheduled, Crashed, and the run then stayed
    Crashed for good). Run A is marked Crashed twice in a row; run B once, then again once it has been
    rescheduled: each ends Scheduled. Run C, which its worker reported Crashed (another message), is not
    the crash automation's and stays Crashed; so does run D, found silent on its third run, past the
    reschedules a run gets (`RESCHEDULES`). C's and D's Crashed are sent first, so the server's triggers
    have taken them up by the time A's and B's later ones are rescheduled."""
    from prefect import flow
    from prefect.client.orchestration import get_client
    from prefect.states import Crashed, Running, Scheduled

    @flow(name="crashed-again")
    def crashed_again() -> None:
        """Never runs: its runs' states are set here, as a worker and the crash automation would."""

    def names(client, run_id) -> list[str]:
        return [state.name for state in client.read_flow_run_states(run_id)]

    def current(client, run_id) -> str | None:
        state = client.read_flow_run(run_id).state
        return state.name if state else None

    def crash(client, run_id, message: str = crash_message(CRASH_AFTER)) -> None:
        client.set_flow_run_state(run_id, Crashed(message=message), force=True)

    ensure_automations(CRASH_AFTER)
    with get_client(sync_client=True) as client:
        a, b, c, d = (client.create_flow_run(crashed_again, tags=[HEARTBEAT_TAG]) for _ in range(4))
        try:
            for run in (c, a, b):
                client.set_flow_run_state(run.id, Running())
            for _ in range(RESCHEDULES + 1):
                client.set_flow_run_state(d.id, Scheduled(), force=True)
                client.set_flow_run_state(d.id, Running())
            assert client.read_flow_run(d.id).run_count == RESCHEDULES + 1
            crash(client, c.id, "Flow run infrastructure exited with non-zero status code 1.")
            crash(client, d.id)
            crash(client, a.id)
            crash(client, a.id)
            crash(client, b.id)
            wait_until(lambda: current(client, b.id) == "Rescheduled", timeout=120, what="B's reschedule",
                       interval=API_POLL_SECONDS)
            crash(client, b.id)
            wait_until(lambda: current(client, b.id) == "Rescheduled" and names(client, b.id).count(
                "Rescheduled") == 2, timeout=120, what="B's second reschedule", interval=API_POLL_SECONDS)
            wait_until(lambda: current(client, a.id) == "Rescheduled", timeout=120,
                       what="A, crashed twice, rescheduled", interval=API_POLL_SECONDS, details=lambda: str(
                           names(client, a.id)))
            for stays in (c, d):
                assert names(client, stays.id)[-1] == "Crashed" and "Rescheduled" not in names(
                    client, stays.id)
        finally:
            for run in (a, b, c, d):
                client.delete_flow_run(run.id)
