#!/usr/bin/env bash
# Times whole pages over HTTP: each path N times in a row (after one warm-up),
# printing the median and the 95th percentile as a Markdown table.
#
# usage: scripts/page-latency.sh BASE_URL [N] < paths.txt
# With IDEM_COOKIES naming a curl cookie jar (a signed-in session), the pages
# are fetched as that user.
set -euo pipefail
base=$1
n=${2:-20}
curl() { command curl ${IDEM_COOKIES:+-b "$IDEM_COOKIES"} "$@"; }
echo "| page | p50 (ms) | p95 (ms) | status |"
echo "|---|---:|---:|---|"
while IFS= read -r path; do
  [ -z "$path" ] && continue
  curl -s -o /dev/null "$base$path"
  status=$(curl -s -o /dev/null -w '%{http_code}' "$base$path")
  for _ in $(seq "$n"); do
    curl -s -o /dev/null -w '%{time_total}\n' "$base$path"
  done | sort -n | awk -v p="$path" -v s="$status" '
    { t[NR] = $1 * 1000 }
    END { printf "| `%s` | %.1f | %.1f | %s |\n", p, t[int((NR + 1) / 2)], t[int(NR * 0.95 + 0.5)], s }'
done
