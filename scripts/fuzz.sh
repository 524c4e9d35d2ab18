# Fuzzing (fuzz/, cargo fuzz on libFuzzer), sourced by scripts/test: each target runs for a
# bounded time from its seeds (fuzz/seeds/TARGET) and the inputs that once broke it
# (fuzz/regressions/TARGET, also replayed by `cargo test`), and fails on any crash, hang
# (over 10 s for one input) or blow-up of memory (over 2 GiB). cargo fuzz needs a nightly
# toolchain. cargo-fuzz and the instrumented build are kept once per machine, as Citus is
# (in $RATCHET_CACHE, ~/.cache/ratchet by default): a clean clone builds only what changed.
#   fuzz_run SECONDS [TARGET...]   # every target when none is named

FUZZ_TARGETS=(workflow_compile expression request_bodies)
FUZZ_CARGO_FUZZ_VERSION=0.13.2
FUZZ_CACHE=${RATCHET_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ratchet}
FUZZ_TOOLS=$FUZZ_CACHE/cargo-fuzz-$FUZZ_CARGO_FUZZ_VERSION
FUZZ_BUILD=$FUZZ_CACHE/fuzz-target

fuzz_say() { echo "== fuzz: $*"; }

fuzz_tools() {
    if ! rustup run nightly rustc --version >/dev/null 2>&1; then
        fuzz_say "no nightly toolchain; installing it with rustup (cargo fuzz needs one)"
        rustup toolchain install nightly --profile minimal >/dev/null || return 1
    fi
    if [[ ! -x $FUZZ_TOOLS/bin/cargo-fuzz ]]; then
        fuzz_say "installing cargo-fuzz $FUZZ_CARGO_FUZZ_VERSION into $FUZZ_TOOLS"
        cargo install -q --locked --root "$FUZZ_TOOLS" cargo-fuzz --version "$FUZZ_CARGO_FUZZ_VERSION" ||
            return 1
    fi
}

fuzz_run() {
    local seconds=$1 target dir status=0
    shift
    (($#)) || set -- "${FUZZ_TARGETS[@]}"
    fuzz_tools || { echo "== fuzz: error: could not install the fuzzing tools" >&2; return 1; }
    # Every target at once (they share their dependencies' build).
    fuzz_say "building the targets (nightly, instrumented)"
    (cd fuzz && PATH=$FUZZ_TOOLS/bin:$PATH cargo +nightly fuzz build -s none \
        --target-dir "$FUZZ_BUILD") || return 1
    for target; do
        dir=target/fuzz/$target
        rm -rf "$dir"
        mkdir -p "$dir/corpus" "$dir/artifacts"
        fuzz_say "$target for ${seconds}s"
        # The corpus starts from the seeds and the regressions; libFuzzer runs every input of
        # them first, so a regression fails at once.
        if ! "$FUZZ_BUILD/x86_64-unknown-linux-gnu/release/$target" "$dir/corpus" \
            "fuzz/seeds/$target" "fuzz/regressions/$target" \
            -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
            -artifact_prefix="$dir/artifacts/" >"$dir/log" 2>&1; then
            status=1
            echo "== fuzz: error: $target found an input that breaks it; the end of its log:" >&2
            tail -n 40 "$dir/log" >&2
            echo "== fuzz: keep the input as a regression case: cp $dir/artifacts/* fuzz/regressions/$target/" >&2
        fi
        grep -E '^(stat::number_of_executed_units|stat::average_exec_per_sec|stat::peak_rss_mb)|DONE' \
            "$dir/log" | tail -n 4 | sed "s/^/== fuzz: $target: /"
    done
    return "$status"
}
