#!/usr/bin/env bash
# Times the build-and-test loop docs/DEVELOPING.md reports, each step from a
# fresh clone of this repository's HEAD in a scratch folder:
#
#   first-page  fresh clone, empty cargo home → `make run` until /login answers
#   fresh-test  fresh clone, empty cargo home → `make test`
#   warm-test   the same clone again → `make test`
#   edit-store  one store file edited → `cargo test -p idem-store`
#   link        the store's test binary relinked, with mold and without
#
# "Fresh" also means the tools are not installed: with --uninstall it first
# removes what scripts/tools.sh installs (Debian's mold, binaryen, chromium,
# sqlite3, and the WASM target), so the timed commands install them again.
# Crates come from crates.io into an empty CARGO_HOME. Needs a Postgres for
# the tests (see scripts/with-postgres.sh) and about an hour of a 2-core
# machine. Prints one line per step: its name and seconds.
#
#   scripts/loop-times.sh [--uninstall] [STEP...]
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
scratch=${LOOP_SCRATCH:-/tmp/idem-loop}
uninstall=0
if [ "${1:-}" = --uninstall ]; then uninstall=1; shift; fi
steps=("${@:-first-page fresh-test warm-test edit-store link}")
read -r -a steps <<<"${steps[*]}"

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }
report() { printf '%-12s %6d s\n' "$1" "$2"; }
# Each line of a log with the seconds since the step began, so the log
# shows which phase took how long.
stamped() { local t0=$SECONDS; while IFS= read -r line; do printf '%5d %s\n' $((SECONDS - t0)) "$line"; done; }

forget_tools() {
  [ "$uninstall" = 1 ] || return 0
  as_root env DEBIAN_FRONTEND=noninteractive apt-get remove -y -qq mold binaryen chromium sqlite3 >/dev/null || true
  rustup target remove wasm32-unknown-unknown >/dev/null 2>&1 || true
}

fresh_clone() {
  rm -rf "$scratch/$1"
  mkdir -p "$scratch"
  git clone -q "$here" "$scratch/$1"
  export CARGO_HOME="$scratch/$1-cargo-home"
  rm -rf "$CARGO_HOME"
  mkdir -p "$CARGO_HOME"
}

first_page() {
  forget_tools
  fresh_clone run
  local started=$SECONDS pid
  export -f stamped
  (cd "$scratch/run" && exec setsid bash -c 'make run 2>&1 | stamped' >"$scratch/run.log") &
  pid=$!
  until curl -fs -o /dev/null http://127.0.0.1:3000/login; do
    kill -0 "$pid" 2>/dev/null || { tail -20 "$scratch/run.log"; exit 1; }
    sleep 2
  done
  report first-page $((SECONDS - started))
  kill -- -"$pid" 2>/dev/null || kill "$pid"
  wait "$pid" 2>/dev/null || true
}

timed_make_test() {
  local started=$SECONDS
  (cd "$scratch/test" && make test 2>&1 | stamped >"$scratch/$1.log") || { tail -40 "$scratch/$1.log"; exit 1; }
  report "$1" $((SECONDS - started))
}

for step in "${steps[@]}"; do
  case "$step" in
    first-page) first_page ;;
    fresh-test) forget_tools; fresh_clone test; timed_make_test fresh-test ;;
    warm-test)
      export CARGO_HOME="$scratch/test-cargo-home"
      timed_make_test warm-test ;;
    edit-store)
      export CARGO_HOME="$scratch/test-cargo-home"
      cd "$scratch/test"
      echo "// edited $(date +%s)" >>store/src/meta.rs
      started=$SECONDS
      scripts/with-postgres.sh cargo test -q -p idem-store >"$scratch/edit.log" 2>&1
      report edit-store $((SECONDS - started))
      git checkout -q store/src/meta.rs
      cd "$here" ;;
    link)
      export CARGO_HOME="$scratch/test-cargo-home"
      cd "$scratch/test"
      for linker in mold ld; do
        hidden=
        if [ "$linker" = ld ] && command -v mold >/dev/null; then
          hidden=$(command -v mold); as_root mv "$hidden" "$hidden.off"
        fi
        echo "// relink $(date +%s)" >>store/src/meta.rs
        started=$SECONDS
        cargo test -q -p idem-store --no-run >/dev/null 2>&1
        report "link-$linker" $((SECONDS - started))
        git checkout -q store/src/meta.rs
        [ -n "$hidden" ] && as_root mv "$hidden.off" "$hidden"
      done
      cd "$here" ;;
    *) echo "unknown step: $step" >&2; exit 2 ;;
  esac
done
