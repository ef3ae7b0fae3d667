//! Embeds the built-in scenario suite (`scenarios/*.yaml`) into the binary.

use std::fmt::Write as _;
use std::path::Path;

fn main() {
    let dir = Path::new("scenarios");
    println!("cargo:rerun-if-changed=scenarios");
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(".yaml") || n.ends_with(".yml"))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    let mut out = String::from("/// The built-in suite: (file name, YAML text), sorted by name.\npub const BUILTIN_SUITE: &[(&str, &str)] = &[\n");
    for n in &names {
        println!("cargo:rerun-if-changed=scenarios/{n}");
        // Resolved when the binary crate compiles, relative to its own manifest, so a build
        // directory shared between checkouts never points at another checkout's files.
        let _ = writeln!(
            out,
            "    ({n:?}, include_str!(concat!(env!(\"CARGO_MANIFEST_DIR\"), \"/scenarios/{n}\"))),"
        );
    }
    out.push_str("];\n");
    let dest = Path::new(&std::env::var("OUT_DIR").expect("OUT_DIR")).join("suite.rs");
    std::fs::write(dest, out).expect("write suite.rs");
}
