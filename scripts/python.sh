# The Python SDK (crates/ratchet-py), sourced by scripts/test: a virtualenv in target/py with
# maturin, pytest and orjson (installed from PyPI the first time, reused after: offline from
# then on), the extension built into it with `maturin develop`, and its pytest suite run
# against SQLite and the PostgreSQL that pg_provision exported (and, for the HTTP client,
# against `ratchet server` from target/debug).

python_venv() {
    local venv=target/py
    if [[ ! -x $venv/bin/maturin || ! -x $venv/bin/pytest ]]; then
        echo "== python: creating $venv (maturin, pytest, orjson from PyPI)"
        python3 -m venv "$venv" || {
            echo "python3 -m venv failed: install Python 3.9 or later with venv" >&2
            return 1
        }
        "$venv/bin/pip" install -q --disable-pip-version-check maturin pytest orjson || return 1
    fi
    PY_VENV=$PWD/$venv
}

python_test() {
    python_venv || return 1
    echo "== python: building the extension (maturin develop)"
    (cd crates/ratchet-py && VIRTUAL_ENV=$PY_VENV PATH=$PY_VENV/bin:$PATH \
        maturin develop --quiet) || return 1
    echo "== python: pytest"
    # The HTTP client's tests run `ratchet server` from the build `cargo test` just made.
    RATCHET_BIN=$PWD/target/debug/ratchet "$PY_VENV/bin/pytest" -q crates/ratchet-py/tests
}
