# The TypeScript SDK (sdk/typescript), sourced by scripts/test: its packages from the npm
# registry as package-lock.json pins them (`npm ci`), its types generated from
# docs/openapi.json, and its tests (Node's test runner) against `ratchet server` from
# target/debug, on SQLite and the PostgreSQL that pg_provision exported.

typescript_test() {
    if ! command -v npm >/dev/null 2>&1; then
        echo "npm not found: install Node.js 20 or later" >&2
        return 1
    fi
    echo "== typescript: npm ci, build, test"
    (cd sdk/typescript &&
        npm ci --no-audit --no-fund --loglevel=error &&
        npm run --silent build &&
        RATCHET_BIN=$PWD/../../target/debug/ratchet npm test --silent)
}
