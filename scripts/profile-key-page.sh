#!/usr/bin/env bash
# Where one key page request's work goes, counted in instructions by
# valgrind's callgrind (repeatable on a busy machine, unlike seconds):
# Idem's release build and the bare axum+sqlx handler
# (tools/examples/bare_key_page.rs) each answer the same PROFILE_REQUESTS
# key pages over one keep-alive connection, as a browser asks for them
# (Idem's with a viewer's session cookie). Counters are zeroed after a
# warm-up and dumped after the measured requests, so start-up is not
# counted; scripts/callgrind-phases.py splits the dump into phases.
# docs/PERFORMANCE.md has the table and how to read it.
#
#   PROFILE_DB   a database seeded by `idem-tools seed` (default: the
#                bench's 1M one, postgres://…/idem_bench_1000000)
#   IDEM, BARE   the binaries (default: the `profiling` profile's, the
#                release build with its symbols: `make profile` builds them)
#   PROFILE_REQUESTS (2000), PROFILE_OUT (target/profile)
#
# Needs valgrind (callgrind_control), python3, psql, curl. Everything
# listens on 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."

DB=${PROFILE_DB:-postgres://postgres@127.0.0.1:5432/idem_bench_1000000}
IDEM=${IDEM:-target/profiling/idem}
BARE=${BARE:-target/profiling/examples/bare_key_page}
N=${PROFILE_REQUESTS:-2000}
OUT=${PROFILE_OUT:-target/profile}
BROWSER="gzip, deflate, br, zstd"
mkdir -p "$OUT"

scripts/key-paths.sh "$DB" >"$OUT/key-paths.txt"

# profile NAME ADDR COOKIE: the server on ADDR must be running under
# callgrind as $pid; warms it up, counts N requests, dumps.
measure() {
  local name=$1 addr=$2 cookie=$3
  # Every key once first: a key's first view stores its log fingerprint
  # (once per replica), which is not what a page view costs afterwards.
  scripts/drive.py "$addr" "$OUT/key-paths.txt" "$(wc -l <"$OUT/key-paths.txt")" "$cookie" "$BROWSER"
  callgrind_control -z "$pid" >/dev/null
  scripts/drive.py "$addr" "$OUT/key-paths.txt" "$N" "$cookie" "$BROWSER"
  callgrind_control -d "$name" "$pid" >/dev/null
  kill "$pid"; wait "$pid" 2>/dev/null || true
  # The dump taken above is the file with the highest number.
  local dump; dump=$(ls -t "$OUT/$name.callgrind".* | head -1)
  mv "$dump" "$OUT/$name.measured"
  rm -f "$OUT/$name.callgrind"*
  echo "profile: $name: $OUT/$name.measured ($N requests)" >&2
}
ready() { # url [curl option]: until it answers (with -f: a 2xx)
  for _ in $(seq 600); do curl -s ${2:-} -o /dev/null "$1" && return 0; sleep 0.5; done
  echo "profile: $1 never answered" >&2; exit 1
}
callgrind() { # name command...
  local name=$1; shift
  valgrind --tool=callgrind --dump-instr=no --callgrind-out-file="$OUT/$name.callgrind" "$@" \
    >"$OUT/$name.log" 2>&1 &
  pid=$!
}

printf 'benchpassword1234\nbenchpassword1234\n' | DATABASE_URL=$DB $IDEM user add bench-viewer --role viewer >/dev/null 2>&1 || true
IDEM_DEMO=0 DATABASE_URL=$DB IDEM_ADDR=127.0.0.1:3960 callgrind idem "$IDEM"
ready http://127.0.0.1:3960/readyz -f
cookie=$(curl -s -o /dev/null -D - -H 'Sec-Fetch-Site: same-origin' \
  -d 'username=bench-viewer&password=benchpassword1234' http://127.0.0.1:3960/login |
  awk -F': ' 'tolower($1) == "set-cookie" { split($2, c, ";"); printf "%s%s", sep, c[1]; sep = "; " }')
grep -q 'idem_session=' <<<"$cookie" || { echo "profile: signing in as bench-viewer failed" >&2; exit 1; }
measure idem 127.0.0.1:3960 "$cookie"

DATABASE_URL=$DB BARE_ADDR=127.0.0.1:3961 callgrind bare "$BARE"
ready http://127.0.0.1:3961/keys/none/none
measure bare 127.0.0.1:3961 ""

python3 scripts/callgrind-phases.py "$N" "$OUT/idem.measured" "$OUT/bare.measured" | tee "$OUT/phases.md"
