//! The plans `auto_explain` sends as Postgres notices, collected from
//! sqlx's tracing events.

use std::{
    fmt::Write as _,
    sync::{Arc, Mutex},
};

use tracing::{Subscriber, field::Visit};
use tracing_subscriber::{Layer, layer::Context};

/// Plans collected from Postgres notices.
#[derive(Clone, Default)]
pub(super) struct Notices(Arc<Mutex<Vec<String>>>);

impl Notices {
    pub(super) fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

struct MessageVisitor<'a>(&'a mut String);

impl Visit for MessageVisitor<'_> {
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        if field.name() == "message" {
            self.0.push_str(value);
        }
    }
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.0, "{value:?}");
        }
    }
}

impl<S: Subscriber> Layer<S> for Notices {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        if event.metadata().target() == "sqlx::postgres::notice" {
            let mut message = String::new();
            event.record(&mut MessageVisitor(&mut message));
            if message.contains("plan:") {
                self.0
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(message);
            }
        }
    }
}
