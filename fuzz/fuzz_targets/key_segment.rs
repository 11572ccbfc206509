//! Any text as a key's or consumer's path segment is either refused with a
//! `KeyError` or decodes to a value whose own segment decodes back to it.
#![no_main]

use idem_domain::{ConsumerName, IdempotencyKey};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|segment: &str| {
    if let Ok(key) = IdempotencyKey::from_segment(segment) {
        let again = IdempotencyKey::from_segment(&key.to_segment())
            .expect("a key's own segment decodes");
        assert_eq!(again, key);
        assert!(key.as_str().len() <= IdempotencyKey::MAX_BYTES);
    }
    if let Ok(consumer) = ConsumerName::from_segment(segment) {
        let again = ConsumerName::from_segment(&consumer.to_segment())
            .expect("a consumer's own segment decodes");
        assert_eq!(again, consumer);
    }
});
