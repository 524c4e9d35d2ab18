# The Python SDK (crates/ratchet-py), sourced by scripts/test: a virtualenv in target/py with
# maturin, pytest and orjson (installed from PyPI the first time, reused after: offline from
# then on), the abi3 wheel built by maturin and installed into it, and its pytest suite run
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
    echo "== python: building the wheel (maturin build) and installing it"
    rm -rf target/wheels/ratchet_workflows-*
    (cd crates/ratchet-py && VIRTUAL_ENV=$PY_VENV PATH=$PY_VENV/bin:$PATH \
        maturin build --quiet --out ../../target/wheels) || return 1
    # The wheel itself, as a user gets it (not the source tree): its files, stubs and tag.
    "$PY_VENV/bin/pip" install -q --disable-pip-version-check --force-reinstall --no-deps \
        target/wheels/ratchet_workflows-*.whl || return 1
    echo "== python: pytest"
    # The HTTP client's tests run `ratchet server` from the build `cargo test` just made.
    RATCHET_BIN=$PWD/target/debug/ratchet "$PY_VENV/bin/pytest" -q crates/ratchet-py/tests
}
