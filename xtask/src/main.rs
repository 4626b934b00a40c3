//! Repository checks that are not tests of behaviour, run as
//! `cargo xtask <task>` (the alias is in `.cargo/config.toml`):
//!
//! - `layers [--graph]`: every crate's modules are layered (see `layers.rs`);
//!   `--graph` prints each level's modules with the siblings they use.

mod source;
mod layers;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The crate roots checked, relative to the workspace root.
const CRATE_ROOTS: &[&str] = &[
    "runtime/src/lib.rs",
    "kernels/src/lib.rs",
    "compiler/src/lib.rs",
    "compiler/src/main.rs",
    "server/src/lib.rs",
    "server/src/main.rs",
    "python/src/lib.rs",
    "xtask/src/main.rs",
];

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        ["layers"] => check_layers(false),
        ["layers", "--graph"] => check_layers(true),
        _ => Err("usage: cargo xtask layers [--graph]".to_string()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask lives in the workspace").to_path_buf()
}

fn check_layers(graph: bool) -> Result<(), String> {
    let root = workspace_root();
    let mut failures = 0;
    for crate_root in CRATE_ROOTS {
        let krate = layers::Crate::read(&root.join(crate_root))?;
        let violations = krate.violations();
        println!(
            "{crate_root}: {} modules, {} references to modules, {} against the layer order",
            krate.modules.len(),
            krate.references.len(),
            violations.len()
        );
        if graph {
            for (parent, rows) in krate.sibling_graph() {
                println!("  {}:", if parent.is_empty() { "crate".to_string() } else { parent.join("::") });
                for (child, uses) in rows {
                    println!("    {child}{}{}", if uses.is_empty() { "" } else { " <- " }, uses.join(", "));
                }
            }
        }
        for v in &violations {
            let at = v.reference.file.strip_prefix(&root).unwrap_or(&v.reference.file);
            let parent = if v.parent.is_empty() { "the crate root".to_string() } else { format!("`{}`", v.parent.join("::")) };
            println!(
                "  {}:{}: `{}` uses `{}` ({} references), declared below it in {parent}",
                at.display(),
                v.reference.line,
                v.user,
                v.used,
                v.count
            );
        }
        let mut parents: Vec<&Vec<String>> = violations.iter().map(|v| &v.parent).collect();
        parents.sort();
        parents.dedup();
        for parent in parents {
            let name = if parent.is_empty() { "crate root".to_string() } else { parent.join("::") };
            match krate.suggested_order(parent) {
                Ok(order) => println!("  {name}: declare the modules in this order: {}", order.join(", ")),
                Err(cycle) => println!("  {name}: these modules use each other in a cycle; break it: {}", cycle.join(", ")),
            }
        }
        failures += violations.len();
    }
    match failures {
        0 => Ok(()),
        n => Err(format!("{n} references against the layer order")),
    }
}
