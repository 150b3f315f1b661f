"""Counting recall's words: the statement that keeps ``lexeme_counts`` true.

Every statement that adds or deletes ``memory_lexemes`` rows counts them in the same
transaction, with :func:`counting`. Its rows are written in lexeme order, one
statement per transaction, so two transactions counting overlapping words lock their
rows in the same order and never deadlock.
"""

from __future__ import annotations

from typing import LiteralString

__all__ = ["ANY_LEXEME", "counting"]

ANY_LEXEME = ""
"""The lexeme whose count is of memories holding any: a document never holds it."""

_ADD: LiteralString = (
    " INSERT INTO {schema}.lexeme_counts AS n (lexeme, memories)"
    " SELECT lexeme, sum(change) FROM changes GROUP BY lexeme"
    " HAVING sum(change) <> 0 ORDER BY lexeme"
    " ON CONFLICT (tenant_id, lexeme) DO UPDATE SET memories = n.memories + excluded.memories"
)


def counting(with_changes: LiteralString) -> LiteralString:
    """Return the statement adding to ``lexeme_counts`` the rows of ``changes``, a
    common table expression ``with_changes`` ends with: ``(lexeme, change)``, +1 for a
    memory now holding the lexeme, -1 for one no longer holding it, and likewise for
    the empty lexeme (:data:`ANY_LEXEME`) once per memory now holding any or none."""
    return with_changes + _ADD
