//! Secret redaction before anything is persisted (seed 000 invariant 7; QUALITY.md §Security).
//!
//! Run storage, reports and evidence never carry a configured secret value: every
//! occurrence is replaced by [`REDACTED`] before a row is written.

/// What a secret is replaced with.
pub const REDACTED: &str = "[REDACTED]";

/// Replaces configured secret values in text.
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    secrets: Vec<String>,
}

impl Redactor {
    /// A redactor for these secret values (empty strings are ignored; longest first so a
    /// secret that contains another is removed whole).
    pub fn new(secrets: &[String]) -> Self {
        let mut secrets: Vec<String> = secrets.iter().filter(|s| !s.is_empty()).cloned().collect();
        secrets.sort_by(|a, b| b.len().cmp(&a.len()).then(a.cmp(b)));
        secrets.dedup();
        Redactor { secrets }
    }

    /// Whether `text` contains any secret.
    pub fn contains_secret(&self, text: &str) -> bool {
        self.secrets.iter().any(|s| text.contains(s.as_str()))
    }

    /// `text` with every secret replaced.
    pub fn redact(&self, text: &str) -> String {
        let mut out = text.to_string();
        for s in &self.secrets {
            if out.contains(s.as_str()) {
                out = out.replace(s.as_str(), REDACTED);
            }
        }
        out
    }

    /// Redact every string inside a JSON value.
    pub fn redact_json(&self, value: &serde_json::Value) -> serde_json::Value {
        use serde_json::Value;
        match value {
            Value::String(s) => Value::String(self.redact(s)),
            Value::Array(a) => Value::Array(a.iter().map(|v| self.redact_json(v)).collect()),
            Value::Object(o) => Value::Object(
                o.iter()
                    .map(|(k, v)| (self.redact(k), self.redact_json(v)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }

    /// A message with its content, tool-call arguments redacted.
    pub fn redact_message(&self, m: &ctxbench_adapters::Message) -> ctxbench_adapters::Message {
        let mut m = m.clone();
        if self.secrets.is_empty() {
            return m;
        }
        m.content = self.redact(&m.content);
        for c in &mut m.tool_calls {
            c.arguments = self.redact_json(&c.arguments);
        }
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacts_longest_first() {
        let r = Redactor::new(&["sk-1".into(), "sk-123".into(), String::new()]);
        assert_eq!(r.redact("a sk-123 b sk-1"), "a [REDACTED] b [REDACTED]");
        assert!(r.contains_secret("xx sk-1"));
        let v = serde_json::json!({"k": ["sk-123", 1]});
        assert_eq!(
            r.redact_json(&v),
            serde_json::json!({"k": ["[REDACTED]", 1]})
        );
    }
}
