"""The crash automation a `watch --pool` sets up (deployments/pool.py) on the session's Prefect server.

A `watch --pool` starting again, or one on another pool, must not reset the crash automation when it
already holds the window asked for: updating it gives its trigger a new id, and the server forgets the
silences the old trigger was timing, so a run whose worker died just before would stay Running for good
(seen with a 40 s window: still Running 120 s after the kill). A different window does update it.
And watches starting at once on a server without the automations leave one of each, not one per watch.
A run the crash automation marks Crashed twice for one silence is rescheduled once.
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
        # The reschedule trigger lets a repeated crash pass for as long as the crash window.
        assert changed[RESCHEDULE_AUTOMATION][1] == changed[CRASH_AUTOMATION][1]
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


def test_a_run_marked_crashed_twice_for_one_silence_is_rescheduled_once(prefect_server) -> None:
    """Prefect's automations act at least once: in a loaded CI run the crash automation marked one dead
    worker's run Crashed twice in a row. A reschedule for each would force back to Scheduled a run that a
    worker already holds again. Run A is marked Crashed twice; then run B once, a sentinel: B's Crashed
    reaches the server's triggers after A's two, so once B is rescheduled A's second Crashed has been
    taken up (before the fix, A was rescheduled twice)."""
    from prefect import flow
    from prefect.client.orchestration import get_client
    from prefect.states import Crashed, Running

    @flow(name="crashed-twice")
    def crashed_twice() -> None:
        """Never runs: its runs' states are set here, as a worker and the crash automation would."""

    def rescheduled(client, run_id) -> int:
        return sum(state.name == "Rescheduled" for state in client.read_flow_run_states(run_id))

    ensure_automations(CRASH_AFTER)
    with get_client(sync_client=True) as client:
        a, b = (client.create_flow_run(crashed_twice, tags=[HEARTBEAT_TAG]) for _ in range(2))
        try:
            for run, crashes in ((a, 2), (b, 1)):
                client.set_flow_run_state(run.id, Running())
                for _ in range(crashes):
                    client.set_flow_run_state(run.id, Crashed(message=crash_message(CRASH_AFTER)), force=True)
            # The server's triggers and actions each take two messages at a time: B's reschedule can come
            # before A's first.
            wait_until(lambda: rescheduled(client, a.id) and rescheduled(client, b.id), timeout=120,
                       what="both runs' reschedules", interval=API_POLL_SECONDS)
            history = [(state.type.value, state.name) for state in client.read_flow_run_states(a.id)]
            assert [name for _, name in history].count("Rescheduled") == 1, history
        finally:
            for run in (a, b):
                client.delete_flow_run(run.id)
