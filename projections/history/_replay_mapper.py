"""Decoding the log for replay: the log's own mapper, each id parsed once.

Rebuild and verify decode every event of the log, and a tenant's events
name the same few ids again and again (the tenant, the principal, a memory
and its versions): building a :class:`~uuid.UUID` from its hex was a tenth
of a replay. :func:`replay_mapper` returns a mapper that decodes exactly as
:func:`~palimpsest.projections.store.eventlog.event_mapper`'s does, with the
same registered transcodings, but keeps the ids it has built (a ``UUID`` is
immutable, so events may share one) and reuses them: 7.7 µs an event
instead of 10.4 (CPU, the benchmark store's 126,543 events). Encoding (the
snapshots rebuild writes) is the log mapper's own, byte for byte.

It uses the library's public interface only: a :class:`Transcoder` (the
extension point the library's :class:`Mapper` takes) and the ``names`` a
:class:`JSONTranscoder` registers its transcodings under.
``tests/projections/history/test_replay_mapper.py`` holds it to the log
mapper's results and errors, malformed rows included.
"""

from __future__ import annotations

import json
from typing import Any
from uuid import UUID

from eventsourcing.persistence import (
    JSONTranscoder,
    Mapper,
    Transcoder,
    TranscodingNotRegisteredError,
)

from palimpsest.projections.store.eventlog import event_mapper

__all__ = ["replay_mapper"]

_KEPT_IDS = 100_000
"""The most ids kept at once (about 25 MB); past it the cache starts again, so a long
replay's memory does not grow with every id it has seen once."""


class _ReplayTranscoder(Transcoder):
    """The log's JSON transcoder, with each ``uuid_hex`` value decoded once."""

    def __init__(self, log: JSONTranscoder) -> None:
        self._log = log
        names = dict(log.names)
        uuids = names["uuid_hex"]
        kept: dict[str, UUID] = {}

        def decode_object(d: dict[str, Any]) -> Any:
            # The library's object hook, step by step (JSONTranscoder._decode_obj):
            # a two-key {"_type_", "_data_"} object is a transcoded value, anything
            # else stays a dict, and an unknown name raises its error.
            if len(d) != 2 or "_type_" not in d or "_data_" not in d:
                return d
            name, data = d["_type_"], d["_data_"]
            if name == "uuid_hex" and type(data) is str:
                found = kept.get(data)
                if found is None:
                    if len(kept) >= _KEPT_IDS:
                        kept.clear()
                    # The library's own decoding: a malformed value raises as it would.
                    found = kept[data] = uuids.decode(data)
                return found
            try:
                transcoding = names[name]
            except KeyError as e:
                msg = (
                    f"Data serialized with name '{name}' is not deserializable. Please "
                    "register a custom transcoding for this type."
                )
                raise TranscodingNotRegisteredError(msg) from e
            return transcoding.decode(data)

        self._decoder = json.JSONDecoder(object_hook=decode_object)
        self._raw_decode = self._decoder.raw_decode

    def encode(self, obj: Any) -> bytes:
        """Encode as the log does (snapshots written by rebuild are the log's bytes)."""
        return self._log.encode(obj)

    def decode(self, data: bytes) -> Any:
        """Decode as the log's transcoder does, reusing ids already built.

        The log's JSON is one value with no whitespace around it, which
        ``raw_decode`` reads alone, sparing ``decode``'s two whitespace matches:
        4.7 microseconds an event instead of 5.3 (CPU, the benchmark store's
        events). Anything else, and every error, goes through ``decode`` itself,
        which answers it as the log's transcoder does.
        """
        text = data.decode("utf8")
        try:
            found, end = self._raw_decode(text)
        except Exception:  # the same error again, or none: decode says which
            return self._decoder.decode(text)
        return found if end == len(text) else self._decoder.decode(text)


def replay_mapper() -> Mapper[UUID]:
    """Return a mapper equivalent to
    :func:`~palimpsest.projections.store.eventlog.event_mapper`'s, for one replay:
    it keeps up to :data:`_KEPT_IDS` decoded ids, so make one per replay."""
    log = event_mapper()
    assert isinstance(log.transcoder, JSONTranscoder)
    return Mapper(
        transcoder=_ReplayTranscoder(log.transcoder), compressor=log.compressor, cipher=log.cipher
    )
