//! HTTP-level faults of the fake server: what a flaky provider or proxy does to a request
//! before any model sees it.

use serde::{Deserialize, Serialize};

/// One injected HTTP fault.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum HttpFault {
    /// 429 in the addressed wire's shape, with `Retry-After` (whole seconds, rounded up)
    /// and `retry-after-ms`.
    RateLimit {
        /// The wait asked for, in milliseconds.
        retry_after_ms: u64,
    },
    /// A 5xx (500, 502, 503, 529, …): an OpenAI `server_error` body, or Anthropic's
    /// `api_error` (`overloaded_error` for 529).
    ServerError {
        /// HTTP status.
        status: u16,
    },
    /// Say nothing for `ms` milliseconds (longer than the client's timeout), then close the
    /// connection without an answer.
    Hang {
        /// How long to hang.
        ms: u64,
    },
    /// 200 with valid headers declaring the full length, then half the JSON, then the
    /// connection is cut. On a streamed request: a 200 event stream cut mid-event.
    TruncatedBody,
    /// 200 with `content-type: application/json` and a body that is not JSON. On a
    /// streamed request: an event stream whose event is not JSON.
    MalformedBody,
}

/// A fault at the N-th completion request (1-based) of a trial key, counting every
/// completion request for that key on either wire, faulted ones included — so a retry of a
/// faulted request is request N+1. `count_tokens` requests are not counted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScheduledFault {
    /// 1-based request index within the key.
    pub request: u64,
    /// What to do.
    pub fault: HttpFault,
}

/// Faults at a seeded rate: each request `(key, n)` faults when a hash of
/// `(seed, key, n)` falls under `rate`, with a kind chosen by the same hash, so a run
/// replays the same faults.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RandomFaults {
    /// Probability per request, 0..=1.
    pub rate: f64,
    /// Seed.
    pub seed: u64,
    /// Kinds to choose from (none: no faults).
    pub kinds: Vec<HttpFault>,
}

/// The server-wide fault plan; a [`super::BackendResolver`] (or [`super::ScriptResolver`])
/// may add faults per key.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FaultPlan {
    /// Faults by request index, applied to every key.
    #[serde(default)]
    pub at_request: Vec<ScheduledFault>,
    /// Seeded random faults, applied when no scheduled fault names the request.
    #[serde(default)]
    pub random: Option<RandomFaults>,
}

fn splitmix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = x;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn fnv1a(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

impl RandomFaults {
    /// The fault (if any) for request `n` of `key`.
    pub fn pick(&self, key: &str, n: u64) -> Option<HttpFault> {
        if self.kinds.is_empty() || self.rate.is_nan() || self.rate <= 0.0 {
            return None;
        }
        let h = splitmix64(self.seed ^ splitmix64(fnv1a(key) ^ splitmix64(n)));
        let unit = (h >> 11) as f64 / (1u64 << 53) as f64;
        if unit >= self.rate {
            return None;
        }
        let idx = usize::try_from(splitmix64(h) % self.kinds.len() as u64).unwrap_or(0);
        self.kinds.get(idx).cloned()
    }
}

impl FaultPlan {
    /// The fault for request `n` of `key`: a key-specific scheduled fault first, then the
    /// plan's scheduled faults, then the seeded rate.
    pub fn pick(&self, key: &str, n: u64, key_faults: &[ScheduledFault]) -> Option<HttpFault> {
        key_faults
            .iter()
            .chain(&self.at_request)
            .find(|f| f.request == n)
            .map(|f| f.fault.clone())
            .or_else(|| self.random.as_ref().and_then(|r| r.pick(key, n)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_faults_are_seeded_and_near_the_rate() {
        let r = RandomFaults {
            rate: 0.25,
            seed: 42,
            kinds: vec![HttpFault::MalformedBody, HttpFault::TruncatedBody],
        };
        let picks: Vec<_> = (1..=2000).map(|n| r.pick("trial-a", n)).collect();
        let again: Vec<_> = (1..=2000).map(|n| r.pick("trial-a", n)).collect();
        assert_eq!(picks, again);
        let hits = picks.iter().filter(|p| p.is_some()).count();
        assert!((400..600).contains(&hits), "{hits}");
        assert!(picks.contains(&Some(HttpFault::MalformedBody)));
        assert!(picks.contains(&Some(HttpFault::TruncatedBody)));
        let other: Vec<_> = (1..=2000).map(|n| r.pick("trial-b", n)).collect();
        assert_ne!(picks, other);
    }

    #[test]
    fn scheduled_faults_take_precedence() {
        let plan = FaultPlan {
            at_request: vec![ScheduledFault {
                request: 2,
                fault: HttpFault::ServerError { status: 503 },
            }],
            random: None,
        };
        let key = [ScheduledFault {
            request: 2,
            fault: HttpFault::MalformedBody,
        }];
        assert_eq!(plan.pick("k", 2, &key), Some(HttpFault::MalformedBody));
        assert_eq!(
            plan.pick("k", 2, &[]),
            Some(HttpFault::ServerError { status: 503 })
        );
        assert_eq!(plan.pick("k", 1, &key), None);
    }
}
