# shellcheck shell=bash
# PostgreSQL for the tests; sourced by scripts/test, which calls pg_provision before
# `cargo test` and pg_teardown on exit. Where the server comes from, in order:
#   1. $DATABASE_URL, used as is;
#   2. a server on 127.0.0.1:5432 that lets user postgres in without a password;
#   3. a throwaway cluster started from the installed server binaries;
#   4. as 3, after installing the binaries with apt-get (root only).
# pg_provision exports DATABASE_URL, RATCHET_REQUIRE_POSTGRES=1 and, only for our own
# cluster, RATCHET_TEST_PG_RESTART (a sh command line restarting it), RATCHET_TEST_PG_TLS_CA
# and RATCHET_TEST_PG_TLS_OTHER_CA (the CA that signed the cluster's certificate, and one
# that did not: the cluster accepts TLS when openssl is installed) and, when pgbouncer is
# installed (or installable), RATCHET_TEST_PGBOUNCER_URL: a PgBouncer in transaction pooling
# mode in front of that cluster. Wherever server binaries and openssl are installed, it also
# starts two small clusters of its own for the tests of every sslmode (pg_start_tls_clusters):
# RATCHET_TEST_PG_TLS_V1_URL, a server with a self-signed X.509 v1 certificate (as Citus makes
# for itself; the file is RATCHET_TEST_PG_TLS_V1_CERT), where role ratchet_tls_only is refused
# without TLS and ratchet_plain_only with it, and RATCHET_TEST_PG_NO_TLS_URL, a server without
# TLS.

PG_TMPDIR=""  # our throwaway cluster's directory (data, socket, logs); empty if none
PG_BIN=""     # directory holding the server binaries of that cluster
PG_RUN=()     # prefix that runs a command as the cluster's owner
PG_SHARED=""  # non-empty when the server is someone else's (steps 1-2)
PG_PORT=""    # TCP port of our throwaway cluster
PG_TLS_DIR="" # directory of the small clusters for the sslmode tests; empty if none
PG_TLS_BIN="" # directory holding the server binaries of those

pg_say() { echo "== postgres: $*"; }
pg_fail() { echo "== postgres: error: $*" >&2; exit 1; }

# The connection string with any password masked, for messages: in a URL's user info, as a
# URL's ?password=, or as a key-value password= (quoted or not).
pg_redact() {
    sed -E -e 's#(://[^:/@]*):[^@/]*@#\1:***@#' -e 's#([?&]password=)[^&]*#\1***#g' \
        -e "s#(password *= *)('([^'\\\\]|\\\\.)*'|[^ ]*)#\\1***#g" <<<"$1"
}

# Quotes one word for POSIX sh: RATCHET_TEST_PG_RESTART runs through `sh -c`.
pg_shquote() {
    if [[ $1 =~ ^[A-Za-z0-9_./:=@%+,-]+$ ]]; then
        printf '%s' "$1"
    else
        printf "'%s'" "${1//"'"/"'\\''"}"
    fi
}

# Path of a client tool (psql, pg_isready): PATH first, else the newest server package.
pg_tool() {
    local dir
    command -v "$1" 2>/dev/null && return 0
    for dir in $(printf '%s\n' /usr/lib/postgresql/*/bin | sort -rV); do
        if [[ -x $dir/$1 ]]; then echo "$dir/$1"; return 0; fi
    done
    return 1
}

# Succeeds when the URL accepts connections; errors go to stderr.
pg_answers() {
    local tool
    if tool=$(pg_tool psql); then
        PGCONNECT_TIMEOUT=5 "$tool" -X -w -q -At -d "$1" -c 'select 1' >/dev/null
    elif tool=$(pg_tool pg_isready); then
        "$tool" -q -t 5 -d "$1"
    else
        echo "neither psql nor pg_isready is installed" >&2
        return 1
    fi
}

# Directory with initdb, pg_ctl and postgres of the highest major version installed.
pg_find_bindir() {
    local dir ctl best dirs=(/usr/lib/postgresql/*/bin)
    if ctl=$(command -v pg_ctl 2>/dev/null); then dirs+=("$(dirname "$(readlink -f "$ctl")")"); fi
    best=$(for dir in "${dirs[@]}"; do
        [[ -x $dir/initdb && -x $dir/pg_ctl && -x $dir/postgres ]] || continue
        echo "$("$dir/pg_ctl" --version | awk '{print $3}' | cut -d. -f1) $dir"
    done | sort -n | tail -n 1 | cut -d' ' -f2-)
    [[ -n $best ]] && echo "$best"
}

pg_install_server() {
    if [[ $EUID -ne 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
        pg_fail "no PostgreSQL found. Set DATABASE_URL (e.g. postgres://USER:PASSWORD@HOST:PORT/DB)" \
            "to a server the tests may use, or install the PostgreSQL server binaries" \
            "(initdb, pg_ctl, postgres) and run this script again"
    fi
    pg_say "no PostgreSQL server binaries found; installing package postgresql with apt-get"
    local install=(env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends postgresql)
    # Stale or missing package lists make the first attempt fail: refresh them and retry.
    "${install[@]}" >/dev/null 2>&1 || { apt-get update -q && "${install[@]}"; } ||
        pg_fail "apt-get install postgresql failed"
}

# The first free port on 127.0.0.1 (a refused connection means free) of the arguments, by
# default 5432, 55432..55531.
pg_free_port() {
    local port
    (($#)) || set -- 5432 $(seq 55432 55531)
    for port; do
        if ! timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$port" 2>/dev/null; then
            echo "$port"
            return 0
        fi
    done
    return 1
}

# Makes a CA, a server certificate it signs (for 127.0.0.1 and localhost) and a second CA
# in directory $1, for the cluster's TLS; prints the server options, nothing without openssl.
pg_make_certs() {
    local dir=$1
    command -v openssl >/dev/null 2>&1 || return 0
    mkdir -p "$dir"
    (
        cd "$dir" &&
            openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=ratchet test CA" \
                -keyout ca.key -out ca.crt &&
            openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=another CA" \
                -keyout other-ca.key -out other-ca.crt &&
            openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" \
                -keyout server.key -out server.csr &&
            printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >server.ext &&
            openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 \
                -extfile server.ext -out server.crt &&
            chmod 600 server.key
    ) >"$dir/openssl.log" 2>&1 || { pg_say "could not make TLS certificates (see $dir/openssl.log)" >&2; return 0; }
    [[ $EUID -ne 0 ]] || chown -R postgres: "$dir"
    echo "-c ssl=on -c ssl_cert_file=$dir/server.crt -c ssl_key_file=$dir/server.key"
}

# Sets PG_RUN, the prefix that runs a command as the owner of our clusters: user postgres
# (made if missing) when we are root, for PostgreSQL refuses to run as root; else ourselves.
pg_owner() {
    if [[ $EUID -eq 0 ]]; then
        id -u postgres >/dev/null 2>&1 ||
            useradd --system --home-dir /var/lib/postgresql --shell /bin/bash postgres
        PG_RUN=(runuser -u postgres --)
    else
        PG_RUN=()
    fi
}

# A new directory named after $1 that the clusters' owner can reach (under /tmp when root).
pg_owned_tmpdir() {
    local dir
    if [[ $EUID -eq 0 ]]; then
        dir=$(mktemp -d "/tmp/$1.XXXXXX") && chown postgres: "$dir" && echo "$dir"
    else
        mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX"
    fi
}

# initdb's options for a throwaway cluster of the binaries in $1 (one per line).
pg_initdb_opts() {
    printf '%s\n' --auth=trust --username=postgres --encoding=UTF8 --no-locale
    [[ $("$1/initdb" --help) != *--no-instructions* ]] || echo --no-instructions
}

pg_start_cluster() {
    PG_BIN=$1
    local port opts ctl arg restart initdb_opts
    mapfile -t initdb_opts < <(pg_initdb_opts "$PG_BIN")
    pg_owner
    PG_TMPDIR=$(pg_owned_tmpdir ratchet-pg) || pg_fail "could not make a directory for PostgreSQL"
    # Run from PG_TMPDIR: the postgres user may not be allowed into the current directory.
    if ! (cd "$PG_TMPDIR" && "${PG_RUN[@]}" "$PG_BIN/initdb" -D "$PG_TMPDIR/data" "${initdb_opts[@]}") \
        >"$PG_TMPDIR/initdb.log" 2>&1; then
        tail -n 30 "$PG_TMPDIR/initdb.log" >&2
        pg_fail "initdb failed (output above)"
    fi
    port=$(pg_free_port) || pg_fail "no free TCP port on 127.0.0.1 for PostgreSQL"
    PG_PORT=$port
    # Durability is useless for a throwaway cluster; the tests open many connections.
    opts="-p $port -k $PG_TMPDIR -c listen_addresses=127.0.0.1 -c max_connections=300"
    opts+=" -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c shared_buffers=256MB"
    # The planner tests count the blocks each statement reads, nested ones included.
    opts+=" -c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.track=all"
    local tls
    tls=$(pg_make_certs "$PG_TMPDIR/tls")
    if [[ -n $tls ]]; then
        opts+=" $tls"
        export RATCHET_TEST_PG_TLS_CA=$PG_TMPDIR/tls/ca.crt
        export RATCHET_TEST_PG_TLS_OTHER_CA=$PG_TMPDIR/tls/other-ca.crt
    else
        pg_say "openssl not found; the TLS tests will be skipped"
    fi
    ctl=("${PG_RUN[@]}" "$PG_BIN/pg_ctl" -D "$PG_TMPDIR/data" -l "$PG_TMPDIR/server.log" -w -t 60 -o "$opts")
    if ! (cd "$PG_TMPDIR" && "${ctl[@]}" start >/dev/null); then
        echo "== postgres: error: the server did not start; last 30 lines of $PG_TMPDIR/server.log:" >&2
        tail -n 30 "$PG_TMPDIR/server.log" >&2 || true
        exit 1
    fi
    export DATABASE_URL="postgres://postgres@127.0.0.1:$port/postgres"
    restart="cd $(pg_shquote "$PG_TMPDIR") &&"
    for arg in "${ctl[@]}" restart -m fast; do restart+=" $(pg_shquote "$arg")"; done
    export RATCHET_TEST_PG_RESTART=$restart
    pg_say "started a throwaway PostgreSQL $("$PG_BIN/pg_ctl" --version | awk '{print $3}')" \
        "cluster at $DATABASE_URL (files in $PG_TMPDIR)"
}

# Makes in directory $1 a self-signed X.509 v1 certificate for localhost and its key
# (v1.crt, v1.key): `openssl x509 -req` without extensions makes v1, as Citus does for itself.
pg_make_v1_cert() {
    (
        cd "$1" &&
            openssl req -new -newkey rsa:2048 -nodes -subj "/CN=localhost" \
                -keyout v1.key -out v1.csr &&
            openssl x509 -req -in v1.csr -signkey v1.key -days 2 -out v1.crt &&
            openssl x509 -in v1.crt -noout -text | grep -q 'Version: 1 ' &&
            chmod 600 v1.key
    ) >"$1/openssl.log" 2>&1
}

# Starts a small cluster of the binaries in $1 from the data directory $2 (made by initdb)
# with the extra server options $3, on a free port; prints the port. Never fails the run.
pg_start_small_cluster() {
    local bin=$1 data=$2 port
    port=$(pg_free_port $(seq 57432 57531)) || return 1
    (cd "$(dirname "$data")" && "${PG_RUN[@]}" "$bin/pg_ctl" -D "$data" -l "$data.log" -w -t 60 \
        -o "-p $port -k $(dirname "$data") -c listen_addresses=127.0.0.1 -c max_connections=40 -c shared_buffers=16MB -c fsync=off -c synchronous_commit=off $3" \
        start) >/dev/null ||
        return 1
    echo "$port"
}

# Starts two small clusters of the binaries in $1 for the tests of every sslmode, and exports
# RATCHET_TEST_PG_TLS_V1_URL (TLS with the self-signed X.509 v1 certificate
# RATCHET_TEST_PG_TLS_V1_CERT; role ratchet_tls_only is refused without TLS,
# ratchet_plain_only with it) and
# RATCHET_TEST_PG_NO_TLS_URL (no TLS). An extra: never fails, it only says why the tests will
# be skipped.
pg_start_tls_clusters() {
    local bin=$1 dir initdb_opts psql v1_port plain_port
    unset RATCHET_TEST_PG_TLS_V1_URL RATCHET_TEST_PG_TLS_V1_CERT RATCHET_TEST_PG_NO_TLS_URL
    if ! command -v openssl >/dev/null 2>&1; then
        pg_say "openssl not found; the sslmode tests will be skipped"
        return 0
    fi
    mapfile -t initdb_opts < <(pg_initdb_opts "$bin")
    pg_owner
    dir=$(pg_owned_tmpdir ratchet-pg-tls) || { pg_say "no directory for the sslmode clusters" >&2; return 0; }
    PG_TLS_DIR=$dir PG_TLS_BIN=$bin
    # One initdb, copied: the second costs a copy, not another initdb.
    if ! (cd "$dir" && "${PG_RUN[@]}" "$bin/initdb" -D "$dir/v1" "${initdb_opts[@]}") >"$dir/initdb.log" 2>&1 ||
        ! "${PG_RUN[@]}" cp -a "$dir/v1" "$dir/plain" || ! mkdir "$dir/tls" || ! pg_make_v1_cert "$dir/tls"; then
        pg_say "could not prepare the sslmode clusters (see $dir); the sslmode tests will be skipped" >&2
        return 0
    fi
    [[ $EUID -ne 0 ]] || chown -R postgres: "$dir/tls"
    # pg_hba.conf takes the first line that matches: these go before initdb's trust lines
    # (written in place, so the file keeps its owner).
    local hba
    hba=$(cat "$dir/v1/pg_hba.conf")
    printf '%s\n' 'hostnossl all ratchet_tls_only all reject' 'hostssl all ratchet_plain_only all reject' \
        "$hba" >"$dir/v1/pg_hba.conf"
    if ! v1_port=$(pg_start_small_cluster "$bin" "$dir/v1" \
        "-c ssl=on -c ssl_cert_file=$dir/tls/v1.crt -c ssl_key_file=$dir/tls/v1.key") ||
        ! plain_port=$(pg_start_small_cluster "$bin" "$dir/plain" "-c ssl=off"); then
        pg_say "an sslmode cluster did not start (logs in $dir); the sslmode tests will be skipped" >&2
        return 0
    fi
    psql=$bin/psql
    [[ -x $psql ]] || psql=$(pg_tool psql) || { pg_say "no psql; the sslmode tests will be skipped"; return 0; }
    if ! "$psql" -X -w -q -d "postgres://postgres@127.0.0.1:$v1_port/postgres?sslmode=disable" \
        -c 'CREATE ROLE ratchet_tls_only LOGIN SUPERUSER' \
        -c 'CREATE ROLE ratchet_plain_only LOGIN SUPERUSER' >/dev/null; then
        pg_say "could not create the sslmode test roles; the sslmode tests will be skipped" >&2
        return 0
    fi
    export RATCHET_TEST_PG_TLS_V1_URL="postgres://postgres@127.0.0.1:$v1_port/postgres"
    export RATCHET_TEST_PG_TLS_V1_CERT=$dir/tls/v1.crt
    export RATCHET_TEST_PG_NO_TLS_URL="postgres://postgres@127.0.0.1:$plain_port/postgres"
    pg_say "sslmode test servers: a self-signed v1 certificate at $RATCHET_TEST_PG_TLS_V1_URL," \
        "no TLS at $RATCHET_TEST_PG_NO_TLS_URL"
}

# Stops the sslmode clusters and removes their directory, if any; never fails.
pg_stop_tls_clusters() {
    local data
    [[ -n $PG_TLS_DIR ]] || return 0
    for data in "$PG_TLS_DIR/v1" "$PG_TLS_DIR/plain"; do
        [[ -f $data/postmaster.pid ]] || continue
        (cd "$PG_TLS_DIR" && "${PG_RUN[@]}" "$PG_TLS_BIN/pg_ctl" -D "$data" -w -t 30 stop -m immediate) \
            >/dev/null 2>&1
    done
    rm -rf "$PG_TLS_DIR" && pg_say "stopped the sslmode test servers and removed $PG_TLS_DIR"
    PG_TLS_DIR=""
    return 0
}

# Path of pgbouncer: PATH first, else /usr/sbin (often not on a non-root PATH).
pg_find_pgbouncer() {
    command -v pgbouncer 2>/dev/null && return 0
    [[ -x /usr/sbin/pgbouncer ]] && echo /usr/sbin/pgbouncer
}

# Installs package pgbouncer (root with apt-get only); fails quietly otherwise. Debian's
# postinst may start a system pgbouncer on port 6432: we neither use nor disturb it.
pg_install_pgbouncer() {
    [[ $EUID -eq 0 ]] && command -v apt-get >/dev/null 2>&1 || return 1
    pg_say "pgbouncer not found; installing package pgbouncer with apt-get"
    local install=(env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends pgbouncer)
    # Stale or missing package lists make the first attempt fail: refresh them and retry.
    "${install[@]}" >/dev/null 2>&1 || { apt-get update -q && "${install[@]}"; } >/dev/null
}

# Starts our own PgBouncer, transaction pooling mode, in front of our throwaway cluster and
# exports RATCHET_TEST_PGBOUNCER_URL. PgBouncer is an extra: never fails, it only says why
# the PgBouncer test will be skipped.
pg_start_pgbouncer() {
    local pgb port url deadline dir=$PG_TMPDIR
    unset RATCHET_TEST_PGBOUNCER_URL
    if ! pgb=$(pg_find_pgbouncer) && ! { pg_install_pgbouncer && pgb=$(pg_find_pgbouncer); }; then
        pg_say "PgBouncer not available; the PgBouncer test will be skipped"
        return 0
    fi
    if ! port=$(pg_free_port $(seq 56432 56531)); then
        pg_say "no free TCP port on 127.0.0.1 for PgBouncer; the PgBouncer test will be skipped"
        return 0
    fi
    printf '"postgres" ""\n' >"$dir/pgbouncer-users.txt"
    cat >"$dir/pgbouncer.ini" <<EOF
[databases]
postgres = host=127.0.0.1 port=$PG_PORT dbname=postgres user=postgres
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $port
auth_type = trust
auth_file = $dir/pgbouncer-users.txt
admin_users = postgres
pool_mode = transaction
max_client_conn = 500
default_pool_size = 20
unix_socket_dir = $dir
logfile = $dir/pgbouncer.log
pidfile = $dir/pgbouncer.pid
ignore_startup_parameters = extra_float_digits
EOF
    # PgBouncer refuses to run as root, like PostgreSQL.
    [[ $EUID -ne 0 ]] || chown postgres: "$dir/pgbouncer-users.txt" "$dir/pgbouncer.ini"
    url="postgres://postgres@127.0.0.1:$port/postgres"
    if (cd "$dir" && "${PG_RUN[@]}" "$pgb" -d "$dir/pgbouncer.ini") >"$dir/pgbouncer.out" 2>&1; then
        deadline=$((SECONDS + 10))
        while ((SECONDS < deadline)); do
            if PGPASSWORD='' PGPASSFILE=/dev/null pg_answers "$url" 2>/dev/null; then
                export RATCHET_TEST_PGBOUNCER_URL=$url
                pg_say "PgBouncer (transaction mode) at $url"
                return 0
            fi
            sleep 0.2
        done
    fi
    echo "== postgres: PgBouncer did not start; the PgBouncer test will be skipped. Its output:" >&2
    tail -n 20 "$dir/pgbouncer.out" "$dir/pgbouncer.log" >&2 2>/dev/null || true
    pg_stop_pgbouncer
    return 0
}

# Stops our PgBouncer, if running; never fails.
pg_stop_pgbouncer() {
    local pid comm _
    [[ -n $PG_TMPDIR && -f $PG_TMPDIR/pgbouncer.pid ]] || return 0
    pid=$(cat "$PG_TMPDIR/pgbouncer.pid" 2>/dev/null) && [[ $pid =~ ^[0-9]+$ ]] || return 0
    # Only that pid if it is still a pgbouncer: a stale pidfile's pid may have been reused.
    comm=$(cat "/proc/$pid/comm" 2>/dev/null || ps -o comm= -p "$pid" 2>/dev/null) || return 0
    [[ $comm == *pgbouncer* ]] || return 0
    kill -TERM "$pid" 2>/dev/null || return 0
    for _ in {1..50}; do
        kill -0 "$pid" 2>/dev/null || return 0
        sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
    return 0
}

pg_provision() {
    local local_url=postgres://postgres@127.0.0.1:5432/postgres bin
    if [[ -n ${DATABASE_URL:-} ]]; then
        pg_answers "$DATABASE_URL" || pg_fail "DATABASE_URL=$(pg_redact "$DATABASE_URL") does not" \
            "answer; fix it, or unset it to let this script find or start PostgreSQL itself"
        PG_SHARED=1
        pg_say "using DATABASE_URL from the environment: $(pg_redact "$DATABASE_URL")"
    elif PGPASSWORD='' PGPASSFILE=/dev/null pg_answers "$local_url" 2>/dev/null; then
        PG_SHARED=1
        export DATABASE_URL=$local_url
        pg_say "using the server answering without a password at $local_url"
    else
        if ! bin=$(pg_find_bindir); then
            pg_install_server
            bin=$(pg_find_bindir) || pg_fail "no initdb/pg_ctl/postgres found even after installing postgresql"
        fi
        pg_start_cluster "$bin"
    fi
    export DATABASE_URL RATCHET_REQUIRE_POSTGRES=1
    if [[ -n $PG_SHARED ]]; then
        unset RATCHET_TEST_PG_RESTART RATCHET_TEST_PGBOUNCER_URL
        [[ -n ${RATCHET_TEST_PG_TLS_CA:-} ]] ||
            pg_say "the TLS tests will be skipped: set RATCHET_TEST_PG_TLS_CA to the server's CA file to run them"
        pg_say "the PostgreSQL restart test will be skipped: this server is not ours to restart"
        pg_say "no PgBouncer test: the server is not ours"
    else
        pg_start_pgbouncer
    fi
    # Servers of our own, whoever's the main one is: the sslmode tests need one with a
    # self-signed v1 certificate and one without TLS.
    if bin=$(pg_find_bindir); then
        pg_start_tls_clusters "$bin"
    else
        pg_say "no PostgreSQL server binaries to start the sslmode test servers; those tests will be skipped"
    fi
}

# Undoes pg_provision; best effort, never fails (call it as `pg_teardown || true`).
pg_teardown() {
    local psql drops
    pg_stop_tls_clusters
    if [[ -n $PG_TMPDIR ]]; then
        pg_stop_pgbouncer
        (cd "$PG_TMPDIR" && "${PG_RUN[@]}" "$PG_BIN/pg_ctl" -D "$PG_TMPDIR/data" -w -t 30 stop -m immediate) \
            >/dev/null 2>&1
        rm -rf "$PG_TMPDIR" && pg_say "stopped the throwaway cluster and removed $PG_TMPDIR"
        PG_TMPDIR=""
    elif [[ -n $PG_SHARED ]] && psql=$(pg_tool psql); then
        # Someone else's server: leave it as we found it, minus the tests' schemas.
        PG_SHARED=""
        drops=$(PGCONNECT_TIMEOUT=10 "$psql" -X -w -q -At -d "$DATABASE_URL" -c "select format('drop schema %I cascade;', nspname)
            from pg_namespace where nspname like 'ratchet\_test\_%'") || return 0
        [[ -n $drops ]] || return 0
        # One statement per transaction, so a big cleanup cannot run out of locks; no NOTICEs.
        PGCONNECT_TIMEOUT=10 "$psql" -X -w -q -d "$DATABASE_URL" >/dev/null \
            <<<"set client_min_messages = warning; $drops" &&
            pg_say "dropped $(wc -l <<<"$drops") leftover ratchet_test_ schema(s)"
    fi
    return 0
}
