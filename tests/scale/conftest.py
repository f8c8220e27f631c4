"""Fixtures of the "beyond one machine" tests: a private PostgreSQL cluster and a Prefect server on it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from harness.ports import free_port
from harness.postgres_cluster import PostgresCluster, cluster_user, postgres_bin, postgres_cluster
from tests.support.services import require_service


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
