#!/usr/bin/env bash
# Installs what building and testing Idem needs, and nothing that is already
# there: every step checks first, so a second run takes a second.
#
#   scripts/tools.sh run    what `make run` needs (Rust WASM target, cargo-leptos, wasm-bindgen)
#   scripts/tools.sh bench  also what `make bench` needs (wrk, brotli)
#   scripts/tools.sh test   also clippy/rustfmt, Node packages for Playwright, Debian's Chromium
#
# Versions are pinned: cargo-leptos 0.3.10 (0.3.11 needs a newer rustc than
# 1.95), and wasm-bindgen-cli at exactly the wasm-bindgen version in
# Cargo.lock (cargo-leptos uses the one on PATH; otherwise it tries to
# download one, which fails on a machine without general internet access).
set -euo pipefail

CARGO_LEPTOS_VERSION=0.3.10
here=$(cd "$(dirname "$0")/.." && pwd)
what=${1:-test}
export PATH="$HOME/.cargo/bin:$PATH"

say() { printf '\033[1m==> %s\033[0m\n' "$*"; }
as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else "$@"; fi; }

apt_install() {
  local missing=()
  for pkg in "$@"; do dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg"); done
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

if [ "$(cargo leptos --version 2>/dev/null || true)" != "cargo-leptos $CARGO_LEPTOS_VERSION" ]; then
  say "installing cargo-leptos $CARGO_LEPTOS_VERSION (compiles for a long while, once)"
  cargo install cargo-leptos --version "$CARGO_LEPTOS_VERSION" --locked
fi

wasm_bindgen_version=$(awk '/^name = "wasm-bindgen"$/ { getline; gsub(/version = |"/, ""); print; exit }' "$here/Cargo.lock")
if [ -z "$wasm_bindgen_version" ]; then
  echo "error: no wasm-bindgen in Cargo.lock" >&2
  exit 1
fi
if [ "$(wasm-bindgen --version 2>/dev/null || true)" != "wasm-bindgen $wasm_bindgen_version" ]; then
  say "installing wasm-bindgen-cli $wasm_bindgen_version (the version in Cargo.lock)"
  cargo install wasm-bindgen-cli --version "$wasm_bindgen_version" --force
fi
installed=$(wasm-bindgen --version)
if [ "$installed" != "wasm-bindgen $wasm_bindgen_version" ]; then
  echo "error: $installed is on PATH but Cargo.lock has wasm-bindgen $wasm_bindgen_version;" >&2
  echo "       the generated JS would not match the WASM. Run: cargo install wasm-bindgen-cli --version $wasm_bindgen_version --force" >&2
  exit 1
fi

# wasm-opt shrinks the release WASM (`make release`); cargo-leptos uses the
# one on PATH, else tries to download one, which fails here.
apt_install binaryen

[ "$what" = run ] && exit 0

# `make bench`: the HTTP load generator and a brotli to measure the WASM with.
if [ "$what" = bench ]; then
  apt_install wrk brotli postgresql-client util-linux
  exit 0
fi

for component in clippy rustfmt; do
  if ! rustup component list --installed | grep -q "^$component"; then
    say "adding the $component component"
    rustup component add "$component"
  fi
done

# --- browser tests -------------------------------------------------------
command -v npm >/dev/null || apt_install nodejs npm
[ -x /usr/bin/chromium ] || apt_install chromium
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

lock="$here/end2end/package-lock.json"
stamp="$here/end2end/node_modules/.package-lock.json"
if [ ! -f "$stamp" ] || [ "$lock" -nt "$stamp" ]; then
  say "installing the Playwright test runner (no browser download: Debian's Chromium is used)"
  (cd "$here/end2end" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund)
fi
