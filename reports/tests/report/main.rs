//! Integration tests of the report stage on small synthetic run directories.

mod ci;
mod compaction;
mod extras;
mod fixture;
mod gates;
mod gates_absolute;
mod output;
mod read;
