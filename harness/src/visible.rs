//! Untrusted text made visible: bidirectional controls and terminal control characters
//! shown as `<U+XXXX>` instead of acting on the display.
//!
//! Scenario ids and titles, grader evidence and model answers are untrusted. A U+202E
//! (right-to-left override) inside a scenario title makes `evil<U+202E>txt.exe` display as
//! `evilexe.txt`: the characters stay in the data, but every place ctxbench shows text to
//! a person (HTML, Markdown, the terminal) spells them out so nobody is misled. The
//! terminal additionally gets every other control character spelled out (an ESC would start
//! an ANSI sequence that could rewrite the screen), except newline and tab.

use std::borrow::Cow;

/// The bidirectional formatting characters of Unicode's bidi algorithm (UAX #9 §2):
/// embeddings, overrides, isolates, their terminators, and the implicit marks.
pub const BIDI_CONTROLS: [char; 12] = [
    '\u{061C}', // ARABIC LETTER MARK
    '\u{200E}', // LEFT-TO-RIGHT MARK
    '\u{200F}', // RIGHT-TO-LEFT MARK
    '\u{202A}', // LEFT-TO-RIGHT EMBEDDING
    '\u{202B}', // RIGHT-TO-LEFT EMBEDDING
    '\u{202C}', // POP DIRECTIONAL FORMATTING
    '\u{202D}', // LEFT-TO-RIGHT OVERRIDE
    '\u{202E}', // RIGHT-TO-LEFT OVERRIDE
    '\u{2066}', // LEFT-TO-RIGHT ISOLATE
    '\u{2067}', // RIGHT-TO-LEFT ISOLATE
    '\u{2068}', // FIRST STRONG ISOLATE
    '\u{2069}', // POP DIRECTIONAL ISOLATE
];

/// Whether `c` is a bidirectional formatting character.
pub fn is_bidi_control(c: char) -> bool {
    BIDI_CONTROLS.contains(&c)
}

fn spell_out(s: &str, hide: impl Fn(char) -> bool) -> Cow<'_, str> {
    if !s.chars().any(&hide) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        if hide(c) {
            out.push_str(&format!("<U+{:04X}>", c as u32));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// `s` with every bidirectional formatting character written as `<U+XXXX>`.
pub fn bidi_visible(s: &str) -> Cow<'_, str> {
    spell_out(s, is_bidi_control)
}

/// `s` for a document (HTML, Markdown; they escape the `<` and `>` themselves):
/// bidirectional formatting characters and invisible control characters written as
/// `<U+XXXX>`; newline, carriage return and tab kept (they are layout there).
pub fn document_safe(s: &str) -> Cow<'_, str> {
    spell_out(s, |c| {
        is_bidi_control(c) || (c.is_control() && !matches!(c, '\n' | '\r' | '\t'))
    })
}

/// `s` safe to print on a terminal: bidirectional formatting characters and control
/// characters other than newline and tab written as `<U+XXXX>`.
pub fn terminal_safe(s: &str) -> Cow<'_, str> {
    spell_out(s, |c| {
        is_bidi_control(c) || (c.is_control() && c != '\n' && c != '\t')
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bidi_controls_are_spelled_out_and_other_text_is_borrowed() {
        assert_eq!(bidi_visible("evil\u{202E}txt.exe"), "evil<U+202E>txt.exe");
        for c in BIDI_CONTROLS {
            assert!(!bidi_visible(&format!("a{c}b")).contains(c), "{c:?}");
        }
        assert!(matches!(bidi_visible("plain ✓ עברית"), Cow::Borrowed(_)));
        assert_eq!(bidi_visible("a\u{1b}b"), "a\u{1b}b");
        assert_eq!(
            document_safe("a\u{1b}b\u{202E}\r\n\t"),
            "a<U+001B>b<U+202E>\r\n\t"
        );
    }

    #[test]
    fn the_terminal_sees_no_escape_sequences_or_overrides() {
        assert_eq!(
            terminal_safe("x\u{1b}[2Jy\u{202E}z\u{7f}\r"),
            "x<U+001B>[2Jy<U+202E>z<U+007F><U+000D>"
        );
        assert_eq!(terminal_safe("line\n\tindented"), "line\n\tindented");
        assert_eq!(terminal_safe("\u{9b}31m"), "<U+009B>31m");
    }
}
