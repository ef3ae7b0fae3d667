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
//! deviations); a column of sequential numbers or of near-equal counters has none. A text
//! column's outliers are values that occur once where one value fills most of the column.

use std::collections::{HashMap, HashSet};

use super::headings::pipe_cells;

/// Fewest rows of one shape that make a table.
const MIN_ROWS: usize = 4;
/// Fewest cells per row.
const MIN_CELLS: usize = 2;
/// How far from the median, in median absolute deviations, an outlier must be.
const SPREAD_FACTOR: f64 = 3.0;
/// Share of a text column (percent) one value must fill for a singleton to stand out.
const MAJORITY_PERCENT: usize = 60;

/// The positions (line indices of the result) of the rows that stand out.
pub(super) fn outlier_rows(lines: &[&str]) -> HashSet<usize> {
    let mut out = HashSet::new();
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

fn cells(line: &str) -> Vec<String> {
    match pipe_cells(line) {
        Some(c) => c,
        None => line.split_whitespace().map(str::to_string).collect(),
    }
}

/// Mark the outliers of one table.
fn mark(rows: &[(usize, Vec<String>)], out: &mut HashSet<usize>) {
    // A header line (no digit in any cell) has the rows' shape but is not one of them.
    let rows = match rows.first() {
        Some((_, first))
            if !first
                .iter()
                .any(|c| c.contains(|ch: char| ch.is_ascii_digit())) =>
        {
            &rows[1..]
        }
        _ => rows,
    };
    if rows.len() < MIN_ROWS {
        return;
    }
    let width = rows[0].1.len();
    for col in 0..width {
        let column: Vec<&str> = rows.iter().map(|(_, c)| c[col].as_str()).collect();
        let numbers: Option<Vec<f64>> = same_unit_numbers(&column);
        let found = match numbers {
            Some(n) => numeric_outlier(&n).into_iter().collect(),
            None => text_outliers(&column),
        };
        out.extend(found.into_iter().map(|i| rows[i].0));
    }
}

/// The column's values as numbers when every cell is a number with one and the same unit
/// suffix (`15G`, `98%`, `1284330`, `3.2ms`).
fn same_unit_numbers(column: &[&str]) -> Option<Vec<f64>> {
    let mut unit: Option<&str> = None;
    let mut values = Vec::with_capacity(column.len());
    for cell in column {
        let split = cell
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(cell.len());
        let (number, suffix) = cell.split_at(split);
        if number.is_empty()
            || suffix.len() > 3
            || !suffix.chars().all(|c| c.is_alphabetic() || c == '%')
        {
            return None;
        }
        if *unit.get_or_insert(suffix) != suffix {
            return None;
        }
        values.push(number.parse::<f64>().ok()?);
    }
    Some(values)
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
    (stands_out && unique).then_some(index)
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
        let mut v: Vec<usize> = outlier_rows(&lines).into_iter().collect();
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
        let df = "/dev/a 100G 40G 60G 40% /\n/dev/b 100G 45G 55G 45% /srv\n/dev/c 100G 98G 2G 98% /var/lib/docker\n/dev/d 100G 33G 67G 33% /home\n/dev/e 100G 38G 62G 38% /opt";
        assert_eq!(rows(df), vec![2]);
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
