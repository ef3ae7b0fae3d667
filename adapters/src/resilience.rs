//! Retries, backoff and adaptive concurrency around any [`Provider`].
//!
//! Infrastructure failures are not model failures (QUALITY.md §Reliability): a 429, a 5xx,
//! a timeout or a malformed body is retried with jittered exponential backoff that honours
//! `Retry-After`, within a bounded number of attempts; a context overflow or a rejected
//! request is never retried — the first is the engine's to recover, the second would only
//! fail again. [`AdaptiveLimiter`], shared by every trial of a run, keeps the number of
//! requests in flight under what the provider tolerates: it halves on a 429 and grows back
//! additively on success, so live runs are bounded by the provider, not by the harness.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::Notify;

use crate::{ModelRequest, ModelResponse, OpaqueItem, Provider, ProviderError};

/// How [`Resilient`] retries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts per request, the first included (at least 1).
    pub max_attempts: u32,
    /// Backoff before the first retry; doubles per retry.
    pub base_delay: Duration,
    /// Cap on the exponential backoff.
    pub max_delay: Duration,
    /// Cap on an honoured `Retry-After`: a server asking for an hour does not stall a run
    /// (ctxbench's `--max-retry-after`, by default the smaller of `--request-timeout` and
    /// [`DEFAULT_MAX_RETRY_AFTER`]). A longer ask waits the cap and is counted in
    /// [`ResilienceStats::retry_after_capped`].
    pub max_retry_after: Duration,
    /// Timeout of each attempt; `None` leaves it to the inner provider.
    pub attempt_timeout: Option<Duration>,
    /// Seed of the backoff jitter, so a run's retry timing is reproducible.
    pub jitter_seed: u64,
}

/// Default cap on an honoured `Retry-After` (see [`RetryPolicy::max_retry_after`]): with
/// the default 5 attempts, a provider answering 429 forever holds a request at most about
/// four minutes before the trial is errored.
pub const DEFAULT_MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 5,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(30),
            max_retry_after: DEFAULT_MAX_RETRY_AFTER,
            attempt_timeout: Some(Duration::from_secs(180)),
            jitter_seed: 0,
        }
    }
}

impl RetryPolicy {
    /// The backoff before retry number `retry` (1-based): "equal jitter" over the capped
    /// exponential `d = min(max_delay, base_delay·2^(retry-1))`, i.e. `d/2 + u·d/2` with
    /// `u ∈ [0,1)` drawn from `jitter`, then raised to the server's `Retry-After` (capped).
    pub fn delay(&self, retry: u32, retry_after: Option<Duration>, jitter: u64) -> Duration {
        let exp = self
            .base_delay
            .saturating_mul(2u32.saturating_pow(retry.saturating_sub(1)))
            .min(self.max_delay);
        let unit = (jitter >> 11) as f64 / (1u64 << 53) as f64;
        let backoff = exp / 2 + exp.mul_f64(unit / 2.0);
        match retry_after {
            Some(ra) => backoff.max(ra.min(self.max_retry_after)),
            None => backoff,
        }
    }
}

/// SplitMix64: a tiny, well-known mixing function; enough for reproducible jitter.
fn splitmix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = x;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[derive(Debug)]
struct LimiterState {
    limit: f64,
    in_flight: usize,
    /// Bumped on every decrease: only a 429 to a request started in the current epoch
    /// halves again, so one burst of 429s to N concurrent requests halves once, not N times.
    epoch: u64,
    decreases: u64,
}

/// A concurrency limit shared by all trials that talk to one provider (AIMD: halve on a
/// 429, grow by `1/limit` per success, i.e. about one slot per window of successes; never
/// below 1, never above `max`).
#[derive(Debug)]
pub struct AdaptiveLimiter {
    state: Mutex<LimiterState>,
    notify: Notify,
    max: usize,
}

/// A slot in the [`AdaptiveLimiter`]; released on drop.
#[derive(Debug)]
pub struct LimiterPermit<'a> {
    limiter: &'a AdaptiveLimiter,
    epoch: u64,
}

impl Drop for LimiterPermit<'_> {
    fn drop(&mut self) {
        {
            let mut s = self.limiter.lock();
            s.in_flight = s.in_flight.saturating_sub(1);
        }
        self.limiter.notify.notify_waiters();
    }
}

impl AdaptiveLimiter {
    /// A limiter starting (and capped) at `max` concurrent requests (at least 1).
    pub fn new(max: usize) -> Self {
        let max = max.max(1);
        AdaptiveLimiter {
            state: Mutex::new(LimiterState {
                limit: max as f64,
                in_flight: 0,
                epoch: 0,
                decreases: 0,
            }),
            notify: Notify::new(),
            max,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LimiterState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The current limit (whole requests).
    pub fn limit(&self) -> usize {
        (self.lock().limit.floor() as usize).max(1)
    }

    /// The configured maximum.
    pub fn max(&self) -> usize {
        self.max
    }

    /// Requests in flight now.
    pub fn in_flight(&self) -> usize {
        self.lock().in_flight
    }

    /// How many times the limit was halved.
    pub fn decreases(&self) -> u64 {
        self.lock().decreases
    }

    /// Wait for a slot.
    pub async fn acquire(&self) -> LimiterPermit<'_> {
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            // Register before checking, so a release between the check and the wait is seen.
            notified.as_mut().enable();
            {
                let mut s = self.lock();
                if s.in_flight < (s.limit.floor() as usize).max(1) {
                    s.in_flight += 1;
                    return LimiterPermit {
                        limiter: self,
                        epoch: s.epoch,
                    };
                }
            }
            notified.await;
        }
    }

    /// A request succeeded: grow by `1/limit`, up to `max`.
    pub fn on_success(&self) {
        let grew = {
            let mut s = self.lock();
            let before = s.limit.floor();
            s.limit = (s.limit + 1.0 / s.limit).min(self.max as f64);
            s.limit.floor() > before
        };
        if grew {
            self.notify.notify_waiters();
        }
    }

    /// A request started under `permit` was rate limited: halve (not below 1), once per
    /// epoch.
    pub fn on_rate_limited(&self, permit: &LimiterPermit<'_>) {
        let mut s = self.lock();
        if permit.epoch == s.epoch {
            s.limit = (s.limit / 2.0).floor().max(1.0);
            s.epoch += 1;
            s.decreases += 1;
        }
    }
}

/// What a [`Resilient`] provider did, for reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResilienceStats {
    /// Logical requests (calls to `complete`, `compact`, `count_tokens`).
    pub calls: u64,
    /// Physical attempts.
    pub attempts: u64,
    /// Retries after a 429.
    pub retries_rate_limited: u64,
    /// Retries after a 5xx.
    pub retries_server: u64,
    /// Retries after a timeout.
    pub retries_timeout: u64,
    /// Retries after a malformed or truncated body.
    pub retries_malformed: u64,
    /// Retries after the provider was unavailable: the connection was refused, or reset or
    /// closed before any answer.
    #[serde(default)]
    pub retries_unavailable: u64,
    /// Calls that still failed with an infrastructure error after the last attempt.
    pub gave_up: u64,
    /// Total backoff slept, in milliseconds (`Retry-After` waits included).
    pub backoff_ms: u64,
    /// Of [`ResilienceStats::backoff_ms`], the milliseconds slept because a server's
    /// `Retry-After` asked for longer than the jittered backoff (capped).
    #[serde(default)]
    pub retry_after_ms: u64,
    /// Retries whose `Retry-After` asked for more than [`RetryPolicy::max_retry_after`]
    /// and waited only the cap.
    #[serde(default)]
    pub retry_after_capped: u64,
}

impl ResilienceStats {
    /// All retries.
    pub fn retries(&self) -> u64 {
        self.retries_rate_limited
            + self.retries_server
            + self.retries_timeout
            + self.retries_malformed
            + self.retries_unavailable
    }
}

#[derive(Debug, Default)]
struct Counters {
    calls: AtomicU64,
    attempts: AtomicU64,
    rate_limited: AtomicU64,
    server: AtomicU64,
    timeout: AtomicU64,
    malformed: AtomicU64,
    unavailable: AtomicU64,
    gave_up: AtomicU64,
    backoff_ms: AtomicU64,
    retry_after_ms: AtomicU64,
    retry_after_capped: AtomicU64,
    jitter: AtomicU64,
}

/// `P` with retries, backoff, per-attempt timeouts and a shared adaptive concurrency limit.
/// Itself a [`Provider`], so the harness wraps whatever it drives.
#[derive(Debug)]
pub struct Resilient<P: Provider> {
    inner: P,
    policy: RetryPolicy,
    limiter: Arc<AdaptiveLimiter>,
    counters: Counters,
}

impl<P: Provider> Resilient<P> {
    /// Wrap `inner`, sharing `limiter` with the run's other trials.
    pub fn new(inner: P, policy: RetryPolicy, limiter: Arc<AdaptiveLimiter>) -> Self {
        Resilient {
            inner,
            policy,
            limiter,
            counters: Counters::default(),
        }
    }

    /// The wrapped provider.
    pub fn inner(&self) -> &P {
        &self.inner
    }

    /// The shared limiter.
    pub fn limiter(&self) -> &Arc<AdaptiveLimiter> {
        &self.limiter
    }

    /// The policy.
    pub fn policy(&self) -> &RetryPolicy {
        &self.policy
    }

    /// Counters so far.
    pub fn stats(&self) -> ResilienceStats {
        let c = &self.counters;
        let get = |a: &AtomicU64| a.load(Ordering::SeqCst);
        ResilienceStats {
            calls: get(&c.calls),
            attempts: get(&c.attempts),
            retries_rate_limited: get(&c.rate_limited),
            retries_server: get(&c.server),
            retries_timeout: get(&c.timeout),
            retries_malformed: get(&c.malformed),
            retries_unavailable: get(&c.unavailable),
            gave_up: get(&c.gave_up),
            backoff_ms: get(&c.backoff_ms),
            retry_after_ms: get(&c.retry_after_ms),
            retry_after_capped: get(&c.retry_after_capped),
        }
    }

    /// Run `op` under the policy: one slot per attempt, a timeout per attempt, retries of
    /// infrastructure failures only.
    async fn run<T, F, Fut>(&self, op: F) -> Result<T, ProviderError>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<T, ProviderError>>,
    {
        let c = &self.counters;
        c.calls.fetch_add(1, Ordering::SeqCst);
        let max_attempts = self.policy.max_attempts.max(1);
        let mut attempt = 0u32;
        loop {
            attempt += 1;
            c.attempts.fetch_add(1, Ordering::SeqCst);
            let permit = self.limiter.acquire().await;
            let result = match self.policy.attempt_timeout {
                Some(t) => tokio::time::timeout(t, op()).await.unwrap_or_else(|_| {
                    Err(ProviderError::Timeout {
                        after_ms: u64::try_from(t.as_millis()).unwrap_or(u64::MAX),
                    })
                }),
                None => op().await,
            };
            let err = match result {
                Ok(v) => {
                    self.limiter.on_success();
                    return Ok(v);
                }
                Err(e) => e,
            };
            if matches!(err, ProviderError::RateLimited { .. }) {
                self.limiter.on_rate_limited(&permit);
            }
            drop(permit);
            if !err.is_infrastructure() {
                return Err(err);
            }
            if attempt >= max_attempts {
                c.gave_up.fetch_add(1, Ordering::SeqCst);
                return Err(err);
            }
            let (counter, retry_after) = match &err {
                ProviderError::RateLimited { retry_after_ms, .. } => {
                    (&c.rate_limited, retry_after_ms.map(Duration::from_millis))
                }
                ProviderError::Timeout { .. } => (&c.timeout, None),
                ProviderError::Malformed { .. } => (&c.malformed, None),
                ProviderError::Unavailable { .. } => (&c.unavailable, None),
                _ => (&c.server, None),
            };
            counter.fetch_add(1, Ordering::SeqCst);
            let n = c.jitter.fetch_add(1, Ordering::SeqCst);
            let jitter = splitmix64(self.policy.jitter_seed ^ splitmix64(n));
            let delay = self.policy.delay(attempt, retry_after, jitter);
            let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
            if let Some(ra) = retry_after {
                if ra > self.policy.max_retry_after {
                    c.retry_after_capped.fetch_add(1, Ordering::SeqCst);
                }
                if delay > self.policy.delay(attempt, None, jitter) {
                    c.retry_after_ms.fetch_add(ms(delay), Ordering::SeqCst);
                }
            }
            c.backoff_ms.fetch_add(ms(delay), Ordering::SeqCst);
            tokio::time::sleep(delay).await;
        }
    }
}

#[async_trait::async_trait]
impl<P: Provider> Provider for Resilient<P> {
    fn name(&self) -> &str {
        self.inner.name()
    }

    async fn complete(&self, request: &ModelRequest) -> Result<ModelResponse, ProviderError> {
        self.run(|| self.inner.complete(request)).await
    }

    fn native_compaction(&self) -> bool {
        self.inner.native_compaction()
    }

    async fn compact(&self, request: &ModelRequest) -> Result<OpaqueItem, ProviderError> {
        self.run(|| self.inner.compact(request)).await
    }

    async fn count_tokens(&self, request: &ModelRequest) -> Result<Option<u64>, ProviderError> {
        self.run(|| self.inner.count_tokens(request)).await
    }

    fn resilience_stats(&self) -> Option<ResilienceStats> {
        Some(self.stats())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{FinishReason, Message, Usage};
    use std::collections::VecDeque;
    use tokio::time::Instant;

    /// Plays a queue of outcomes; `None` means "hang for an hour".
    struct Scripted {
        outcomes: Mutex<VecDeque<Option<Result<(), ProviderError>>>>,
        calls: AtomicU64,
    }

    impl Scripted {
        fn new(outcomes: Vec<Option<Result<(), ProviderError>>>) -> Self {
            Scripted {
                outcomes: Mutex::new(outcomes.into()),
                calls: AtomicU64::new(0),
            }
        }
    }

    fn ok_response() -> ModelResponse {
        ModelResponse {
            message: Message::assistant("ok"),
            usage: Usage {
                input_tokens: 1,
                output_tokens: 1,
            },
            finish_reason: FinishReason::Stop,
        }
    }

    #[async_trait::async_trait]
    impl Provider for Scripted {
        fn name(&self) -> &str {
            "scripted"
        }
        async fn complete(&self, _: &ModelRequest) -> Result<ModelResponse, ProviderError> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            let next = self
                .outcomes
                .lock()
                .unwrap()
                .pop_front()
                .unwrap_or(Some(Ok(())));
            match next {
                None => {
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                    Ok(ok_response())
                }
                Some(r) => r.map(|()| ok_response()),
            }
        }
    }

    fn request() -> ModelRequest {
        ModelRequest {
            model: "m".into(),
            messages: vec![Message::user("hi")],
            tools: vec![],
            max_output_tokens: 10,
        }
    }

    fn policy() -> RetryPolicy {
        RetryPolicy {
            max_attempts: 4,
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_millis(1_000),
            max_retry_after: Duration::from_secs(10),
            attempt_timeout: Some(Duration::from_secs(5)),
            jitter_seed: 7,
        }
    }

    fn server() -> Option<Result<(), ProviderError>> {
        Some(Err(ProviderError::Server {
            status: 503,
            message: "down".into(),
        }))
    }

    #[test]
    fn delay_is_capped_exponential_with_equal_jitter() {
        let p = policy();
        for retry in 1..=8 {
            let exp = Duration::from_millis((100u64 << (retry - 1)).min(1_000));
            for j in [0, u64::MAX / 3, u64::MAX] {
                let d = p.delay(retry, None, j);
                assert!(d >= exp / 2 && d <= exp, "retry {retry}: {d:?} vs {exp:?}");
            }
        }
        assert_eq!(
            p.delay(1, Some(Duration::from_secs(3)), 0),
            Duration::from_secs(3)
        );
        assert_eq!(
            p.delay(1, Some(Duration::from_secs(999)), 0),
            Duration::from_secs(10)
        );
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn retries_infrastructure_errors_with_backoff_and_retry_after() {
        let inner = Scripted::new(vec![
            server(),
            Some(Err(ProviderError::RateLimited {
                retry_after_ms: Some(2_000),
                message: "slow".into(),
            })),
            Some(Err(ProviderError::Malformed {
                message: "cut".into(),
            })),
        ]);
        let r = Resilient::new(inner, policy(), Arc::new(AdaptiveLimiter::new(4)));
        let t0 = Instant::now();
        let resp = r.complete(&request()).await.unwrap();
        assert_eq!(resp.message.content, "ok");
        let waited = t0.elapsed();
        // retry 1: 50..100 ms; retry 2: honours 2 s; retry 3: 200..400 ms.
        assert!(waited >= Duration::from_millis(2_250), "{waited:?}");
        assert!(waited <= Duration::from_millis(2_500), "{waited:?}");
        let s = r.stats();
        assert_eq!(s.calls, 1);
        assert_eq!(s.attempts, 4);
        assert_eq!(
            (
                s.retries_server,
                s.retries_rate_limited,
                s.retries_malformed,
                s.retries_timeout
            ),
            (1, 1, 1, 0)
        );
        assert_eq!(s.retries(), 3);
        assert_eq!(s.gave_up, 0);
        // Whole milliseconds per retry: at most one lost per retry to rounding.
        assert!(waited.as_millis() - u128::from(s.backoff_ms) <= 3);
        assert_eq!(r.limiter().decreases(), 1);
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_persistent_retry_after_is_honoured_only_up_to_the_cap_and_counted() {
        let hour = || {
            Some(Err(ProviderError::RateLimited {
                retry_after_ms: Some(3_600_000),
                message: "come back in an hour".into(),
            }))
        };
        let mut p = policy();
        p.max_retry_after = Duration::from_secs(7);
        let inner = Scripted::new(vec![hour(), hour(), hour(), hour()]);
        let r = Resilient::new(inner, p, Arc::new(AdaptiveLimiter::new(1)));
        let t0 = Instant::now();
        let err = r.complete(&request()).await.unwrap_err();
        assert_eq!(err.kind(), "rate_limited");
        // Three retries between four attempts, each waiting the 7 s cap, not an hour.
        assert_eq!(t0.elapsed(), Duration::from_secs(21));
        let s = r.stats();
        assert_eq!(
            (s.retries_rate_limited, s.retry_after_capped, s.gave_up),
            (3, 3, 1)
        );
        assert_eq!((s.retry_after_ms, s.backoff_ms), (21_000, 21_000));

        // A short ask is honoured in full and not counted as capped.
        let short = Scripted::new(vec![Some(Err(ProviderError::RateLimited {
            retry_after_ms: Some(2_000),
            message: "slow".into(),
        }))]);
        let r = Resilient::new(short, policy(), Arc::new(AdaptiveLimiter::new(1)));
        r.complete(&request()).await.unwrap();
        let s = r.stats();
        assert_eq!((s.retry_after_capped, s.retry_after_ms), (0, 2_000));
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn attempt_timeout_is_typed_and_retried() {
        let inner = Scripted::new(vec![None]);
        let r = Resilient::new(inner, policy(), Arc::new(AdaptiveLimiter::new(1)));
        let t0 = Instant::now();
        r.complete(&request()).await.unwrap();
        assert!(t0.elapsed() >= Duration::from_secs(5));
        assert!(t0.elapsed() < Duration::from_secs(6));
        assert_eq!(r.stats().retries_timeout, 1);
        assert_eq!(r.inner().calls.load(Ordering::SeqCst), 2);
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn gives_up_after_max_attempts_with_the_last_error() {
        let inner = Scripted::new(vec![None, server(), server(), server(), server()]);
        let r = Resilient::new(inner, policy(), Arc::new(AdaptiveLimiter::new(1)));
        let err = r.complete(&request()).await.unwrap_err();
        assert_eq!(err.kind(), "server");
        let s = r.stats();
        assert_eq!((s.attempts, s.gave_up, s.retries()), (4, 1, 3));
        assert_eq!(r.inner().calls.load(Ordering::SeqCst), 4);
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn overflow_and_rejected_are_never_retried() {
        for e in [
            ProviderError::ContextOverflow {
                limit: Some(1),
                requested: Some(2),
                input_tokens: Some(2),
                message: "too long".into(),
                partial_output: None,
            },
            ProviderError::Rejected {
                status: 401,
                message: "auth".into(),
            },
        ] {
            let inner = Scripted::new(vec![Some(Err(e.clone()))]);
            let r = Resilient::new(inner, policy(), Arc::new(AdaptiveLimiter::new(1)));
            assert_eq!(r.complete(&request()).await.unwrap_err(), e);
            assert_eq!(r.stats().attempts, 1);
            assert_eq!(r.inner().calls.load(Ordering::SeqCst), 1);
        }
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn jitter_is_reproducible_from_the_seed() {
        let mut waits = Vec::new();
        for seed in [1, 1, 2] {
            let inner = Scripted::new(vec![server(), server()]);
            let mut p = policy();
            p.jitter_seed = seed;
            let r = Resilient::new(inner, p, Arc::new(AdaptiveLimiter::new(1)));
            r.complete(&request()).await.unwrap();
            waits.push(r.stats().backoff_ms);
        }
        assert_eq!(waits[0], waits[1]);
        assert_ne!(waits[0], waits[2]);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn limiter_halves_once_per_epoch_and_recovers_additively() {
        let l = AdaptiveLimiter::new(8);
        assert_eq!(l.limit(), 8);
        let a = l.acquire().await;
        let b = l.acquire().await;
        l.on_rate_limited(&a);
        l.on_rate_limited(&b); // same burst: no second halving
        assert_eq!(l.limit(), 4);
        drop((a, b));
        let c = l.acquire().await;
        l.on_rate_limited(&c);
        assert_eq!(l.limit(), 2);
        drop(c);
        for _ in 0..4 {
            let p = l.acquire().await;
            l.on_rate_limited(&p);
        }
        assert_eq!(l.limit(), 1, "never below 1");
        for _ in 0..2 {
            l.on_success();
        }
        assert_eq!(l.limit(), 2); // 1 + 1/1
        for _ in 0..200 {
            l.on_success();
        }
        assert_eq!(l.limit(), 8, "capped at max");
        assert_eq!(l.in_flight(), 0);
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn limiter_bounds_requests_in_flight() {
        struct Slow {
            now: AtomicU64,
            peak: AtomicU64,
        }
        #[async_trait::async_trait]
        impl Provider for Slow {
            fn name(&self) -> &str {
                "slow"
            }
            async fn complete(&self, _: &ModelRequest) -> Result<ModelResponse, ProviderError> {
                let n = self.now.fetch_add(1, Ordering::SeqCst) + 1;
                self.peak.fetch_max(n, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(10)).await;
                self.now.fetch_sub(1, Ordering::SeqCst);
                Ok(ok_response())
            }
        }
        let limiter = Arc::new(AdaptiveLimiter::new(3));
        let slow = Arc::new(Slow {
            now: AtomicU64::new(0),
            peak: AtomicU64::new(0),
        });
        let r = Arc::new(Resilient::new(slow.clone(), policy(), limiter.clone()));
        let mut tasks = Vec::new();
        for _ in 0..12 {
            let r = r.clone();
            tasks.push(tokio::spawn(async move { r.complete(&request()).await }));
        }
        for t in tasks {
            t.await.unwrap().unwrap();
        }
        assert_eq!(slow.peak.load(Ordering::SeqCst), 3);
        assert_eq!(limiter.in_flight(), 0);
    }
}
