//! Headings in tool output: what a line needs from above it to still say whose value it
//! is once it is kept alone — the section keys of an indented document, the column names of
//! a table.
//!
//! `kubectl get pods`, `ps`, `size`, `df` and Markdown tables print their values in rows
//! under one header line. A row kept on its own (`api-7d9f 1/1 Running 3 2d`) no longer
//! says which number is the restart count; kept with its headers
//! (`api-7d9f 1/1 Running 3 2d (columns: NAME READY STATUS RESTARTS AGE)`) it does, for
//! any reader. The row itself is written as it was read (a later question may quote it
//! whole); the names follow it, and only where the header and the row have exactly the
//! same number of columns (a mismatch means the guess is unsafe). A parenthesised remark
//! belongs to the cell before it (`3 (2d ago)`: kubectl's restart count).

use std::sync::OnceLock;

use regex::Regex;

use super::tool_lines::{key_value, MAX_LINE_CHARS};

/// The nesting of an indented `key:` document (YAML, TOML-like listings): which section
/// keys enclose each line. `port: 8443` under `billing:` means nothing once the section
/// header is gone, and two services' settings look alike; kept as `billing.port: 8443`
/// the line still says whose it is.
pub(super) struct Sections {
    /// Per line: the enclosing section keys, outermost first.
    paths: Vec<Vec<String>>,
}

impl Sections {
    pub(super) fn of(content: &str) -> Self {
        static HEADER: OnceLock<Regex> = OnceLock::new();
        let header = HEADER.get_or_init(|| {
            Regex::new(r"^(\s*)(?:-\s+)?([A-Za-z_][\w.\-]{0,40}):\s*$").expect("static regex")
        });
        let mut stack: Vec<(usize, String)> = Vec::new();
        let mut paths = Vec::new();
        for line in content.lines() {
            let indent = line.len() - line.trim_start().len();
            if !line.trim().is_empty() {
                while stack.last().is_some_and(|(i, _)| *i >= indent) {
                    stack.pop();
                }
            }
            paths.push(stack.iter().map(|(_, k)| k.clone()).collect());
            if let Some(c) = header.captures(line) {
                stack.push((c[1].len(), c[2].to_string()));
            }
        }
        Sections { paths }
    }

    /// `line` (trimmed, at `position`) with its enclosing keys: only a `key: value` setting
    /// is qualified, and the outermost key only when there are two or more (a single
    /// top-level wrapper such as `services:` adds nothing).
    pub(super) fn qualified(&self, position: usize, line: &str) -> String {
        let Some(path) = self.paths.get(position).filter(|p| !p.is_empty()) else {
            return line.to_string();
        };
        if key_value().captures(line).is_none() || line.starts_with(['-', '*']) {
            return line.to_string();
        }
        let keep = if path.len() > 1 {
            &path[1..]
        } else {
            &path[..]
        };
        format!("{}.{line}", keep.join("."))
    }
}

/// Per line of a result: the column names that apply to it, if any.
pub(super) struct Columns {
    headers: Vec<Option<Header>>,
}

#[derive(Clone)]
struct Header {
    names: Vec<String>,
    piped: bool,
}

/// Fewest columns a whitespace-separated header has: two words are as often a phrase.
const MIN_COLUMNS: usize = 3;

/// The cells of a Markdown table row (`| a | b |`), or `None`.
pub(super) fn pipe_cells(line: &str) -> Option<Vec<String>> {
    let t = line.trim();
    if t.len() < 3 || !t.starts_with('|') || !t.ends_with('|') {
        return None;
    }
    Some(
        t[1..t.len() - 1]
            .split('|')
            .map(|c| c.trim().to_string())
            .collect(),
    )
}

/// A Markdown separator row (`|---|:--:|`, `|--+--|`).
pub(super) fn separator(line: &str) -> bool {
    let t = line.trim();
    t.contains('-') && t.chars().all(|c| "|-: +".contains(c))
}

/// Whether a cell or a token reads as a column name: letters first, no run of digits
/// (a value), short.
fn name_like(token: &str) -> bool {
    let mut digits = 0;
    let mut run = 0;
    for c in token.chars() {
        if c.is_ascii_digit() {
            run += 1;
            digits = digits.max(run);
        } else {
            run = 0;
        }
    }
    token
        .chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || "%#".contains(c))
        && token.chars().count() <= 24
        && digits < 2
        && !token.ends_with(['.', ':', ',', ';', '!', '?'])
}

/// Whether a line's tokens are set apart as columns are (a tab, or two spaces between
/// two of them) rather than as the words of a sentence.
fn padded(line: &str) -> bool {
    let t = line.trim();
    t.contains('\t') || t.contains("  ")
}

/// Whether a whitespace-separated row holds a value: some token has a digit.
fn has_value(tokens: &[&str]) -> bool {
    tokens.iter().any(|t| t.chars().any(|c| c.is_ascii_digit()))
}

impl Columns {
    /// The headers of `content`'s tables. A header applies to the lines after it up to the
    /// next blank line (or the next header).
    pub(super) fn of(content: &str) -> Self {
        let mut headers = Vec::new();
        let mut current: Option<Header> = None;
        let mut previous_piped_header = false;
        for line in content.lines() {
            if line.trim().is_empty() {
                current = None;
                headers.push(None);
                continue;
            }
            if let Some(cells) = pipe_cells(line) {
                if separator(line) {
                    headers.push(None);
                    continue;
                }
                let header = cells.len() >= 2
                    && cells.iter().all(|c| !c.is_empty() && name_like_cell(c))
                    && !previous_piped_header;
                if header && current.as_ref().is_none_or(|h| !h.piped) {
                    current = Some(Header {
                        names: cells,
                        piped: true,
                    });
                    previous_piped_header = true;
                    headers.push(None);
                    continue;
                }
                headers.push(current.clone().filter(|h| h.piped));
                continue;
            }
            previous_piped_header = false;
            let tokens: Vec<&str> = line.split_whitespace().collect();
            if tokens.len() >= MIN_COLUMNS
                && tokens.iter().all(|t| name_like(t))
                && (padded(line) || tokens.iter().all(|t| !t.chars().any(char::is_lowercase)))
            {
                current = Some(Header {
                    names: tokens.iter().map(|t| t.to_string()).collect(),
                    piped: false,
                });
                headers.push(None);
                continue;
            }
            headers.push(current.clone().filter(|h| !h.piped));
        }
        Columns { headers }
    }

    /// `line` (at `position`) with its column names, when its header fits it exactly and
    /// the named row still fits a key line; otherwise `line` as it is.
    pub(super) fn named(&self, position: usize, line: &str) -> String {
        self.with_names(position, line)
            .unwrap_or_else(|| line.to_string())
    }

    /// Whether `line` (at `position`) is a row its header names (see [`Self::named`]).
    pub(super) fn headed(&self, position: usize, line: &str) -> bool {
        self.with_names(position, line).is_some()
    }

    /// [`Self::named`] when the header names the row; `None` otherwise.
    fn with_names(&self, position: usize, line: &str) -> Option<String> {
        let Some(Some(h)) = self.headers.get(position) else {
            return None;
        };
        let (cells, joiner): (Vec<String>, &str) = if h.piped {
            (pipe_cells(line)?, " | ")
        } else {
            let tokens: Vec<&str> = line.split_whitespace().collect();
            if !has_value(&tokens) {
                return None;
            }
            (whitespace_cells(&tokens), " ")
        };
        if cells.len() != h.names.len() {
            return None;
        }
        let named = format!("{line} (columns: {})", h.names.join(joiner));
        (named.chars().count() <= MAX_LINE_CHARS).then_some(named)
    }
}

/// The cells of a whitespace-separated row: its tokens, a parenthesised remark joined to
/// the cell before it (`1 (2d ago)`).
pub(super) fn whitespace_cells(tokens: &[&str]) -> Vec<String> {
    let mut cells: Vec<String> = Vec::new();
    let mut open = false;
    for t in tokens {
        match cells.last_mut() {
            Some(last) if open || t.starts_with('(') => {
                last.push(' ');
                last.push_str(t);
            }
            _ => cells.push(t.to_string()),
        }
        if t.starts_with('(') || open {
            open = !t.ends_with(')');
        }
    }
    cells
}

/// A Markdown header cell: words that read as a name (`region`, `p99 latency`), no value.
fn name_like_cell(cell: &str) -> bool {
    let words: Vec<&str> = cell.split_whitespace().collect();
    (1..=4).contains(&words.len()) && words.iter().all(|w| name_like(w))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(content: &str, position: usize) -> String {
        let line = content.lines().nth(position).unwrap_or_default().trim();
        Columns::of(content).named(position, line)
    }

    #[test]
    fn rows_under_a_header_name_their_values() {
        let pods = "NAME READY STATUS RESTARTS AGE\napi-7d9f 1/1 Running 3 2d\n\
                    worker-5c 0/1 CrashLoopBackOff 41 2d\n";
        assert_eq!(
            named(pods, 2),
            "worker-5c 0/1 CrashLoopBackOff 41 2d (columns: NAME READY STATUS RESTARTS AGE)"
        );
        // A remark in parentheses is part of its cell.
        let restarted = "NAME READY STATUS RESTARTS AGE
                         worker-5c   0/1   CrashLoopBackOff   17 (3m ago)   2d4h
";
        assert_eq!(
            named(restarted, 1),
            "worker-5c   0/1   CrashLoopBackOff   17 (3m ago)   2d4h (columns: NAME READY STATUS RESTARTS AGE)"
        );
        let size = "   text\t   data\t    bss\t    dec\t    hex\tfilename\n \
                    181244\t   2312\t  41872\t 225428\t  37094\tbuild/fw.elf\n";
        assert_eq!(
            named(size, 1),
            "181244\t   2312\t  41872\t 225428\t  37094\tbuild/fw.elf \
             (columns: text data bss dec hex filename)"
        );
        let md = "| region | replicas |\n|---|---|\n| eu-west-3 | 12 |\n";
        assert_eq!(
            named(md, 2),
            "| eu-west-3 | 12 | (columns: region | replicas)"
        );
    }

    #[test]
    fn no_header_or_a_column_mismatch_leaves_the_row_alone() {
        // Two words are a phrase, not a header.
        assert_eq!(
            named("Build finished\n3 warnings 0 errors\n", 1),
            "3 warnings 0 errors"
        );
        // A row with more tokens than the header has columns.
        let df = "Filesystem Size Used Avail Use% Mounted on\n/dev/sda1 98G 41G 52G 45% /\n";
        assert_eq!(named(df, 1), "/dev/sda1 98G 41G 52G 45% /");
        // A blank line ends the table.
        let gap = "NAME READY STATUS\n\napi 1/1 Running\n";
        assert_eq!(named(gap, 2), "api 1/1 Running");
        // A row without any value is not a data row.
        assert_eq!(
            named("ALPHA BETA GAMMA\none two three\n", 1),
            "one two three"
        );
        // A sentence is not a header, whatever follows it.
        assert_eq!(
            named(
                "Checking dependencies for project\nfound 12 packages total\n",
                1
            ),
            "found 12 packages total"
        );
        assert_eq!(
            named("name  zone  port\nbilling  eu-1  8443\n", 1),
            "billing  eu-1  8443 (columns: name zone port)"
        );
    }
}
