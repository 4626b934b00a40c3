//! Runs ONNX's backend conformance suite and prints one line per case plus
//! `N passed, N failed, N skipped`.
//!
//! Usage: `trtc-conformance [--root DIR] [--filter SUBSTR] [--write-passing FILE] [--gpu] [-q]`
//!
//! With `--gpu`, every case that passes on the CPU is also built for the GPU
//! of this machine and run on the CUDA executor, compared with the CPU.

use trtc::conformance::{self, Outcome, Tolerance};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut root = conformance::default_root();
    let mut filter = String::new();
    let mut write_passing = None;
    let mut quiet = false;
    let mut gpu = false;
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "--root" => {
                root = args[i + 1].clone().into();
                i += 1;
            }
            "--filter" => {
                filter = args[i + 1].clone();
                i += 1;
            }
            "--write-passing" => {
                write_passing = Some(args[i + 1].clone());
                i += 1;
            }
            "-q" => quiet = true,
            "--gpu" => gpu = true,
            a => {
                eprintln!("unknown argument {a}");
                std::process::exit(2);
            }
        }
        i += 1;
    }
    let cases = match conformance::list_cases(&root, conformance::SUBSETS) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::exit(1);
        }
    };
    let gpu_sm = if gpu {
        match trtc::cuda::present_gpu() {
            Ok(d) => Some(conformance::GpuBuild { sm: d.sm, opt_level: None }),
            Err(e) => {
                eprintln!("error: --gpu: {e:#}");
                std::process::exit(1);
            }
        }
    } else {
        None
    };
    let (mut passed, mut failed, mut skipped) = (0, 0, 0);
    let mut passing = Vec::new();
    let mut skip_reasons: std::collections::BTreeMap<String, usize> = Default::default();
    for (name, dir) in cases.iter().filter(|(n, _)| n.contains(&filter)) {
        let outcome = conformance::run_case_on(dir, Tolerance::default(), gpu_sm);
        match &outcome {
            Outcome::Passed => {
                passed += 1;
                passing.push(name.clone());
                if !quiet {
                    println!("PASS {name}");
                }
            }
            Outcome::Failed(why) => {
                failed += 1;
                let short: String = why.chars().take(300).collect();
                println!("FAIL {name}: {short}");
            }
            Outcome::Skipped(why) => {
                skipped += 1;
                *skip_reasons.entry(why.clone()).or_default() += 1;
                if !quiet {
                    println!("SKIP {name}: {why}");
                }
            }
        }
    }
    for (why, n) in &skip_reasons {
        println!("skipped {n:4} : {why}");
    }
    if let Some(p) = write_passing {
        if let Err(e) = std::fs::write(&p, passing.join("\n") + "\n") {
            eprintln!("error: cannot write {p}: {e}");
            std::process::exit(1);
        }
    }
    println!("conformance: {passed} passed, {failed} failed, {skipped} skipped");
}
