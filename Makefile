# Idem's two commands: `make run` and `make test`. Both install what is
# missing first (scripts/tools.sh); nothing else needs doing by hand.

SHELL := bash
.SHELLFLAGS := -euo pipefail -c
export PATH := $(HOME)/.cargo/bin:$(PATH)

# The compiler flags every cargo command shares (tests, lints, the site
# build) are in .cargo/config.toml, so a plain `cargo test` reuses what
# `make` compiled, and the other way round.

# promtool, unpacked by scripts/tools.sh, checks the generated alerting rules.
export IDEM_PROMTOOL ?= $(CURDIR)/.tools/bin/promtool

# Where the browser tests' server listens (a port of its own, so a running
# `make run` on 3000 does not collide).
E2E_ADDR ?= 127.0.0.1:3917
# The OpenID provider the browser tests sign in through (end2end/oidc-provider.mjs,
# started by Playwright), and Idem's settings for it.
E2E_OIDC_ADDR ?= 127.0.0.1:3951
E2E_OIDC = IDEM_OIDC_ISSUER=http://$(E2E_OIDC_ADDR) IDEM_OIDC_CLIENT_ID=idem \
  IDEM_OIDC_CLIENT_SECRET=idem-e2e-secret IDEM_OIDC_NAME="Example SSO" \
  IDEM_OIDC_SCOPES="openid email profile groups" IDEM_OIDC_ROLES="sre=operator,idem-admins=admin"

.PHONY: run build site server test test-build front tools tools-run tools-release fmt-check sizes unit lint lint-server lint-front e2e e2e-run embedded release-check release bench clean-test-dbs fuzz screenshots api-fuzz

## Build and start Idem on the embedded SQLite database (./idem.db) with the demo.
run: build
	cargo run --package idem --bin idem

## Both halves, debug, at the same time: the site in target/site (the WASM
## compiled in target/front), the server in target/debug/idem.
build: tools-run
	$(MAKE) --no-print-directory -j2 site server

server:
	cargo build --package idem --bin idem

# What the browser loads, in target/site/pkg: the WASM (cargo), its
# bindings (the wasm-bindgen library at Cargo.lock's version) and the
# stylesheet. See xtask/src/main.rs.
site:
	cargo xtask site

## Everything CI checks: formatting, Rust tests on SQLite and Postgres, both builds linted, browser tests.
# The two halves compile at the same time (their own target directories:
# target/ and target/front), then the tests run; the browser tests run
# against the binary `make release` ships (as a debug build), so the
# server is built once for both.
test: tools fmt-check sizes
	$(MAKE) --no-print-directory -j2 test-build front
	$(MAKE) --no-print-directory unit lint-server release-check api-fuzz e2e-run

# Every test binary of the server-side crates, compiled, not run.
test-build:
	cargo test --workspace --exclude idem-frontend --no-run

# The browser's half: the site built and the WASM build linted.
front: site lint-front

tools:
	scripts/tools.sh test

## One self-contained binary, dist/idem: built for release with the site's
## assets inside it. Deploying is copying it; see docs/DEPLOY.md.
# (`cargo xtask site --release` builds the WASM without the debug-only
# `erase_components`; the server's release build clears it here.)
release: tools-release
	cargo xtask site --release
	RUSTFLAGS= IDEM_EMBED_SITE=$(CURDIR)/target/site cargo build --release -p idem
	mkdir -p dist
	cp target/release/idem dist/idem
	scripts/check-release.sh dist/idem

## The benchmark in docs/BENCHMARKS.md against Postgres (BENCH_PG, default
## the local server): seeds 1M and 10M claims, times every dashboard read
## beside its naive form, HTTP load, ingest, WASM size. Not part of
## `make test`; the better part of an hour here. Report: target/bench/report.md.
bench: tools-release
	scripts/tools.sh bench
	cargo xtask site --release
	RUSTFLAGS= IDEM_EMBED_SITE=$(CURDIR)/target/site cargo build --release -p idem
	RUSTFLAGS= cargo build --release -p idem-tools --bins --examples
	RUSTFLAGS= cargo build --release -p idem-consumer --example ingest
	mkdir -p target/bench
	scripts/bench.sh | tee target/bench/report.md

## The README's screenshots (docs/screenshots/*.png), taken by Playwright
## from a fresh demo at a fixed seed. Not part of `make test`.
screenshots: tools build
	mkdir -p docs/screenshots
	db=$$(mktemp -d /tmp/idem-shots.XXXXXX); \
	trap 'rm -rf "$$db"' EXIT; \
	cd end2end && env -u TEST_DATABASE_URL \
	  LEPTOS_SITE_ADDR=$(E2E_ADDR) \
	  DATABASE_URL="sqlite://$$db/idem.db" \
	  IDEM_DEMO=1 IDEM_DEMO_BACKFILL_HOURS=48 IDEM_DEMO_SEED=1842 IDEM_SCREENSHOTS=1 \
	  npx playwright test
	ls -l docs/screenshots

# What `make release` ships, as a debug build: the binary with the site
# compiled in, run from an empty directory with only a database URL.
# Its dependencies hold no test or tool code (idem-store's `testing` and
# `bulk` features; seed, plans and bench are idem-tools).
embedded: site release-check

# The same, with the site as target/site already holds it.
release-check:
	if cargo tree -p idem -e normal,features --prefix none | \
	  grep -E '^(tempfile|idem-tools) |^idem-store feature "(testing|bulk)"'; then \
	  echo "the shipped binary depends on test or tool code" >&2; exit 1; fi
	IDEM_EMBED_SITE=$(CURDIR)/target/site cargo build -p idem
	scripts/check-release.sh target/debug/idem

## The API's schema-driven fuzz run (Schemathesis) against the binary
## release-check built, on a throwaway demo database; scripts/api-fuzz.sh.
api-fuzz:
	scripts/api-fuzz.sh target/debug/idem

## Fuzz the key/consumer segment and cursor parsers, FUZZ_SECONDS each (not part of `make test`).
# `-s none`: no sanitizer, so stable Rust builds it (safe Rust needs none).
FUZZ_SECONDS ?= 60
fuzz:
	command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --version 0.13.2 --locked
	cd fuzz && for target in key_segment cursor; do \
	  env -u RUSTFLAGS cargo fuzz run -s none $$target -- -max_total_time=$(FUZZ_SECONDS); \
	done

tools-run:
	scripts/tools.sh run

tools-release:
	scripts/tools.sh release

fmt-check:
	cargo fmt --all -- --check

# No Rust file over 500 lines, but for a short, explained allow-list
# (scripts/sizes.py; `--report` shows the largest). No function over 80
# lines outside tests is clippy's too_many_lines, in `make lint`.
sizes:
	python3 scripts/sizes.py

# The server-side crates, tested on both backends. idem-frontend (the WASM
# entry point) is excluded: building it here would switch on `hydrate` and
# `ssr` in idem-app at once.
# Four tests at a time on two cores: the slow ones mostly wait (on a
# database, a timeout, a slow client), so the CPU is idle half the time
# with the default of one test per core.
unit:
	RUST_TEST_THREADS=$${RUST_TEST_THREADS:-4} scripts/with-postgres.sh cargo test --workspace --exclude idem-frontend
	# The consumer library's documented example, run as a reader would run it.
	cargo run -q -p idem-consumer --example reminders

# Each build linted on its own: the server build and the WASM build (in
# the WASM's target directory, so it can run beside a server build).
lint: lint-server lint-front

lint-server:
	cargo clippy --workspace --exclude idem-frontend --all-targets -- -D warnings

lint-front:
	cargo clippy -p idem-frontend --target wasm32-unknown-unknown --target-dir target/front -- -D warnings

# Both halves built, then Playwright (Debian's Chromium) starts the server
# on a fresh demo database (its `webServer`), runs the suite and stops it.
# The demo is quiet at night (UTC): a whole day of history, from a fixed
# seed, holds the same mix of unknown outcomes and dead letters for the
# tests whatever time it is (six hours written at 03:00 held only two).
e2e: build e2e-run

# The browser tests against whatever target/debug/idem and target/site hold.
# RabbitMQ's topology is declared first (end2end/rabbitmq-topology.mjs says
# how to start a broker where none runs); Idem drains its dead-letter queue
# as end2end/brokers.toml says.
e2e-run:
	db=$$(mktemp -d /tmp/idem-e2e.XXXXXX); \
	trap 'rm -rf "$$db"' EXIT; \
	cd end2end && node rabbitmq-topology.mjs && env -u TEST_DATABASE_URL \
	  LEPTOS_SITE_ADDR=$(E2E_ADDR) \
	  IDEM_BROKERS_FILE=$(CURDIR)/end2end/brokers.toml \
	  DATABASE_URL="sqlite://$$db/idem.db" \
	  IDEM_DEMO=1 IDEM_DEMO_BACKFILL_HOURS=24 IDEM_DEMO_SEED=1842 IDEM_REDRIVE_PER_SECOND=20 \
	  OIDC_PROVIDER_ADDR=$(E2E_OIDC_ADDR) $(E2E_OIDC) \
	  npx playwright test
