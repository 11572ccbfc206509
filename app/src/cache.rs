//! A short-lived, shared cache of dashboard reads (server only).
//!
//! Live refresh means every open browser asks for the same lists every few
//! seconds. Reads go through [`ReadCache::get_or_load`]: within its time to
//! live one database read serves every request for the same list and
//! arguments, and concurrent misses wait for the one load already running
//! (single flight), so a hundred open tabs cost what one costs.

use std::{
    any::Any,
    collections::HashMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use tokio::sync::OnceCell;

type Slot = Arc<OnceCell<Arc<dyn Any + Send + Sync>>>;

#[derive(Clone)]
pub struct ReadCache {
    ttl: Duration,
    capacity: usize,
    entries: Arc<Mutex<HashMap<String, (Instant, Slot)>>>,
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

    /// The value cached under `key`, or the result of `load` (which then
    /// serves every caller until it is `ttl` old). A failed load is not
    /// cached: the next caller tries again.
    pub async fn get_or_load<T, E, F, Fut>(&self, key: String, load: F) -> Result<T, E>
    where
        T: Clone + Send + Sync + 'static,
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        // The value's type is part of the key, so a slot only ever holds one type.
        let key = format!("{}\u{0}{key}", std::any::type_name::<T>());
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
                None => unreachable!("the type name is part of the key"),
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

    fn slot(&self, key: &str) -> Slot {
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
        entries.insert(key.to_owned(), (now, slot.clone()));
        slot
    }

    fn forget(&self, key: &str, slot: &Slot) {
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

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn fifty_concurrent_readers_of_one_list_cost_one_load() {
        let cache = ReadCache::new(Duration::from_secs(5), 100);
        let loads = Arc::new(AtomicUsize::new(0));
        let tasks: Vec<_> = (0..50)
            .map(|_| {
                let (cache, loads) = (cache.clone(), loads.clone());
                tokio::spawn(async move {
                    cache
                        .get_or_load("unknown:first".into(), || async {
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
        assert_eq!(cache.get_or_load("k".into(), load(1)).await, Ok(1));
        assert_eq!(
            cache.get_or_load("k".into(), load(2)).await,
            Ok(1),
            "fresh: served from the cache"
        );
        tokio::time::sleep(Duration::from_millis(30)).await;
        assert_eq!(
            cache.get_or_load("k".into(), load(3)).await,
            Ok(3),
            "expired: loaded again"
        );

        assert_eq!(
            cache
                .get_or_load::<i32, _, _, _>("e".into(), || async { Err("down") })
                .await,
            Err("down")
        );
        assert_eq!(
            cache.get_or_load("e".into(), load(4)).await,
            Ok(4),
            "a failure is not remembered"
        );
    }
}
