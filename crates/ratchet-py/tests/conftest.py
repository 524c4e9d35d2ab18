"""Every test runs on a fresh SQLite file and on a fresh schema of a real PostgreSQL
(DATABASE_URL, as scripts/test provisions it; skipped without it unless
RATCHET_REQUIRE_POSTGRES=1, which makes a missing server a failure)."""

import os
import pathlib
import subprocess
import uuid

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]


def pytest_generate_tests(metafunc):
    if "url" in metafunc.fixturenames:
        metafunc.parametrize("backend", ["sqlite", "postgres"], indirect=True)


@pytest.fixture
def backend(request):
    return request.param


@pytest.fixture
def url(backend, tmp_path):
    if backend == "sqlite":
        return str(tmp_path / "ratchet.db")
    database = os.environ.get("DATABASE_URL")
    if not database:
        if os.environ.get("RATCHET_REQUIRE_POSTGRES") == "1":
            pytest.fail("RATCHET_REQUIRE_POSTGRES=1 but DATABASE_URL is not set")
        pytest.skip("no DATABASE_URL: the PostgreSQL half is skipped")
    return database


@pytest.fixture
def schema(backend):
    """A fresh schema on PostgreSQL; None (unused) on SQLite."""
    return f"py_{uuid.uuid4().hex[:12]}" if backend == "postgres" else None


def serve(url, schema, *extra):
    """Runs `ratchet server` on the store (RATCHET_BIN, or the workspace's debug build) and
    yields its address; skipped when no binary was built."""
    binary = pathlib.Path(os.environ.get("RATCHET_BIN") or ROOT / "target/debug/ratchet")
    if not binary.exists():
        if os.environ.get("RATCHET_BIN"):
            pytest.fail(f"RATCHET_BIN={binary} does not exist")
        pytest.skip("no ratchet binary: build it with cargo build -p ratchet-cli")
    store = (["--database-url", url, "--schema", schema] if schema else ["--db", url])
    subprocess.run([str(binary), *store, "migrate"], check=True, capture_output=True)
    process = subprocess.Popen([str(binary), *store, "server", "--listen", "127.0.0.1:0",
                                "--poll-ms", "200", *extra], stdout=subprocess.PIPE, text=True)
    try:
        base = None
        for line in process.stdout:
            base = next((w for w in line.split() if w.startswith("http://")), None)
            if base:
                break
        assert base, "the server said where it serves"
        yield base
    finally:
        process.terminate()
        process.wait(20)


@pytest.fixture(params=["in-process", "http"])
def worker_url(request, url, schema):
    """Where a worker connects: the database itself, or a `ratchet server` on it that runs
    nothing (`--no-worker`), so the same scenarios test both kinds of worker."""
    if request.param == "in-process":
        yield url
    else:
        yield from serve(url, schema, "--no-worker")
