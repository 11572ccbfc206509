#!/usr/bin/env bash
# Runs an Idem binary the way a deployment does — copied into an empty
# directory, given nothing but a database URL — and checks that it serves
# every page and the assets those pages load from inside itself, with long
# cache lifetimes, gzip and brotli.
#
#   scripts/check-release.sh path/to/idem
set -euo pipefail

bin=$(realpath "$1")
dir=$(mktemp -d /tmp/idem-release.XXXXXX)
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$dir"; }
trap cleanup EXIT
fail() { echo "check-release: $*" >&2; [ -f "$dir/log" ] && tail -20 "$dir/log" >&2; exit 1; }

cp "$bin" "$dir/idem"
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
base="http://127.0.0.1:$port"
echo "check-release: $("$dir/idem" --version)"

# The team's tooling lives in idem-tools: the shipped binary cannot seed,
# bulk-delete or benchmark a database.
for tool in seed plans bench; do
  if "$dir/idem" "$tool" --help >/dev/null 2>&1; then fail "the shipped binary has an '$tool' command"; fi
done

# A clean environment: no site root, no LEPTOS_* variables.
(cd "$dir" && exec env -i PATH=/usr/bin:/bin HOME="$dir" \
  DATABASE_URL="sqlite://$dir/idem.db" IDEM_ADDR="127.0.0.1:$port" \
  IDEM_DEMO=1 IDEM_DEMO_BACKFILL_HOURS=1 ./idem >"$dir/log" 2>&1) &
pid=$!
for _ in $(seq 1 150); do
  curl -fs "$base/readyz" >/dev/null && break
  kill -0 "$pid" 2>/dev/null || fail "idem exited"
  sleep 0.2
done
curl -fs "$base/readyz" >/dev/null || fail "never ready"

# An operator, who may open every page (the audit log is not for viewers).
jar="$dir/cookies"
code=$(curl -s -o /dev/null -w '%{http_code}' -c "$jar" -H 'Sec-Fetch-Site: same-origin' \
  --data 'username=operator&password=operator&next=/' "$base/login")
[ "$code" = 303 ] || fail "signing in answered $code"

for page in / /keys /unknown /dead-letters /outbox /slo /audit /login; do
  code=$(curl -s -o "$dir/page.html" -w '%{http_code}' -b "$jar" "$base$page")
  [ "$code" = 200 ] || fail "$page answered $code"
done

assets=$(grep -oE '/pkg/[0-9a-f]{16}/[A-Za-z0-9_.-]+' "$dir/page.html" | sort -u)
for kind in js wasm css; do
  grep -qE "\.$kind\$" <<<"$assets" || fail "no .$kind asset linked from the page: $assets"
done
for asset in $assets; do
  headers=$(curl -fsS -D - -o /dev/null -H 'Accept-Encoding: gzip' "$base$asset") || fail "$asset"
  grep -qi '^cache-control: public, max-age=31536000, immutable' <<<"$headers" || fail "$asset is not cached for long"
  grep -qi '^content-encoding: gzip' <<<"$headers" || fail "$asset is not served compressed"
  headers=$(curl -fsS -D - -o /dev/null -H 'Accept-Encoding: gzip, deflate, br' "$base$asset") || fail "$asset"
  grep -qi '^content-encoding: br' <<<"$headers" || fail "$asset is not served as brotli to a browser that accepts it"
  raw=$(curl -fsS "$base$asset" | wc -c)
  gz=$(curl -fsS -H 'Accept-Encoding: gzip' "$base$asset" | wc -c)
  br=$(curl -fsS -H 'Accept-Encoding: br' "$base$asset" | wc -c)
  # What a browser unpacks is the file itself (brotli: scripts/tools.sh).
  cmp -s <(curl -fsS -H 'Accept-Encoding: br' "$base$asset" | brotli -d) <(curl -fsS "$base$asset") \
    || fail "$asset: its brotli copy does not unpack to the file"
  echo "check-release: $asset $raw bytes, $gz gzip, $br brotli"
done
echo "check-release: ok — every page and its assets served from the binary alone"
