"""The web process under uvicorn, as `make run` starts it: its database connections are bounded by the pool,
and a request that finds the pool exhausted for DB_POOL_TIMEOUT is answered 503 with Retry-After while the
server keeps serving everyone else once connections free up."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from items.models import RawItem
from tests.factories import make_agent
from tests.pgstat import ConnectionSampler, count_connections, test_db_connect
from tests.pipeline.runtime.fixtures import wait_for
from tests.web.servers import SERVER_APPLICATION_NAME

pytestmark = pytest.mark.slow


def test_an_exhausted_pool_answers_503_and_serves_the_next_request_once_it_frees(web_server):
    _, token = make_agent()
    headers = {"Authorization": f"Bearer {token}"}
    server = web_server(DB_POOL_MIN_SIZE="1", DB_POOL_MAX_SIZE="1", DB_POOL_TIMEOUT="1")
    me = f"{server.url}/api/v1/agents/me"
    assert httpx.get(me, headers=headers).status_code == 200

    locker = test_db_connect(autocommit=False)
    watcher = test_db_connect()
    try:
        locker.execute(f"LOCK TABLE {RawItem._meta.db_table} IN ACCESS EXCLUSIVE MODE")
        with ThreadPoolExecutor(1) as pool:
            # Client A's publish takes the pool's only connection and waits on the lock inside its INSERT.
            publish = pool.submit(
                httpx.post,
                f"{server.url}/api/v1/items/publish",
                json={"content": "Offering a spare GPU this weekend"},
                headers=headers,
                timeout=30,
            )
            wait_for(
                lambda: watcher.execute(
                    "SELECT 1 FROM pg_stat_activity WHERE application_name = %s AND wait_event_type = 'Lock'",
                    [SERVER_APPLICATION_NAME],
                ).fetchone(),
                timeout=15,
                message="the publish to wait on the lock",
            )
            # Client B finds no free connection within DB_POOL_TIMEOUT.
            refused = httpx.get(me, headers=headers, timeout=30)
            locker.rollback()  # the connection frees up
            published = publish.result()
    finally:
        locker.close()  # never leave the lock behind: the test database's teardown would wait for it
        watcher.close()
    assert refused.status_code == 503, refused.text
    assert refused.headers["Retry-After"] == "1"
    assert refused.json()["error"] == {
        "code": "unavailable",
        "message": "the server is busy (no database connection free); retry later",
    }
    assert published.status_code == 202
    assert httpx.get(me, headers=headers).status_code == 200
    assert "Traceback" not in server.output()


def test_a_database_that_is_down_answers_503_database_unavailable_not_busy(web_server, postgres_proxy):
    # The pool's timeout ends both waits: for a connection every request holds, and for one it cannot open.
    _, token = make_agent()
    headers = {"Authorization": f"Bearer {token}"}
    server = web_server(DATABASE_URL=postgres_proxy.database_url, DB_POOL_MIN_SIZE="1", DB_POOL_TIMEOUT="1")
    me = f"{server.url}/api/v1/agents/me"
    assert httpx.get(me, headers=headers, timeout=30).status_code == 200

    postgres_proxy.down()  # open connections drop, new ones are refused: PostgreSQL is down for the server
    refused = httpx.get(me, headers=headers, timeout=30)
    assert refused.status_code == 503, refused.text
    assert refused.json()["error"] == {"code": "unavailable", "message": "database unavailable; retry later"}
    assert refused.headers["Retry-After"] == "5"

    postgres_proxy.up()
    wait_for(lambda: httpx.get(me, headers=headers, timeout=30).status_code == 200, 60, 0.5, "the server to recover")
    assert "Traceback" not in server.output()


def test_many_concurrent_requests_never_hold_more_connections_than_the_pool(web_server):
    _, token = make_agent()
    headers = {"Authorization": f"Bearer {token}"}
    server = web_server(DB_POOL_MIN_SIZE="1", DB_POOL_MAX_SIZE="3", RATE_LIMIT_READ_PER_MINUTE="0")
    me = f"{server.url}/api/v1/agents/me"

    def client(_: int) -> list[int]:
        with httpx.Client(headers=headers, timeout=30) as http:
            return [http.get(me).status_code for _ in range(15)]

    with ConnectionSampler(SERVER_APPLICATION_NAME) as sampler, ThreadPoolExecutor(24) as pool:
        codes = [code for codes in pool.map(client, range(24)) for code in codes]
    assert codes == [200] * len(codes)
    assert sampler.samples > 5
    assert 1 <= sampler.peak <= 3
    # Idle afterwards, the process still holds no more than its pool.
    with test_db_connect() as conn:
        assert count_connections(conn, SERVER_APPLICATION_NAME) <= 3
