"""``palimpsest serve`` heals its embedded PostgreSQL or says it is sick, and its
liveness never waits on the database (issue 43, items 13 and 15): real processes,
a real data directory."""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import httpx2
import psutil
import pytest

from palimpsest.projections.store.embedded import postmaster_pid
from tests.api.cli.serving import free_port, stop_serve, until


@contextmanager
def _embedded_serve(
    data_dir: Path, settings: dict[str, str] | None = None
) -> Iterator[tuple[str, dict[str, str]]]:
    """Run ``palimpsest serve`` on the embedded default in ``data_dir`` (no embedding
    model to load); yield its base URL and the default tenant's admin headers."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PALIMPSEST_", "DATABASE_"))}
    env |= {
        "PALIMPSEST_DATA_DIR": str(data_dir),
        "PALIMPSEST_EMBEDDER": "http",
        "PALIMPSEST_EMBEDDING_URL": "http://127.0.0.1:9/v1/embeddings",
        "PALIMPSEST_EMBEDDING_MODEL": "none",
    } | (settings or {})
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "palimpsest.api.cli", "serve", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        until(lambda: _health(base) == 200, 120, "serve is healthy")
        token = (data_dir / "admin-token").read_text().strip()
        yield base, {"Authorization": f"Bearer {token}"}
    finally:
        stop_serve(server)
        pid = postmaster_pid(data_dir / "pgdata")
        if pid is not None:  # one the test made unstoppable, or started by hand
            with suppress(psutil.Error):
                psutil.Process(pid).kill()


def _health(base: str, timeout_s: float = 2.0) -> int:
    try:
        return httpx2.get(f"{base}/healthz", timeout=timeout_s).status_code
    except httpx2.TransportError:
        return 0


def _write(base: str, headers: dict[str, str], content: str, timeout_s: float = 10.0) -> int:
    try:
        return httpx2.post(
            f"{base}/v1/memories",
            json={"type": "note", "scope": "user", "content": content},
            headers=headers,
            timeout=timeout_s,
        ).status_code
    except httpx2.TransportError:
        return 0


def _postmaster(data_dir: Path) -> psutil.Process:
    pid = postmaster_pid(data_dir / "pgdata")
    assert pid is not None, "the embedded PostgreSQL runs"
    return psutil.Process(pid)


@pytest.mark.slow
def test_serve_starts_its_embedded_postgres_again_when_it_is_killed(tmp_path: Path) -> None:
    with _embedded_serve(tmp_path) as (base, headers):
        assert _write(base, headers, "before the crash") == 201
        # When the embedded postmaster is killed (SIGKILL) under a stream of writes
        killed = _postmaster(tmp_path)
        killed.kill()
        killed_at = time.monotonic()
        # Then writes resume within a bound: serve started the server again
        answers: list[int] = []

        def resumed() -> bool:
            answers.append(_write(base, headers, f"after the crash {len(answers)}", 5.0))
            return answers[-1] == 201

        until(resumed, 60, "writes resume")
        assert time.monotonic() - killed_at < 60
        assert _postmaster(tmp_path).pid != killed.pid
        # And liveness stayed 200 (the service healed itself: nothing to restart)
        assert _health(base) == 200
        # And what was written before is still there, and the new writes are read back
        # once published (the drains publish after the write answers: until then a
        # listing shows a write as pending, without content)
        listed: list[dict[str, object]] = []

        def published() -> bool:
            page = httpx2.get(f"{base}/v1/memories", headers=headers, timeout=10).json()
            listed[:] = page["items"]
            return all(item["status"] == "current" for item in listed)

        until(published, 30, "the writes are published")
        contents = {item["content"] for item in listed}
        assert "before the crash" in contents
        assert f"after the crash {len(answers) - 1}" in contents


@pytest.mark.slow
def test_healthz_fails_when_serve_cannot_start_its_embedded_postgres_again(
    tmp_path: Path,
) -> None:
    settings = {"PALIMPSEST_EMBEDDED_RESTART_ATTEMPTS": "2"}
    with _embedded_serve(tmp_path, settings) as (base, headers):
        assert _write(base, headers, "before the crash") == 201
        # Given a server that can no longer start (a setting PostgreSQL refuses)
        auto_conf = tmp_path / "pgdata" / "postgresql.auto.conf"
        kept = auto_conf.read_text()
        auto_conf.write_text(kept + "\nshared_buffers = 'a great many'\n")
        # When it is killed
        _postmaster(tmp_path).kill()
        # Then, after its bounded attempts, liveness fails, so a probe restarts serve
        until(lambda: _health(base) == 503, 60, "/healthz answers 503")
        sick = httpx2.get(f"{base}/healthz", timeout=5)
        assert sick.headers["content-type"].startswith("application/problem+json")
        assert sick.json()["type"] == "urn:palimpsest:problem:not-alive"
        assert (tmp_path / "embedded-down").exists()
        # And once the cause is removed, it heals by itself (it keeps trying)
        auto_conf.write_text(kept)
        until(lambda: _health(base) == 200, 90, "/healthz answers 200 again")
        until(lambda: _write(base, headers, "after the repair", 5.0) == 201, 30, "writes resume")
        assert not (tmp_path / "embedded-down").exists()


@contextmanager
def _hung(data_dir: Path) -> Iterator[None]:
    """Stop (SIGSTOP) the embedded PostgreSQL, its postmaster and every backend: every
    statement in flight, and every new one, waits unanswered; SIGCONT afterwards."""
    postmaster = _postmaster(data_dir)
    processes = [postmaster, *postmaster.children(recursive=True)]
    for process in processes:
        process.send_signal(signal.SIGSTOP)
    try:
        yield
    finally:
        for process in processes:
            with suppress(psutil.Error):
                process.send_signal(signal.SIGCONT)


def _probe_ms(prober: httpx2.Client) -> float:
    """Time one ``/healthz`` through ``prober`` (a connection of its own, kept alive, as
    a probe's is); fail unless it answers 200."""
    started = time.perf_counter()
    answered = prober.get("/healthz")
    elapsed_ms = (time.perf_counter() - started) * 1000
    assert answered.status_code == 200
    return elapsed_ms


@pytest.mark.slow
def test_healthz_answers_at_once_while_the_database_hangs(tmp_path: Path) -> None:
    with (
        _embedded_serve(tmp_path) as (base, headers),
        httpx2.Client(base_url=base, headers=headers, timeout=60) as lone,
        # Made now, connected at its first probe: the lone client stays alone till then.
        httpx2.Client(base_url=base, timeout=5) as prober,
    ):
        # Given one client, the process's only connection, that has written before
        assert lone.post(
            "/v1/memories", json={"type": "note", "scope": "user", "content": "warm"}
        ).is_success
        stuck: list[int] = []
        with _hung(tmp_path):
            # When the database stops answering while that client writes, and then
            # 60 more writes hold every worker thread
            def write(client: httpx2.Client | None, content: str) -> None:
                body = {"type": "note", "scope": "user", "content": content}
                if client is not None:
                    stuck.append(client.post("/v1/memories", json=body).status_code)
                else:
                    stuck.append(_write(base, headers, content, 60.0))

            writers = [threading.Thread(target=write, args=(lone, "alone"), daemon=True)]
            writers[0].start()
            # the lone write reaches the server (the load the probes meet)
            time.sleep(0.5)
            probes = [_probe_ms(prober) for _ in range(5)]
            more = [
                threading.Thread(target=write, args=(None, f"crowd {i}"), daemon=True)
                for i in range(60)
            ]
            for thread in more:
                thread.start()
            writers += more
            # the crowd piles up in the server (the load the probes meet)
            time.sleep(1.0)
            probes += [_probe_ms(prober) for _ in range(5)]
            # Then liveness answers at once all along (a probe of its own thread
            # or of the loop would wait as long as the database)
            assert not stuck  # the writes were waiting, as the database was
            assert statistics.median(probes) < 100, probes
            assert max(probes) < 500, probes
        # And once it answers again, so do the writes
        for thread in writers:
            thread.join(60)
        assert len(stuck) == 61
        assert stuck.count(201) >= 1, stuck
