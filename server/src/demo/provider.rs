//! The external providers the demo's consumers call, and how they misbehave.

use rand::{Rng, rngs::StdRng};

use super::incidents::ProviderWeather;

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

/// One call, as the provider answers under `weather`. `rate_limited_before`
/// makes 429s come in streaks, as they do when one account or merchant is
/// over its quota.
pub fn call(
    rng: &mut StdRng,
    weather: &ProviderWeather,
    ref_prefix: &str,
    rate_limited_before: bool,
) -> Call {
    if rate_limited_before && rng.random_bool(weather.streak) {
        return Call::RateLimited {
            retry_after_seconds: rng.random_range(weather.retry_after.0..weather.retry_after.1),
        };
    }
    let roll: f64 = rng.random();
    let limited = weather.rate_limited;
    let unavailable = limited + weather.unavailable;
    let rejected = unavailable + weather.rejected;
    let lost = rejected + weather.lost_response;
    let crash = lost + weather.crash_after_acceptance;
    match roll {
        r if r < limited => Call::RateLimited {
            retry_after_seconds: rng.random_range(weather.retry_after.0..weather.retry_after.1),
        },
        r if r < unavailable => Call::Unavailable,
        r if r < rejected => Call::Rejected {
            reason: [
                "400 Bad Request: recipient address is invalid",
                "400 Bad Request: order is already closed",
            ][rng.random_range(0..2)],
        },
        r if r < lost => Call::LostResponse,
        r if r < crash => Call::CrashAfterAcceptance,
        _ => Call::Accepted {
            provider_ref: reference(rng, ref_prefix),
        },
    }
}

pub fn reference(rng: &mut StdRng, prefix: &str) -> String {
    let id: u64 = rng.random();
    format!("{prefix}_{:010x}", id & 0xff_ffff_ffff)
}
