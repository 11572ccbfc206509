//! The external providers the demo's consumers call, and how they misbehave.

use rand::{Rng, rngs::StdRng};

/// How one call to a provider ends, as the worker experiences it.
#[derive(Debug, Clone, PartialEq)]
pub enum Call {
    /// The provider acted and said so.
    Accepted { provider_ref: String },
    /// 429 Too Many Requests with Retry-After.
    RateLimited { retry_after_seconds: u32 },
    /// 503 from the provider: retryable.
    Unavailable,
    /// 400: the request will never succeed as sent.
    Rejected { reason: &'static str },
    /// The request went out and no response came back: it may have been acted on.
    LostResponse,
    /// The provider accepted, then the worker crashed before recording it.
    CrashAfterAcceptance,
}

/// Seconds a call takes.
pub fn latency_seconds(rng: &mut StdRng) -> f64 {
    0.15 + rng.random::<f64>().powi(3) * 2.5
}

/// A worker that stalls past its visibility timeout (GC pause, slow
/// provider) so the queue hands the message to another worker meanwhile.
pub fn stalls(rng: &mut StdRng) -> bool {
    rng.random_bool(0.015)
}

/// One call. `rate_limited_before` makes 429s come in streaks, as they do
/// when one account or merchant is over its quota.
pub fn call(rng: &mut StdRng, ref_prefix: &str, rate_limited_before: bool) -> Call {
    if rate_limited_before && rng.random_bool(0.6) {
        return Call::RateLimited {
            retry_after_seconds: rng.random_range(5..40),
        };
    }
    let roll: f64 = rng.random();
    match roll {
        r if r < 0.035 => Call::RateLimited {
            retry_after_seconds: rng.random_range(5..40),
        },
        r if r < 0.055 => Call::Unavailable,
        r if r < 0.070 => Call::Rejected {
            reason: [
                "400 Bad Request: recipient address is invalid",
                "400 Bad Request: order is already closed",
            ][rng.random_range(0..2)],
        },
        r if r < 0.078 => Call::LostResponse,
        r if r < 0.084 => Call::CrashAfterAcceptance,
        _ => Call::Accepted {
            provider_ref: reference(rng, ref_prefix),
        },
    }
}

pub fn reference(rng: &mut StdRng, prefix: &str) -> String {
    let id: u64 = rng.random();
    format!("{prefix}_{:010x}", id & 0xff_ffff_ffff)
}
