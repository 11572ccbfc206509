//! The Idem server: configuration, start-up, the HTTP router, health probes
//! and the demo simulator. `main.rs` only parses arguments and calls in here,
//! so tests build the same [`Application`] on port 0.

pub mod accounts;
pub mod api;
pub mod assets;
pub mod auth;
pub mod brokers;
pub mod compression;
pub mod config;
pub mod consumer_events;
pub mod consumers_config;
pub mod demo;
pub mod fn_errors;
pub mod health;
pub mod limits;
pub mod metrics;
pub mod per_address;
pub mod preferences;
pub mod reconcile;
pub mod refusal;
pub mod rules;
pub mod serve;
pub mod slo_config;
pub mod startup;
pub mod telemetry;
pub mod tokens;

pub use config::Config;
pub use startup::{Application, StartError};
