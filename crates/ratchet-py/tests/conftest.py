"""Every test runs on a fresh SQLite file and on a fresh schema of a real PostgreSQL
(DATABASE_URL, as scripts/test provisions it; skipped without it unless
RATCHET_REQUIRE_POSTGRES=1, which makes a missing server a failure)."""

import os
import uuid

import pytest


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
