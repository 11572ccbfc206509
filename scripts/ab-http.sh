#!/usr/bin/env bash
# An A/B of two Idem binaries on the same database, alternated round by
# round so drift on a shared machine falls on both alike (docs/BENCHMARKS.md
# says why a lone before/after figure is not trusted here): wrk, 8
# connections, Idem on core 0, Postgres and wrk on core 1; the key pages of
# 1,000 keys in turn and the overview, asked for as a browser does
# (Accept-Encoding), and the overview without it (what any client got
# before Idem compressed). Prints a Markdown table: req/s and bytes per
# answer, median (range).
#
#   scripts/ab-http.sh BEFORE_BINARY AFTER_BINARY
#   AB_DB (default the bench's 10M database), AB_ROUNDS (3), AB_SECONDS (10)
set -euo pipefail
cd "$(dirname "$0")/.."
before=$1 after=$2
DB=${AB_DB:-postgres://postgres@127.0.0.1:5432/idem_bench_10000000}
ROUNDS=${AB_ROUNDS:-3}
SECONDS_EACH=${AB_SECONDS:-10}
OUT=${AB_OUT:-target/ab}
BROWSER="gzip, deflate, br, zstd"
mkdir -p "$OUT"

scripts/key-paths.sh "$DB" >"$OUT/key-paths.txt"
for pid in $(pgrep -x postgres); do taskset -apc 1 "$pid" >/dev/null; done
trap 'for pid in $(pgrep -x postgres); do taskset -apc 0-$(( $(nproc) - 1 )) "$pid" >/dev/null; done' EXIT
printf 'benchpassword1234\nbenchpassword1234\n' | DATABASE_URL=$DB "$after" user add bench-viewer --role viewer >/dev/null 2>&1 || true

# run BINARY NAME: one round of every measurement against BINARY.
run() {
  local binary=$1 name=$2
  IDEM_DEMO=0 DATABASE_URL=$DB IDEM_ADDR=127.0.0.1:3955 taskset -c 0 "$binary" >"$OUT/$name.log" 2>&1 &
  local pid=$!
  for _ in $(seq 100); do curl -sf http://127.0.0.1:3955/readyz >/dev/null && break; sleep 0.2; done
  local cookie
  cookie=$(curl -s -o /dev/null -D - -H 'Sec-Fetch-Site: same-origin' \
    -d 'username=bench-viewer&password=benchpassword1234' http://127.0.0.1:3955/login |
    awk -F': ' 'tolower($1) == "set-cookie" { split($2, c, ";"); printf "%s%s", sep, c[1]; sep = "; " }')
  # Every key once (its fingerprint is stored on a first view), untimed.
  scripts/drive.py 127.0.0.1:3955 "$OUT/key-paths.txt" 1000 "$cookie" "$BROWSER" 2>/dev/null
  wrk1() { # what accept [paths]
    taskset -c 1 wrk -t1 -c8 -d"${SECONDS_EACH}s" -H "Cookie: $cookie" ${2:+-H "Accept-Encoding: $2"} \
      ${3:+-s scripts/bench-keys.lua} "http://127.0.0.1:3955${4:-/}" ${3:+-- "$3"} >"$OUT/wrk.txt"
    awk -v what="$1" -v name="$name" '/Requests\/sec/ { r = $2 } /Transfer\/sec/ { t = $2 }
      END { print name "\t" what "\t" r }' "$OUT/wrk.txt"
  }
  wrk1 "key page" "$BROWSER" "$OUT/key-paths.txt"
  wrk1 "overview, Accept-Encoding as a browser" "$BROWSER"
  wrk1 "overview, no Accept-Encoding" ""
  for what in "$BROWSER" ""; do
    printf '%s\t%s\t%s\n' "$name" "overview bytes${what:+ (browser)}" \
      "$(curl -s -H "Cookie: $cookie" ${what:+-H "Accept-Encoding: $what"} http://127.0.0.1:3955/ | wc -c)"
  done
  printf '%s\t%s\t%s\n' "$name" "key page bytes (browser)" \
    "$(curl -s -H "Cookie: $cookie" -H "Accept-Encoding: $BROWSER" "http://127.0.0.1:3955$(head -1 "$OUT/key-paths.txt")" | wc -c)"
  kill "$pid"; wait "$pid" 2>/dev/null || true
}

: >"$OUT/rounds.tsv"
for _ in $(seq "$ROUNDS"); do
  run "$before" before >>"$OUT/rounds.tsv"
  run "$after" after >>"$OUT/rounds.tsv"
done
python3 - "$OUT/rounds.tsv" <<'PY'
import collections, statistics, sys
rows = collections.defaultdict(list)
order = []
for line in open(sys.argv[1]):
    name, what, value = line.rstrip("\n").split("\t")
    if what not in order:
        order.append(what)
    rows[(what, name)].append(float(value))
def show(values):
    m = statistics.median(values)
    return f"{m:,.0f} ({min(values):,.0f}–{max(values):,.0f})" if len(set(values)) > 1 else f"{m:,.0f}"
print("| what | before | after |")
print("|---|---:|---:|")
for what in order:
    print(f"| {what} | {show(rows[(what, 'before')])} | {show(rows[(what, 'after')])} |")
PY
