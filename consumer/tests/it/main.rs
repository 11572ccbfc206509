//! The consumer library's integration tests, in one binary, against real
//! SQLite and Postgres databases.

mod choreography;
mod own_transaction;
