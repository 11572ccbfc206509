//! One module per page (or family of pages). Pages read the raw location and
//! hand raw segments and query values to server functions; see `links`.

mod audit;
mod checks;
mod consumers;
mod dead_letters;
mod key;
mod lists;
mod login;
mod not_found;
mod overview;
mod reconcile;
mod redrives;
mod search;
mod slo;
mod tokens;

pub use audit::AuditPage;
pub use checks::ChecksPage;
pub use consumers::{ConsumerPage, ConsumersPage};
pub use dead_letters::{DeadLetterPage, DeadLettersPage};
pub use key::{KeyLookupPage, KeyPage};
pub use lists::{OutboxPage, UnknownPage};
pub use login::LoginPage;
pub use not_found::NotFoundPage;
pub use overview::OverviewPage;
pub use reconcile::{ReconcilePage, ReconciliationPage};
pub use redrives::RedrivePage;
pub use search::SearchPage;
pub use slo::{SloDetailPage, SloPage};
pub use tokens::{CREATE_TOKEN_PATH, TokensPage};
