//! The consumer library's integration tests, in one binary, against real
//! SQLite and Postgres databases.

// A test's length follows the story it tells (the 80-line limit is for
// the product's functions).
#![allow(clippy::too_many_lines)]

mod choreography;
mod own_transaction;
mod races;
