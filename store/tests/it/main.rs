//! The store's integration tests, in one binary; each storage test runs
//! its body on SQLite and on Postgres (`idem_store::testing`).

// A test's length follows the story it tells (the 80-line limit is for
// the product's functions).
#![allow(clippy::too_many_lines)]

mod actions;
mod audit;
mod conformance;
mod contract;
mod slo;
mod slo_audit;
mod slo_by_consumer;
