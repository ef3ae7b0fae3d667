//! The agent process: spawn, write requests, read replies with timeouts, typed errors.

use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use thiserror::Error;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::mpsc;

use super::protocol::{encode, FromAgent, ToAgent};

/// Longest stdout line accepted (a longer one is malformed output).
pub const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;
/// Bytes of the agent's stderr kept for error messages.
const STDERR_TAIL: usize = 2048;

/// Why talking to an external agent failed. Every variant ends the trial as errored with
/// [`AgentError::kind`] as its reason.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum AgentError {
    /// The command could not be started.
    #[error("cannot start agent `{command}`: {message}")]
    Spawn {
        /// The command.
        command: String,
        /// The OS error.
        message: String,
    },
    /// No line within the timeout.
    #[error(
        "agent sent nothing for {secs:.1}s while ctxbench waited for the reply to `{waiting_for}`"
    )]
    Timeout {
        /// The request waiting for its reply.
        waiting_for: String,
        /// The timeout.
        secs: f64,
    },
    /// The agent's stdout closed (it exited or crashed).
    #[error("agent exited ({status}) while ctxbench waited for the reply to `{waiting_for}`{}", stderr_suffix(.stderr))]
    Exited {
        /// The request waiting for its reply.
        waiting_for: String,
        /// Exit status, as far as known.
        status: String,
        /// The end of the agent's stderr.
        stderr: String,
    },
    /// A line that is not a protocol message.
    #[error("agent printed a malformed line ({reason}): {line:?}")]
    Malformed {
        /// The line (cut).
        line: String,
        /// The parse error.
        reason: String,
    },
    /// The agent speaks another protocol version.
    #[error("agent speaks protocol `{got}`, ctxbench speaks `{expected}`")]
    VersionMismatch {
        /// [`super::protocol::PROTOCOL_VERSION`].
        expected: String,
        /// What the agent announced.
        got: String,
    },
    /// A well-formed message that breaks the protocol (wrong id, wrong reply type).
    #[error("protocol violation: {0}")]
    Violation(String),
    /// The agent reported a fatal error.
    #[error("agent error: {0}")]
    Agent(String),
    /// Writing to the agent failed.
    #[error("writing to the agent: {0}")]
    Io(String),
}

fn stderr_suffix(s: &str) -> String {
    if s.trim().is_empty() {
        String::new()
    } else {
        format!("; stderr: {}", s.trim())
    }
}

impl AgentError {
    /// Stable reason for the trial outcome.
    pub fn kind(&self) -> &'static str {
        match self {
            AgentError::Spawn { .. } => "agent_spawn_failed",
            AgentError::Timeout { .. } => "agent_timeout",
            AgentError::Exited { .. } => "agent_crashed",
            AgentError::Malformed { .. } => "agent_malformed_output",
            AgentError::VersionMismatch { .. } => "agent_protocol_version",
            AgentError::Violation(_) => "agent_protocol_violation",
            AgentError::Agent(_) => "agent_error",
            AgentError::Io(_) => "agent_io",
        }
    }
}

enum Line {
    Text(String),
    TooLong,
    Eof,
}

/// A running agent.
pub struct AgentProcess {
    command: String,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::UnboundedReceiver<Line>,
    stderr: Arc<Mutex<String>>,
    stderr_task: Option<tokio::task::JoinHandle<()>>,
    timeout: Duration,
    next_id: u64,
}

impl std::fmt::Debug for AgentProcess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentProcess")
            .field("command", &self.command)
            .finish_non_exhaustive()
    }
}

/// Split a command line into words: whitespace separates, single and double quotes group,
/// backslash escapes the next character outside single quotes.
pub fn split_command(s: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut quote: Option<char> = None;
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some('"'), '\\') | (None, '\\') => match chars.next() {
                Some(n) => {
                    cur.push(n);
                    in_word = true;
                }
                None => return Err("command ends with a backslash".into()),
            },
            (Some(_), c) => cur.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                in_word = true;
            }
            (None, c) if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            (None, c) => {
                cur.push(c);
                in_word = true;
            }
        }
    }
    if quote.is_some() {
        return Err("unterminated quote in the command".into());
    }
    if in_word {
        words.push(cur);
    }
    if words.is_empty() {
        return Err("empty command".into());
    }
    Ok(words)
}

impl AgentProcess {
    /// Start `argv` in `cwd` with piped stdio; `timeout` bounds every wait for a line.
    pub fn spawn(
        argv: &[String],
        cwd: &Path,
        env: &[(String, String)],
        timeout: Duration,
    ) -> Result<Self, AgentError> {
        let command = argv.join(" ");
        let Some((program, args)) = argv.split_first() else {
            return Err(AgentError::Spawn {
                command,
                message: "empty command".into(),
            });
        };
        let mut cmd = Command::new(program);
        cmd.args(args)
            .current_dir(cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().map_err(|e| AgentError::Spawn {
            command: command.clone(),
            message: e.to_string(),
        })?;
        let (Some(stdout), Some(stdin), Some(mut stderr_pipe)) =
            (child.stdout.take(), child.stdin.take(), child.stderr.take())
        else {
            return Err(AgentError::Spawn {
                command,
                message: "stdio pipes unavailable".into(),
            });
        };
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut reader = BufReader::new(stdout);
            let mut buf = Vec::new();
            loop {
                buf.clear();
                let mut limited = (&mut reader).take(MAX_LINE_BYTES as u64 + 1);
                match limited.read_until(b'\n', &mut buf).await {
                    Ok(0) | Err(_) => {
                        let _ = tx.send(Line::Eof);
                        break;
                    }
                    Ok(_) if buf.len() > MAX_LINE_BYTES => {
                        let _ = tx.send(Line::TooLong);
                        break;
                    }
                    Ok(_) => {
                        let text = String::from_utf8_lossy(&buf).trim_end().to_string();
                        if tx.send(Line::Text(text)).is_err() {
                            break;
                        }
                    }
                }
            }
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        let tail = stderr.clone();
        let stderr_task = tokio::spawn(async move {
            let mut chunk = [0u8; 4096];
            while let Ok(n) = stderr_pipe.read(&mut chunk).await {
                if n == 0 {
                    break;
                }
                let mut t = tail.lock().unwrap_or_else(|e| e.into_inner());
                t.push_str(&String::from_utf8_lossy(&chunk[..n]));
                if t.len() > STDERR_TAIL * 2 {
                    let mut cut = t.len() - STDERR_TAIL;
                    while !t.is_char_boundary(cut) {
                        cut += 1;
                    }
                    *t = t[cut..].to_string();
                }
            }
        });
        Ok(AgentProcess {
            command,
            child,
            stdin: Some(stdin),
            lines: rx,
            stderr,
            stderr_task: Some(stderr_task),
            timeout,
            next_id: 1,
        })
    }

    /// A fresh request id.
    pub fn next_id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    /// Write one raw line (the conformance test uses it to send garbage).
    pub async fn send_raw(&mut self, line: &str, waiting_for: &str) -> Result<(), AgentError> {
        let Some(stdin) = self.stdin.as_mut() else {
            return Err(AgentError::Io("stdin already closed".into()));
        };
        let mut bytes = line.as_bytes().to_vec();
        bytes.push(b'\n');
        let write = async {
            stdin.write_all(&bytes).await?;
            stdin.flush().await
        };
        match tokio::time::timeout(self.timeout, write).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => {
                Err(self.exited(waiting_for).await)
            }
            Ok(Err(e)) => Err(AgentError::Io(e.to_string())),
            Err(_) => Err(AgentError::Timeout {
                waiting_for: waiting_for.into(),
                secs: self.timeout.as_secs_f64(),
            }),
        }
    }

    /// Send `msg` and read until its terminal reply; `event` sees every `event` line and
    /// every non-fatal `error` line in between.
    pub async fn request(
        &mut self,
        msg: &ToAgent,
        event: &mut (dyn FnMut(FromAgent) + Send),
    ) -> Result<FromAgent, AgentError> {
        let kind = msg.kind();
        self.send_raw(&encode(msg), kind).await?;
        self.reply(msg.id(), kind, event).await
    }

    /// Read lines until the reply to request `id`.
    pub async fn reply(
        &mut self,
        id: u64,
        waiting_for: &str,
        event: &mut (dyn FnMut(FromAgent) + Send),
    ) -> Result<FromAgent, AgentError> {
        loop {
            let line = match tokio::time::timeout(self.timeout, self.lines.recv()).await {
                Err(_) => {
                    return Err(AgentError::Timeout {
                        waiting_for: waiting_for.into(),
                        secs: self.timeout.as_secs_f64(),
                    })
                }
                Ok(None | Some(Line::Eof)) => return Err(self.exited(waiting_for).await),
                Ok(Some(Line::TooLong)) => {
                    return Err(AgentError::Malformed {
                        line: String::new(),
                        reason: format!("line longer than {MAX_LINE_BYTES} bytes"),
                    })
                }
                Ok(Some(Line::Text(t))) => t,
            };
            if line.trim().is_empty() {
                continue;
            }
            let msg: FromAgent = match serde_json::from_str(&line) {
                Ok(m) => m,
                Err(e) => {
                    // An event ctxbench does not know (another kind, other fields) is
                    // ignored: events are optional. Anything else is malformed.
                    let is_event = serde_json::from_str::<serde_json::Value>(&line)
                        .is_ok_and(|v| v.get("type").and_then(|t| t.as_str()) == Some("event"));
                    if is_event {
                        event(FromAgent::Error {
                            id: None,
                            message: format!("unrecognised event ignored: {e}"),
                            fatal: false,
                        });
                        continue;
                    }
                    return Err(AgentError::Malformed {
                        line: line.chars().take(200).collect(),
                        reason: e.to_string(),
                    });
                }
            };
            match msg {
                FromAgent::Event { .. } => event(msg),
                FromAgent::Error {
                    id: err_id,
                    message,
                    fatal,
                } => {
                    if fatal || err_id == Some(id) {
                        return Err(AgentError::Agent(message));
                    }
                    event(FromAgent::Error {
                        id: err_id,
                        message,
                        fatal,
                    });
                }
                other => {
                    let got = reply_id(&other);
                    if got != id {
                        return Err(AgentError::Violation(format!(
                            "reply with id {got} while waiting for the reply to `{waiting_for}` (id {id})"
                        )));
                    }
                    return Ok(other);
                }
            }
        }
    }

    async fn exited(&mut self, waiting_for: &str) -> AgentError {
        let status = match tokio::time::timeout(Duration::from_secs(2), self.child.wait()).await {
            Ok(Ok(s)) => s.to_string(),
            Ok(Err(e)) => format!("unknown: {e}"),
            Err(_) => "stdout closed, process still running".into(),
        };
        // Let the stderr reader reach the end of the pipe (bounded: a grandchild may hold
        // it open).
        if let Some(task) = self.stderr_task.take() {
            let _ = tokio::time::timeout(Duration::from_millis(500), task).await;
        }
        let stderr = self
            .stderr
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let stderr: String = stderr
            .chars()
            .rev()
            .take(STDERR_TAIL)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        AgentError::Exited {
            waiting_for: waiting_for.into(),
            status,
            stderr,
        }
    }

    /// Close stdin, give the agent `grace` to exit, then kill it.
    pub async fn close(mut self, grace: Duration) {
        drop(self.stdin.take());
        if tokio::time::timeout(grace, self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.kill().await;
        }
    }
}

fn reply_id(m: &FromAgent) -> u64 {
    match m {
        FromAgent::Ready { id, .. }
        | FromAgent::TurnComplete { id, .. }
        | FromAgent::Ack { id }
        | FromAgent::CompactComplete { id, .. }
        | FromAgent::Bye { id, .. } => *id,
        FromAgent::Event { .. } | FromAgent::Error { .. } => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn answer(script: &str) -> Result<FromAgent, AgentError> {
        let argv = vec!["sh".to_string(), "-c".to_string(), script.to_string()];
        let dir = std::env::temp_dir();
        let mut agent = AgentProcess::spawn(&argv, &dir, &[], Duration::from_secs(5))?;
        let id = agent.next_id();
        let r = agent.request(&ToAgent::Shutdown { id }, &mut |_| {}).await;
        agent.close(Duration::from_millis(200)).await;
        r
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn replies_unknown_events_garbage_and_exits() {
        let ok = answer(
            r#"read l; echo '{"type":"event","event":{"kind":"runtime.custom","data":{}}}'; echo '{"type":"bye","id":1}'"#,
        )
        .await;
        assert!(matches!(ok, Ok(FromAgent::Bye { id: 1, .. })), "{ok:?}");
        let bad = answer("read l; echo 'not json'; cat >/dev/null").await;
        assert_eq!(bad.unwrap_err().kind(), "agent_malformed_output");
        let crash = answer("read l; echo dying >&2; exit 7").await.unwrap_err();
        assert_eq!(crash.kind(), "agent_crashed");
        assert!(crash.to_string().contains("dying"), "{crash}");
        let wrong = answer(r#"read l; echo '{"type":"ack","id":9}'"#).await;
        assert_eq!(wrong.unwrap_err().kind(), "agent_protocol_violation");
    }

    #[test]
    fn commands_split_like_a_shell() {
        assert_eq!(
            split_command(r#"ctxbench agent --x "a b" 'c d' e\ f"#).unwrap(),
            vec!["ctxbench", "agent", "--x", "a b", "c d", "e f"]
        );
        assert!(split_command("  ").is_err());
        assert!(split_command("a 'b").is_err());
    }
}
