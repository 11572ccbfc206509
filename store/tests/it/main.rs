//! The store's integration tests, in one binary; each storage test runs
//! its body on SQLite and on Postgres (`idem_store::testing`).

mod actions;
mod audit;
mod conformance;
mod contract;
mod slo;
