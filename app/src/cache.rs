//! A short-lived, shared cache of dashboard reads (server only).
//!
//! Live refresh means every open browser asks for the same lists every few
//! seconds. Reads go through [`Reader::cached`]: within its time to live one
//! database read serves every request for the same [`ReadKey`], and
//! concurrent misses wait for the one load already running (single flight),
//! so a hundred open tabs cost what one costs.
//!
//! An entry is named by the read's [`ReadKey`], the [`Database`] it was read
//! from (added by the [`Reader`], which also hands the load that database's
//! store, so no read can forget it) and the type of its value.

use std::{
    any::{Any, TypeId},
    collections::HashMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use idem_domain::{ConsumerName, DeadLetterState};
use idem_store::{Store, Ts};
use tokio::sync::OnceCell;

use crate::{error::AppError, span::ChartSpan};

/// Where a page reads from, and the caches its reads go through
/// ([`Reader::cached`] names the database in every entry it keeps). Made by
/// `serving::reader`, which decides which database a request reads.
pub struct Reader {
    pub store: Store,
    pub database: Database,
    pub(crate) reads: ReadCache,
    pub(crate) per_interval: ReadCache,
}

impl Reader {
    /// Whether this reads the read replica, which may lag behind an action
    /// just taken.
    pub fn is_replica(&self) -> bool {
        self.database == Database::Replica
    }
}

/// Which database a read goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Database {
    Primary,
    /// The read replica, which may lag behind the primary.
    Replica,
}

/// Every kind of cached read, with the arguments that decide its answer.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum ReadKey {
    /// The overview's counts and "needs attention" lists, of the
    /// consumers a reader may see.
    Overview { within: idem_domain::Within },
    /// The consumer table's figures, of the consumers a reader may see.
    Consumers { within: idem_domain::Within },
    /// One page of unknown outcomes.
    Unknown {
        cursor: Option<String>,
        window: idem_store::Window,
    },
    /// One page of dead letters in one state.
    DeadLetters {
        state: DeadLetterState,
        cursor: Option<String>,
        filter: idem_store::DeadLetterFilter,
    },
    /// One page of the outbox backlog.
    Outbox {
        cursor: Option<String>,
        filter: idem_store::OutboxFilter,
    },
    /// Every consistency check's count, over the consumers a reader may see.
    CheckCounts { within: idem_domain::Within },
    /// One page of one consistency check's findings.
    CheckFindings {
        check: idem_domain::Check,
        cursor: Option<String>,
        within: idem_domain::Within,
    },
    /// The unknown outcomes open now, by age (about now, not a span).
    /// `blind`: for a reader to whom the consumer is not theirs.
    OpenUnknownChart {
        consumer: Option<ConsumerName>,
        blind: bool,
    },
    /// The overview's charts for a span, until its next interval completes.
    OverviewCharts {
        span: ChartSpan,
        consumer: Option<ConsumerName>,
        blind: bool,
    },
    /// One SLO's charts, until the next hour completes.
    SloCharts {
        name: String,
        consumer: Option<idem_domain::ConsumerName>,
        hour: Ts,
    },
    /// Every SLO evaluated up to a whole minute.
    SloBoard { minute: Ts },
}

impl ReadKey {
    /// Whether the answer changes only when an interval the key names
    /// completes (kept in `AppState::per_interval`; the rest in
    /// `AppState::reads`).
    fn per_interval(&self) -> bool {
        matches!(
            self,
            Self::OverviewCharts { .. } | Self::SloCharts { .. } | Self::SloBoard { .. }
        )
    }
}

impl Reader {
    /// The answer to `key` from this reader's database: cached, or the
    /// result of `load` given that database's store (which then serves
    /// every caller until it is stale). A failed load is not cached: the
    /// next caller tries again.
    pub(crate) async fn cached<T, F, Fut>(&self, key: ReadKey, load: F) -> Result<T, AppError>
    where
        T: Clone + Send + Sync + 'static,
        F: FnOnce(Store) -> Fut,
        Fut: Future<Output = Result<T, AppError>>,
    {
        let cache = if key.per_interval() {
            &self.per_interval
        } else {
            &self.reads
        };
        let store = self.store.clone();
        cache.get_or_load(self.database, key, || load(store)).await
    }
}

/// What names an entry: the read, where it was read, and its value's type
/// (so a slot only ever holds one type).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct EntryKey {
    read: ReadKey,
    database: Database,
    value: TypeId,
}

type Slot = Arc<OnceCell<Arc<dyn Any + Send + Sync>>>;

#[derive(Clone)]
pub struct ReadCache {
    ttl: Duration,
    capacity: usize,
    entries: Arc<Mutex<HashMap<EntryKey, (Instant, Slot)>>>,
}

impl std::fmt::Debug for ReadCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadCache")
            .field("ttl", &self.ttl)
            .finish_non_exhaustive()
    }
}

impl ReadCache {
    pub fn new(ttl: Duration, capacity: usize) -> Self {
        Self {
            ttl,
            capacity,
            entries: Arc::default(),
        }
    }

    /// The value cached for `read` from `database`, or the result of `load`
    /// (which then serves every caller until it is `ttl` old). A failed
    /// load is not cached: the next caller tries again. Only a [`Reader`]
    /// calls this, with its own database.
    async fn get_or_load<T, E, F, Fut>(
        &self,
        database: Database,
        read: ReadKey,
        load: F,
    ) -> Result<T, E>
    where
        T: Clone + Send + Sync + 'static,
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let key = EntryKey {
            read,
            database,
            value: TypeId::of::<T>(),
        };
        let slot = self.slot(&key);
        let loaded = slot
            .get_or_try_init(|| async {
                load()
                    .await
                    .map(|value| Arc::new(value) as Arc<dyn Any + Send + Sync>)
            })
            .await;
        match loaded {
            Ok(value) => match value.downcast_ref::<T>() {
                Some(value) => Ok(value.clone()),
                None => unreachable!("the value's type is part of the key"),
            },
            Err(err) => {
                self.forget(&key, &slot);
                Err(err)
            }
        }
    }

    /// Forgets everything cached: the next read of each key loads afresh.
    pub fn clear(&self) {
        self.entries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }

    fn slot(&self, key: &EntryKey) -> Slot {
        let now = Instant::now();
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((born, slot)) = entries.get(key)
            && now.duration_since(*born) < self.ttl
        {
            return slot.clone();
        }
        if entries.len() >= self.capacity {
            entries.retain(|_, (born, _)| now.duration_since(*born) < self.ttl);
            if entries.len() >= self.capacity {
                entries.clear();
            }
        }
        let slot = Slot::default();
        entries.insert(key.clone(), (now, slot.clone()));
        slot
    }

    fn forget(&self, key: &EntryKey, slot: &Slot) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if entries.get(key).is_some_and(|(_, s)| Arc::ptr_eq(s, slot)) {
            entries.remove(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    fn first_unknown() -> ReadKey {
        ReadKey::Unknown {
            cursor: None,
            window: idem_store::Window::default(),
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn fifty_concurrent_readers_of_one_list_cost_one_load() {
        let cache = ReadCache::new(Duration::from_secs(5), 100);
        let loads = Arc::new(AtomicUsize::new(0));
        let tasks: Vec<_> = (0..50)
            .map(|_| {
                let (cache, loads) = (cache.clone(), loads.clone());
                tokio::spawn(async move {
                    cache
                        .get_or_load(Database::Primary, first_unknown(), || async {
                            loads.fetch_add(1, Ordering::SeqCst);
                            tokio::time::sleep(Duration::from_millis(50)).await;
                            Ok::<_, ()>(42)
                        })
                        .await
                })
            })
            .collect();
        for task in tasks {
            assert_eq!(task.await.unwrap(), Ok(42));
        }
        assert_eq!(loads.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn an_expired_entry_is_loaded_again_and_failures_are_not_cached() {
        let cache = ReadCache::new(Duration::from_millis(20), 100);
        let load = |n: i32| move || async move { Ok::<_, &str>(n) };
        let (db, k, e) = (Database::Primary, first_unknown, || ReadKey::Overview {
            within: idem_domain::Within::Every,
        });
        assert_eq!(cache.get_or_load(db, k(), load(1)).await, Ok(1));
        assert_eq!(
            cache.get_or_load(db, k(), load(2)).await,
            Ok(1),
            "fresh: served from the cache"
        );
        tokio::time::sleep(Duration::from_millis(30)).await;
        assert_eq!(
            cache.get_or_load(db, k(), load(3)).await,
            Ok(3),
            "expired: loaded again"
        );

        assert_eq!(
            cache
                .get_or_load::<i32, _, _, _>(db, e(), || async { Err("down") })
                .await,
            Err("down")
        );
        assert_eq!(
            cache.get_or_load(db, e(), load(4)).await,
            Ok(4),
            "a failure is not remembered"
        );
    }

    #[tokio::test]
    async fn the_same_read_from_the_primary_and_from_the_replica_is_cached_apart() {
        let store = Store::connect(&idem_store::StoreConfig::new("sqlite::memory:")).unwrap();
        let (reads, per_interval) = (
            ReadCache::new(Duration::from_secs(5), 100),
            ReadCache::new(Duration::from_secs(5), 100),
        );
        let reader = |database| Reader {
            store: store.clone(),
            database,
            reads: reads.clone(),
            per_interval: per_interval.clone(),
        };
        let (primary, replica) = (reader(Database::Primary), reader(Database::Replica));
        let answer = |text: &'static str| move |_: Store| async move { Ok(text) };
        let minute = ReadKey::SloBoard {
            minute: Ts(chrono::DateTime::UNIX_EPOCH),
        };
        for key in [
            ReadKey::Overview {
                within: idem_domain::Within::Every,
            },
            minute,
        ] {
            assert_eq!(
                primary.cached(key.clone(), answer("primary")).await,
                Ok("primary")
            );
            assert_eq!(
                replica.cached(key.clone(), answer("replica")).await,
                Ok("replica")
            );
            assert_eq!(
                primary.cached(key, answer("again")).await,
                Ok("primary"),
                "each database's answer is served to its own readers"
            );
        }
    }
}
