//! The row that differs: in a table of look-alike rows, the one an agent ran the command
//! to find.
//!
//! `kubectl get pods`, consumer-group lag, `df`, `ps` and test-timing tables print many
//! rows of one shape; what the session needs later is rarely the first row but the one
//! that stands out — the pod with 41 restarts, the partition a million messages behind,
//! the disk at 98 %, the one `CrashLoopBackOff` among `Running`. Rank order alone keeps
//! the first rows; this marks, per column, the row whose value is far from the rest, so
//! it ranks first among its table's rows.
//!
//! A table here is a run of at least [`MIN_ROWS`] consecutive lines with the same number
//! of whitespace- (or `|`-) separated cells, at least [`MIN_CELLS`]. A numeric column's
//! outlier is its most extreme value when it is far from the median both relatively (at
//! least half the median away) and against the column's own spread (three median absolute
//! deviations); a column of sequential numbers or of near-equal counters has none. Log fields
//! (`queries=1190`) count as numbers. A text
//! column's outliers are values that occur once where one value fills most of the column.

use std::collections::HashMap;

use super::headings::{pipe_cells, whitespace_cells};

/// Fewest rows of one shape that make a table.
const MIN_ROWS: usize = 4;
/// Fewest cells per row.
const MIN_CELLS: usize = 2;
/// How far from the median, in median absolute deviations, an outlier must be.
const SPREAD_FACTOR: f64 = 3.0;
/// How far from its nearest neighbour an outlier must be, as a share of its distance to the
/// median.
const ISOLATION: f64 = 0.15;
/// Share of a column (percent) that must be numbers of one kind for it to be numeric.
const NUMERIC_PERCENT: usize = 80;
/// Share of a text column (percent) one value must fill for a singleton to stand out.
const MAJORITY_PERCENT: usize = 60;

/// Whether a row's cells read as code: a block brace, a statement end, an empty call, a
/// comment.
fn code_like(cells: &[String]) -> bool {
    cells
        .iter()
        .any(|c| c.contains(['{', '}', ';']) || c.contains("()") || c.starts_with("//") || c == "#")
}

/// The positions (line indices of the result) of the rows that stand out, each with the
/// number of columns it stands out in (the replica behind in bytes *and* in time before
/// the one whose state alone differs).
pub(super) fn outlier_rows(lines: &[&str]) -> HashMap<usize, usize> {
    let mut out = HashMap::new();
    let mut block: Vec<(usize, Vec<String>)> = Vec::new();
    for (position, line) in lines.iter().enumerate() {
        let cells = cells(line);
        let same_shape = block
            .last()
            .is_some_and(|(_, c)| c.len() == cells.len() && !cells.is_empty());
        if !same_shape {
            mark(&block, &mut out);
            block.clear();
        }
        if cells.len() >= MIN_CELLS {
            block.push((position, cells));
        }
    }
    mark(&block, &mut out);
    out
}

/// A row's cells: between `|` (a Markdown row, or `psql`'s `a | b | c` without the outer
/// bars), else between runs of whitespace (a parenthesised remark, `3 (2d ago)`, joined to
/// its cell).
fn cells(line: &str) -> Vec<String> {
    match pipe_cells(line) {
        Some(c) => c,
        None if line.contains(" | ") => line.split('|').map(|c| c.trim().to_string()).collect(),
        None => whitespace_cells(&line.split_whitespace().collect::<Vec<_>>()),
    }
}

/// Mark the outliers of one table.
fn mark(rows: &[(usize, Vec<String>)], out: &mut HashMap<usize, usize>) {
    // A header line (no digit in any cell) has the rows' shape but is not one of them —
    // wherever it sits (a status line may come first), when most rows have digits.
    let has_digit = |cells: &[String]| {
        cells
            .iter()
            .any(|c| c.contains(|ch: char| ch.is_ascii_digit()))
    };
    let with_digits = rows.iter().filter(|(_, c)| has_digit(c)).count();
    let rows: Vec<&(usize, Vec<String>)> = if with_digits * 2 > rows.len() {
        rows.iter().filter(|(_, c)| has_digit(c)).collect()
    } else {
        rows.iter().collect()
    };
    if rows.len() < MIN_ROWS {
        return;
    }
    // Code is no table, however regular its lines (`if x.len() > 424 {`, `// a comment`).
    if rows.iter().filter(|(_, c)| code_like(c)).count() * 4 > rows.len() {
        return;
    }
    let width = rows[0].1.len();
    for col in 0..width {
        let column: Vec<&str> = rows.iter().map(|(_, c)| c[col].as_str()).collect();
        let column = without_common_key(&column);
        let found = match numeric_column(&column) {
            Some(cells) => {
                let values: Vec<f64> = cells.iter().map(|&(_, v)| v).collect();
                numeric_outlier(&values)
                    .map(|k| cells[k].0)
                    .into_iter()
                    .collect()
            }
            None => text_outliers(&column),
        };
        for i in found {
            *out.entry(rows[i].0).or_default() += 1;
        }
    }
}

/// The column's cells without the key they share (`queries=1190`, `loss 7.942`,
/// `lag: 12`: a log line's fields), when most cells ([`NUMERIC_PERCENT`]) open with one
/// before a number; else as they are.
fn without_common_key<'c>(column: &[&'c str]) -> Vec<&'c str> {
    let key = |cell: &'c str| -> Option<(&'c str, &'c str)> {
        let at = cell.find(['=', ':', ' '])?;
        let (k, rest) = (&cell[..at], cell[at + 1..].trim_start());
        let named = !k.is_empty()
            && k.chars()
                .all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '.'))
            && k.chars().any(char::is_alphabetic);
        (named && rest.starts_with(|c: char| c.is_ascii_digit() || c == '.' || c == '-'))
            .then_some((k, rest))
    };
    let keyed: Vec<Option<(&str, &str)>> = column.iter().map(|cell| key(cell)).collect();
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for (k, _) in keyed.iter().flatten() {
        *counts.entry(k).or_default() += 1;
    }
    let Some((common, n)) = counts.into_iter().max_by_key(|&(k, n)| (n, k)) else {
        return column.to_vec();
    };
    if n * 100 < column.len() * NUMERIC_PERCENT {
        return column.to_vec();
    }
    column
        .iter()
        .zip(keyed)
        .map(|(cell, keyed)| match keyed {
            Some((k, rest)) if k == common => rest,
            _ => cell,
        })
        .collect()
}

/// What a cell's number measures, so that values written with different prefixes compare.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Unit<'a> {
    /// A size or count with a decimal or binary prefix: `96 kB`, `12 MB`, `512Mi`, `15G`.
    Scaled,
    /// A duration: `3.2ms`, `45s`, `5h`, `00:04:17`.
    Seconds,
    /// Any other suffix, compared as written (`98%`, none at all).
    Written(&'a str),
}

/// The multiplier of a size or count prefix (`kB`, `MiB`, `G`), case as tools print it.
fn scale(suffix: &str) -> Option<f64> {
    let (prefix, rest) = suffix.split_at(suffix.len().min(1));
    let binary = matches!(rest, "i" | "iB");
    if !(rest.is_empty() || binary || rest == "B" || rest == "b") {
        return None;
    }
    let power = match prefix {
        "B" | "b" if rest.is_empty() => return Some(1.0),
        "k" | "K" => 1,
        "M" => 2,
        "G" => 3,
        "T" => 4,
        "P" => 5,
        _ => return None,
    };
    let base: f64 = if binary { 1024.0 } else { 1000.0 };
    Some(base.powi(power))
}

/// The seconds of a duration unit.
fn seconds(suffix: &str) -> Option<f64> {
    Some(match suffix {
        "ns" => 1e-9,
        "us" | "µs" => 1e-6,
        "ms" => 1e-3,
        "s" | "sec" => 1.0,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        "d" => 86400.0,
        _ => return None,
    })
}

/// A clock-style duration (`00:04:17`, `00:00:19.882`), in seconds.
fn clock(cell: &str) -> Option<f64> {
    let parts: Vec<&str> = cell.split(':').collect();
    if parts.len() != 3 || parts[..2].iter().any(|p| p.is_empty() || p.len() > 3) {
        return None;
    }
    let mut total = 0.0;
    for p in &parts {
        if !p.chars().all(|c| c.is_ascii_digit() || c == '.') {
            return None;
        }
        total = total * 60.0 + p.parse::<f64>().ok()?;
    }
    Some(total)
}

/// A cell as a magnitude and what it measures: a number, then (after at most one space) a
/// short unit suffix; sizes and durations in their base unit.
fn magnitude(cell: &str) -> Option<(Unit<'_>, f64)> {
    let cell = cell.trim();
    if let Some(s) = clock(cell) {
        return Some((Unit::Seconds, s));
    }
    let split = cell
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(cell.len());
    let (number, suffix) = cell.split_at(split);
    let suffix = suffix.strip_prefix(' ').unwrap_or(suffix);
    if number.is_empty()
        || suffix.chars().count() > 3
        || !suffix.chars().all(|c| c.is_alphabetic() || c == '%')
    {
        return None;
    }
    let value = number.parse::<f64>().ok()?;
    Some(match (scale(suffix), seconds(suffix)) {
        (Some(k), _) => (Unit::Scaled, value * k),
        (_, Some(k)) => (Unit::Seconds, value * k),
        _ => (Unit::Written(suffix), value),
    })
}

/// The column's numbers of its most common kind, with their row indexes, when nearly
/// every cell is one ([`NUMERIC_PERCENT`]; a header row or a status line printed in the
/// table's shape is not): the same suffix (`98%`, `1284330`), or sizes and durations
/// however prefixed (`96 kB` beside `1843 MB`, `3.2ms` beside `00:04:17`), converted to
/// one unit.
fn numeric_column<'c>(column: &[&'c str]) -> Option<Vec<(usize, f64)>> {
    let parsed: Vec<(usize, Unit<'c>, f64)> = column
        .iter()
        .enumerate()
        .filter_map(|(i, cell)| magnitude(cell).map(|(u, v)| (i, u, v)))
        .collect();
    let mut kinds: Vec<(Unit<'c>, usize)> = Vec::new();
    for (_, u, _) in &parsed {
        match kinds.iter_mut().find(|(k, _)| k == u) {
            Some((_, n)) => *n += 1,
            None => kinds.push((*u, 1)),
        }
    }
    let (unit, n) = kinds.into_iter().max_by_key(|&(_, n)| n)?;
    if n < MIN_ROWS || n * 100 < column.len() * NUMERIC_PERCENT {
        return None;
    }
    Some(
        parsed
            .into_iter()
            .filter(|(_, u, _)| *u == unit)
            .map(|(i, _, v)| (i, v))
            .collect(),
    )
}

fn median(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    }
}

/// The index of the column's most extreme value, when it stands out.
fn numeric_outlier(values: &[f64]) -> Option<usize> {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let med = median(&sorted);
    let mut deviations: Vec<f64> = values.iter().map(|v| (v - med).abs()).collect();
    let (index, &far) = deviations
        .iter()
        .enumerate()
        .max_by(|a, b| a.1.total_cmp(b.1))?;
    deviations.sort_by(f64::total_cmp);
    let spread = median(&deviations);
    let stands_out = far > 0.0 && far >= med.abs() / 2.0 && far > SPREAD_FACTOR * spread;
    // A tie for the extreme (two rows equally far) singles out neither.
    let unique = values
        .iter()
        .filter(|v| ((*v - med).abs() - far).abs() < f64::EPSILON)
        .count()
        == 1;
    // A small cluster of its own (two dead-letter partitions among live ones) is a second
    // kind of row, not the one that stands out: the extreme must be apart from its nearest
    // neighbour too.
    let extreme = values[index];
    let nearest = values
        .iter()
        .enumerate()
        .filter(|&(i, _)| i != index)
        .map(|(_, v)| (v - extreme).abs())
        .fold(f64::INFINITY, f64::min);
    let isolated = nearest >= ISOLATION * far;
    (stands_out && unique && isolated).then_some(index)
}

/// The indexes of values that occur once where one value fills most of the column.
fn text_outliers(column: &[&str]) -> Vec<usize> {
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for c in column {
        *counts.entry(c).or_default() += 1;
    }
    let most = counts.values().copied().max().unwrap_or(0);
    if most * 100 < column.len() * MAJORITY_PERCENT || most == column.len() {
        return Vec::new();
    }
    column
        .iter()
        .enumerate()
        .filter(|(_, c)| counts[**c] == 1)
        .map(|(i, _)| i)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(text: &str) -> Vec<usize> {
        let lines: Vec<&str> = text.lines().map(str::trim).collect();
        let mut v: Vec<usize> = outlier_rows(&lines).into_keys().collect();
        v.sort();
        v
    }

    #[test]
    fn the_lagging_partition_and_the_crashing_pod_stand_out() {
        let lag = "GROUP TOPIC PARTITION LAG\n\
                   g t 0 1282\ng t 1 1282\ng t 2 1135\ng t 3 1707\ng t 4 1284330\ng t 5 1086\ng t 6 1318";
        assert_eq!(rows(lag), vec![5]);
        let pods = "NAME READY STATUS RESTARTS AGE\n\
                    api-1 1/1 Running 0 2d\napi-2 1/1 Running 0 2d\nworker-5c 0/1 CrashLoopBackOff 41 2d\napi-3 1/1 Running 0 2d\napi-4 1/1 Running 0 2d";
        assert_eq!(rows(pods), vec![3]);
        // kubectl's `3 (2d ago)` is one cell: the rows that restarted keep the table's shape.
        let restarted = "NAME READY STATUS RESTARTS AGE\n\
                         api-1 1/1 Running 0 2d\napi-2 1/1 Running 1 (30h ago) 2d\n\
                         worker-5c 0/1 CrashLoopBackOff 17 (3m ago) 2d\napi-3 1/1 Running 0 2d\n\
                         api-4 1/1 Running 2 (1d ago) 2d";
        assert_eq!(rows(restarted), vec![3]);
        let df = "/dev/a 100G 40G 60G 40% /\n/dev/b 100G 45G 55G 45% /srv\n/dev/c 100G 98G 2G 98% /var/lib/docker\n/dev/d 100G 33G 67G 33% /home\n/dev/e 100G 38G 62G 38% /opt";
        assert_eq!(rows(df), vec![2]);
        // Sizes and durations compare across prefixes: 1843 MB is the one behind, not
        // 2210 kB; 00:04:17 the one lagging, not 19.882 s.
        let replication = "r1 | streaming | 96 kB | 00:00:00.004\n\
                           r2 | streaming | 12 MB | 00:00:01.310\n\
                           r3 | streaming | 1843 MB | 00:04:17\n\
                           r4 | streaming | 184 MB | 00:00:19.882\n\
                           an | catchup | 2210 kB | 00:00:02.001";
        assert_eq!(rows(replication), vec![2, 4]); // r3, and the one catching up
        let lines: Vec<&str> = replication.lines().map(str::trim).collect();
        let columns = outlier_rows(&lines);
        assert_eq!((columns[&2], columns[&4]), (2, 1), "{columns:?}");
        // A status line and the header printed in the rows' shape do not hide the column.
        let groups = "Consumer group 'g' has no active members... retrying\n\
                      GROUP TOPIC PARTITION OFFSET LAG CONSUMER HOST ID\n\
                      g raw 12 90012210 219667 c-0 10.8.3.11 c-0\n\
                      g raw 13 89977302 213110 c-0 10.8.3.11 c-0\n\
                      g raw 14 90101188 243717 c-1 10.8.3.12 c-1\n\
                      g raw 17 88123401 3409789 c-2 10.8.3.14 c-2\n\
                      g raw 19 90044120 237116 c-3 10.8.3.19 c-3";
        assert!(rows(groups).contains(&5), "{:?}", rows(groups));
        // Code lines of one shape are no table.
        let code = "if a.len() > 3 {\nlet b = c.d()?;\n// x y z\nif e.len() > 424 {\nlet f = g.h()?;\nlet i = j.k()?;";
        assert!(rows(code).is_empty(), "{:?}", rows(code));
        // Two rows near each other far from the rest are a cluster: neither stands out.
        let dead_letters =
            "q raw 90012210\nq raw 89977302\nq raw 90101188\nq raw 90230017\nq dlq 1120\nq dlq 998";
        assert!(rows(dead_letters).is_empty(), "{:?}", rows(dead_letters));
        // Log fields (`queries=54`) are numbers: the request issuing a thousand queries
        // stands out, not the one `status=201` among `status=200` (a text column would
        // single it out).
        let profile = "GET /api/health/ status=200 queries=1 sql_ms=1\n\
                       GET /api/contacts/ status=200 queries=54 sql_ms=210\n\
                       GET /api/export/ status=200 queries=3 sql_ms=12\n\
                       GET /api/accounts/ status=200 queries=1287 sql_ms=4318\n\
                       GET /api/accounts/8812/ status=200 queries=61 sql_ms=288\n\
                       GET /api/accounts/9/ status=201 queries=9 sql_ms=33\n\
                       GET /api/users/me/ status=200 queries=4 sql_ms=6";
        assert_eq!(rows(profile), vec![3]);
    }

    #[test]
    fn magnitudes_convert_prefixes_and_keep_other_suffixes_apart() {
        assert_eq!(magnitude("96 kB"), Some((Unit::Scaled, 96_000.0)));
        assert_eq!(
            magnitude("512Mi"),
            Some((Unit::Scaled, 512.0 * 1024.0 * 1024.0))
        );
        assert_eq!(magnitude("3.5ms"), Some((Unit::Seconds, 0.0035)));
        assert_eq!(magnitude("00:04:17"), Some((Unit::Seconds, 257.0)));
        assert_eq!(magnitude("98%"), Some((Unit::Written("%"), 98.0)));
        assert_eq!(magnitude("running"), None);
        assert_eq!(numeric_column(&["1 kB", "5s", "2 kB", "3s"]), None);
        // A header cell does not make a column of numbers text.
        let lag = ["LAG", "219667", "213110", "3409789", "237116", "0"];
        assert_eq!(numeric_column(&lag).map(|c| c.len()), Some(5));
    }

    #[test]
    fn sequences_and_near_equal_counters_do_not() {
        // Partition numbers count up; offsets are all about the same: nothing stands out.
        let t =
            "p 0 91220413\np 1 90877120\np 2 89120556\np 3 90012877\np 4 89551203\np 5 90330129";
        assert!(rows(t).is_empty(), "{:?}", rows(t));
        // Too few rows for a table; prose lines of varied shape are no table.
        assert!(rows("a 1 2\nb 1 200").is_empty());
        assert!(rows("the build failed in step 3\nretrying now with cache off\nok").is_empty());
        // Two rows equally far from the rest: neither is singled out.
        let tie = "x 1 5\nx 2 5\nx 3 5\nx 4 900\nx 5 900\nx 6 5";
        assert!(rows(tie).is_empty(), "{:?}", rows(tie));
    }
}
