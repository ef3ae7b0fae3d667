//! Cassettes: record a live run's provider exchanges, replay them later at no cost.
//!
//! Each exchange is keyed by the SHA-256 of the exact request sent (after the engine's
//! budgeting and compaction — the bytes a provider would see, in ctxbench's canonical JSON
//! form) together with the trial it belongs to; the same request sent twice in one trial
//! gets its answers back in order. A replayed run therefore sends exactly the requests the
//! recorded run sent, or it misses — and a miss is an infrastructure error naming the
//! scenario, mode, trial and step, so a changed engine cannot silently pass on stale answers.
//!
//! The file is JSON lines (`ctxbench.cassette/1`), appended and flushed per exchange, so a
//! killed recording keeps what it had. Requests are stored only as hashes; responses are
//! stored verbatim (a cassette is a test fixture, and replay must reproduce what the
//! model said). API keys never reach a cassette: they live in HTTP headers, which are not
//! part of a request.

use std::collections::{HashMap, VecDeque};
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use ctxbench_adapters::{ModelRequest, ModelResponse, ProviderError};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use thiserror::Error;

/// Schema tag of a cassette line.
pub const CASSETTE_SCHEMA: &str = "ctxbench.cassette/1";

/// Cassette errors (opening or appending; misses are [`ProviderError`]s).
#[derive(Debug, Error)]
pub enum CassetteError {
    /// I/O on the cassette file.
    #[error("{path}: {source}")]
    Io {
        /// The cassette.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A line that is not a cassette entry.
    #[error("{path}:{line}: not a ctxbench cassette entry: {reason}")]
    Bad {
        /// The cassette.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// What was wrong.
        reason: String,
    },
}

/// One recorded exchange.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CassetteEntry {
    /// [`CASSETTE_SCHEMA`].
    pub schema: String,
    /// `<scenario>/<mode>/<trial>`.
    pub trial_id: String,
    /// Script step that sent it (diagnostics only).
    pub step: u64,
    /// SHA-256 of the request's canonical JSON.
    pub request_sha256: String,
    /// What the provider answered to a completion (absent on a count entry).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Result<ModelResponse, ProviderError>>,
    /// What the provider answered to an exact token count (`count_tokens`), which
    /// steers the engine's budget and so must replay too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<CountResult>,
}

/// A recorded exact count: the provider's count, `None` when it offers none, or its error.
pub type CountResult = Result<Option<u64>, ProviderError>;

/// The SHA-256 (hex) of a request's canonical JSON — the cassette key.
pub fn request_key(request: &ModelRequest) -> String {
    // serde_json writes struct fields in declaration order and the request holds no maps
    // with unordered keys besides tool arguments, which serde_json keeps in insertion
    // order: the same request always serializes to the same bytes.
    let bytes = serde_json::to_vec(request).unwrap_or_default();
    hex::encode(Sha256::digest(&bytes))
}

enum State {
    Record {
        file: File,
    },
    Replay {
        entries: ReplayMap<ModelResponseResult>,
        counts: ReplayMap<CountResult>,
    },
}

type ModelResponseResult = Result<ModelResponse, ProviderError>;
/// Recorded results by (trial id, request hash), in recording order.
type ReplayMap<T> = HashMap<(String, String), VecDeque<T>>;

/// A cassette being recorded to or replayed from; shared by every trial of a run.
pub struct Cassette {
    path: PathBuf,
    state: Mutex<State>,
}

impl std::fmt::Debug for Cassette {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cassette")
            .field("path", &self.path)
            .field("replaying", &self.replaying())
            .finish()
    }
}

impl Cassette {
    /// Start (or, on `--resume`, continue) recording to `path`.
    pub fn record(path: &Path) -> Result<Self, CassetteError> {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|source| CassetteError::Io {
                path: path.to_path_buf(),
                source,
            })?;
        Ok(Cassette {
            path: path.to_path_buf(),
            state: Mutex::new(State::Record { file }),
        })
    }

    /// Load `path` for replay. A torn final line (a recording killed mid-append) is
    /// ignored; any other bad line is an error with its line number.
    pub fn replay(path: &Path) -> Result<Self, CassetteError> {
        let io = |source| CassetteError::Io {
            path: path.to_path_buf(),
            source,
        };
        let text = std::fs::read(path).map_err(io)?;
        let ends_clean = text.last().is_none_or(|&b| b == b'\n');
        let mut entries: ReplayMap<ModelResponseResult> = HashMap::new();
        let mut counts: ReplayMap<CountResult> = HashMap::new();
        // Index of the final line (the only one that may be torn).
        let last = text.iter().filter(|&&b| b == b'\n').count();
        for (i, line) in BufReader::new(&text[..]).lines().enumerate() {
            let line = line.map_err(io)?;
            if line.trim().is_empty() {
                continue;
            }
            match serde_json::from_str::<CassetteEntry>(&line) {
                Ok(e) if e.schema == CASSETTE_SCHEMA => match (e.result, e.count) {
                    (Some(result), None) => entries
                        .entry((e.trial_id, e.request_sha256))
                        .or_default()
                        .push_back(result),
                    (None, Some(count)) => counts
                        .entry((e.trial_id, e.request_sha256))
                        .or_default()
                        .push_back(count),
                    _ => {
                        return Err(CassetteError::Bad {
                            path: path.to_path_buf(),
                            line: i + 1,
                            reason: "an entry holds exactly one of `result` and `count`".into(),
                        })
                    }
                },
                Ok(e) => {
                    return Err(CassetteError::Bad {
                        path: path.to_path_buf(),
                        line: i + 1,
                        reason: format!("schema `{}`, expected `{CASSETTE_SCHEMA}`", e.schema),
                    })
                }
                Err(_) if !ends_clean && i == last => {}
                Err(e) => {
                    return Err(CassetteError::Bad {
                        path: path.to_path_buf(),
                        line: i + 1,
                        reason: e.to_string(),
                    })
                }
            }
        }
        Ok(Cassette {
            path: path.to_path_buf(),
            state: Mutex::new(State::Replay { entries, counts }),
        })
    }

    /// The cassette file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether this cassette answers requests (replay) rather than storing them.
    pub fn replaying(&self) -> bool {
        matches!(
            *self.state.lock().unwrap_or_else(|e| e.into_inner()),
            State::Replay { .. }
        )
    }

    /// Replay: the recorded answer to `request` in `trial_id`, or a typed miss naming where.
    pub fn answer(
        &self,
        trial_id: &str,
        step: u64,
        request: &ModelRequest,
    ) -> Result<ModelResponse, ProviderError> {
        self.next(trial_id, step, request, "", |entries, _, key| {
            entries.get_mut(key).and_then(VecDeque::pop_front)
        })
    }

    /// Replay: the recorded exact count of `request` in `trial_id`, or a typed miss.
    pub fn count(&self, trial_id: &str, step: u64, request: &ModelRequest) -> CountResult {
        self.next(
            trial_id,
            step,
            request,
            " (token count)",
            |_, counts, key| counts.get_mut(key).and_then(VecDeque::pop_front),
        )
    }

    /// The next recorded result for `request` in `trial_id` from one of the replay maps.
    fn next<T>(
        &self,
        trial_id: &str,
        step: u64,
        request: &ModelRequest,
        what: &str,
        pick: impl FnOnce(
            &mut ReplayMap<ModelResponseResult>,
            &mut ReplayMap<CountResult>,
            &(String, String),
        ) -> Option<Result<T, ProviderError>>,
    ) -> Result<T, ProviderError> {
        let key = (trial_id.to_string(), request_key(request));
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let State::Replay { entries, counts } = &mut *state else {
            return Err(ProviderError::Unavailable {
                message: "the cassette is recording, not replaying".into(),
            });
        };
        pick(entries, counts, &key).unwrap_or_else(|| {
            Err(ProviderError::Unavailable {
                message: format!("{}{what}", miss_message(&self.path, trial_id, step, &key.1)),
            })
        })
    }

    /// Record: append one exchange and flush it.
    pub fn store(
        &self,
        trial_id: &str,
        step: u64,
        request: &ModelRequest,
        result: &Result<ModelResponse, ProviderError>,
    ) -> Result<(), CassetteError> {
        self.append(CassetteEntry {
            schema: CASSETTE_SCHEMA.into(),
            trial_id: trial_id.into(),
            step,
            request_sha256: request_key(request),
            result: Some(result.clone()),
            count: None,
        })
    }

    /// Record: append one exact count and flush it.
    pub fn store_count(
        &self,
        trial_id: &str,
        step: u64,
        request: &ModelRequest,
        count: &CountResult,
    ) -> Result<(), CassetteError> {
        self.append(CassetteEntry {
            schema: CASSETTE_SCHEMA.into(),
            trial_id: trial_id.into(),
            step,
            request_sha256: request_key(request),
            result: None,
            count: Some(count.clone()),
        })
    }

    fn append(&self, entry: CassetteEntry) -> Result<(), CassetteError> {
        let mut line = serde_json::to_vec(&entry).map_err(|e| CassetteError::Bad {
            path: self.path.clone(),
            line: 0,
            reason: e.to_string(),
        })?;
        line.push(b'\n');
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if let State::Record { file } = &mut *state {
            file.write_all(&line)
                .and_then(|_| file.flush())
                .map_err(|source| CassetteError::Io {
                    path: self.path.clone(),
                    source,
                })?;
        }
        Ok(())
    }
}

/// The miss message: where the run diverged from the recording, in the user's terms.
fn miss_message(path: &Path, trial_id: &str, step: u64, key: &str) -> String {
    let mut parts = trial_id.splitn(3, '/');
    let scenario = parts.next().unwrap_or("?");
    let mode = parts.next().unwrap_or("?");
    let trial = parts.next().unwrap_or("?");
    format!(
        "cassette miss in {}: no recorded answer for scenario `{scenario}`, mode `{mode}`, \
         trial {trial}, step {step} (request sha256 {}); the engine sent a request the \
         recording never saw — re-record with --record",
        path.display(),
        &key[..16.min(key.len())]
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use ctxbench_adapters::{FinishReason, Message, Usage};

    fn req(text: &str) -> ModelRequest {
        ModelRequest {
            model: "m".into(),
            messages: vec![Message::user(text)],
            tools: vec![],
            max_output_tokens: 16,
        }
    }

    fn resp(text: &str) -> ModelResponse {
        ModelResponse {
            message: Message::assistant(text),
            usage: Usage {
                input_tokens: 3,
                output_tokens: 1,
            },
            finish_reason: FinishReason::Stop,
        }
    }

    #[test]
    fn recorded_answers_replay_in_order_and_misses_name_the_step() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.jsonl");
        let rec = Cassette::record(&path).unwrap();
        rec.store("s/compact/0", 1, &req("a"), &Ok(resp("one")))
            .unwrap();
        rec.store("s/compact/0", 2, &req("a"), &Ok(resp("two")))
            .unwrap();
        let overflow = ProviderError::ContextOverflow {
            limit: Some(10),
            requested: Some(12),
            input_tokens: Some(12),
            message: "too long".into(),
            partial_output: None,
        };
        rec.store("s/compact/0", 3, &req("b"), &Err(overflow.clone()))
            .unwrap();
        drop(rec);

        let play = Cassette::replay(&path).unwrap();
        assert!(play.replaying());
        let a1 = play.answer("s/compact/0", 1, &req("a")).unwrap();
        let a2 = play.answer("s/compact/0", 2, &req("a")).unwrap();
        assert_eq!(a1.message.content, "one");
        assert_eq!(a2.message.content, "two");
        assert_eq!(play.answer("s/compact/0", 3, &req("b")), Err(overflow));
        // Another trial, or a third identical request, is a miss naming the place.
        let miss = play.answer("s/warn/0", 1, &req("a")).unwrap_err();
        let text = miss.to_string();
        assert!(miss.is_infrastructure());
        for needle in ["scenario `s`", "mode `warn`", "trial 0", "step 1"] {
            assert!(text.contains(needle), "{text}");
        }
        assert!(play.answer("s/compact/0", 9, &req("a")).is_err());
    }

    #[test]
    fn exact_counts_replay_apart_from_answers() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.jsonl");
        let rec = Cassette::record(&path).unwrap();
        rec.store_count("s/off/0", 0, &req("a"), &Ok(Some(42)))
            .unwrap();
        rec.store("s/off/0", 0, &req("a"), &Ok(resp("one")))
            .unwrap();
        rec.store_count("s/off/0", 1, &req("b"), &Ok(None)).unwrap();
        drop(rec);
        let play = Cassette::replay(&path).unwrap();
        assert_eq!(play.count("s/off/0", 0, &req("a")), Ok(Some(42)));
        assert_eq!(
            play.answer("s/off/0", 0, &req("a"))
                .unwrap()
                .message
                .content,
            "one"
        );
        assert_eq!(play.count("s/off/0", 1, &req("b")), Ok(None));
        // A count is not an answer and vice versa; each misses on its own.
        let miss = play.count("s/off/0", 0, &req("a")).unwrap_err().to_string();
        assert!(miss.contains("(token count)"), "{miss}");
        assert!(play.answer("s/off/0", 1, &req("b")).is_err());
    }

    #[test]
    fn torn_final_line_is_ignored_but_damage_elsewhere_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.jsonl");
        let rec = Cassette::record(&path).unwrap();
        rec.store("t/off/0", 0, &req("a"), &Ok(resp("x"))).unwrap();
        drop(rec);
        let mut text = std::fs::read_to_string(&path).unwrap();
        text.push_str("{\"schema\":\"ctxbench.cas");
        std::fs::write(&path, &text).unwrap();
        let play = Cassette::replay(&path).unwrap();
        assert!(play.answer("t/off/0", 0, &req("a")).is_ok());

        std::fs::write(&path, format!("garbage\n{text}\n")).unwrap();
        let err = Cassette::replay(&path).unwrap_err().to_string();
        assert!(err.contains(":1:"), "{err}");
    }
}
