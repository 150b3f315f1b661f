"""The one place the tests write a pytest internal: ``Function._nodeid``, for schemathesis.

What it uses: the ``_nodeid`` attribute of a pytest test item. schemathesis
4.32's lazy loader (``schemathesis.pytest.from_fixture``, which
``tests/api/test_fuzz.py`` runs) reads ``request.node._nodeid`` to name each
operation's subtest, and rewrites it; pytest 9.2 no longer keeps one
(``nodeid`` is computed from the item's ``_id``), so the read raises
``AttributeError`` and the fuzz test cannot run.

Why: it is the only way to run schemathesis's pytest integration on pytest 9.2
until schemathesis stops reading it.

What breaks if either changes: if schemathesis stops reading ``_nodeid`` this
shim is dead code; if pytest starts using ``_nodeid`` again, writing it could
rename the item. ``tests/contracts/test_pytest_internals.py`` fails on either.
"""

from __future__ import annotations

import pytest

__all__ = ["give_schemathesis_a_node_id"]


def give_schemathesis_a_node_id(node: pytest.Item) -> None:
    """Give ``node`` the ``_nodeid`` schemathesis's lazy loader reads: its ``nodeid``."""
    node._nodeid = node.nodeid  # type: ignore[attr-defined]
