//! Idem's tooling: what the team runs against a database to measure Idem,
//! never what an operator's binary can do. `idem-tools seed` fills a
//! database with a production-sized synthetic data set, `idem-tools plans`
//! prints every dashboard read's plan, `idem-tools bench` times them beside
//! their naive forms, `idem-tools load` loads a server at a fixed rate, `idem-tools
//! compression` prices each compression level on saved pages, `idem-tools
//! reconcile` times a provider's export reconciled against the claims. None of it ships in `idem`: the release binary cannot
//! bulk-load or bulk-delete anything.

pub mod bench;
pub mod compression;
pub mod load;
pub mod plans;
pub mod reconcile;
pub mod seed;

pub use idem_app::error::cause_chain;
