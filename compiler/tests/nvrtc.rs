//! Every CUDA kernel instantiation the testdata models need, plus every
//! activation and the GEMM tactics, compiles with NVRTC to a cubin for sm_80,
//! sm_86, sm_89 and sm_90, without register spills. Needs libnvrtc (no
//! GPU): `scripts/test.sh` installs it from PyPI (nvidia-cuda-nvrtc).

mod common;

use trtc::build::{build_graph, BuildOptions};
use trtc::cuda::nvrtc;
use trtc::ir::NodeKind;
use trtc_kernels::activation;
use trtc_kernels::linear::gemm::simt::GemmTactic;
use trtc_kernels::{pointwise, KernelSource, SmLimits};
use trtc_runtime::ops::elementwise::{ElementwiseOp, UnaryKind};
use trtc_runtime::ops::fused::{FusedOp, Instr};
use trtc_runtime::Op;

const SMS: [u32; 4] = [80, 86, 89, 90];

fn require_nvrtc() {
    assert!(
        nvrtc::available(),
        "NVRTC is needed for this test: run scripts/test.sh, which installs nvidia-cuda-nvrtc into .cache/nvrtc ({:?})",
        nvrtc::library().err()
    );
}

/// Compiles for every SM; returns the worst spill (bytes of spill stores).
fn compile_all_sms(k: &KernelSource, what: &str) -> u64 {
    let mut worst = 0;
    for sm in SMS {
        let c = nvrtc::compile(&k.source, what, sm).unwrap_or_else(|e| panic!("{what}: {e:#}"));
        assert_eq!(&c.cubin[..4], b"\x7fELF", "{what}: not a cubin for sm_{sm}");
        worst = worst.max(c.spill_store_bytes());
    }
    worst
}

/// Compiles for every SM and requires no register spills: the kernels an
/// engine uses by default must not spill.
fn compile_everywhere(k: &KernelSource, what: &str) {
    let spills = compile_all_sms(k, what);
    assert_eq!(spills, 0, "{what} spills {spills} bytes of registers");
}

#[test]
fn nvrtc_is_version_13() {
    require_nvrtc();
    let (major, _) = nvrtc::version().unwrap();
    assert_eq!(major, 13, "the GPU machine's driver matches NVRTC 13");
}

#[test]
fn gemm_default_tactics_compile_with_every_epilogue() {
    require_nvrtc();
    let mut epilogues = vec![("none".to_string(), "v".to_string())];
    for k in activation::supported_unary_kinds() {
        epilogues.push((format!("{k:?}"), activation::unary(k, "v").unwrap()));
    }
    for (m, n) in [(16, 16), (1024, 1024)] {
        let t = GemmTactic::default_for(m, n);
        for (name, e) in &epilogues {
            compile_everywhere(&t.source(e), &format!("gemm {t:?} epilogue {name}"));
        }
    }
}

#[test]
fn every_gemm_tactic_is_valid_and_a_sample_compiles() {
    require_nvrtc();
    let limits = SmLimits::for_sm(90);
    let all = GemmTactic::candidates(&limits);
    // Compiling all of them for four SMs takes minutes on two cores; the
    // extremes of the tile space are where spills and limits bite.
    let sample: Vec<&GemmTactic> = all.iter().filter(|t| t.thread_m * t.thread_n >= 32 || t.tile_k == 32).take(12).collect();
    assert!(!sample.is_empty());
    // Candidates may spill: the tuner compiles them, sees the spill in
    // ptxas' report and drops them. Here they must only compile.
    let mut spilling = 0;
    for t in sample {
        if compile_all_sms(&t.source("v"), &format!("gemm {t:?}")) > 0 {
            spilling += 1;
        }
    }
    println!("gemm sample: {spilling} tactics spill registers (the tuner rejects those)");
}

#[test]
fn pointwise_kernels_of_the_testdata_models_compile() {
    require_nvrtc();
    let mut seen = std::collections::HashSet::new();
    let (mut compiled, mut without_kernel) = (0, 0);
    for m in common::testdata_models() {
        let g = trtc::frontend::onnx::import_file(&m, &Default::default()).unwrap();
        let g = build_graph(g, &BuildOptions::default()).unwrap().graph;
        for n in g.node_ids() {
            let NodeKind::Op(op) = &g.node(n).kind else { continue };
            let program = match op {
                Op::Fused(FusedOp::Pointwise(p)) => p.program.clone(),
                Op::Elementwise(ElementwiseOp::Unary(u)) if g.node(n).outputs[0].ty.dtype == trtc_runtime::DType::F32 => {
                    vec![Instr::Input(0), Instr::Unary(u.kind, 0)]
                }
                _ => continue,
            };
            let ins: Vec<Vec<usize>> = g.inputs_of(n).iter().map(|p| g.ty(p.unwrap()).shape.clone()).collect();
            let out = g.node(n).outputs[0].ty.shape.clone();
            match pointwise::source(&program, &out, &ins) {
                Some(k) => {
                    if seen.insert(k.source.clone()) {
                        compile_everywhere(&k, &format!("pointwise {} of {}", g.node(n).name, m.display()));
                        compiled += 1;
                    }
                }
                None => without_kernel += 1,
            }
        }
    }
    println!("pointwise kernels: {compiled} compiled, {without_kernel} nodes without a CUDA expression yet");
    assert!(compiled > 0);
}

#[test]
fn every_activation_has_a_pointwise_kernel() {
    require_nvrtc();
    for k in activation::supported_unary_kinds() {
        let src = pointwise::source(&[Instr::Input(0), Instr::Unary(k, 0)], &[2, 3], &[vec![2, 3]]).unwrap();
        compile_everywhere(&src, &format!("pointwise {k:?}"));
    }
    let _ = UnaryKind::Relu;
}
