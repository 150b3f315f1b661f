"""Counting recall's words: the statement that keeps ``lexeme_counts`` true.

Every statement that adds or deletes ``memory_lexemes`` rows counts them in the same
transaction, with :func:`counting`. A count that reaches zero is deleted in that
statement: the row's key is the word itself, so a count of zero left behind would
keep an erased memory's words in the database. The rows a statement changes are
locked in lexeme order (the existing ones first, then the new ones), one statement
per transaction, so two transactions counting overlapping words lock their rows in
the same order and never deadlock.
"""

from __future__ import annotations

from typing import LiteralString

__all__ = ["ANY_LEXEME", "counting"]

ANY_LEXEME = ""
"""The lexeme whose count is of memories holding any: a document never holds it."""

_ADD: LiteralString = (
    ", summed AS (SELECT lexeme, sum(change) AS change FROM changes GROUP BY lexeme"
    " HAVING sum(change) <> 0),"
    # The rows that exist, locked in lexeme order; under READ COMMITTED a row another
    # transaction changed meanwhile is read again once it is ours, so ``memories`` is
    # what the row will hold after this change.
    " held AS (SELECT n.lexeme, n.memories + s.change AS memories"
    " FROM {schema}.lexeme_counts n JOIN summed s ON s.lexeme = n.lexeme"
    " ORDER BY n.lexeme FOR UPDATE OF n),"
    " emptied AS (DELETE FROM {schema}.lexeme_counts n USING held h"
    " WHERE n.lexeme = h.lexeme AND h.memories = 0 RETURNING n.lexeme)"
    # A WITH query's writes are invisible to the rest of its statement: the rows the
    # DELETE took are left out here, not updated to zero.
    " INSERT INTO {schema}.lexeme_counts AS n (lexeme, memories)"
    " SELECT lexeme, change FROM summed WHERE lexeme NOT IN (SELECT lexeme FROM emptied)"
    " ORDER BY lexeme"
    " ON CONFLICT (tenant_id, lexeme) DO UPDATE SET memories = n.memories + excluded.memories"
)


def counting(with_changes: LiteralString) -> LiteralString:
    """Return the statement adding to ``lexeme_counts`` the rows of ``changes``, a
    common table expression ``with_changes`` ends with: ``(lexeme, change)``, +1 for a
    memory now holding the lexeme, -1 for one no longer holding it, and likewise for
    the empty lexeme (:data:`ANY_LEXEME`) once per memory now holding any or none.
    A count that reaches zero is deleted, not kept at zero."""
    return with_changes + _ADD
