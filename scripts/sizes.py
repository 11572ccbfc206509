#!/usr/bin/env python3
"""Room sizes: no Rust file over MAX_FILE lines.

A newcomer should be able to read any file in one sitting. (Functions have
their own limit, 80 lines outside tests: clippy's `too_many_lines`, set in
clippy.toml and the workspace's lints.) `make test` runs this; it fails on a
file over the limit that is not on the allow-list below, and on an
allow-list entry that is no longer needed (so the list only shrinks).
Usage: scripts/sizes.py [--report]
"""
import subprocess
import sys
from pathlib import Path

MAX_FILE = 500

# Each entry says why it may stay larger. Keep it short.
ALLOW_FILES = {
}

ROOT = Path(__file__).resolve().parent.parent


def rust_files():
    out = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "*.rs"],
        cwd=ROOT, check=True, capture_output=True, text=True,
    ).stdout.split()
    return sorted({p for p in out if not p.startswith("fuzz/") and (ROOT / p).exists()})


def main():
    lengths = {rel: len((ROOT / rel).read_text().splitlines()) for rel in rust_files()}
    if "--report" in sys.argv:
        for rel, n in sorted(lengths.items(), key=lambda kv: -kv[1])[:15]:
            print(f"{n:5}  {rel}")
        return 0
    failures = [
        f"{rel} has {n} lines (limit {MAX_FILE}): split it into rooms"
        for rel, n in lengths.items()
        if n > MAX_FILE and rel not in ALLOW_FILES
    ]
    failures += [
        f"{rel} is within {MAX_FILE} lines now: take it off ALLOW_FILES"
        for rel in ALLOW_FILES
        if lengths.get(rel, 0) <= MAX_FILE
    ]
    for failure in failures:
        print(failure, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
