//! Crash sites: the stack frame that says where an error happened.
//!
//! A stack trace is mostly frames that look alike, and none of them carries an error word,
//! so line rules keep the exception message and drop every frame — yet "where did it
//! fail?" is answered by one of them: the first frame with a source location after the
//! exception (Java, Kotlin, JavaScript, Go, Swift and Rust print the innermost frame first)
//! or the last one before it (Python prints it last, right above the exception).

use std::sync::OnceLock;

use regex::Regex;

/// A frame's source location: `InvoiceCalculator.java:233`, `src/main.rs:10:5`,
/// `File "app/jobs.py", line 88`.
fn location() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| {
        Regex::new(
            r#"(?:[\w$.\-]+/)*[\w$\-]+(?:\.[\w$\-]+)*\.(?:java|kt|kts|scala|groovy|py|rb|go|rs|js|mjs|cjs|ts|tsx|jsx|swift|m|mm|c|cc|cpp|cxx|h|hpp|cs|php|ex|exs|erl|dart|lua|pl|zig):\d+|File "[^"]+", line \d+"#,
        )
        .expect("static regex")
    })
}

/// How many lines above an exception its innermost frame may be (Python prints the
/// failing source line between them).
const FRAME_ABOVE: usize = 3;

/// A Python traceback's header: its frames are printed outermost first.
fn most_recent_last() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| Regex::new(r"(?i)^traceback \(most recent call last\)").expect("static regex"))
}

/// A Python exception line: `psycopg.errors.UndefinedTable: relation … does not exist`.
fn raised() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| Regex::new(r"^[A-Za-z_][\w.]*(?::\s|$)").expect("static regex"))
}

/// Which of `lines` carry a frame's source location: computed once per result, read by
/// both passes below.
pub(super) fn frame_lines(lines: &[&str]) -> Vec<bool> {
    lines.iter().map(|l| location().is_match(l)).collect()
}

/// Positions of the exception lines that end Python tracebacks among `lines` (trimmed;
/// `frames` from [`frame_lines`]). The exception's class need not say `Error`
/// (`UndefinedTable`, `KeyboardInterrupt`): it is the first line after the frames that is
/// neither a frame nor the source line printed under one.
pub(super) fn raised_exceptions(lines: &[&str], frames: &[bool]) -> Vec<usize> {
    let mut out = Vec::new();
    let mut in_traceback = false;
    let mut after_frame = false;
    for (position, (line, &frame)) in lines.iter().zip(frames).enumerate() {
        if most_recent_last().is_match(line) {
            in_traceback = true;
            after_frame = false;
            continue;
        }
        if !in_traceback || line.is_empty() {
            continue;
        }
        if frame {
            after_frame = true;
            continue;
        }
        let raises = raised().is_match(line);
        if after_frame {
            // The source line under a frame.
            after_frame = false;
            if !raises || line.contains('(') || line.contains('=') {
                continue;
            }
        }
        if raises {
            out.push(position);
        }
        in_traceback = false;
    }
    out
}

/// Positions of the crash-site frames among `lines` (`frames` from [`frame_lines`]),
/// given which lines are errors, in order. The last is the root cause's: a chained Java
/// trace ends with its innermost `Caused by:`, a Python one with the exception that was
/// raised first.
pub(super) fn crash_sites(
    lines: &[&str],
    frames: &[bool],
    is_error: impl Fn(usize, &str) -> bool,
) -> Vec<usize> {
    let mut out: Vec<usize> = Vec::new();
    let mut awaiting = false;
    for (position, (line, &frame)) in lines.iter().zip(frames).enumerate() {
        let error = is_error(position, line);
        if frame && !error {
            if awaiting {
                out.push(position);
                awaiting = false;
            }
            continue;
        }
        if most_recent_last().is_match(line) {
            // Frames follow outermost first: the crash site is the one above the exception.
            awaiting = false;
            continue;
        }
        if error {
            let above = position.saturating_sub(FRAME_ABOVE)..position;
            if let Some(p) = above.rev().find(|&p| frames[p]) {
                if !out.contains(&p) {
                    out.push(p);
                }
            }
            awaiting = true;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sites(text: &str) -> Vec<usize> {
        let lines: Vec<&str> = text.lines().map(str::trim).collect();
        crash_sites(&lines, &frame_lines(&lines), |_, l| {
            l.contains("Exception") || l.contains("Error")
        })
    }

    #[test]
    fn the_innermost_frame_after_or_right_above_the_exception() {
        let java = "java.lang.NullPointerException: rule is null\n\
            \tat com.acme.InvoiceCalculator.applyTax(InvoiceCalculator.java:233)\n\
            \tat com.acme.InvoiceService.price(InvoiceService.java:88)";
        assert_eq!(sites(java), vec![1]);
        let python = "Traceback (most recent call last):\n  File \"app/main.py\", line 12, in <module>\n    run()\n  File \"app/jobs.py\", line 88, in run\n    rows[0]\nIndexError: list index out of range";
        assert_eq!(sites(python), vec![3]);
        let chained =
            "ServletException: request failed\n\tat o.s.Servlet.service(Servlet.java:10)\n\
            Caused by: NullPointerException: rule is null\n\tat c.a.Calc.applyTax(Calc.java:233)";
        assert_eq!(sites(chained), vec![1, 3]);
        let raised = "Traceback (most recent call last):\nFile \"/app/main.py\", line 41, in <module>\nboot()\nFile \"/app/db.py\", line 9, in boot\ncur.execute(q)\npsycopg.errors.UndefinedTable: relation \"ledger_v2\" does not exist";
        let lines: Vec<&str> = raised.lines().collect();
        let frames = frame_lines(&lines);
        assert_eq!(raised_exceptions(&lines, &frames), vec![5]);
        assert_eq!(
            crash_sites(&lines, &frames, |p, _| raised_exceptions(&lines, &frames)
                .contains(&p)),
            vec![3]
        );
        // Frames without an error before them are no crash site.
        assert!(sites("at a.b(A.java:1)\nat c.d(C.java:2)").is_empty());
    }
}
