//! Session persistence: the canonical transcript as an append-only ledger on disk.
//!
//! `transcript.jsonl` holds one record per line — a message or a turn boundary — each
//! carrying its position and the running hash chain. `session.json` is a tiny snapshot
//! (record count and chain head) replaced atomically (write to a temporary file, then
//! rename): it is the **commit point**, so a crash leaves either the old or the new
//! committed state. On open, records beyond the snapshot's count (a torn or uncommitted
//! append) are ignored and cut off, and the chain is verified: the transcript cannot be
//! silently edited.
//!
//! ## Group commit
//!
//! Records are buffered in memory as they are appended and written to the ledger, with the
//! snapshot, once per *logical operation*, not once per record (records past the snapshot's
//! count are ignored on open anyway, so writing them earlier protects nothing; one `write`
//! per operation instead of one per record). The snapshot is rewritten
//! once per operation too — rewriting it after every record was
//! half of a short trial's wall time on a disk filesystem (docs/benchmarks.md). The
//! operations, each all-or-nothing across a crash:
//!
//! * a **turn**: [`Session::begin_turn`] through [`Session::end_turn`] (the user input, the
//!   model's replies, tool results, the turn boundary) commits once, at `end_turn`; a crash
//!   in between reopens to the state before the turn, as if it had never started;
//! * a record appended while no turn is open commits at once (it is an operation by itself);
//! * a checkpoint change ([`Session::set_checkpoint`], [`Session::drop_checkpoint`]) writes
//!   the snapshot, and with it every record appended so far;
//! * [`Session::commit`], for callers that need a record durable mid-turn (and before a
//!   restart reopens the directory).
//!
//! Dropping a session does *not* commit: a drop stands for a crash, which is what the tests
//! rely on. The in-memory state always includes uncommitted records.
//!
//! Nothing here ever rewrites or deletes an earlier committed record.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use ctxbench_adapters::{ContentHash, Message};

use crate::checkpoint::Checkpoint;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use thiserror::Error;

const SNAPSHOT: &str = "session.json";
const LEDGER: &str = "transcript.jsonl";
/// Current session snapshot schema: v2 adds the optional derived checkpoint.
pub const SESSION_SCHEMA: &str = "ctxbench.session/2";
/// The previous schema, migrated on open (it has no checkpoint).
pub const SESSION_SCHEMA_V1: &str = "ctxbench.session/1";

impl From<SessionError> for ctxbench_sut::EngineError {
    fn from(e: SessionError) -> Self {
        ctxbench_sut::EngineError::Session(e.to_string())
    }
}

/// Session persistence errors.
#[derive(Debug, Error)]
pub enum SessionError {
    /// Reading or writing a session file failed.
    #[error("session file {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A session file is not what we wrote.
    #[error("session file {path} is corrupt: {detail}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> SessionError + '_ {
    move |source| SessionError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// How a turn ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnStatus {
    /// Still running (or interrupted by a crash).
    Open,
    /// The model answered with final text.
    Completed,
    /// The turn ended without an answer (limit reached, provider failure).
    Incomplete,
}

/// A turn's extent in the transcript: `[start, end)` message indices.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnSpan {
    /// Index of the turn's user message.
    pub start: usize,
    /// One past its last message (equals the transcript length while open).
    pub end: usize,
    /// Status.
    pub status: TurnStatus,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "record", rename_all = "snake_case")]
enum LedgerRecord {
    Message {
        pos: u64,
        hash: ContentHash,
        chain: ContentHash,
        message: Message,
    },
    TurnStart {
        pos: u64,
        start: usize,
        chain: ContentHash,
    },
    TurnEnd {
        pos: u64,
        status: TurnStatus,
        chain: ContentHash,
    },
}

#[derive(Debug, Serialize, Deserialize)]
struct Snapshot {
    schema: String,
    records: u64,
    chain: ContentHash,
    messages: u64,
    /// The checkpoint, kept as raw JSON so a damaged checkpoint never makes the transcript
    /// unreadable: it is parsed and validated separately.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    checkpoint: Option<serde_json::Value>,
}

/// What happened to the stored checkpoint when a session was opened.
#[derive(Debug, Clone, PartialEq)]
pub enum StoredCheckpoint {
    /// None was stored.
    None,
    /// A valid checkpoint, reusable.
    Valid(Box<Checkpoint>),
    /// One was stored but rejected; the engine rebuilds from the transcript.
    Rejected(String),
}

/// One transcript entry: the message and its content hash, computed once.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// The message.
    pub message: Message,
    /// Its content hash (the token-cache key).
    pub hash: ContentHash,
}

/// The canonical transcript of one agent session, persisted under a directory.
#[derive(Debug)]
pub struct Session {
    dir: PathBuf,
    entries: Vec<Entry>,
    turns: Vec<TurnSpan>,
    chain: ContentHash,
    records: u64,
    /// Records covered by the snapshot on disk (the last commit).
    committed: u64,
    /// The ledger, open for appending for the session's lifetime (one `write` per commit,
    /// not an open/write/close).
    ledger: File,
    /// Bytes of whole records written to the ledger; a failed write is cut back to this.
    ledger_len: u64,
    /// Records appended since the last commit, serialized, one line each: written to the
    /// ledger by the next commit, lost (like any uncommitted record) by a crash.
    pending: Vec<u8>,
    checkpoint: Option<Checkpoint>,
    opened_checkpoint: StoredCheckpoint,
    /// Test hook: fail (tear) the next checkpoint write, as a crash would.
    crash_next_checkpoint_write: bool,
}

fn chain_next(prev: &ContentHash, tag: &[u8], item: &[u8]) -> ContentHash {
    let mut h = Sha256::new();
    h.update(prev.0);
    h.update(tag);
    h.update(item);
    ContentHash(h.finalize().into())
}

impl Session {
    /// Start an empty session in `dir` (created if missing; an existing session is an error).
    pub fn create(dir: &Path) -> Result<Self, SessionError> {
        std::fs::create_dir_all(dir).map_err(io_err(dir))?;
        let ledger = dir.join(LEDGER);
        if dir.join(SNAPSHOT).exists() {
            return Err(SessionError::Corrupt {
                path: dir.join(SNAPSHOT),
                detail: "a session already exists here".into(),
            });
        }
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&ledger)
            .map_err(io_err(&ledger))?;
        file.set_len(0).map_err(io_err(&ledger))?;
        let mut s = Session {
            dir: dir.to_path_buf(),
            entries: Vec::new(),
            turns: Vec::new(),
            chain: ContentHash([0; 32]),
            records: 0,
            committed: 0,
            ledger: file,
            ledger_len: 0,
            pending: Vec::new(),
            checkpoint: None,
            opened_checkpoint: StoredCheckpoint::None,
            crash_next_checkpoint_write: false,
        };
        s.write_snapshot()?;
        Ok(s)
    }

    /// Reload a session from disk, verifying the hash chain.
    pub fn open(dir: &Path) -> Result<Self, SessionError> {
        let snap_path = dir.join(SNAPSHOT);
        let text = std::fs::read_to_string(&snap_path).map_err(io_err(&snap_path))?;
        let snap: Snapshot = serde_json::from_str(&text).map_err(|e| SessionError::Corrupt {
            path: snap_path.clone(),
            detail: e.to_string(),
        })?;
        if snap.schema != SESSION_SCHEMA && snap.schema != SESSION_SCHEMA_V1 {
            return Err(SessionError::Corrupt {
                path: snap_path,
                detail: format!("unknown schema `{}`", snap.schema),
            });
        }
        let ledger = dir.join(LEDGER);
        let file = File::open(&ledger).map_err(io_err(&ledger))?;
        let append = OpenOptions::new()
            .append(true)
            .open(&ledger)
            .map_err(io_err(&ledger))?;
        let mut s = Session {
            dir: dir.to_path_buf(),
            entries: Vec::new(),
            turns: Vec::new(),
            chain: ContentHash([0; 32]),
            records: 0,
            committed: 0,
            ledger: append,
            ledger_len: 0,
            pending: Vec::new(),
            checkpoint: None,
            opened_checkpoint: StoredCheckpoint::None,
            crash_next_checkpoint_write: false,
        };
        let corrupt = |detail: String| SessionError::Corrupt {
            path: ledger.clone(),
            detail,
        };
        let mut committed_bytes: u64 = 0;
        for line in BufReader::new(file).split(b'\n') {
            if s.records == snap.records {
                break;
            }
            let line = line.map_err(io_err(&ledger))?;
            let rec: LedgerRecord = serde_json::from_slice(&line)
                .map_err(|e| corrupt(format!("record {}: {e}", s.records)))?;
            s.apply(rec).map_err(corrupt)?;
            committed_bytes += line.len() as u64 + 1;
        }
        if s.records != snap.records || s.chain != snap.chain {
            return Err(corrupt(format!(
                "ledger has {} committed records with chain {}, snapshot says {} with chain {}",
                s.records,
                s.chain.short(),
                snap.records,
                snap.chain.short()
            )));
        }
        // Cut off anything appended after the last committed snapshot.
        s.ledger.set_len(committed_bytes).map_err(io_err(&ledger))?;
        s.ledger_len = committed_bytes;
        s.committed = s.records;
        // The checkpoint is derived state: a damaged or stale one is rejected, never trusted,
        // and never a reason to lose the transcript.
        s.opened_checkpoint = match snap.checkpoint {
            None => StoredCheckpoint::None,
            Some(v) => match serde_json::from_value::<Checkpoint>(v) {
                Err(e) => StoredCheckpoint::Rejected(format!("unreadable checkpoint: {e}")),
                Ok(c) => match c.validate(&s.entries) {
                    Ok(()) => StoredCheckpoint::Valid(Box::new(c)),
                    Err(e) => StoredCheckpoint::Rejected(e.to_string()),
                },
            },
        };
        if let StoredCheckpoint::Valid(c) = &s.opened_checkpoint {
            s.checkpoint = Some((**c).clone());
        }
        Ok(s)
    }

    fn apply(&mut self, rec: LedgerRecord) -> Result<(), String> {
        let expect_pos = self.records;
        match rec {
            LedgerRecord::Message {
                pos,
                hash,
                chain,
                message,
            } => {
                if pos != expect_pos {
                    return Err(format!("record at position {pos}, expected {expect_pos}"));
                }
                if message.content_hash() != hash {
                    return Err(format!("message {pos} does not match its hash"));
                }
                let next = chain_next(&self.chain, b"m", &hash.0);
                if next != chain {
                    return Err(format!("hash chain broken at record {pos}"));
                }
                self.chain = next;
                self.entries.push(Entry { message, hash });
                if let Some(t) = self.turns.last_mut() {
                    if t.status == TurnStatus::Open {
                        t.end = self.entries.len();
                    }
                }
            }
            LedgerRecord::TurnStart { pos, start, chain } => {
                if pos != expect_pos {
                    return Err(format!("record at position {pos}, expected {expect_pos}"));
                }
                let next = chain_next(&self.chain, b"s", &(start as u64).to_le_bytes());
                if next != chain {
                    return Err(format!("hash chain broken at record {pos}"));
                }
                self.chain = next;
                self.turns.push(TurnSpan {
                    start,
                    end: start,
                    status: TurnStatus::Open,
                });
            }
            LedgerRecord::TurnEnd { pos, status, chain } => {
                if pos != expect_pos {
                    return Err(format!("record at position {pos}, expected {expect_pos}"));
                }
                let tag: &[u8] = match status {
                    TurnStatus::Open => b"o",
                    TurnStatus::Completed => b"c",
                    TurnStatus::Incomplete => b"i",
                };
                let next = chain_next(&self.chain, b"e", tag);
                if next != chain {
                    return Err(format!("hash chain broken at record {pos}"));
                }
                self.chain = next;
                let n = self.entries.len();
                if let Some(t) = self.turns.last_mut() {
                    t.end = n;
                    t.status = status;
                }
            }
        }
        self.records += 1;
        Ok(())
    }

    /// Write one record to the ledger and apply it in memory. It is committed by the next
    /// snapshot write: at once when no turn is open, else at the end of the turn (see the
    /// [module docs](self)).
    fn append_record(&mut self, rec: LedgerRecord) -> Result<(), SessionError> {
        // Sized for the message up front: a long message would otherwise regrow the buffer
        // a dozen times while serializing.
        let size = match &rec {
            LedgerRecord::Message { message, .. } => message.content.len() + 256,
            _ => 160,
        };
        let start = self.pending.len();
        self.pending.reserve(size);
        if let Err(e) = serde_json::to_writer(&mut self.pending, &rec) {
            self.pending.truncate(start);
            return Err(SessionError::Corrupt {
                path: self.dir.join(LEDGER),
                detail: e.to_string(),
            });
        }
        self.pending.push(b'\n');
        if let Err(detail) = self.apply(rec) {
            self.pending.truncate(start);
            return Err(SessionError::Corrupt {
                path: self.dir.join(LEDGER),
                detail,
            });
        }
        if !self.turn_open() {
            self.commit()?;
        }
        Ok(())
    }

    /// Write the pending records to the ledger (before the snapshot that commits them).
    fn flush_pending(&mut self) -> Result<(), SessionError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        if let Err(e) = self.ledger.write_all(&self.pending) {
            // A partial write would glue a torn record to the next one; cut it back so the
            // ledger stays a sequence of whole records. Best effort: `open` cuts anything
            // past the committed count anyway. The records stay pending for a retry.
            let _ = self.ledger.set_len(self.ledger_len);
            return Err(io_err(&self.dir.join(LEDGER))(e));
        }
        self.ledger_len += self.pending.len() as u64;
        self.pending.clear();
        Ok(())
    }

    /// Whether the last turn is still open (its records are committed at its end).
    fn turn_open(&self) -> bool {
        self.turns
            .last()
            .is_some_and(|t| t.status == TurnStatus::Open)
    }

    /// Commit every record appended so far: rewrite the snapshot (atomically) if anything
    /// was appended since the last commit. After it returns `Ok`, a crash or a reopen keeps
    /// those records. Called by `end_turn` and for records outside a turn; engines call it
    /// before anything that reads the session back from disk (a restart).
    pub fn commit(&mut self) -> Result<(), SessionError> {
        if self.committed == self.records {
            return Ok(());
        }
        self.write_snapshot()
    }

    /// Records appended but not yet committed (lost by a crash now).
    pub fn uncommitted_records(&self) -> u64 {
        self.records - self.committed
    }

    /// Rewrite the snapshot with the current record count, chain head and checkpoint: the
    /// commit point for everything appended so far.
    fn write_snapshot(&mut self) -> Result<(), SessionError> {
        self.flush_pending()?;
        let snap = Snapshot {
            schema: SESSION_SCHEMA.into(),
            records: self.records,
            chain: self.chain,
            messages: self.entries.len() as u64,
            checkpoint: self
                .checkpoint
                .as_ref()
                .and_then(|c| serde_json::to_value(c).ok()),
        };
        let path = self.dir.join(SNAPSHOT);
        let bytes = serde_json::to_vec(&snap).map_err(|e| SessionError::Corrupt {
            path: path.clone(),
            detail: e.to_string(),
        })?;
        write_atomic(&path, &bytes).map_err(io_err(&path))?;
        self.committed = self.records;
        Ok(())
    }

    /// Append a message to the transcript; returns its content hash. Inside an open turn
    /// it is committed with the turn (see the [module docs](self)).
    pub fn append(&mut self, message: Message) -> Result<ContentHash, SessionError> {
        let hash = message.content_hash();
        let chain = chain_next(&self.chain, b"m", &hash.0);
        self.append_record(LedgerRecord::Message {
            pos: self.records,
            hash,
            chain,
            message,
        })?;
        Ok(hash)
    }

    /// Open a turn whose user message is the next one to be appended. Everything appended
    /// until [`Self::end_turn`] commits together.
    pub fn begin_turn(&mut self) -> Result<(), SessionError> {
        let start = self.entries.len();
        let chain = chain_next(&self.chain, b"s", &(start as u64).to_le_bytes());
        self.append_record(LedgerRecord::TurnStart {
            pos: self.records,
            start,
            chain,
        })
    }

    /// Close the open turn and commit it.
    pub fn end_turn(&mut self, status: TurnStatus) -> Result<(), SessionError> {
        let tag: &[u8] = match status {
            TurnStatus::Open => b"o",
            TurnStatus::Completed => b"c",
            TurnStatus::Incomplete => b"i",
        };
        let chain = chain_next(&self.chain, b"e", tag);
        self.append_record(LedgerRecord::TurnEnd {
            pos: self.records,
            status,
            chain,
        })
    }

    /// The transcript, in order.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// Turn spans, in order.
    pub fn turns(&self) -> &[TurnSpan] {
        &self.turns
    }

    /// Head of the hash chain over every record so far.
    pub fn chain_head(&self) -> ContentHash {
        self.chain
    }

    /// The directory the session lives in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The current valid checkpoint, if any.
    pub fn checkpoint(&self) -> Option<&Checkpoint> {
        self.checkpoint.as_ref()
    }

    /// What was found when the session was opened.
    pub fn opened_checkpoint(&self) -> &StoredCheckpoint {
        &self.opened_checkpoint
    }

    /// Replace the checkpoint, validated against the transcript, and persist it atomically
    /// with the snapshot (which also commits every record appended so far: the checkpoint
    /// may cover them). On failure the previous checkpoint stays in force (fail-open).
    pub fn set_checkpoint(&mut self, checkpoint: Checkpoint) -> Result<(), SessionError> {
        let path = self.dir.join(SNAPSHOT);
        checkpoint
            .validate(&self.entries)
            .map_err(|e| SessionError::Corrupt {
                path: path.clone(),
                detail: format!("refusing to store an invalid checkpoint: {e}"),
            })?;
        if std::mem::take(&mut self.crash_next_checkpoint_write) {
            // A crash mid-write: a torn temporary file, no rename. The committed snapshot
            // (and with it the previous checkpoint) is untouched.
            let tmp = self
                .dir
                .join(format!(".{SNAPSHOT}.tmp-{}", std::process::id()));
            let _ = std::fs::write(&tmp, b"{\"schema\":\"ctxbench.session/2\",\"rec");
            return Err(SessionError::Io {
                path,
                source: std::io::Error::other("simulated crash during checkpoint write"),
            });
        }
        let previous = self.checkpoint.replace(checkpoint);
        if let Err(e) = self.write_snapshot() {
            self.checkpoint = previous;
            return Err(e);
        }
        Ok(())
    }

    /// Forget the checkpoint (it can no longer be used, e.g. an opaque item bound to another
    /// provider); the transcript is untouched and the next compaction rebuilds from it.
    pub fn drop_checkpoint(&mut self) -> Result<(), SessionError> {
        if self.checkpoint.take().is_some() {
            self.write_snapshot()?;
        }
        Ok(())
    }

    /// Test hook: make the next checkpoint write fail as if the process crashed mid-write.
    pub fn crash_next_checkpoint_write(&mut self) {
        self.crash_next_checkpoint_write = true;
    }

    /// **Mutant only** (`Mutation::MutateTranscript`): overwrite the in-memory message at
    /// `index`, as a destructive compaction would. Deliberately breaks the invariant this
    /// module exists for (nothing rewrites an earlier message); the on-disk ledger and the
    /// hash chain are left as they were, so the damage is visible. Never called by the
    /// reference engine without that mutation.
    #[doc(hidden)]
    pub fn mutant_rewrite(&mut self, index: usize, message: Message) {
        if let Some(e) = self.entries.get_mut(index) {
            e.hash = message.content_hash();
            e.message = message;
        }
    }
}

/// Write `bytes` to `path` atomically: a temporary file in the same directory, then renamed
/// over the target, so a reader (or a process killed mid-write) sees the old or the new
/// content, never a mix. The session snapshot is rewritten at every commit (about once per
/// turn), so it is not fsynced; [`write_durable`] is for files that must also survive a
/// power loss.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_replace(path, bytes, false)
}

/// [`write_atomic`] plus an fsync of the new content before the rename (run manifests).
pub fn write_durable(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_replace(path, bytes, true)
}

fn write_replace(path: &Path, bytes: &[u8], sync: bool) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or_else(|| Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "file".into());
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    {
        let mut f = File::create(&tmp)?;
        f.write_all(bytes)?;
        if sync {
            f.sync_data()?;
        }
    }
    std::fs::rename(&tmp, path)
}

/// Whether `dir` holds a session in this module's format (its snapshot file exists) —
/// an external runtime's session directory usually does not.
pub fn has_snapshot(dir: &Path) -> bool {
    dir.join(SNAPSHOT).is_file()
}

/// Damage the stored checkpoint of a session on disk (recovery-scenario fixture). Returns
/// `false` when there is no checkpoint to damage.
pub fn corrupt_checkpoint(dir: &Path, how: ctxbench_sut::Corruption) -> Result<bool, SessionError> {
    use ctxbench_sut::Corruption;
    let path = dir.join(SNAPSHOT);
    let text = std::fs::read_to_string(&path).map_err(io_err(&path))?;
    let mut snap: Snapshot = serde_json::from_str(&text).map_err(|e| SessionError::Corrupt {
        path: path.clone(),
        detail: e.to_string(),
    })?;
    let Some(cp) = snap.checkpoint.as_mut() else {
        return Ok(false);
    };
    match how {
        Corruption::Garbage => *cp = serde_json::Value::String("\u{1}garbage\u{fffd}".into()),
        Corruption::StaleSource => {
            cp["source_hash"] = serde_json::Value::String("0".repeat(64));
        }
        Corruption::OutOfRange => {
            cp["summarized_through"] = serde_json::Value::from(u32::MAX);
        }
    }
    let bytes = serde_json::to_vec(&snap).map_err(|e| SessionError::Corrupt {
        path: path.clone(),
        detail: e.to_string(),
    })?;
    write_atomic(&path, &bytes).map_err(io_err(&path))?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reopen_restores_transcript_and_chain() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Session::create(dir.path()).unwrap();
        s.begin_turn().unwrap();
        s.append(Message::user("hello")).unwrap();
        s.append(Message::assistant("hi")).unwrap();
        s.end_turn(TurnStatus::Completed).unwrap();
        let head = s.chain_head();
        drop(s);
        let r = Session::open(dir.path()).unwrap();
        assert_eq!(r.entries().len(), 2);
        assert_eq!(r.chain_head(), head);
        assert_eq!(
            r.turns(),
            &[TurnSpan {
                start: 0,
                end: 2,
                status: TurnStatus::Completed
            }]
        );
    }

    fn snapshot_records(dir: &Path) -> u64 {
        let text = std::fs::read_to_string(dir.join(SNAPSHOT)).unwrap();
        serde_json::from_str::<Snapshot>(&text).unwrap().records
    }

    #[test]
    fn a_crash_inside_a_turn_reopens_to_the_last_committed_turn() {
        let dir = tempfile::tempdir().unwrap();
        let ledger = dir.path().join(LEDGER);
        let mut s = Session::create(dir.path()).unwrap();
        s.begin_turn().unwrap();
        s.append(Message::user("one")).unwrap();
        s.append(Message::assistant("a")).unwrap();
        s.end_turn(TurnStatus::Completed).unwrap();
        let head = s.chain_head();
        let committed_len = std::fs::metadata(&ledger).unwrap().len();
        assert_eq!(snapshot_records(dir.path()), 4);
        // The next turn's records wait in memory; neither the ledger nor the snapshot is
        // written per record.
        s.begin_turn().unwrap();
        s.append(Message::user("two")).unwrap();
        s.append(Message::assistant("b")).unwrap();
        assert_eq!(s.uncommitted_records(), 3);
        assert_eq!(
            snapshot_records(dir.path()),
            4,
            "snapshot untouched mid-turn"
        );
        assert_eq!(std::fs::metadata(&ledger).unwrap().len(), committed_len);
        assert_eq!(s.entries().len(), 4, "in memory, uncommitted records count");
        drop(s); // a crash before the turn ends
        let mut r = Session::open(dir.path()).unwrap();
        assert_eq!(r.entries().len(), 2);
        assert_eq!(r.chain_head(), head);
        assert_eq!(
            r.turns(),
            &[TurnSpan {
                start: 0,
                end: 2,
                status: TurnStatus::Completed
            }]
        );
        assert_eq!(
            std::fs::metadata(&ledger).unwrap().len(),
            committed_len,
            "the uncommitted records were cut"
        );
        // The session goes on from the committed state; the cut turn never comes back.
        r.begin_turn().unwrap();
        r.append(Message::user("three")).unwrap();
        r.end_turn(TurnStatus::Incomplete).unwrap();
        assert_eq!(r.uncommitted_records(), 0);
        drop(r);
        let r = Session::open(dir.path()).unwrap();
        let contents: Vec<&str> = r
            .entries()
            .iter()
            .map(|e| e.message.content.as_str())
            .collect();
        assert_eq!(contents, ["one", "a", "three"]);
        assert_eq!(r.turns().len(), 2);
    }

    #[test]
    fn explicit_commit_keeps_an_open_turn_across_a_crash() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Session::create(dir.path()).unwrap();
        s.begin_turn().unwrap();
        s.append(Message::user("admitted")).unwrap();
        s.commit().unwrap();
        assert_eq!(s.uncommitted_records(), 0);
        s.append(Message::assistant("lost")).unwrap();
        drop(s);
        let r = Session::open(dir.path()).unwrap();
        assert_eq!(r.entries().len(), 1);
        assert_eq!(
            r.turns(),
            &[TurnSpan {
                start: 0,
                end: 1,
                status: TurnStatus::Open
            }]
        );
    }

    #[test]
    fn uncommitted_tail_is_cut_and_edits_are_detected() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Session::create(dir.path()).unwrap();
        s.append(Message::user("one")).unwrap();
        drop(s);
        // A torn append after the last snapshot.
        let ledger = dir.path().join(LEDGER);
        let mut f = OpenOptions::new().append(true).open(&ledger).unwrap();
        f.write_all(b"{\"record\":\"mess").unwrap();
        drop(f);
        let mut s = Session::open(dir.path()).unwrap();
        assert_eq!(s.entries().len(), 1);
        s.append(Message::user("two")).unwrap();
        drop(s);
        assert_eq!(Session::open(dir.path()).unwrap().entries().len(), 2);
        // Editing a committed message breaks the chain.
        let text = std::fs::read_to_string(&ledger)
            .unwrap()
            .replace("one", "0ne");
        std::fs::write(&ledger, text).unwrap();
        assert!(matches!(
            Session::open(dir.path()),
            Err(SessionError::Corrupt { .. })
        ));
    }
}
