#!/usr/bin/env python3
"""Splits callgrind dumps of Idem's key page and the bare handler into
phases, in instructions per request (scripts/profile-key-page.sh runs it).

    callgrind-phases.py N IDEM_DUMP BARE_DUMP

callgrind lists a function once per source file its inlined code comes
from, each entry with (nearly) the function's whole inclusive cost; the
largest is taken. Async layers
nest (each layer's future polls the next), so a layer's own cost is its
inclusive cost minus the inclusive cost of the layer it wraps. Entries
that callgrind marks as part of a recursion cycle ('2) are not summed.
Whatever no phase names is "the rest": the runtime, the router, the
other layers.
"""
import collections
import re
import subprocess
import sys

LINE = re.compile(r"^\s*([\d,]+) \([^)]*\)\s+(.*?):(.*?)(?: \[[^\]]*\])?$")


def inclusive(dump):
    out = subprocess.run(
        ["callgrind_annotate", "--inclusive=yes", "--threshold=100", "--auto=no", dump],
        check=True, capture_output=True, text=True).stdout
    costs = collections.Counter()
    total = 0
    for line in out.splitlines():
        if "PROGRAM TOTALS" in line:
            total = int(line.split()[0].replace(",", ""))
            continue
        m = LINE.match(line)
        if not m or re.search(r"'\d+$", m.group(3)):
            continue
        costs[m.group(3)] = max(costs[m.group(3)], int(m.group(1).replace(",", "")))
    return total, costs


def cost(costs, *patterns):
    """The summed inclusive cost of the functions each pattern names."""
    found = 0
    for pattern in patterns:
        names = [name for name in costs if re.search(pattern, name)]
        found += sum(costs[n] for n in names)
    return found


def table(title, n, total, phases):
    print(f"\n{title}: {total / n:,.0f} instructions per request\n")
    print("| phase | instructions per request | share |")
    print("|---|---:|---:|")
    named = 0
    for name, value in phases:
        named += value
        print(f"| {name} | {value / n:,.0f} | {value / total:.1%} |")
    rest = total - named
    print(f"| the rest: runtime, router, other layers, allocator outside the above | {rest / n:,.0f} | {rest / total:.1%} |")


def main():
    n = int(sys.argv[1])
    total, c = inclusive(sys.argv[2])
    fmt_layer = cost(c, r"^<idem::telemetry::RequestSpan as tower_http::trace::make_span::MakeSpan<B>>::make_span$",
                     r"^<idem::telemetry::ResponseEvent as tower_http::trace::on_response::OnResponse<B>>::on_response$")
    story = cost(c, r"^idem_app::api::keys::ssr::story::\{\{closure\}\}$")
    reads = cost(c, r"^idem_store::reads::<impl idem_store::store::Store>::key_records::\{\{closure\}\}$")
    if reads == 0:  # inlined into the story: its SQL round trips
        reads = cost(c, r"^sqlx_core::query_as::QueryAs<DB,O,A>::fetch_all::\{\{closure\}\}$")
    handler = cost(c, r"^leptos_axum::handle_response_inner::\{\{closure\}\}$")
    guard = cost(c, r"^idem::auth::guard::guard::\{\{closure\}\}$")
    inner_of_guard = cost(c, r"^<axum::middleware::from_fn::FromFn<F,S,I,\(T1,\)> as tower_service::Service<http::request::Request<axum_core::body::Body>>>::call::\{\{closure\}\}$")
    sessions = cost(c, r"^<tracing::instrument::Instrumented<T> as core::future::future::Future>::poll$")
    compress = cost(c, r"^brotli::enc::encode::BrotliEncoderStateStruct<Alloc>::compress_stream$",
                    r"^miniz_oxide::deflate::stream::deflate$")
    parse = cost(c, r"^<hyper::proto::h1::role::Server as hyper::proto::h1::Http1Transaction>::parse$")
    encode = cost(c, r"^<hyper::proto::h1::role::Server as hyper::proto::h1::Http1Transaction>::encode$")
    table("Idem, key page", n, total, [
        ("accept and parse the request (hyper)", parse),
        ("session: load and hand back (tower-sessions, Idem's store)", max(sessions - guard, 0)),
        ("guard: authenticate, role (its own work)", max(guard - inner_of_guard, 0)),
        ("the key's reads (sqlx: 4 statements, one connection)", reads),
        ("the story: verdicts, timeline, audit rule (after the reads)", max(story - reads, 0)),
        ("render the page (Leptos SSR, without the story's server function)", max(handler - story, 0)),
        ("logging: the request span and its one event", fmt_layer),
        ("compress the answer", compress),
        ("write the response head (hyper)", encode),
    ])

    total, c = inclusive(sys.argv[3])
    table("Bare axum+sqlx handler", n, total, [
        ("accept and parse the request (hyper)", cost(c, r"^<hyper::proto::h1::role::Server as hyper::proto::h1::Http1Transaction>::parse$")),
        ("the claim's read (sqlx: 1 statement, from the pool)", cost(c, r"^sqlx_core::pool::executor::<impl sqlx_core::executor::Executor for &sqlx_core::pool::Pool<DB>>::fetch_optional::\{\{closure\}\}$")),
        ("the row as JSON (serde_json)", cost(c, r"^<axum::json::Json<T> as axum_core::response::into_response::IntoResponse>::into_response$")),
        ("write the response head (hyper)", cost(c, r"^<hyper::proto::h1::role::Server as hyper::proto::h1::Http1Transaction>::encode$")),
    ])


if __name__ == "__main__":
    main()
