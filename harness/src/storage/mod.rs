//! Run storage: an append-only run directory (see [`schema`] for the files and rows).
//!
//! A finished trial's rows are appended and flushed together, trial row last, so the
//! presence of a trial row means the trial's data is complete. Messages are stored once per
//! run by content hash, with secrets redacted before they are written.

pub mod schema;

use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use thiserror::Error;

use schema::{EventRow, Manifest, MessageRow, RequestRow, TrialRow};

/// File names inside a run directory.
pub mod files {
    /// The manifest.
    pub const MANIFEST: &str = "manifest.json";
    /// Trial rows.
    pub const TRIALS: &str = "trials.jsonl";
    /// Request rows.
    pub const REQUESTS: &str = "requests.jsonl";
    /// Event rows.
    pub const EVENTS: &str = "events.jsonl";
    /// Message store.
    pub const MESSAGES: &str = "messages.jsonl";
}

/// Run storage errors.
#[derive(Debug, Error)]
pub enum StorageError {
    /// File I/O failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// Serializing a row failed.
    #[error("{path}: cannot serialize row: {source}")]
    Serialize {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: serde_json::Error,
    },
    /// `--resume` was pointed at something that is not a resumable run.
    #[error("{path}: cannot resume: {reason}")]
    NotResumable {
        /// The run directory or file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The directory already holds a run.
    #[error(
        "{0} already holds a run (manifest.json exists); choose another --out or use --resume"
    )]
    Exists(PathBuf),
}

/// Writer of one run directory.
pub struct RunStore {
    dir: PathBuf,
    trials: File,
    requests: File,
    events: File,
    messages: File,
    written_messages: HashSet<String>,
}

fn open_append(path: &Path) -> Result<File, StorageError> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|source| StorageError::Io {
            path: path.to_path_buf(),
            source,
        })
}

impl RunStore {
    /// Create a new run directory and write its manifest (before any trial runs).
    pub fn create(dir: &Path, manifest: &Manifest) -> Result<Self, StorageError> {
        std::fs::create_dir_all(dir).map_err(|source| StorageError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
        if dir.join(files::MANIFEST).exists() {
            return Err(StorageError::Exists(dir.to_path_buf()));
        }
        write_manifest(dir, manifest)?;
        Self::open(dir)
    }

    /// Reopen an existing run for `--resume`: cut off torn final records (a trial killed
    /// mid-append), then report which trials are complete. Nothing complete is rewritten.
    pub fn resume(dir: &Path) -> Result<(Self, ResumeScan), StorageError> {
        let manifest_path = dir.join(files::MANIFEST);
        let text = std::fs::read(&manifest_path).map_err(|source| StorageError::Io {
            path: manifest_path.clone(),
            source,
        })?;
        let manifest: Manifest =
            serde_json::from_slice(&text).map_err(|e| StorageError::NotResumable {
                path: manifest_path.clone(),
                reason: format!("manifest.json does not parse: {e}"),
            })?;
        let mut torn = Vec::new();
        for name in [
            files::TRIALS,
            files::REQUESTS,
            files::EVENTS,
            files::MESSAGES,
        ] {
            let path = dir.join(name);
            let cut = cut_torn_tail(&path)?;
            if cut > 0 {
                torn.push(format!("{name}: {cut} bytes"));
            }
        }
        let mut done = HashSet::new();
        let trials_path = dir.join(files::TRIALS);
        if let Ok(f) = File::open(&trials_path) {
            for (n, line) in BufReader::new(f).lines().enumerate() {
                let line = line.map_err(|source| StorageError::Io {
                    path: trials_path.clone(),
                    source,
                })?;
                if line.trim().is_empty() {
                    continue;
                }
                #[derive(serde::Deserialize)]
                struct Id {
                    trial_id: String,
                }
                let id: Id =
                    serde_json::from_str(&line).map_err(|e| StorageError::NotResumable {
                        path: trials_path.clone(),
                        reason: format!("line {}: not a trial row: {e}", n + 1),
                    })?;
                done.insert(id.trial_id);
            }
        }
        Ok((
            Self::open(dir)?,
            ResumeScan {
                manifest,
                done,
                torn,
            },
        ))
    }

    fn open(dir: &Path) -> Result<Self, StorageError> {
        let messages_path = dir.join(files::MESSAGES);
        let mut written_messages = HashSet::new();
        if let Ok(f) = File::open(&messages_path) {
            for line in BufReader::new(f).lines().map_while(Result::ok) {
                if let Ok(row) = serde_json::from_str::<MessageRow>(&line) {
                    written_messages.insert(row.hash);
                }
            }
        }
        Ok(RunStore {
            dir: dir.to_path_buf(),
            trials: open_append(&dir.join(files::TRIALS))?,
            requests: open_append(&dir.join(files::REQUESTS))?,
            events: open_append(&dir.join(files::EVENTS))?,
            messages: open_append(&messages_path)?,
            written_messages,
        })
    }

    /// The run directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Append one finished trial: messages, requests, events, then the trial row; flushed.
    pub fn append_trial(
        &mut self,
        trial: &TrialRow,
        requests: &[RequestRow],
        events: &[EventRow],
        messages: Vec<MessageRow>,
    ) -> Result<(), StorageError> {
        let mut buf = Vec::new();
        for m in messages {
            if self.written_messages.insert(m.hash.clone()) {
                push_line(&mut buf, &m, &self.dir.join(files::MESSAGES))?;
            }
        }
        write_all(&mut self.messages, &buf, &self.dir.join(files::MESSAGES))?;
        buf.clear();
        for r in requests {
            push_line(&mut buf, r, &self.dir.join(files::REQUESTS))?;
        }
        write_all(&mut self.requests, &buf, &self.dir.join(files::REQUESTS))?;
        buf.clear();
        for e in events {
            push_line(&mut buf, e, &self.dir.join(files::EVENTS))?;
        }
        write_all(&mut self.events, &buf, &self.dir.join(files::EVENTS))?;
        buf.clear();
        push_line(&mut buf, trial, &self.dir.join(files::TRIALS))?;
        write_all(&mut self.trials, &buf, &self.dir.join(files::TRIALS))
    }
}

/// What `--resume` found in a run directory.
#[derive(Debug, Clone)]
pub struct ResumeScan {
    /// The manifest as written by the run (and earlier resumes).
    pub manifest: Manifest,
    /// Trial ids with a complete trial row.
    pub done: HashSet<String>,
    /// Torn final records that were cut off, as `file: bytes`.
    pub torn: Vec<String>,
}

/// Truncate `path` after its last newline; returns the bytes cut. Reads backwards from the
/// end in blocks, so a multi-gigabyte `requests.jsonl` costs one block, not a full read.
fn cut_torn_tail(path: &Path) -> Result<u64, StorageError> {
    use std::io::{Read, Seek, SeekFrom};
    let io = |source| StorageError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut f = match OpenOptions::new().read(true).write(true).open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(io(e)),
    };
    let len = f.metadata().map_err(io)?.len();
    let mut end = len;
    let mut block = vec![0u8; 64 * 1024];
    let keep = loop {
        if end == 0 {
            break 0;
        }
        let start = end.saturating_sub(block.len() as u64);
        let n = (end - start) as usize;
        f.seek(SeekFrom::Start(start)).map_err(io)?;
        f.read_exact(&mut block[..n]).map_err(io)?;
        if let Some(i) = block[..n].iter().rposition(|&b| b == b'\n') {
            break start + i as u64 + 1;
        }
        end = start;
    };
    if keep < len {
        f.set_len(keep).map_err(io)?;
        f.sync_all().map_err(io)?;
    }
    Ok(len - keep)
}

fn push_line<T: serde::Serialize>(
    buf: &mut Vec<u8>,
    row: &T,
    path: &Path,
) -> Result<(), StorageError> {
    serde_json::to_writer(&mut *buf, row).map_err(|source| StorageError::Serialize {
        path: path.to_path_buf(),
        source,
    })?;
    buf.push(b'\n');
    Ok(())
}

fn write_all(f: &mut File, buf: &[u8], path: &Path) -> Result<(), StorageError> {
    f.write_all(buf)
        .and_then(|_| f.flush())
        .map_err(|source| StorageError::Io {
            path: path.to_path_buf(),
            source,
        })
}

/// Write (replace atomically) `manifest.json`.
pub fn write_manifest(dir: &Path, manifest: &Manifest) -> Result<(), StorageError> {
    let path = dir.join(files::MANIFEST);
    let bytes = serde_json::to_vec_pretty(manifest).map_err(|source| StorageError::Serialize {
        path: path.clone(),
        source,
    })?;
    write_durable(&path, &bytes).map_err(|source| StorageError::Io { path, source })
}

/// Replace `path` atomically with `bytes`, synced before the rename: a crash leaves the old
/// file or the new one, never a torn one (and no temporary file once it returns).
pub fn write_durable(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or_else(|| Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_data()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}
