#!/usr/bin/env bash
# `make bench`: the numbers in docs/BENCHMARKS.md, from one run. Not part of
# `make test` (it loads 11 million claims and takes the better part of an
# hour here). Everything listens on 127.0.0.1; load is bounded in time.
#
#   1. seeds Postgres databases with BENCH_SIZES claims over BENCH_CONSUMERS
#      consumers (10; skipped when a database already holds that many) and
#      times the load;
#   2. `idem-tools bench`: every dashboard read beside its naive form, and growth;
#   3. HTTP load on the largest database, Idem pinned to core 0, Postgres
#      and the load generators to core 1: throughput with wrk (closed loop,
#      ROUNDS rounds, median and range) on key pages rotating over 1,000
#      sampled keys, /unknown, the overview and one chart, and the bare
#      axum+sqlx key lookup (the floor); then latency at a fixed 200 and
#      1,000 req/s (`idem-tools load`, measured from when each request was
#      due: corrected for coordinated omission);
#   4. ingest: claims/s through idem-consumer (claims and its per-minute
#      metrics) with Idem's indexes and rollup running, without them, with
#      the dashboard under load, and into the largest data set;
#   5. the release WASM bundle and its JS: size raw, gzip and brotli.
#
# Needs: the release build (`make bench` builds it), wrk, brotli, taskset.
set -euo pipefail
cd "$(dirname "$0")/.."

PG=${BENCH_PG:-postgres://postgres@127.0.0.1:5432}
SIZES=${BENCH_SIZES:-1000000 10000000}
# Consumers the claims spread over; a fleet of many teams is BENCH_CONSUMERS=100.
CONSUMERS=${BENCH_CONSUMERS:-10}
IDEM=target/release/idem
TOOLS=target/release/idem-tools
BARE=target/release/examples/bare_key_page
INGEST=target/release/examples/ingest
SECONDS_EACH=${BENCH_SECONDS:-20}
OUT=${BENCH_OUT:-target/bench}
mkdir -p "$OUT"

psql_at() { psql "$1" -Atqc "$2"; }
say() { printf '\n## %s\n\n' "$*"; }
# BENCH_STEPS picks parts to rerun, e.g. BENCH_STEPS=ingest (the data sets
# must exist for reads and http).
step() { [[ " ${BENCH_STEPS:-seed reads http ingest wasm} " == *" $1 "* ]]; }
ROUNDS=${BENCH_ROUNDS:-3}
# Every HTTP request asks as Chromium does over HTTPS, so pages come
# compressed (brotli) as a browser gets them.
BROWSER="gzip, deflate, br, zstd"

urls=()
for n in $SIZES; do
  db=idem_bench_$n
  [ "$CONSUMERS" = 10 ] || db=${db}_c$CONSUMERS
  url="$PG/$db"
  urls+=("$url")
  step seed || continue
  have=$(psql_at "$PG/postgres" "SELECT 1 FROM pg_database WHERE datname = '$db'")
  if [ "$have" = 1 ] && [ "$(psql_at "$url" 'SELECT count(*) FROM claims' 2>/dev/null || echo 0)" -ge "$n" ]; then
    echo "bench: $db already holds $n claims" >&2
    continue
  fi
  psql_at "$PG/postgres" "DROP DATABASE IF EXISTS $db WITH (FORCE)"
  psql_at "$PG/postgres" "CREATE DATABASE $db"
  start=$(date +%s)
  DATABASE_URL=$url $TOOLS seed --claims "$n" --consumers "$CONSUMERS" --metrics >&2
  echo "bench: seeded $n claims in $(( $(date +%s) - start )) s" | tee "$OUT/seed-$n.txt" >&2
done

if step reads; then
say "Dashboard reads (idem-tools bench)"
$TOOLS bench "${urls[@]}" | tee "$OUT/reads.md"
fi

largest=${urls[-1]}
key_row=$(psql_at "$largest" "SELECT consumer, idempotency_key FROM claims WHERE status = 'sent' ORDER BY last_delivery_at DESC LIMIT 1")
consumer=${key_row%%|*}
key=${key_row#*|}
enc() { python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1], safe=""))' "$1"; }
key_path="/keys/$(enc "$consumer")/$(enc "$key")"
# The server function's path (its name and a hash), from the server: the
# WASM holds only the islands and calls no server function.
charts_fn=$(grep -ao '/api/read/get_charts[0-9A-Za-z_]*' target/release/idem | head -1)
scripts/key-paths.sh "$largest" >"$OUT/key-paths.txt"

median() { printf '%s\n' "$@" | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
# wrk, ROUNDS rounds: req/s, p50 and p99 (ms) as the median and range.
load() { # name url [header] [-- paths file]
  local name=$1 url=$2 header=${3:-} paths=${4:-} rps=() p50=() p99=() bad=0
  for _ in $(seq "$ROUNDS"); do
    taskset -c 1 wrk -t1 -c8 -d"${SECONDS_EACH}s" --latency -H "Accept-Encoding: $BROWSER" ${header:+-H "$header"} \
      ${paths:+-s scripts/bench-keys.lua} "$url" ${paths:+-- "$paths"} >"$OUT/wrk.txt"
    rps+=("$(awk '/Requests\/sec/ { print $2 }' "$OUT/wrk.txt")")
    p50+=("$(awk '/ 50%/ { print $2 }' "$OUT/wrk.txt" | ms)")
    p99+=("$(awk '/ 99%/ { print $2 }' "$OUT/wrk.txt" | ms)")
    # "Non-2xx or 3xx responses: N": a redirect to sign-in is not an answer.
    bad=$(( bad + $(awk '/Non-2xx/ { n = $NF } END { print n + 0 }' "$OUT/wrk.txt") ))
  done
  printf '| %s | %s | %s | %s | %s |\n' "$name" "$(spread "${rps[@]}")" "$(spread "${p50[@]}")" \
    "$(spread "${p99[@]}")" "$([ "$bad" = 0 ] && echo "all 2xx" || echo "$bad non-2xx")"
}
# wrk's "1.23ms" / "456.00us" / "1.02s" as milliseconds.
ms() { awk '{ v = $1 + 0; if ($1 ~ /us$/) v /= 1000; else if ($1 ~ /[0-9]s$/ && $1 !~ /ms$/) v *= 1000; printf "%.2f\n", v }'; }
spread() { # values... -> "median (min–max)"
  local sorted; sorted=$(printf '%s\n' "$@" | sort -g)
  printf '%s (%s–%s)' "$(median "$@")" "$(head -1 <<<"$sorted")" "$(tail -1 <<<"$sorted")"
}
# Postgres (every backend: new ones inherit the postmaster's) off Idem's core.
pin_postgres() { # cpu list
  for pid in $(pgrep -x postgres); do taskset -apc "$1" "$pid" >/dev/null; done
}

if step http; then
say "HTTP load on one core ($(basename "$largest"))"
pin_postgres 1
IDEM_DEMO=0 DATABASE_URL=$largest IDEM_ADDR=127.0.0.1:3950 taskset -c 0 $IDEM >"$OUT/idem.log" 2>&1 &
idem_pid=$!
BARE_ADDR=127.0.0.1:3951 DATABASE_URL=$largest taskset -c 0 $BARE >"$OUT/bare.log" 2>&1 &
bare_pid=$!
trap 'kill $idem_pid $bare_pid 2>/dev/null || true; pin_postgres 0-$(( $(nproc) - 1 ))' EXIT
for _ in $(seq 100); do curl -sf http://127.0.0.1:3950/readyz >/dev/null && break; sleep 0.2; done
printf 'benchpassword1234\nbenchpassword1234\n' | DATABASE_URL=$largest $IDEM user add bench-viewer --role viewer >/dev/null 2>&1 || true
cookie=$(curl -s -o /dev/null -D - -H 'Sec-Fetch-Site: same-origin' \
  -d 'username=bench-viewer&password=benchpassword1234' http://127.0.0.1:3950/login |
  awk -F': ' 'tolower($1) == "set-cookie" { split($2, c, ";"); printf "%s%s", sep, c[1]; sep = "; " }')
grep -q 'idem_session=' <<<"$cookie" || { echo "bench: signing in as bench-viewer failed" >&2; exit 1; }
echo "Throughput: wrk, 8 connections, $ROUNDS rounds of ${SECONDS_EACH} s; median (range)."
echo
echo "| what | req/s | p50 (ms) | p99 (ms) | answers |"
echo "|---|---:|---:|---:|---|"
# Every sampled key's page once first: at 10M the first visit reads from
# disk, and a round should measure Idem, not the page cache filling.
taskset -c 1 $TOOLS load --base http://127.0.0.1:3950 --paths-file "$OUT/key-paths.txt" \
  --cookie "$cookie" --rate 200 --seconds 5 --rounds 1 --name "warm-up" >/dev/null
load "Idem key page, 1,000 keys in turn" "http://127.0.0.1:3950/" "Cookie: $cookie" "$OUT/key-paths.txt"
load "Idem /unknown" "http://127.0.0.1:3950/unknown" "Cookie: $cookie"
load "Idem overview (/)" "http://127.0.0.1:3950/" "Cookie: $cookie"
load "Idem consumer table (/consumers)" "http://127.0.0.1:3950/consumers?sort=unknown" "Cookie: $cookie"
load "Idem chart data, 28 days (get_charts)" "http://127.0.0.1:3950$charts_fn?range=28d" "Cookie: $cookie"
load "bare axum+sqlx key lookup (floor), 1,000 keys in turn" "http://127.0.0.1:3951/" "" "$OUT/key-paths.txt"
echo
echo "Latency at a fixed rate: idem-tools load, from when each request was due; $ROUNDS rounds of ${SECONDS_EACH} s, then the median (range)."
echo
echo "| what | rate | p50 (ms) | p99 (ms) | p99.9 (ms) | max (ms) | answers |"
echo "|---|---:|---:|---:|---:|---:|---|"
for rate in 200 1000; do
  taskset -c 1 $TOOLS load --base http://127.0.0.1:3950 --paths-file "$OUT/key-paths.txt" \
    --cookie "$cookie" --rate "$rate" --seconds "$SECONDS_EACH" --rounds "$ROUNDS" \
    --name "Idem key page at $rate req/s"
done
# The landing page as a person opens it (the read cache warm, as it is for
# a team's open consoles).
taskset -c 1 $TOOLS load --base http://127.0.0.1:3950 --path / --cookie "$cookie" \
  --rate 100 --seconds "$SECONDS_EACH" --rounds "$ROUNDS" --name "Idem overview (/) at 100 req/s"
taskset -c 1 $TOOLS load --base http://127.0.0.1:3950 --path "/consumers?sort=unknown" --cookie "$cookie" \
  --rate 100 --seconds "$SECONDS_EACH" --rounds "$ROUNDS" --name "Idem /consumers at 100 req/s"
kill $idem_pid $bare_pid 2>/dev/null || true
wait $idem_pid $bare_pid 2>/dev/null || true
pin_postgres 0-$(( $(nproc) - 1 ))
fi

if step ingest; then
say "Ingest through idem-consumer (claims/s, 8 workers; median of $ROUNDS alternating ${SECONDS_EACH} s runs)"
ingest_db() { # name; a fresh database migrated by Idem
  psql_at "$PG/postgres" "DROP DATABASE IF EXISTS $1 WITH (FORCE)"
  psql_at "$PG/postgres" "CREATE DATABASE $1"
  DATABASE_URL=$PG/$1 $TOOLS seed --claims 0 --outbox 0 --dead-letters 0 >/dev/null 2>&1
}
ingest() { DATABASE_URL=$PG/$1 $INGEST 8 "${2:-$SECONDS_EACH}"; }
ingest_db idem_ingest_off
# Only what the contract itself needs (the claim's primary key) stays.
psql_at "$PG/idem_ingest_off" "DROP INDEX claims_by_key, claims_unknown_since, claims_pending_since,
  claims_failed_since, claims_by_activity, claims_by_provider_ref, claims_by_consumer_activity"
ingest_db idem_ingest_on
IDEM_DEMO=0 DATABASE_URL=$PG/idem_ingest_on IDEM_ADDR=127.0.0.1:3952 $IDEM >"$OUT/idem-ingest.log" 2>&1 &
idem_pid=$!
for _ in $(seq 100); do curl -sf http://127.0.0.1:3952/readyz >/dev/null && break; sleep 0.2; done
# A short warm-up on each (connections, caches, first pages), not counted;
# then alternate, so drift on the machine falls on both alike.
ingest idem_ingest_off 5 >/dev/null
ingest idem_ingest_on 5 >/dev/null
offs=() ons=()
for _ in $(seq "$ROUNDS"); do
  offs+=("$(ingest idem_ingest_off)")
  ons+=("$(ingest idem_ingest_on)")
done
off=$(median "${offs[@]}")
on=$(median "${ons[@]}")
printf 'benchpassword1234\nbenchpassword1234\n' | DATABASE_URL=$PG/idem_ingest_on $IDEM user add bench-viewer --role viewer >/dev/null 2>&1 || true
cookie=$(curl -s -o /dev/null -D - -H 'Sec-Fetch-Site: same-origin' \
  -d 'username=bench-viewer&password=benchpassword1234' http://127.0.0.1:3952/login |
  awk -F': ' 'tolower($1) == "set-cookie" { split($2, c, ";"); printf "%s%s", sep, c[1]; sep = "; " }')
# Ingest while wrk loads the overview: flat out (8 connections, as fast as
# the server answers), and paced (4 connections, each waiting 40 ms after
# every answer: ~90 req/s, a few hundred open consoles refreshing). Prints
# "claims/s (median) | runs | dashboard req/s (median)".
under_load() { # wrk options...
  local loadeds=() rps=()
  for _ in $(seq "$ROUNDS"); do
    wrk -t1 "$@" -d"$(( SECONDS_EACH + 4 ))s" -H "Cookie: $cookie" http://127.0.0.1:3952/ >"$OUT/wrk-ingest.txt" &
    local wrk_pid=$!
    sleep 2
    loadeds+=("$(ingest idem_ingest_on)")
    wait $wrk_pid
    rps+=("$(awk '/Requests\/sec/ { print $2 }' "$OUT/wrk-ingest.txt")")
  done
  echo "$(median "${loadeds[@]}")|${loadeds[*]}|$(median "${rps[@]}")"
}
IFS='|' read -r flat flats flat_rps <<<"$(under_load -c8)"
IFS='|' read -r paced paceds paced_rps <<<"$(under_load -c4 -s scripts/bench-paced.lua)"
kill $idem_pid 2>/dev/null || true
# The same writes into the largest data set (its claims, 30 days of
# metrics, its audit log) with Idem running on it: ingest at production
# size, not only into an empty table.
big=$(basename "$largest")
IDEM_DEMO=0 DATABASE_URL=$largest IDEM_ADDR=127.0.0.1:3953 $IDEM >"$OUT/idem-ingest-big.log" 2>&1 &
idem_pid=$!
for _ in $(seq 100); do curl -sf http://127.0.0.1:3953/readyz >/dev/null && break; sleep 0.2; done
ingest "$big" 5 >/dev/null
bigs=()
for _ in $(seq "$ROUNDS"); do bigs+=("$(ingest "$big")"); done
kill $idem_pid 2>/dev/null || true
echo "| setup | claims/s (median) | runs | vs. without Idem |"
echo "|---|---:|---|---:|"
awk -v off="$off" -v on="$on" -v offs="${offs[*]}" -v ons="${ons[*]}" \
    -v flat="$flat" -v flats="$flats" -v flat_rps="$flat_rps" \
    -v paced="$paced" -v paceds="$paceds" -v paced_rps="$paced_rps" \
    -v big="$(median "${bigs[@]}")" -v bigs="${bigs[*]}" -v big_name="$big" 'BEGIN {
  printf "| contract only: primary key, no Idem indexes | %d | %s | 1.00× |\n", off, offs
  printf "| Idem: its indexes, Idem running (rollup) | %d | %s | %.2f× slower |\n", on, ons, off / on
  printf "| Idem, overview paced (%.0f req/s) | %d | %s | %.1f%% below unloaded |\n", paced_rps, paced, paceds, (on - paced) * 100 / on
  printf "| Idem, overview flat out (%.0f req/s) | %d | %s | %.1f%% below unloaded |\n", flat_rps, flat, flats, (on - flat) * 100 / on
  printf "| Idem running, into %s | %d | %s | %.2f× slower |\n", big_name, big, bigs, off / big
}'
fi

if step wasm; then
say "WASM bundle and its JS (release, wasm-opt)"
echo "| file | raw | gzip -9 | brotli -q 11 |"
echo "|---|---:|---:|---:|"
for file in target/site/pkg/idem.wasm target/site/pkg/idem.js; do
  echo "| ${file##*/} | $(stat -c %s "$file") | $(gzip -9 -c "$file" | wc -c) | $(brotli -q 11 -c "$file" | wc -c) |"
done
fi
