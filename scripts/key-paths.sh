#!/usr/bin/env bash
# Prints 1,000 key pages' paths (/keys/<consumer>/<key>, percent-encoded)
# of the database at $1, from a sample of the claims table's pages, not a
# scan: what the benchmark, the profile and the A/B rotate over (many keys,
# not one hot key).
set -euo pipefail
psql "$1" -AtF $'\t' -c "SELECT consumer, idempotency_key FROM claims TABLESAMPLE SYSTEM (1) LIMIT 1000" |
  python3 -c '
import sys, urllib.parse
for line in sys.stdin:
    consumer, key = line.rstrip("\n").split("\t", 1)
    print("/keys/%s/%s" % (urllib.parse.quote(consumer, safe=""), urllib.parse.quote(key, safe="")))
'
