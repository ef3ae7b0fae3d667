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
//! stored as the model said them except for the scenario's listed secrets: every string in
//! a stored answer (content, tool-call arguments, error messages) has each secret replaced
//! by a numbered placeholder, `[REDACTED#n]` for the scenario's n-th secret ([`Secrets`]),
//! and replay puts the secret back from the scenario, so a replayed trial sees exactly what
//! the recorded one saw while the file holds no secret. The request hash is taken over the
//! request with the same placeholders, so it does not encode a secret either, and replay
//! matches it. API keys never reach a cassette: they live in HTTP headers, which are not
//! part of a request.

use std::collections::{HashMap, VecDeque};
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use ctxbench_adapters::{ModelRequest, ModelResponse, ProviderError};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
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

/// The SHA-256 (hex) of a request's canonical JSON — the cassette key of a request that
/// holds no listed secret (see [`Secrets::request_key`]).
pub fn request_key(request: &ModelRequest) -> String {
    // serde_json writes struct fields in declaration order and the request holds no maps
    // with unordered keys besides tool arguments, which serde_json keeps in insertion
    // order: the same request always serializes to the same bytes.
    let bytes = serde_json::to_vec(request).unwrap_or_default();
    hex::encode(Sha256::digest(&bytes))
}

/// A trial's listed secrets (the scenario's `secrets:`), and the reversible placeholders a
/// cassette stores instead of them: `[REDACTED#n]` for the n-th secret (1-based, in the
/// scenario's order).
#[derive(Debug, Clone, Default)]
pub struct Secrets {
    /// Distinct non-empty secrets in the scenario's order.
    values: Vec<String>,
    /// Indexes into `values`, longest secret first, so a secret containing another is
    /// replaced whole.
    longest_first: Vec<usize>,
}

impl Secrets {
    /// The secrets of one scenario.
    pub fn new(secrets: &[String]) -> Self {
        let mut values: Vec<String> = Vec::new();
        for s in secrets {
            if !s.is_empty() && !values.contains(s) {
                values.push(s.clone());
            }
        }
        let mut longest_first: Vec<usize> = (0..values.len()).collect();
        longest_first.sort_by(|&a, &b| values[b].len().cmp(&values[a].len()).then(a.cmp(&b)));
        Secrets {
            values,
            longest_first,
        }
    }

    fn placeholder(i: usize) -> String {
        format!("[REDACTED#{}]", i + 1)
    }

    /// `text` with every secret replaced by its placeholder.
    pub fn hide(&self, text: &str) -> String {
        let mut out = text.to_string();
        for &i in &self.longest_first {
            if out.contains(self.values[i].as_str()) {
                out = out.replace(self.values[i].as_str(), &Self::placeholder(i));
            }
        }
        out
    }

    /// `text` with every placeholder replaced by its secret again.
    pub fn restore(&self, text: &str) -> String {
        if !text.contains("[REDACTED#") {
            return text.to_string();
        }
        let mut out = text.to_string();
        // Highest index first, so `[REDACTED#1]` never matches inside `[REDACTED#12]`'s text.
        for i in (0..self.values.len()).rev() {
            out = out.replace(&Self::placeholder(i), &self.values[i]);
        }
        out
    }

    /// Every string of `value` (object keys included) through `f`.
    fn map_strings(value: Value, f: &dyn Fn(&str) -> String) -> Value {
        match value {
            Value::String(s) => Value::String(f(&s)),
            Value::Array(a) => {
                Value::Array(a.into_iter().map(|v| Self::map_strings(v, f)).collect())
            }
            Value::Object(o) => Value::Object(
                o.into_iter()
                    .map(|(k, v)| (f(&k), Self::map_strings(v, f)))
                    .collect(),
            ),
            other => other,
        }
    }

    /// `value` with every string passed through `f`, when there are secrets at all.
    fn through<T: Serialize + DeserializeOwned>(&self, value: T, f: &dyn Fn(&str) -> String) -> T {
        if self.values.is_empty() {
            return value;
        }
        // Both directions only swap text inside strings, so the shape round-trips.
        match serde_json::to_value(&value) {
            Ok(v) => serde_json::from_value(Self::map_strings(v, f)).unwrap_or(value),
            Err(_) => value,
        }
    }

    /// The cassette key of `request`: the SHA-256 of its canonical JSON with every secret
    /// replaced by its placeholder (equal to [`request_key`] when it holds none).
    pub fn request_key(&self, request: &ModelRequest) -> String {
        if self.values.is_empty() {
            return request_key(request);
        }
        let hidden = self.through(request.clone(), &|s| self.hide(s));
        request_key(&hidden)
    }
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

    /// Replay: the recorded answer to `request` in `trial_id` (its secrets put back), or a
    /// typed miss naming where.
    pub fn answer(
        &self,
        trial_id: &str,
        step: u64,
        request: &ModelRequest,
        secrets: &Secrets,
    ) -> Result<ModelResponse, ProviderError> {
        let result = self.next(trial_id, step, request, secrets, "", |entries, _, key| {
            entries.get_mut(key).and_then(VecDeque::pop_front)
        });
        secrets.through(result, &|s| secrets.restore(s))
    }

    /// Replay: the recorded exact count of `request` in `trial_id`, or a typed miss.
    pub fn count(
        &self,
        trial_id: &str,
        step: u64,
        request: &ModelRequest,
        secrets: &Secrets,
    ) -> CountResult {
        let result = self.next(
            trial_id,
            step,
            request,
            secrets,
            " (token count)",
            |_, counts, key| counts.get_mut(key).and_then(VecDeque::pop_front),
        );
        secrets.through(result, &|s| secrets.restore(s))
    }

    /// The next recorded result for `request` in `trial_id` from one of the replay maps.
    fn next<T>(
        &self,
        trial_id: &str,
        step: u64,
        request: &ModelRequest,
        secrets: &Secrets,
        what: &str,
        pick: impl Fn(
            &mut ReplayMap<ModelResponseResult>,
            &mut ReplayMap<CountResult>,
            &(String, String),
        ) -> Option<Result<T, ProviderError>>,
    ) -> Result<T, ProviderError> {
        let key = (trial_id.to_string(), secrets.request_key(request));
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let State::Replay { entries, counts } = &mut *state else {
            return Err(ProviderError::Unavailable {
                message: "the cassette is recording, not replaying".into(),
            });
        };
        // A cassette recorded before secrets were hidden keys a request holding a secret by
        // its plain hash.
        let legacy = || (trial_id.to_string(), request_key(request));
        pick(entries, counts, &key)
            .or_else(|| {
                let plain = legacy();
                (plain != key)
                    .then(|| pick(entries, counts, &plain))
                    .flatten()
            })
            .unwrap_or_else(|| {
                Err(ProviderError::Unavailable {
                    message: format!("{}{what}", miss_message(&self.path, trial_id, step, &key.1)),
                })
            })
    }

    /// Record: append one exchange, its secrets hidden, and flush it.
    pub fn store(
        &self,
        trial_id: &str,
        step: u64,
        request: &ModelRequest,
        secrets: &Secrets,
        result: &Result<ModelResponse, ProviderError>,
    ) -> Result<(), CassetteError> {
        self.append(CassetteEntry {
            schema: CASSETTE_SCHEMA.into(),
            trial_id: trial_id.into(),
            step,
            request_sha256: secrets.request_key(request),
            result: Some(secrets.through(result.clone(), &|s| secrets.hide(s))),
            count: None,
        })
    }

    /// Record: append one exact count, its secrets hidden, and flush it.
    pub fn store_count(
        &self,
        trial_id: &str,
        step: u64,
        request: &ModelRequest,
        secrets: &Secrets,
        count: &CountResult,
    ) -> Result<(), CassetteError> {
        self.append(CassetteEntry {
            schema: CASSETTE_SCHEMA.into(),
            trial_id: trial_id.into(),
            step,
            request_sha256: secrets.request_key(request),
            result: None,
            count: Some(secrets.through(count.clone(), &|s| secrets.hide(s))),
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

    fn none() -> Secrets {
        Secrets::default()
    }

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
        rec.store("s/compact/0", 1, &req("a"), &none(), &Ok(resp("one")))
            .unwrap();
        rec.store("s/compact/0", 2, &req("a"), &none(), &Ok(resp("two")))
            .unwrap();
        let overflow = ProviderError::ContextOverflow {
            limit: Some(10),
            requested: Some(12),
            input_tokens: Some(12),
            message: "too long".into(),
            partial_output: None,
        };
        rec.store("s/compact/0", 3, &req("b"), &none(), &Err(overflow.clone()))
            .unwrap();
        drop(rec);

        let play = Cassette::replay(&path).unwrap();
        assert!(play.replaying());
        let a1 = play.answer("s/compact/0", 1, &req("a"), &none()).unwrap();
        let a2 = play.answer("s/compact/0", 2, &req("a"), &none()).unwrap();
        assert_eq!(a1.message.content, "one");
        assert_eq!(a2.message.content, "two");
        assert_eq!(
            play.answer("s/compact/0", 3, &req("b"), &none()),
            Err(overflow)
        );
        // Another trial, or a third identical request, is a miss naming the place.
        let miss = play.answer("s/warn/0", 1, &req("a"), &none()).unwrap_err();
        let text = miss.to_string();
        assert!(miss.is_infrastructure());
        for needle in ["scenario `s`", "mode `warn`", "trial 0", "step 1"] {
            assert!(text.contains(needle), "{text}");
        }
        assert!(play.answer("s/compact/0", 9, &req("a"), &none()).is_err());
    }

    #[test]
    fn exact_counts_replay_apart_from_answers() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.jsonl");
        let rec = Cassette::record(&path).unwrap();
        rec.store_count("s/off/0", 0, &req("a"), &none(), &Ok(Some(42)))
            .unwrap();
        rec.store("s/off/0", 0, &req("a"), &none(), &Ok(resp("one")))
            .unwrap();
        rec.store_count("s/off/0", 1, &req("b"), &none(), &Ok(None))
            .unwrap();
        drop(rec);
        let play = Cassette::replay(&path).unwrap();
        assert_eq!(play.count("s/off/0", 0, &req("a"), &none()), Ok(Some(42)));
        assert_eq!(
            play.answer("s/off/0", 0, &req("a"), &none())
                .unwrap()
                .message
                .content,
            "one"
        );
        assert_eq!(play.count("s/off/0", 1, &req("b"), &none()), Ok(None));
        // A count is not an answer and vice versa; each misses on its own.
        let miss = play
            .count("s/off/0", 0, &req("a"), &none())
            .unwrap_err()
            .to_string();
        assert!(miss.contains("(token count)"), "{miss}");
        assert!(play.answer("s/off/0", 1, &req("b"), &none()).is_err());
    }

    #[test]
    fn torn_final_line_is_ignored_but_damage_elsewhere_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.jsonl");
        let rec = Cassette::record(&path).unwrap();
        rec.store("t/off/0", 0, &req("a"), &none(), &Ok(resp("x")))
            .unwrap();
        drop(rec);
        let mut text = std::fs::read_to_string(&path).unwrap();
        text.push_str("{\"schema\":\"ctxbench.cas");
        std::fs::write(&path, &text).unwrap();
        let play = Cassette::replay(&path).unwrap();
        assert!(play.answer("t/off/0", 0, &req("a"), &none()).is_ok());

        std::fs::write(&path, format!("garbage\n{text}\n")).unwrap();
        let err = Cassette::replay(&path).unwrap_err().to_string();
        assert!(err.contains(":1:"), "{err}");
    }

    #[test]
    fn secrets_are_hidden_on_record_and_restored_on_replay() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.jsonl");
        let secrets = Secrets::new(&["sk-1".into(), "tok-sk-1-long".into(), String::new()]);
        let asked = req("my key is sk-1 and tok-sk-1-long");
        let mut said = resp("using sk-1 for tok-sk-1-long");
        said.message.tool_calls.push(ctxbench_adapters::ToolCall {
            id: "c1".into(),
            name: "login".into(),
            arguments: serde_json::json!({"key": "sk-1", "sk-1": ["tok-sk-1-long"]}),
        });
        let refused = ProviderError::Rejected {
            status: 400,
            message: "bad key sk-1".into(),
        };
        let rec = Cassette::record(&path).unwrap();
        rec.store("s/off/0", 0, &asked, &secrets, &Ok(said.clone()))
            .unwrap();
        rec.store("s/off/0", 1, &asked, &secrets, &Err(refused.clone()))
            .unwrap();
        rec.store_count("s/off/0", 0, &asked, &secrets, &Ok(Some(9)))
            .unwrap();
        drop(rec);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(!text.contains("sk-1"), "{text}");
        assert!(
            text.contains("[REDACTED#1]") && text.contains("[REDACTED#2]"),
            "{text}"
        );
        // The key is not the plain request's hash (which would encode the secret).
        assert!(!text.contains(&request_key(&asked)), "{text}");

        let play = Cassette::replay(&path).unwrap();
        assert_eq!(play.answer("s/off/0", 0, &asked, &secrets), Ok(said));
        assert_eq!(play.answer("s/off/0", 1, &asked, &secrets), Err(refused));
        assert_eq!(play.count("s/off/0", 0, &asked, &secrets), Ok(Some(9)));
        assert_eq!(
            secrets.restore(&secrets.hide("x tok-sk-1-long y sk-1")),
            "x tok-sk-1-long y sk-1"
        );
    }

    #[test]
    fn a_cassette_recorded_with_plain_secrets_still_replays() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.jsonl");
        let asked = req("key sk-9");
        // As an older ctxbench wrote it: the plain request hash, the answer verbatim.
        Cassette::record(&path)
            .unwrap()
            .store("s/off/0", 0, &asked, &none(), &Ok(resp("sk-9 used")))
            .unwrap();
        let play = Cassette::replay(&path).unwrap();
        let secrets = Secrets::new(&["sk-9".into()]);
        assert_eq!(
            play.answer("s/off/0", 0, &asked, &secrets)
                .unwrap()
                .message
                .content,
            "sk-9 used"
        );
    }
}
