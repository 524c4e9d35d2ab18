# Chromium and ChromeDriver for the web console's browser tests (sourced by scripts/test):
# found on the PATH, or installed from Debian's packages `chromium` and `chromium-driver` with
# apt-get when running as root. Exports where they are, and asks the tests to require them.

browser_provision() {
    local chromium chromedriver
    chromium=$(command -v chromium || command -v chromium-browser || true)
    chromedriver=$(command -v chromedriver || true)
    if [[ -z $chromium || -z $chromedriver ]]; then
        if [[ $EUID -ne 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
            echo "the console's browser tests need chromium and chromedriver:" \
                "install Debian's chromium and chromium-driver (or run this as root)" >&2
            return 1
        fi
        echo "== installing chromium and chromium-driver with apt-get"
        local install=(env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium chromium-driver)
        "${install[@]}" >/dev/null 2>&1 || { apt-get update -q >/dev/null && "${install[@]}" >/dev/null; } || {
            echo "apt-get install chromium chromium-driver failed" >&2
            return 1
        }
        chromium=$(command -v chromium)
        chromedriver=$(command -v chromedriver)
    fi
    export RATCHET_TEST_CHROMIUM=$chromium
    export RATCHET_TEST_CHROMEDRIVER=$chromedriver
    export RATCHET_REQUIRE_BROWSER=1
}
