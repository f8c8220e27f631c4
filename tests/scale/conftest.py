"""Fixtures of the "beyond one machine" tests: a private PostgreSQL cluster, a Prefect server on it, a small
chain."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import free_port, require_service
from tests.scale.postgres_cluster import PostgresCluster, cluster_user, postgres_bin, postgres_cluster

NODES_MODULE = '''
def count(data):
    return {"numbers": [1, 2, 3]}


def double(data):
    return {"doubled": [2 * n for n in data["numbers"]]}
'''


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresCluster]:
    """One PostgreSQL cluster for the session, on a free port of 127.0.0.1.

    Shared: a Prefect server started on a database an earlier one migrated starts in about two thirds
    of the time (measured at load 4-5: 10.9 s against 17.0 s), and initdb runs once. Tests read back
    only the runs they made (by id, deployment or pool name).
    """
    require_service(postgres_bin() is not None, "PostgreSQL is not installed (apt-get install postgresql)")
    require_service(cluster_user() is not None,
                    "running as root, but there is no `postgres` user to own a cluster")
    with postgres_cluster() as cluster:
        yield cluster


@pytest.fixture(scope="module")
def postgres_prefect_server(postgres: PostgresCluster,
                            tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Prefect server of this module's own on the session's PostgreSQL cluster
    (`deployments.server.start_server`); yields its API URL.

    In-process Prefect calls see it through `temporary_settings`; subprocesses get `PREFECT_API_URL`.
    """
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from deployments.server import start_server

    server = start_server(port=free_port(), home=tmp_path_factory.mktemp("prefect-pg-home"),
                          database=postgres.url, ready_timeout=240)
    try:
        with temporary_settings(updates={PREFECT_API_URL: server.api_url}):
            yield server.api_url
    finally:
        server.stop()


def small_chain(folder: Path, chain_id: str = "small") -> Path:
    """A two-node python chain (count, then double) that runs on its own, without any agent."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{chain_id}_nodes.py").write_text(NODES_MODULE)
    chain = {
        "chain_id": chain_id,
        "nodes": [
            {"node_id": "count", "output_slot": {"slot_id": "count", "path": "slots/count_output.json"},
             "executor": {"kind": "python", "callable": f"{chain_id}_nodes:count"}},
            {"node_id": "double", "input_slot": {"slot_id": "double-in", "path": "slots/double_input.json"},
             "output_slot": {"slot_id": "double", "path": "slots/double_output.json"},
             "executor": {"kind": "python", "callable": f"{chain_id}_nodes:double"}},
        ],
        "routes": [{"route_id": "count-to-double", "from_node": "count", "to_node": "double"}],
    }
    path = folder / "node_chain.json"
    path.write_text(json.dumps(chain))
    return path
