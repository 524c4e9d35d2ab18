# shellcheck shell=bash
# Citus for the tests, sourced by scripts/test: the extension built once per machine from
# ../shared/citus (its build.sh does nothing when Citus is installed), and for the run a
# cluster of a coordinator (127.0.0.1:5440) and two workers (5441, 5442) in a directory of its
# own, removed afterwards.
#
#   citus_provision   build if needed, start the cluster, export CITUS_URL
#   citus_teardown    stop the cluster and remove its files
#
# Where ../shared/citus is missing (a machine outside CI), the Citus tests are skipped, saying
# so, unless RATCHET_REQUIRE_CITUS=1.

CITUS_SRC=${RATCHET_CITUS_SRC:-$PWD/../shared/citus}
CITUS_DIR=""

citus_say() { echo "== citus: $*" >&2; }

# Builds (once per machine) and starts the cluster; returns 1 when Citus is not available
# here (the tests skip it), 2 when it failed.
citus_provision() {
    if [[ ! -x $CITUS_SRC/build.sh || ! -x $CITUS_SRC/cluster.sh ]]; then
        if [[ ${RATCHET_REQUIRE_CITUS:-0} == 1 ]]; then
            citus_say "no Citus source at $CITUS_SRC (set RATCHET_CITUS_SRC)"
            return 2
        fi
        citus_say "no Citus source at $CITUS_SRC: the Citus tests are skipped"
        return 1
    fi
    "$CITUS_SRC/build.sh" >&2 || { citus_say "build.sh failed"; return 2; }
    CITUS_DIR=$(mktemp -d /tmp/ratchet-citus.XXXXXX)
    chmod 755 "$CITUS_DIR"
    CITUS_DIR=$CITUS_DIR "$CITUS_SRC/cluster.sh" start >&2 ||
        { citus_say "the cluster did not start (files in $CITUS_DIR)"; return 2; }
    export CITUS_URL=postgres://postgres@127.0.0.1:5440/postgres
    # Four shards per distributed table rather than Citus's 32: three nodes share this
    # machine's cores, and a statement over every shard costs a task per shard (a test of
    # 3,000 orchestrations took 303 s with 32, 95 s with 4). Still more shards than workers,
    # so instances and their parents land on different nodes in the tests.
    psql "$CITUS_URL" -qc "ALTER DATABASE postgres SET citus.shard_count = 4" >/dev/null ||
        { citus_say "could not set the shard count"; return 2; }
}

citus_teardown() {
    [[ -n $CITUS_DIR ]] || return 0
    CITUS_DIR=$CITUS_DIR "$CITUS_SRC/cluster.sh" reset >/dev/null 2>&1 || true
    CITUS_DIR=""
}
