//! The store's facets: `store.claims()`, `store.runs()`, … — each a room
//! of related methods a reader can hold in mind, borrowing the one
//! [`Store`]. A facet dereferences to the store (its pool, `begin`), never
//! to another facet: what one facet needs of another it asks for by name.

use crate::store::Store;

macro_rules! facets {
    ($( $(#[$meta:meta])* $method:ident => $facet:ident ),+ $(,)?) => {
        $(
            $(#[$meta])*
            #[derive(Clone, Copy)]
            pub struct $facet<'s>(&'s Store);

            impl std::ops::Deref for $facet<'_> {
                type Target = Store;
                fn deref(&self) -> &Store {
                    self.0
                }
            }

            impl<'s> $facet<'s> {
                /// The store, for as long as the facet's borrow (what a
                /// value the facet makes, such as a reconciler, holds).
                #[allow(dead_code)]
                pub(crate) fn store(self) -> &'s Store {
                    self.0
                }
            }

            impl std::fmt::Debug for $facet<'_> {
                fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                    f.debug_tuple(stringify!($facet)).field(self.0).finish()
                }
            }
        )+

        impl Store {
            $(
                $(#[$meta])*
                pub fn $method(&self) -> $facet<'_> {
                    $facet(self)
                }
            )+
        }
    };
}

facets! {
    /// One key, and finding keys: a claim, everything about a key, the key searches, one dead letter.
    claims => Claims,
    /// The work lists and their counts: unknown outcomes, dead letters, the outbox backlog, the overview, each consumer's open work.
    lists => Lists,
    /// The consistency checks: their findings and counts, and the shared-reference sweep.
    checks => Checks,
    /// The consumers' metrics: recording, per-consumer sums and gauges, the rollups and what SLOs and charts read of them.
    metrics => Metrics,
    /// The single operator actions: replay, discard, resolve.
    actions => Actions,
    /// Bulk runs: offers, starts, steps, stops, and reading a run.
    runs => Runs,
    /// Accounts, sign-in throttling and refusals.
    people => People,
    /// The API's tokens and its Idempotency-Keys.
    tokens => Tokens,
    /// The audit log: appended to, read back.
    audit => Audit,
    /// Reconciliations: matching an export, keeping it, reading it back.
    reconcile => Reconcile,
    /// Dead letters from a broker, and the publication of their replays.
    brokers => Brokers,
    /// Idem's own upkeep: the background lease, its settings, the log fingerprints of keys.
    system => System,
}
