//! ONNX's backend conformance suite (node, pytorch-converted,
//! pytorch-operator, simple) through the whole pipeline. Every case listed in
//! `testdata/conformance/passing.txt` must pass; the test prints the totals.
//! Refresh the list with
//! `cargo run --bin trtc-conformance -- -q --write-passing testdata/conformance/passing.txt`.

use std::collections::BTreeSet;
use std::path::Path;
use trtc::conformance::{self, Outcome, Tolerance};

#[test]
fn conformance_suite_has_no_regressions() {
    let root = conformance::default_root();
    let cases = conformance::list_cases(&root, conformance::SUBSETS)
        .expect("the conformance data is fetched by scripts/fetch-conformance.sh (run by scripts/test.sh)");
    let list = Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/conformance/passing.txt");
    let expected: BTreeSet<String> = std::fs::read_to_string(&list)
        .expect("testdata/conformance/passing.txt")
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(String::from)
        .collect();
    let (mut passed, mut failed, mut skipped) = (0, 0, 0);
    let mut regressions = Vec::new();
    let mut newly_passing = Vec::new();
    for (name, dir) in &cases {
        match conformance::run_case(dir, Tolerance::default()) {
            Outcome::Passed => {
                passed += 1;
                if !expected.contains(name) {
                    newly_passing.push(name.clone());
                }
            }
            Outcome::Failed(why) => {
                failed += 1;
                if expected.contains(name) {
                    regressions.push(format!("{name}: {why}"));
                }
            }
            Outcome::Skipped(_) => skipped += 1,
        }
    }
    let known: BTreeSet<&String> = cases.iter().map(|(n, _)| n).collect();
    let missing: Vec<&String> = expected.iter().filter(|n| !known.contains(n)).collect();
    println!("conformance: {passed} passed, {failed} failed, {skipped} skipped (out-of-scope ops)");
    if !newly_passing.is_empty() {
        println!("{} cases pass that are not in passing.txt yet: {:?}", newly_passing.len(), newly_passing);
    }
    assert!(missing.is_empty(), "passing.txt lists cases that do not exist: {missing:?}");
    assert!(regressions.is_empty(), "{} regressions:\n{}", regressions.len(), regressions.join("\n"));
}
