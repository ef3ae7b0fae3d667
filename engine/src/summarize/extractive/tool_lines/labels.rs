//! Call labels: how a summary names the tool call a kept line came from
//! (`read_file(src/config.py)`), short enough to cost little and still tell calls apart.

use super::super::claims::claims;
use super::super::text::{clip, one_line};

/// Longest call label (`name(args)`), in characters.
const MAX_LABEL_CHARS: usize = 72;

/// A scalar argument value as short text.
fn scalar(v: &serde_json::Value) -> Option<String> {
    match v {
        serde_json::Value::String(s) => Some(one_line(s)),
        serde_json::Value::Number(n) => Some(n.to_string()),
        serde_json::Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// The label of a call: `name(value)` for one scalar argument, `name(k=v, …)` otherwise,
/// clipped; parentheses inside are neutralised so the label parses back. An argument that
/// carries a claim is left out.
pub fn call_label(name: &str, arguments: &serde_json::Value) -> String {
    label_within(name, arguments, LabelLimits::SHORT)
}

/// [`call_label`] with room for a whole command line: the label of the last command.
pub fn call_label_long(name: &str, arguments: &serde_json::Value) -> String {
    label_within(name, arguments, LabelLimits::LONG)
}

/// A label as written in an earlier checkpoint (`name(args)`), cut back to the short
/// form: the long label of what was then the last command is no longer the last one's,
/// and would otherwise be repeated, whole, in every later checkpoint.
pub fn shortened_label(label: &str) -> String {
    let Some((name, rest)) = label.split_once('(') else {
        return label.to_string();
    };
    let args = rest.strip_suffix(')').unwrap_or(rest);
    if args.chars().count() <= LabelLimits::SHORT.total {
        return label.to_string();
    }
    format!("{name}({})", clip_argument(args, LabelLimits::SHORT.single))
}

/// Character bounds of a call label: one scalar argument, each of several, the whole.
#[derive(Debug, Clone, Copy)]
struct LabelLimits {
    single: usize,
    each: usize,
    total: usize,
}

impl LabelLimits {
    // Short: a label is repeated on every line of its result, and in a small summary a
    // long one costs what a value would.
    const SHORT: LabelLimits = LabelLimits {
        single: 32,
        each: 20,
        total: MAX_LABEL_CHARS,
    };
    const LONG: LabelLimits = LabelLimits {
        single: 240,
        each: 120,
        total: 320,
    };
}

/// An argument clipped to `max` characters: a path keeps its end (the file name tells
/// `envs/prod/main.tf` from `envs/dev/main.tf`), a command line both ends (the program, and
/// the target it ends with: `cargo test …invoices_roundtrip`), anything else its beginning.
fn clip_argument(v: &str, max: usize) -> String {
    let n = v.chars().count();
    if n <= max {
        return v.to_string();
    }
    if v.contains('/') && !v.contains(char::is_whitespace) {
        // Whole components only: the longest end after a `/` that fits, or the file name
        // whole when even it does not (up to twice the room) — a file name cut in two
        // names no file.
        let chars: Vec<char> = v.chars().collect();
        let start = (1..n)
            .filter(|&i| chars[i - 1] == '/' && n - i <= max)
            .min()
            .or_else(|| {
                let base = chars.iter().rposition(|&c| c == '/').map_or(0, |p| p + 1);
                (n - base <= 2 * max).then_some(base)
            })
            .unwrap_or(n - max);
        let tail: String = chars[start..].iter().collect();
        format!("…{tail}")
    } else if v.contains(char::is_whitespace) && max >= 12 {
        clip_command(v, max)
    } else {
        clip(v, max)
    }
}

/// A command line clipped to about `max` characters, keeping both ends: its leading words
/// (the program, within two fifths) and the longest end that starts at a word, an `=` or a
/// `/` (`-out=edge-vpc.tfplan` keeps `edge-vpc.tfplan`), so a file or target it names is
/// never cut in two. Characters are cut only where no such start fits.
fn clip_command(v: &str, max: usize) -> String {
    let chars: Vec<char> = v.chars().collect();
    let n = chars.len();
    let head_max = max * 2 / 5;
    let words_end = (0..=head_max.min(n.saturating_sub(1)))
        .rev()
        .find(|&i| chars[i].is_whitespace());
    let head_len = words_end.filter(|&i| i > 0).unwrap_or(head_max);
    let head: String = chars[..head_len].iter().collect();
    let head = head.trim_end();
    let room = max.saturating_sub(head.chars().count() + 1);
    let start = (1..n)
        .filter(|&i| {
            n - i <= room && (chars[i - 1].is_whitespace() || matches!(chars[i - 1], '=' | '/'))
        })
        .min()
        .unwrap_or(n - room.min(n));
    let tail: String = chars[start..].iter().collect();
    format!("{head}…{}", tail.trim_start())
}

/// Whether a call runs a command (a shell line, a CLI, a test run) rather than only
/// reading or writing a file: the "last command" a resumed agent is asked about is the
/// last thing it ran, not the file it opened after it. A call whose every argument is a
/// path, written text or a line number is a file operation; a call without arguments is
/// none either.
pub fn runs_a_command(arguments: &serde_json::Value) -> bool {
    let serde_json::Value::Object(o) = arguments else {
        return matches!(arguments, serde_json::Value::String(s) if !s.is_empty());
    };
    o.iter().any(|(k, v)| {
        let key = k.to_ascii_lowercase();
        let command_key = matches!(
            key.as_str(),
            "command" | "cmd" | "script" | "args" | "argv" | "commandline" | "command_line"
        );
        let position = matches!(
            key.as_str(),
            "start"
                | "end"
                | "offset"
                | "limit"
                | "line"
                | "lines"
                | "start_line"
                | "end_line"
                | "encoding"
        );
        match (v.as_str(), scalar(v)) {
            _ if command_key => !v.is_null(),
            (Some(raw), Some(text)) => {
                !position
                    && !text.is_empty()
                    && !path_argument(k, &text)
                    && !content_argument(k, raw, 0)
            }
            _ => false,
        }
    })
}

/// Whether an argument names a file: one word, with a `/` or under a key that says so.
fn path_argument(key: &str, value: &str) -> bool {
    let key = key.to_ascii_lowercase();
    !value.is_empty()
        && !value.contains(char::is_whitespace)
        && (value.contains('/')
            || matches!(
                key.as_str(),
                "path" | "file" | "file_path" | "filepath" | "filename" | "target_file"
            ))
}

/// Whether an argument is text written (a file's content, a patch): too long for a label
/// and multi-line or under a key that says so. A command line is neither.
fn content_argument(key: &str, value: &str, room: usize) -> bool {
    let key = key.to_ascii_lowercase();
    value.chars().count() > room
        && (value.contains('\n')
            || matches!(
                key.as_str(),
                "content"
                    | "contents"
                    | "text"
                    | "body"
                    | "data"
                    | "new_string"
                    | "old_string"
                    | "patch"
                    | "diff"
                    | "new_text"
                    | "old_text"
                    | "code"
            ))
}

fn label_within(name: &str, arguments: &serde_json::Value, limits: LabelLimits) -> String {
    let pairs: Vec<(String, String)> = match arguments {
        serde_json::Value::Object(o) => o
            .iter()
            .filter_map(|(k, v)| scalar(v).map(|s| (k.clone(), s)))
            .collect(),
        other => scalar(other)
            .map(|s| vec![(String::new(), s)])
            .unwrap_or_default(),
    };
    // A call that writes a file (a path, and text too long for a label): the path names
    // the call, the text is what its result says was written.
    let written = pairs.iter().find(|(k, v)| path_argument(k, v)).filter(|_| {
        pairs.len() > 1
            && pairs
                .iter()
                .filter(|(k, v)| !path_argument(k, v))
                .all(|(k, v)| content_argument(k, v, limits.each))
    });
    let args = match pairs.as_slice() {
        _ if written.is_some() => {
            clip_argument(written.map_or("", |(_, p)| p.as_str()), limits.single)
        }
        [(_, v)] => clip_argument(v, limits.single),
        many => many
            .iter()
            .take(3)
            .map(|(k, v)| format!("{k}={}", clip_argument(v, limits.each)))
            .collect::<Vec<_>>()
            .join(", "),
    };
    let args = if claims().is_match(&args) {
        "…".to_string()
    } else {
        args.replace('(', "[").replace(')', "]")
    };
    clip(
        &format!("{}({args})", one_line(name).replace(['(', ')'], "")),
        limits.total,
    )
}
