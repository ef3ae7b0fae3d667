//! The graders against the reference engine and its deliberately broken variants: every
//! grader passes the engine where it should and fails the mutant meant for it. (The grader
//! crate itself does not depend on the engine; only these tests do.)

mod support;

mod archive_refs;
mod budget;
mod builtin;
mod checkpoint_reuse;
mod event_families;
mod held_out;
mod instruction_frozen;
mod instructions_outrank;
mod limit_honest;
mod no_authority;
mod no_invented_constraints;
mod no_thrash;
mod opaque_hashed;
mod overflow_no_duplicate;
mod recall;
mod recap_not_empty;
mod secrets_redacted;
mod summary_request_fits;
mod tool_pairs;
mod transcript_immutable;
mod typed_reason;
mod verification_historical;
