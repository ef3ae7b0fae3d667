//! Run storage: an append-only run directory (see [`schema`] for the files and rows).
//!
//! A finished trial's rows are appended together, trial row last, and synced at the trial
//! boundary (data before the trial row), so the presence of a trial row means the trial's
//! data is complete even after a power cut. Messages are stored once per
//! run by content hash, with secrets redacted before they are written.

pub mod schema;

use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Write};
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

    /// Reopen an existing run for `--resume`.
    ///
    /// Nothing is changed until the plan is recorded: the run's rows are scanned first
    /// (a trial with two complete rows refuses the resume, naming both lines), then `record`
    /// adds the resume to the manifest, which is written durably, and only then are torn
    /// final records cut, whole final records missing their newline completed, and the
    /// trial rows of trials whose request or event rows were torn withdrawn (they run
    /// again). A resume that fails before the manifest is written has changed nothing.
    pub fn resume(
        dir: &Path,
        record: impl FnOnce(&mut Manifest, &ResumeScan),
    ) -> Result<(Self, ResumeScan), StorageError> {
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
        let names = [
            files::TRIALS,
            files::REQUESTS,
            files::EVENTS,
            files::MESSAGES,
        ];
        let mut tails = Vec::new();
        for name in names {
            tails.push((name, Tail::inspect(&dir.join(name))?));
        }
        let trials_path = dir.join(files::TRIALS);
        let mut complete = complete_trials(&trials_path, &tails[0].1)?;
        let mut rerun = std::collections::BTreeSet::new();
        let mut torn = Vec::new();
        let mut repaired = Vec::new();
        for (name, tail) in &tails {
            match tail.kind {
                TailKind::Clean => {}
                TailKind::Whole { line } => repaired.push(format!("{name}: line {line}")),
                TailKind::Torn => {
                    torn.push(format!("{name}: {} bytes", tail.bytes.len()));
                    // A torn request or event row of a trial whose trial row is complete:
                    // the row is lost, so the trial is not complete after all.
                    if matches!(*name, files::REQUESTS | files::EVENTS) {
                        if let Some((id, segment)) = row_identity(&tail.bytes) {
                            if complete
                                .get(&id)
                                .is_some_and(|&(_, s)| segment.is_none_or(|seg| seg == s))
                            {
                                rerun.insert(id);
                            }
                        }
                    }
                }
            }
        }
        for id in &rerun {
            complete.remove(id);
        }
        let scan = ResumeScan {
            manifest: manifest.clone(),
            done: complete.keys().cloned().collect(),
            torn,
            repaired,
            rerun: rerun.iter().cloned().collect(),
        };
        let mut manifest = manifest;
        record(&mut manifest, &scan);
        write_manifest(dir, &manifest)?;
        for (name, tail) in &tails {
            tail.apply(&dir.join(name))?;
        }
        if !rerun.is_empty() {
            withdraw_trial_rows(&trials_path, &rerun)?;
        }
        Ok((Self::open(dir)?, ResumeScan { manifest, ..scan }))
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

    /// Append one finished trial: messages, requests, events, then the trial row.
    ///
    /// The data rows are synced to disk before the trial row is written, and the trial row
    /// before this returns: a trial row on disk always has its data on disk, and a power cut
    /// loses at most the trials still in flight (a synced data row without its trial row is
    /// an orphan that `--resume` runs again).
    pub fn append_trial(
        &mut self,
        trial: &TrialRow,
        requests: &[RequestRow],
        events: &[EventRow],
        messages: Vec<MessageRow>,
    ) -> Result<(), StorageError> {
        self.append_trials(vec![TrialRows {
            trial: trial.clone(),
            requests: requests.to_vec(),
            events: events.to_vec(),
            messages,
        }])
    }

    /// Append a group of finished trials with one sync per file (group commit): every
    /// trial's messages, requests and events, then — once those are synced — every trial's
    /// row, synced before this returns. The guarantee is [`append_trial`](Self::append_trial)'s
    /// for each trial of the group: a trial row on disk always has its data on disk; a
    /// power cut or `kill -9` in the middle leaves data rows without trial rows (orphans
    /// that `--resume` runs again) or a torn last line (detected and cut). Trial rows are
    /// written in the group's order.
    pub fn append_trials(&mut self, group: Vec<TrialRows>) -> Result<(), StorageError> {
        if group.is_empty() {
            return Ok(());
        }
        let mut trial_rows = Vec::with_capacity(group.len());
        let mut msg_buf = Vec::new();
        let mut req_buf = Vec::new();
        let mut ev_buf = Vec::new();
        for TrialRows {
            trial,
            requests,
            events,
            messages,
        } in group
        {
            for m in messages {
                if self.written_messages.insert(m.hash.clone()) {
                    push_line(&mut msg_buf, &m, &self.dir.join(files::MESSAGES))?;
                }
            }
            for r in &requests {
                push_line(&mut req_buf, r, &self.dir.join(files::REQUESTS))?;
            }
            for e in &events {
                push_line(&mut ev_buf, e, &self.dir.join(files::EVENTS))?;
            }
            trial_rows.push(trial);
        }
        write_all(
            &mut self.messages,
            &msg_buf,
            &self.dir.join(files::MESSAGES),
        )?;
        write_all(
            &mut self.requests,
            &req_buf,
            &self.dir.join(files::REQUESTS),
        )?;
        write_all(&mut self.events, &ev_buf, &self.dir.join(files::EVENTS))?;
        for (wrote, file, name) in [
            (!msg_buf.is_empty(), &self.messages, files::MESSAGES),
            (!req_buf.is_empty(), &self.requests, files::REQUESTS),
            (!ev_buf.is_empty(), &self.events, files::EVENTS),
        ] {
            if wrote {
                sync(file, &self.dir.join(name))?;
            }
        }
        let mut buf = Vec::new();
        for trial in &trial_rows {
            push_line(&mut buf, trial, &self.dir.join(files::TRIALS))?;
        }
        write_all(&mut self.trials, &buf, &self.dir.join(files::TRIALS))?;
        sync(&self.trials, &self.dir.join(files::TRIALS))
    }
}

/// The storage rows of one finished trial, as [`RunStore::append_trials`] takes them.
#[derive(Debug, Clone)]
pub struct TrialRows {
    /// The trial row (written last).
    pub trial: TrialRow,
    /// Its provider requests.
    pub requests: Vec<RequestRow>,
    /// Its events.
    pub events: Vec<EventRow>,
    /// Its messages (each written once per run, by content hash).
    pub messages: Vec<MessageRow>,
}

fn sync(f: &File, path: &Path) -> Result<(), StorageError> {
    f.sync_data().map_err(|source| StorageError::Io {
        path: path.to_path_buf(),
        source,
    })
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
    /// Whole final records that only lacked their newline, completed, as `file: line N`.
    pub repaired: Vec<String>,
    /// Trials whose trial row was withdrawn because their request or event rows were torn.
    pub rerun: Vec<String>,
}

/// What follows the last newline of a JSONL file.
enum TailKind {
    /// Nothing: the file ends with a newline (or is empty or absent).
    Clean,
    /// A whole JSON row without its newline; `line` is its 1-based line number.
    Whole { line: u64 },
    /// A partial row.
    Torn,
}

/// The end of a JSONL file as found by `--resume`, before anything is changed.
struct Tail {
    /// Length of the part that ends with the last newline.
    keep: u64,
    /// The bytes after it.
    bytes: Vec<u8>,
    kind: TailKind,
}

impl Tail {
    fn inspect(path: &Path) -> Result<Tail, StorageError> {
        use std::io::{Read, Seek, SeekFrom};
        let io = |source| StorageError::Io {
            path: path.to_path_buf(),
            source,
        };
        let keep = last_line_end(path)?;
        let mut bytes = Vec::new();
        match File::open(path) {
            Ok(mut f) => {
                f.seek(SeekFrom::Start(keep)).map_err(io)?;
                f.read_to_end(&mut bytes).map_err(io)?;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io(e)),
        }
        let kind = if bytes.is_empty() {
            TailKind::Clean
        } else if serde_json::from_slice::<serde_json::Value>(&bytes).is_ok_and(|v| v.is_object()) {
            TailKind::Whole {
                line: count_lines(path)? + 1,
            }
        } else {
            TailKind::Torn
        };
        Ok(Tail { keep, bytes, kind })
    }

    /// Cut a torn row, or complete a whole one with its newline; synced.
    fn apply(&self, path: &Path) -> Result<(), StorageError> {
        let io = |source| StorageError::Io {
            path: path.to_path_buf(),
            source,
        };
        match self.kind {
            TailKind::Clean => Ok(()),
            TailKind::Whole { .. } => {
                let mut f = OpenOptions::new().append(true).open(path).map_err(io)?;
                f.write_all(b"\n").map_err(io)?;
                f.sync_data().map_err(io)
            }
            TailKind::Torn => {
                let f = OpenOptions::new().write(true).open(path).map_err(io)?;
                f.set_len(self.keep).map_err(io)?;
                f.sync_all().map_err(io)
            }
        }
    }
}

/// Newlines in `path` (0 when absent).
fn count_lines(path: &Path) -> Result<u64, StorageError> {
    use std::io::Read;
    let mut f = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(source) => {
            return Err(StorageError::Io {
                path: path.to_path_buf(),
                source,
            })
        }
    };
    let mut buf = vec![0u8; 64 * 1024];
    let mut n = 0u64;
    loop {
        let read = f.read(&mut buf).map_err(|source| StorageError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        if read == 0 {
            return Ok(n);
        }
        n += buf[..read].iter().filter(|&&b| b == b'\n').count() as u64;
    }
}

/// The trial id and, when it survived, the segment at the start of a (possibly torn)
/// request or event row: rows are written `{"schema":…,"trial_id":…,"segment":…,…}`.
fn row_identity(bytes: &[u8]) -> Option<(String, Option<u32>)> {
    static ROW: std::sync::LazyLock<Option<regex::bytes::Regex>> = std::sync::LazyLock::new(|| {
        regex::bytes::Regex::new(
            r#"^\{"schema":"[^"]*","trial_id":"((?:[^"\\]|\\.)*)"(?:,"segment":(\d+)[,}])?"#,
        )
        .ok()
    });
    let caps = ROW.as_ref()?.captures(bytes)?;
    let id: String = serde_json::from_slice(&[b"\"", &caps[1], b"\""].concat()).ok()?;
    let segment = caps
        .get(2)
        .and_then(|m| std::str::from_utf8(m.as_bytes()).ok()?.parse().ok());
    Some((id, segment))
}

/// Complete trial rows by trial id: (1-based line, segment). Two complete rows of one
/// trial refuse the resume with both line numbers, before anything is run or changed.
fn complete_trials(
    path: &Path,
    tail: &Tail,
) -> Result<std::collections::HashMap<String, (u64, u32)>, StorageError> {
    #[derive(serde::Deserialize)]
    struct Id {
        trial_id: String,
        #[serde(default)]
        segment: u32,
    }
    let mut out = std::collections::HashMap::new();
    let mut add = |line: u64, text: &[u8]| -> Result<(), StorageError> {
        let id: Id = serde_json::from_slice(text).map_err(|e| StorageError::NotResumable {
            path: path.to_path_buf(),
            reason: format!("line {line}: not a trial row: {e}"),
        })?;
        if let Some(&(first, segment)) = out.get(&id.trial_id) {
            return Err(StorageError::NotResumable {
                path: path.to_path_buf(),
                reason: format!(
                    "line {line}: trial `{}` already has a complete row at line {first} \
                     (segment {segment}); a run holds one row per trial, so this run cannot be \
                     resumed or reported as it is — delete one of the two lines (both are whole \
                     trials) and resume again",
                    id.trial_id
                ),
            });
        }
        out.insert(id.trial_id, (line, id.segment));
        Ok(())
    };
    if let Ok(f) = File::open(path) {
        let mut reader = BufReader::new(f).take(tail.keep);
        let mut line = Vec::new();
        let mut n = 0u64;
        loop {
            line.clear();
            let read = reader
                .read_until(b'\n', &mut line)
                .map_err(|source| StorageError::Io {
                    path: path.to_path_buf(),
                    source,
                })?;
            if read == 0 {
                break;
            }
            n += 1;
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            add(n, &line)?;
        }
    }
    if let TailKind::Whole { line } = tail.kind {
        add(line, &tail.bytes)?;
    }
    Ok(out)
}

/// Rewrite `trials.jsonl` without the rows of `trials` (atomically, synced).
fn withdraw_trial_rows(
    path: &Path,
    trials: &std::collections::BTreeSet<String>,
) -> Result<(), StorageError> {
    #[derive(serde::Deserialize)]
    struct Id {
        trial_id: String,
    }
    let text = std::fs::read(path).map_err(|source| StorageError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let mut kept = Vec::with_capacity(text.len());
    for line in text.split_inclusive(|&b| b == b'\n') {
        let withdrawn =
            serde_json::from_slice::<Id>(line).is_ok_and(|id| trials.contains(&id.trial_id));
        if !withdrawn {
            kept.extend_from_slice(line);
        }
    }
    write_durable(path, &kept).map_err(|source| StorageError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// The length of `path` up to and including its last newline (0 when absent). Reads
/// backwards from the end in blocks, so a multi-gigabyte `requests.jsonl` costs one block,
/// not a full read.
fn last_line_end(path: &Path) -> Result<u64, StorageError> {
    use std::io::{Read, Seek, SeekFrom};
    let io = |source| StorageError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut f = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(io(e)),
    };
    let len = f.metadata().map_err(io)?.len();
    let mut end = len;
    let mut block = vec![0u8; 64 * 1024];
    loop {
        if end == 0 {
            return Ok(0);
        }
        let start = end.saturating_sub(block.len() as u64);
        let n = (end - start) as usize;
        f.seek(SeekFrom::Start(start)).map_err(io)?;
        f.read_exact(&mut block[..n]).map_err(io)?;
        if let Some(i) = block[..n].iter().rposition(|&b| b == b'\n') {
            return Ok(start + i as u64 + 1);
        }
        end = start;
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest_json() -> serde_json::Value {
        serde_json::json!({
            "schema": schema::MANIFEST_SCHEMA, "run_id": "r", "created_at": "t",
            "ctxbench_version": "0", "seed": 0, "provider": "fake", "modes": ["off"],
            "trials": 1, "concurrency": 1, "suite_source": "builtin", "scenarios": [],
            "matrix_size": 2, "gates": null
        })
    }

    fn row(kind: &str, trial: &str, segment: u32) -> String {
        format!(
            r#"{{"schema":"ctxbench.{kind}/1","trial_id":"{trial}","segment":{segment},"x":1}}"#
        )
    }

    /// A run whose trial `a` is complete but whose last request row (of `a`) is torn, as a
    /// power cut can leave an unsynced append.
    fn damaged_run(dir: &Path) -> Vec<u8> {
        std::fs::write(dir.join(files::MANIFEST), manifest_json().to_string()).unwrap();
        std::fs::write(
            dir.join(files::TRIALS),
            format!("{}\n{}\n", row("trial", "b", 0), row("trial", "a", 0)),
        )
        .unwrap();
        let torn = format!(
            "{}\n{}\n{}",
            row("request", "b", 0),
            row("request", "a", 0),
            &row("request", "a", 0)[..60]
        );
        std::fs::write(dir.join(files::REQUESTS), &torn).unwrap();
        torn.into_bytes()
    }

    #[test]
    fn the_resume_is_recorded_before_any_row_is_cut_and_a_torn_complete_trial_reruns() {
        let dir = tempfile::tempdir().unwrap();
        let torn = damaged_run(dir.path());
        let mut seen_in_record = None;
        let (_, scan) = RunStore::resume(dir.path(), |m, scan| {
            // Nothing has been changed yet when the resume is recorded.
            seen_in_record = Some(std::fs::read(dir.path().join(files::REQUESTS)).unwrap());
            m.resumes.push(schema::ResumeRecord {
                torn: scan.torn.clone(),
                rerun: scan.rerun.clone(),
                ..Default::default()
            });
        })
        .unwrap();
        assert_eq!(seen_in_record.as_deref(), Some(&torn[..]));
        assert_eq!(scan.rerun, ["a"]);
        assert_eq!(scan.done, HashSet::from(["b".to_string()]));
        let on_disk: Manifest =
            serde_json::from_slice(&std::fs::read(dir.path().join(files::MANIFEST)).unwrap())
                .unwrap();
        assert_eq!(on_disk.resumes[0].rerun, ["a"]);
        let requests = std::fs::read_to_string(dir.path().join(files::REQUESTS)).unwrap();
        assert!(requests.ends_with('\n') && requests.lines().count() == 2);
        // `a`'s row is withdrawn; `b`'s stays as it was.
        let trials = std::fs::read_to_string(dir.path().join(files::TRIALS)).unwrap();
        assert_eq!(trials, format!("{}\n", row("trial", "b", 0)));
    }

    #[test]
    fn a_torn_row_of_an_unfinished_trial_is_only_cut() {
        let dir = tempfile::tempdir().unwrap();
        damaged_run(dir.path());
        let mut requests = std::fs::read_to_string(dir.path().join(files::REQUESTS)).unwrap();
        requests.truncate(requests.rfind('\n').unwrap() + 1);
        requests.push_str(&row("request", "c", 0)[..50]);
        std::fs::write(dir.path().join(files::REQUESTS), &requests).unwrap();
        let (_, scan) = RunStore::resume(dir.path(), |_, _| {}).unwrap();
        assert!(scan.rerun.is_empty());
        assert_eq!(scan.done.len(), 2);
        assert_eq!(
            row_identity(&row("request", "a", 3).as_bytes()[..58]),
            Some(("a".into(), Some(3)))
        );
        assert_eq!(
            row_identity(br#"{"schema":"ctxbench.request/1","trial_id":"x\"y","seg"#),
            Some(("x\"y".into(), None))
        );
        assert_eq!(
            row_identity(br#"{"schema":"ctxbench.request/1","trial_id":"x"#),
            None
        );
    }

    #[test]
    fn two_rows_of_one_trial_refuse_the_resume_naming_both_lines_and_change_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let torn = damaged_run(dir.path());
        let mut trials = std::fs::read_to_string(dir.path().join(files::TRIALS)).unwrap();
        trials.push_str(&format!("{}\n", row("trial", "b", 1)));
        std::fs::write(dir.path().join(files::TRIALS), &trials).unwrap();
        let err = RunStore::resume(dir.path(), |_, _| panic!("must not be recorded"))
            .err()
            .unwrap()
            .to_string();
        assert!(
            err.contains("line 3: trial `b` already has a complete row at line 1"),
            "{err}"
        );
        assert_eq!(
            std::fs::read(dir.path().join(files::REQUESTS)).unwrap(),
            torn
        );
    }
}
