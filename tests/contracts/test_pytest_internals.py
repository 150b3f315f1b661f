"""The pytest internal behind ``tests/api/pytest_internals.py`` is still needed and still
harmless: schemathesis's lazy loader reads and rewrites ``_nodeid``, and pytest's own
``nodeid`` does not come from it."""

from __future__ import annotations

import inspect

import pytest
import schemathesis.pytest.lazy

from tests.api.pytest_internals import give_schemathesis_a_node_id


def test_schemathesis_still_reads_the_node_id_the_shim_gives() -> None:
    # When this fails, schemathesis no longer needs the shim: remove it and its fixture.
    source = inspect.getsource(schemathesis.pytest.lazy)
    assert "request.node._nodeid" in source


def test_the_shim_names_the_item_as_pytest_does_and_pytest_ignores_a_rewrite(
    request: pytest.FixtureRequest,
) -> None:
    node = request.node
    assert isinstance(node, pytest.Item)
    before = node.nodeid
    give_schemathesis_a_node_id(node)
    assert node._nodeid == before  # type: ignore[attr-defined]
    # schemathesis rewrites it per operation; pytest's name of the item must not move.
    node._nodeid = f"{before}[GET /x]"  # type: ignore[attr-defined]
    assert node.nodeid == before
