//! Probe answering (stub).

use super::FakeFact;
use crate::conventions::UNKNOWN_ANSWER;
use crate::ModelRequest;

/// Answer each fact id from the request only.
pub fn answer_probe(_request: &ModelRequest, _facts: &[FakeFact], ids: &[String]) -> Vec<String> {
    ids.iter().map(|_| UNKNOWN_ANSWER.to_string()).collect()
}
