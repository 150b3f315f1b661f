"""Persistence errors, translated once from driver and library exceptions."""

from __future__ import annotations

from palimpsest.domain.errors import ConfigurationError, ConflictError, PalimpsestError

__all__ = [
    "ConcurrentWriteError",
    "DataDirectoryInUseError",
    "DatabaseUnavailableError",
    "EmbedderUnavailableError",
    "MemoryUnprojectableError",
    "PgvectorMissingError",
    "SchemaTooNewError",
    "StaleReadError",
]


class DatabaseUnavailableError(PalimpsestError):
    """Raised when PostgreSQL cannot be reached or refuses the connection."""


class EmbedderUnavailableError(PalimpsestError):
    """Raised when the embedding model cannot be loaded or its endpoint fails."""


class PgvectorMissingError(ConfigurationError):
    """Raised when the configured PostgreSQL has no pgvector extension."""


class SchemaTooNewError(ConfigurationError):
    """Raised when the database was migrated by a newer palimpsest than this one."""


class DataDirectoryInUseError(ConfigurationError):
    """Raised when another ``palimpsest serve`` already runs on the data directory."""


class ConcurrentWriteError(ConflictError):
    """Raised when a write kept losing races with other writers of the same memory."""


class StaleReadError(ConflictError):
    """Raised inside an insert transaction when something the write decided from
    changed after it was read: the transaction rolls back and the write is built
    again from fresh aggregates."""


class MemoryUnprojectableError(ConflictError):
    """Raised when a memory's events include one this release cannot decode or apply
    (:mod:`palimpsest.projections.store.unreadable`): the memory is quarantined, and
    reads and writes of it are refused until it is erased."""

    def __init__(self, memory_id: object, reason: str) -> None:
        super().__init__(f"memory {memory_id} cannot be projected: {reason}")
        self.memory_id = memory_id
        self.reason = reason
