//! A trial's requests read back once for all graders.
//!
//! Every grader that follows memory through a session needs each sent request as the model
//! read it (rebuilt from the message store, a wrapped conversation unwrapped) and its
//! pieces by place (the fake's layout rule). Rebuilding that per grader cloned every
//! message of every request once per grader — quadratic in session length, times the number
//! of graders. Here each request is rebuilt, and its pieces found, at most once per trial,
//! lazily, on the first grader that asks. What a grader sees is unchanged.

use std::cell::OnceCell;

use ctxbench_adapters::fake::layout::{segments, MemoryRule, Place, Segment};
use ctxbench_adapters::{Message, ModelRequest};
use ctxbench_harness::record::{RequestRecord, TrialRecord};
use ctxbench_harness::scenario::Scenario;

use crate::common;

/// Requests rebuilt on demand: the owned half, kept apart from [`ReadBack`] because the
/// pieces borrow the rebuilt text.
pub type Rebuilt = Vec<OnceCell<ModelRequest>>;

/// Room for every request of `record`, nothing rebuilt yet.
pub fn rebuilt(record: &TrialRecord) -> Rebuilt {
    (0..record.requests.len())
        .map(|_| OnceCell::new())
        .collect()
}

/// A request's messages with their content hashes (`None`: missing from the store).
type Listed<'a> = Vec<(&'a str, Option<&'a Message>)>;

/// The shared read-back of one trial's requests.
pub struct ReadBack<'a> {
    record: &'a TrialRecord,
    rule: MemoryRule,
    requests: &'a [OnceCell<ModelRequest>],
    messages: Vec<OnceCell<Listed<'a>>>,
    segments: Vec<OnceCell<Vec<Segment<'a>>>>,
}

impl<'a> ReadBack<'a> {
    /// A read-back of `record` whose rebuilt requests live in `requests` (from [`rebuilt`]).
    pub fn new(scenario: &Scenario, record: &'a TrialRecord, requests: &'a Rebuilt) -> Self {
        let n = record.requests.len();
        ReadBack {
            record,
            rule: common::memory_rule(scenario, record),
            requests,
            messages: (0..n).map(|_| OnceCell::new()).collect(),
            segments: (0..n).map(|_| OnceCell::new()).collect(),
        }
    }

    /// How memory is recognised in this trial (see [`common::memory_rule`]).
    pub fn rule(&self) -> &MemoryRule {
        &self.rule
    }

    /// `r`'s position in the record. `r` must be one of the record's requests; anything
    /// else panics, which is a grader bug, not user input.
    fn index(&self, r: &RequestRecord) -> usize {
        let all = &self.record.requests;
        let size = std::mem::size_of::<RequestRecord>().max(1);
        let offset = (r as *const RequestRecord as usize).wrapping_sub(all.as_ptr() as usize);
        let i = offset / size;
        if i < all.len() && std::ptr::eq(&all[i], r) {
            return i;
        }
        all.iter()
            .position(|x| std::ptr::eq(x, r))
            .expect("a request of this trial's record")
    }

    /// The request as the model read it (see [`common::request`]).
    pub fn request(&self, r: &RequestRecord) -> &'a ModelRequest {
        self.request_at(self.index(r))
    }

    /// The request's messages with their content hashes (see [`common::messages`]).
    pub fn messages(&self, r: &RequestRecord) -> &[(&'a str, Option<&'a Message>)] {
        self.messages_at(self.index(r))
    }

    /// Every piece of the request with its place, in message order.
    pub fn segments(&self, r: &RequestRecord) -> &[Segment<'a>] {
        let i = self.index(r);
        let req = self.request_at(i);
        self.segments[i].get_or_init(|| segments(req, &self.rule))
    }

    fn messages_at(&self, i: usize) -> &[(&'a str, Option<&'a Message>)] {
        let rec = self.record;
        self.messages[i].get_or_init(|| common::messages(rec, &rec.requests[i]))
    }

    fn request_at(&self, i: usize) -> &'a ModelRequest {
        self.requests[i]
            .get_or_init(|| common::request(&self.record.requests[i], self.messages_at(i)))
    }

    /// The request's pieces that sit in `place`.
    pub fn pieces(
        &self,
        r: &RequestRecord,
        place: Place,
    ) -> impl Iterator<Item = &Segment<'a>> + '_ {
        self.segments(r).iter().filter(move |s| s.place == place)
    }
}
