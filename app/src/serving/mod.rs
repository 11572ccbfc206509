//! The server side of serving a page or a server function (server only):
//! the application state, the request as a server function sees it, which
//! database it reads, how an action's answer reaches its page, and how an
//! outcome becomes a status. Rooms, each importing only those before it:
//! `state` → `request` → `reader`, `answered` → `answers`.

mod answered;
mod answers;
mod reader;
mod request;
mod state;

pub use answered::{RETRY_AFTER_SECONDS, serve, set_status};
pub use answers::{ANSWER_IN_PLACE_HEADER, ANSWER_PARAM, answer_form, answer_on, take_answer};
pub use reader::{READ_PRIMARY_COOKIE, READ_PRIMARY_SECONDS, primary, reader};
pub use request::{
    client_addr, clock, content_security_policy, cookie, current_user, new_action_id,
    refused_elsewhere, require, require_on, state, viewer_zone, within,
};
pub use state::{AppState, CHART_CACHE_TTL, DatabaseStatus, READ_CACHE_TTL};
