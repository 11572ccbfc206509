//! The `idem` server's integration tests, in one binary: each test starts
//! the real `Application` on port 0 with its own database (SQLite, or a
//! fresh Postgres database) and talks to it over real HTTP, or runs the
//! built binary as a process. `common` is the harness.
//!
//! `tests/logs.rs` is a binary of its own: it installs the process's log
//! subscriber (JSON, every level) and reads everything it captured.

// A test's length follows the story it tells (the 80-line limit is for
// the product's functions).
#![allow(clippy::too_many_lines)]

mod common;

mod action_bounds;
mod actions;
mod adapters;
mod anonymous;
mod api;
mod auth;
mod brokers;
mod charts;
mod demo;
mod demo_board;
mod demo_teams;
mod hostile;
mod http;
mod metrics;
mod oidc;
mod outage;
mod proxy_auth;
mod reliability;
mod replicas;
mod rules;
mod sign_in;
mod slo;
mod slow;
mod team_rights;
