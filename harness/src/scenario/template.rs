//! Placeholders inside scenario texts: parsed once at load time, substituted per trial.
//!
//! Recognised forms (anything else in braces is literal text, see [`parse`]):
//!
//! | form | inserts |
//! | --- | --- |
//! | `{i}` | the innermost repeat index, 1-based |
//! | `{i0}` | the innermost repeat index, 0-based |
//! | `{fact:ID}` | the fact's `states` text |
//! | `{fact:ID@N}` | the fact's N-th update (1-based) |
//! | `{hostile:ID}` | the text of a marked hostile span |
//! | `{filler:N}` / `{filler:N:prose}` / `{filler:N:code}` | ≈N tokens of seeded filler |
//!
//! `{{` is a literal `{`.

use serde::{Deserialize, Serialize};

/// What kind of filler text to generate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum FillerKind {
    /// English-like sentences about software work.
    #[default]
    Prose,
    /// Rust-like source lines.
    Code,
}

impl FillerKind {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            FillerKind::Prose => "prose",
            FillerKind::Code => "code",
        }
    }
}

/// One piece of a parsed text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Piece {
    /// Literal text.
    Text(String),
    /// The innermost repeat index.
    Index {
        /// `{i0}` rather than `{i}`.
        zero_based: bool,
    },
    /// A fact statement: `version` 0 is `states`, N ≥ 1 is update N.
    Fact { id: String, version: usize },
    /// A marked hostile span's text.
    Hostile { id: String },
    /// Seeded filler of about `tokens` tokens.
    Filler { tokens: u64, kind: FillerKind },
}

/// A text with its placeholders parsed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Template {
    pub(crate) pieces: Vec<Piece>,
}

impl Template {
    /// A template of literal text only.
    pub(crate) fn literal(text: &str) -> Self {
        Template {
            pieces: if text.is_empty() {
                Vec::new()
            } else {
                vec![Piece::Text(text.to_string())]
            },
        }
    }
}

/// A placeholder the parser could not accept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PlaceholderError {
    /// The placeholder as written, braces included.
    pub(crate) written: String,
    /// What is wrong with it.
    pub(crate) message: String,
    /// What would be accepted.
    pub(crate) expected: String,
}

const FORMS: &str = "`{i}`, `{i0}`, `{fact:ID}`, `{fact:ID@N}`, `{hostile:ID}` or \
                     `{filler:N}` / `{filler:N:code}` (write `{{` for a literal `{`)";

/// Parses `text`. A `{` opens a placeholder only when it is followed by a lowercase name and
/// an optional `:argument` with no spaces, then `}` — so JSON, code and prose braces such as
/// `{"a": 1}`, `{}` or `{ x }` stay literal — and an unknown name in that shape is an error
/// (it is almost always a typo) rather than silently literal. `{{` is a literal `{`.
pub(crate) fn parse(text: &str) -> Result<Template, Vec<PlaceholderError>> {
    let mut pieces: Vec<Piece> = Vec::new();
    let mut errors = Vec::new();
    let mut literal = String::new();
    let mut rest = text;
    while let Some(pos) = rest.find('{') {
        literal.push_str(&rest[..pos]);
        let after = &rest[pos + 1..];
        if let Some(tail) = after.strip_prefix('{') {
            literal.push('{');
            rest = tail;
            continue;
        }
        match placeholder_body(after) {
            Some(body) => {
                let written = format!("{{{body}}}");
                match classify(body) {
                    Ok(piece) => {
                        if !literal.is_empty() {
                            pieces.push(Piece::Text(std::mem::take(&mut literal)));
                        }
                        pieces.push(piece);
                    }
                    Err((message, expected)) => {
                        errors.push(PlaceholderError {
                            written: written.clone(),
                            message,
                            expected,
                        });
                        literal.push_str(&written);
                    }
                }
                rest = &after[body.len() + 1..];
            }
            None => {
                if let Some(name) = ["filler:", "fact:", "hostile:"]
                    .iter()
                    .find(|n| after.starts_with(**n))
                {
                    // `{filler: {tokens: 140}}` or `{fact: x}`: a known placeholder name
                    // glued to its colon is never JSON (JSON quotes its keys) — it is a
                    // placeholder written in the step-mapping form, which would otherwise
                    // reach the model as literal text.
                    let written = written_extent(&rest[pos..]);
                    errors.push(PlaceholderError {
                        written: written.to_string(),
                        message: format!(
                            "`{written}` is not a placeholder: inside a text, `{{{name}…}}` takes an argument without spaces or braces"
                        ),
                        expected: format!(
                            "{FORMS}; the mapping form `{{filler: {{tokens: N}}}}` is only valid as a whole step value, e.g. `- user: {{filler: {{tokens: 140}}}}`"
                        ),
                    });
                }
                literal.push('{');
                rest = after;
            }
        }
    }
    literal.push_str(rest);
    if !literal.is_empty() {
        pieces.push(Piece::Text(literal));
    }
    if errors.is_empty() {
        Ok(Template { pieces })
    } else {
        Err(errors)
    }
}

/// `text` (starting at a `{`) up to its balancing `}` (or the line's end), for messages.
fn written_extent(text: &str) -> &str {
    let mut depth = 0usize;
    for (i, c) in text.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return &text[..=i];
                }
            }
            '\n' => return &text[..i],
            _ => {}
        }
    }
    text
}

/// The text between `{` and `}` when it has the placeholder shape `name` or `name:arg`:
/// name `[a-z][a-z0-9_]*`, argument without whitespace or braces.
fn placeholder_body(after: &str) -> Option<&str> {
    let end = after.find('}')?;
    let body = &after[..end];
    let (name, arg) = match body.split_once(':') {
        Some((n, a)) => (n, Some(a)),
        None => (body, None),
    };
    let mut chars = name.chars();
    let first = chars.next()?;
    if !first.is_ascii_lowercase() {
        return None;
    }
    if !chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_') {
        return None;
    }
    if let Some(arg) = arg {
        if arg
            .chars()
            .any(|c| c.is_whitespace() || c == '{' || c == '"' || c == '\'')
        {
            return None;
        }
    }
    Some(body)
}

fn classify(body: &str) -> Result<Piece, (String, String)> {
    let (name, arg) = match body.split_once(':') {
        Some((n, a)) => (n, Some(a)),
        None => (body, None),
    };
    match (name, arg) {
        ("i", None) => Ok(Piece::Index { zero_based: false }),
        ("i0", None) => Ok(Piece::Index { zero_based: true }),
        ("fact", Some(arg)) => {
            let (id, version) = match arg.split_once('@') {
                Some((id, n)) => match n.parse::<usize>() {
                    Ok(0) => {
                        return Err((
                            format!("`{{fact:{id}@0}}`: update numbers start at 1"),
                            format!("`{{fact:{id}}}` for the original statement, `{{fact:{id}@1}}` for the first update"),
                        ))
                    }
                    Ok(v) => (id, v),
                    Err(_) => {
                        return Err((
                            format!("`{{fact:{arg}}}`: `{n}` is not an update number"),
                            format!("`{{fact:{id}@N}}` with N = 1, 2, … (the N-th entry of `updates`)"),
                        ))
                    }
                },
                None => (arg, 0),
            };
            if id.is_empty() {
                return Err((
                    "`{fact:}` names no fact".to_string(),
                    "`{fact:ID}` with the id of a fact under `facts:`".to_string(),
                ));
            }
            Ok(Piece::Fact {
                id: id.to_string(),
                version,
            })
        }
        ("hostile", Some(id)) => {
            if id.is_empty() {
                return Err((
                    "`{hostile:}` names no span".to_string(),
                    "`{hostile:ID}` with the id of a span under `hostile:`".to_string(),
                ));
            }
            Ok(Piece::Hostile { id: id.to_string() })
        }
        ("filler", Some(arg)) => {
            let (n, kind) = match arg.split_once(':') {
                Some((n, "prose")) => (n, FillerKind::Prose),
                Some((n, "code")) => (n, FillerKind::Code),
                Some((_, k)) => {
                    return Err((
                        format!("unknown filler kind `{k}`"),
                        "`{filler:N:prose}` or `{filler:N:code}`".to_string(),
                    ))
                }
                None => (arg, FillerKind::Prose),
            };
            match n.parse::<u64>() {
                Ok(tokens) => Ok(Piece::Filler { tokens, kind }),
                // Digits too many for any count: the range, not "not a number".
                Err(_) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => Err((
                    format!("`{{filler:{arg}}}`: {n} tokens is out of range"),
                    format!(
                        "1 to {} tokens, e.g. `{{filler:500}}`",
                        super::MAX_FILLER_TOKENS
                    ),
                )),
                Err(_) => Err((
                    format!("`{{filler:{arg}}}`: `{n}` is not a token count"),
                    "`{filler:N}` with N a whole number of tokens, e.g. `{filler:500}`".to_string(),
                )),
            }
        }
        ("i" | "i0", Some(_)) => Err((
            format!("`{{{body}}}`: the repeat index takes no argument"),
            FORMS.to_string(),
        )),
        ("fact" | "filler" | "hostile", None) => {
            Err((format!("`{{{name}}}` needs an argument"), FORMS.to_string()))
        }
        _ => Err((
            format!("unknown placeholder `{{{body}}}`"),
            FORMS.to_string(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literal_braces_stay_literal() {
        let t = parse(r#"fn main() {} and {"a": 1} and { x } and {{i} and {Upper}"#).unwrap();
        assert_eq!(
            t.pieces,
            vec![Piece::Text(
                r#"fn main() {} and {"a": 1} and { x } and {i} and {Upper}"#.to_string()
            )]
        );
    }

    #[test]
    fn placeholders_parse() {
        let t = parse("m{i}/{i0} {fact:db} {fact:region@2} {filler:30:code}").unwrap();
        assert_eq!(
            t.pieces,
            vec![
                Piece::Text("m".into()),
                Piece::Index { zero_based: false },
                Piece::Text("/".into()),
                Piece::Index { zero_based: true },
                Piece::Text(" ".into()),
                Piece::Fact {
                    id: "db".into(),
                    version: 0
                },
                Piece::Text(" ".into()),
                Piece::Fact {
                    id: "region".into(),
                    version: 2
                },
                Piece::Text(" ".into()),
                Piece::Filler {
                    tokens: 30,
                    kind: FillerKind::Code
                },
            ]
        );
    }

    #[test]
    fn typos_are_errors() {
        let errs = parse("a {fatc:db} b {fact:x@0} {filler:lots} {filler:3:poem} {j}").unwrap_err();
        let written: Vec<_> = errs.iter().map(|e| e.written.as_str()).collect();
        assert_eq!(
            written,
            vec![
                "{fatc:db}",
                "{fact:x@0}",
                "{filler:lots}",
                "{filler:3:poem}",
                "{j}"
            ]
        );
    }

    #[test]
    fn an_inline_filler_too_large_to_count_is_out_of_range() {
        let errs =
            parse("{filler:99999999999999999999} {filler:99999999999999999999:code}").unwrap_err();
        assert_eq!(errs.len(), 2);
        for e in &errs {
            assert!(e.message.contains("is out of range"), "{e:?}");
            assert!(e.expected.contains("1 to 1000000 tokens"), "{e:?}");
        }
        // Not digits: not a token count at all.
        let errs = parse("{filler:12k} {filler:-5}").unwrap_err();
        assert!(errs
            .iter()
            .all(|e| e.message.contains("is not a token count")));
        // In range for a u64: parsed; the size limit is the validator's.
        assert!(parse("{filler:2000000}").is_ok());
    }

    #[test]
    fn mapping_form_inside_text_is_an_error() {
        let errs = parse("see {filler: {tokens: 140}} and {fact: region}\nmore").unwrap_err();
        let written: Vec<_> = errs.iter().map(|e| e.written.as_str()).collect();
        assert_eq!(written, vec!["{filler: {tokens: 140}}", "{fact: region}"]);
        assert!(
            errs[0].expected.contains("whole step value"),
            "{:?}",
            errs[0]
        );
        // Quoted JSON keys and other names stay literal.
        assert!(parse(r#"{"filler": {"tokens": 1}} {fillers: 2} { filler: 3 }"#).is_ok());
    }
}
