"""Pipelined reads read the rows of the statement they read, never of one before it.

In pipeline mode psycopg hands an answer to its cursor whenever the answer
arrives, and a fetch on a cursor that already holds an answer waits for no
other. When the server sent the answers so far before the next statement went
(a flush, which any fetch on the connection asks for), a cursor that ran a
setting and then a query read the setting's rows as the query's: recall's text
candidates were once read as its planner settings. Here the answers so far are
made to arrive at that moment, on purpose.
"""

from __future__ import annotations

import time
from typing import Any

from psycopg import Connection

from palimpsest.projections.runtime import Runtime
from palimpsest.projections.store.tenancy import run_unread, tenant_transaction
from tests.conftest import Tenant


def _answers_so_far_arrive(conn: Connection[Any]) -> None:
    """Have the server send every answer so far, and give them time to arrive."""
    conn.pgconn.send_flush_request()
    conn.pgconn.flush()
    time.sleep(0.05)


def test_a_pipelined_tenant_transaction_reads_its_first_statement(
    runtime: Runtime, tenant: Tenant
) -> None:
    with tenant_transaction(runtime.log.datastore, tenant.id, commit=False, pipelined=True) as cur:
        _answers_so_far_arrive(cur.connection)  # the tenant's setting is answered
        cur.execute("SELECT 'read' AS answer")
        assert cur.fetchall() == [{"answer": "read"}]


def test_a_statement_run_unread_is_never_read_in_place_of_the_next(runtime: Runtime) -> None:
    with (
        runtime.log.datastore.get_connection() as conn,
        conn.pipeline(),
        conn.transaction(),
        conn.cursor() as cur,
    ):
        run_unread(cur, "SELECT set_config('join_collapse_limit', '1', true) AS answer")
        _answers_so_far_arrive(conn)
        cur.execute("SELECT 'read' AS answer")
        assert cur.fetchall() == [{"answer": "read"}]
