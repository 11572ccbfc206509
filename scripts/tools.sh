#!/usr/bin/env bash
# Installs what building and testing Idem needs, and nothing that is already
# there: every step checks first, so a second run takes a second.
#
#   scripts/tools.sh run      what `make run` needs (the Rust WASM target; mold, a faster linker)
#   scripts/tools.sh release  also wasm-opt (Debian's binaryen), for `make release`
#   scripts/tools.sh bench    also what `make bench` needs (wrk, brotli)
#   scripts/tools.sh test     also clippy/rustfmt, Node packages for Playwright, Debian's Chromium
#
# No build tool is compiled from source: the site is built by the
# workspace's own `cargo xtask site` (xtask/), which generates the WASM's
# bindings with the wasm-bindgen library at Cargo.lock's version.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
what=${1:-test}
export PATH="$HOME/.cargo/bin:$PATH"

say() { printf '\033[1m==> %s\033[0m\n' "$*"; }
as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else "$@"; fi; }

apt_install() {
  local missing=()
  # Installed, not merely known: a removed package keeps a "config-files"
  # status that `dpkg -s` still answers for.
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  say "installing Debian packages: ${missing[*]}"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
}

# --- Rust ---------------------------------------------------------------
if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
  say "adding the wasm32-unknown-unknown target"
  rustup target add wasm32-unknown-unknown
fi

# mold links the test binaries and the server several times faster than
# ld; scripts/link-gcc uses it when it is there and ld otherwise.
apt_install mold

[ "$what" = run ] && exit 0

# wasm-opt shrinks the release WASM (`make release`, `make bench`; the
# release check in `make test` builds debug and needs none).
case "$what" in
  release) apt_install binaryen; exit 0 ;;
  # The HTTP load generator, and a brotli to measure the WASM with.
  bench) apt_install binaryen wrk brotli postgresql-client util-linux; exit 0 ;;
esac

for component in clippy rustfmt; do
  if ! rustup component list --installed | grep -q "^$component"; then
    say "adding the $component component"
    rustup component add "$component"
  fi
done

# --- browser tests -------------------------------------------------------
command -v npm >/dev/null || apt_install nodejs npm
[ -x /usr/bin/chromium ] || apt_install chromium
# The browser tests write rows as a consumer would (sqlite3 on the demo database).
command -v sqlite3 >/dev/null || apt_install sqlite3
command -v psql >/dev/null || apt_install postgresql-client
# scripts/check-release.sh unpacks the brotli copies of the embedded assets.
command -v brotli >/dev/null || apt_install brotli

# promtool checks the generated alerting rules. It comes from Debian's
# `prometheus` package, unpacked into .tools/ rather than installed, so no
# Prometheus service starts on this machine.
promtool="$here/.tools/bin/promtool"
if [ ! -x "$promtool" ]; then
  say "unpacking promtool from Debian's prometheus package"
  scratch=$(mktemp -d)
  trap 'rm -rf "$scratch"' EXIT
  (cd "$scratch" && apt-get download prometheus >/dev/null 2>&1 || {
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    apt-get download prometheus
  })
  dpkg-deb -x "$scratch"/prometheus_*.deb "$scratch/root"
  mkdir -p "$(dirname "$promtool")"
  cp "$scratch/root/usr/bin/promtool" "$promtool"
fi

# Schemathesis, for the API's schema-driven fuzz run (scripts/api-fuzz.sh),
# from PyPI into a virtual environment of its own in .tools/.
schemathesis="$here/.tools/schemathesis"
if [ ! -x "$schemathesis/bin/st" ]; then
  say "installing Schemathesis (PyPI) into .tools/schemathesis"
  command -v python3 >/dev/null || apt_install python3
  python3 -c 'import venv, ensurepip' 2>/dev/null || apt_install python3-venv
  rm -rf "$schemathesis"
  python3 -m venv "$schemathesis"
  "$schemathesis/bin/pip" install --quiet --disable-pip-version-check "schemathesis==4.32.5"
fi
command -v curl >/dev/null || apt_install curl

lock="$here/end2end/package-lock.json"
stamp="$here/end2end/node_modules/.package-lock.json"
if [ ! -f "$stamp" ] || [ "$lock" -nt "$stamp" ]; then
  say "installing the Playwright test runner (no browser download: Debian's Chromium is used)"
  (cd "$here/end2end" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund)
fi

# --- RabbitMQ --------------------------------------------------------------
# The broker tests (server/tests/it/brokers.rs, end2end's rabbitmq spec)
# talk to a real RabbitMQ on 127.0.0.1:5672 with guest/guest (or
# IDEM_TEST_AMQP_URL). One installed but stopped is started; none at all is
# said plainly, with how to get one.
amqp_port_open() { (exec 3<>/dev/tcp/127.0.0.1/5672) 2>/dev/null; }
if [ -z "${IDEM_TEST_AMQP_URL:-}" ] && ! amqp_port_open; then
  if command -v rabbitmq-server >/dev/null; then
    say "starting RabbitMQ (installed, not running)"
    as_root service rabbitmq-server start || true
    for _ in $(seq 30); do amqp_port_open && break; sleep 1; done
  fi
  if ! amqp_port_open; then
    echo "The tests need RabbitMQ on 127.0.0.1:5672 (guest/guest) and none answers." >&2
    echo "Start one:  sudo apt-get install rabbitmq-server && sudo service rabbitmq-server start" >&2
    echo "(or point IDEM_TEST_AMQP_URL at one: amqp://user:password@host:5672/%2f)" >&2
    exit 1
  fi
fi
