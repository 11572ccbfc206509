#!/usr/bin/env bash
# The API's schema-driven fuzz run, part of `make test`: Schemathesis (from
# PyPI, installed into .tools/ by scripts/tools.sh) reads the OpenAPI
# document a running Idem serves and sends it what the document allows and
# what it does not, with a token and without one. It fails on any 5xx, an
# answer the document does not describe (status, media type, schema), or
# a write that succeeds without a token.
#
#   scripts/api-fuzz.sh [path/to/idem]     (default: target/debug/idem)
#
# Idem runs the demo on a throwaway SQLite database, so there are keys,
# dead letters and unknown outcomes to read and act on. Bounded: at most
# API_FUZZ_EXAMPLES cases per operation and API_FUZZ_SECONDS in all.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
idem=${1:-$here/target/debug/idem}
st="$here/.tools/schemathesis/bin/st"
addr=${API_FUZZ_ADDR:-127.0.0.1:3963}
examples=${API_FUZZ_EXAMPLES:-40}
seconds=${API_FUZZ_SECONDS:-180}

dir=$(mktemp -d /tmp/idem-api-fuzz.XXXXXX)
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$dir"; }
trap cleanup EXIT

unset TEST_DATABASE_URL
export DATABASE_URL="sqlite://$dir/idem.db" IDEM_ADDR="$addr" RUST_LOG=warn
IDEM_DEMO=1 IDEM_DEMO_BACKFILL_HOURS=2 IDEM_DEMO_SEED=1842 "$idem" >"$dir/idem.log" 2>&1 &
pid=$!
for _ in $(seq 60); do
  curl -fs "http://$addr/readyz" >/dev/null 2>&1 && break
  sleep 1
done
curl -fs "http://$addr/readyz" >/dev/null || { cat "$dir/idem.log" >&2; echo "Idem did not start" >&2; exit 1; }

# An operator's token: the run may replay, discard and resolve the demo's rows.
printf 'fuzzing-password-0\n' | "$idem" user add fuzzer --role operator >/dev/null
secret=$("$idem" token create schemathesis --owner fuzzer --role operator --expires 1h | sed -n 2p)

# positive_data_acceptance is left out: a well-formed key or id that names
# nothing is rightly a 404, which that check counts as a refusal.
status=0
# From the throwaway directory: Schemathesis keeps its own files where it runs.
cd "$dir"
"$st" --no-color --config-file "$here/scripts/schemathesis.toml" run "http://$addr/api/v1/openapi.json" \
  --header "Authorization: Bearer $secret" \
  --checks all --exclude-checks positive_data_acceptance \
  --phases examples,coverage,fuzzing,stateful \
  --max-examples "$examples" --max-time "$seconds" \
  --workers 1 --seed 1842 --generation-database none || status=$?
if grep -q "panicked" "$dir/idem.log"; then
  grep -B2 -A5 "panicked" "$dir/idem.log" >&2
  exit 1
fi
exit $status
