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
# mode in front of that cluster.

PG_TMPDIR=""  # our throwaway cluster's directory (data, socket, logs); empty if none
PG_BIN=""     # directory holding the server binaries of that cluster
PG_RUN=()     # prefix that runs a command as the cluster's owner
PG_SHARED=""  # non-empty when the server is someone else's (steps 1-2)
PG_PORT=""    # TCP port of our throwaway cluster

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

pg_start_cluster() {
    PG_BIN=$1
    local port opts ctl arg restart initdb_opts=(--auth=trust --username=postgres --encoding=UTF8 --no-locale)
    if [[ $EUID -eq 0 ]]; then
        # PostgreSQL refuses to run as root.
        id -u postgres >/dev/null 2>&1 ||
            useradd --system --home-dir /var/lib/postgresql --shell /bin/bash postgres
        PG_RUN=(runuser -u postgres --)
        PG_TMPDIR=$(mktemp -d /tmp/ratchet-pg.XXXXXX)  # /tmp: the postgres user must reach it
        chown postgres: "$PG_TMPDIR"
    else
        PG_TMPDIR=$(mktemp -d "${TMPDIR:-/tmp}/ratchet-pg.XXXXXX")
    fi
    [[ $("$PG_BIN/initdb" --help) == *--no-instructions* ]] && initdb_opts+=(--no-instructions)
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
}

# Undoes pg_provision; best effort, never fails (call it as `pg_teardown || true`).
pg_teardown() {
    local psql drops
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
