//! The CPU executor's f32 matrix multiply in its two modes (exact:
//! `matrixmultiply`; fast: the packed kernel of `ops/linalg/sgemm.rs`) on
//! the shapes convolution networks give it, in GFLOP/s.
//!
//! Usage: cargo run --release -p trtc-runtime --example gemm_speed [-- [--threads T] [--cold COPIES] M K N ...]
//! (triples of sizes; default: ResNet-50's im2col products and a transformer's;
//! one thread unless --threads says otherwise). With `--cold`, each run
//! multiplies the next of COPIES distinct copies of A, so that A comes from
//! memory as a network's weights do (24 copies of ResNet-50's largest
//! weights are 226 MB) instead of staying in the caches across runs.

use std::time::Instant;
use trtc_runtime::math::{self, Math};
use trtc_runtime::ops::linalg::{gemm_f32, GemmArgs};
use trtc_runtime::parallel::Threads;

fn main() {
    let fail = |message: String| -> ! {
        eprintln!("gemm_speed: {message}");
        std::process::exit(2)
    };
    let mut argv: Vec<String> = std::env::args().skip(1).collect();
    let mut option = |name: &str, default: usize| match argv.iter().position(|a| a == name) {
        Some(i) => {
            let Some(t) = argv.get(i + 1).and_then(|t| t.parse().ok()) else { fail(format!("{name} takes a count")) };
            argv.drain(i..i + 2);
            t
        }
        None => default,
    };
    let threads = option("--threads", 1);
    let copies = option("--cold", 1).max(1);
    let pool = Threads::new(threads).unwrap_or_else(|e| fail(e.to_string()));
    let args: Vec<usize> =
        argv.iter().map(|a| a.parse().unwrap_or_else(|_| fail(format!("sizes are integers, got {a:?}")))).collect();
    let shapes: Vec<(usize, usize, usize)> = if args.is_empty() {
        vec![
            (64, 147, 12544),
            (64, 576, 3136),
            (256, 64, 3136),
            (128, 1152, 784),
            (256, 2304, 196),
            (1024, 256, 196),
            (512, 4608, 49),
            (2048, 512, 49),
            (128, 768, 768),
            (128, 768, 3072),
        ]
    } else {
        if !args.len().is_multiple_of(3) {
            fail("give sizes as M K N triples".into());
        }
        args.chunks(3).map(|s| (s[0], s[1], s[2])).collect()
    };
    println!("{:>6} {:>6} {:>6} {:>12} {:>12} {:>7}", "M", "K", "N", "exact GF/s", "fast GF/s", "ratio");
    for (m, k, n) in shapes {
        let a: Vec<Vec<f32>> =
            (0..copies).map(|c| (0..m * k).map(|i| (((i + c) * 7919) % 1000) as f32 / 1000.0 - 0.5).collect()).collect();
        let b: Vec<f32> = (0..k * n).map(|i| ((i * 104_729) % 1000) as f32 / 1000.0 - 0.5).collect();
        let mut c = vec![0f32; m * n];
        let args = GemmArgs::row_major(m, k, n);
        let mut time = |mode| {
            let flops = 2.0 * (m * k * n) as f64;
            let reps = ((2e9 / flops) as usize).clamp(3, 1000).max(copies);
            let mut best = f64::MAX;
            for _ in 0..5 {
                let start = Instant::now();
                for r in 0..reps {
                    pool.install(|| math::install(mode, || gemm_f32(&args, &a[r % copies], &b, &mut c)));
                }
                best = best.min(start.elapsed().as_secs_f64() / reps as f64);
            }
            flops / best / 1e9
        };
        let (exact, fast) = (time(Math::Exact), time(Math::Fast));
        println!("{m:>6} {k:>6} {n:>6} {exact:>12.1} {fast:>12.1} {:>7.2}", fast / exact);
    }
}
