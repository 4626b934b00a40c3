//! GEMM layers: Gemm, MatMul, fused Linear (Gemm or MatMul kind) and
//! Int8Linear (Gemm or MatMul kind), each one batched GEMM with a fused
//! epilogue (`problem`), computed by one of three kernel families.
//!
//! **Tensor cores** (`tc`, `cuda/gemm_tc.cu`): mma.sync with f16 operands and
//! f32 accumulators for f16 storage, tf32 (f32 operands rounded to nearest,
//! ties away) with f32 accumulators for f32 storage, s8 with s32
//! accumulators for int8; a cp.async multi-stage pipeline, ldmatrix
//! fragments, the epilogue in f32 from the accumulators and one rounding on
//! store. A tactic is `(BM, BN, BK, WM, WN, stages)`: block tiles from
//! 256x128 and 128x256 down to 16x64, warp tiles from 64x64 down to 16x32
//! (32 to 256 threads), k-tiles of 64 or 128 bytes, 2 to 4 stages; valid
//! when the tiles divide into mma tiles, the stages fit 48 KiB of static
//! shared memory and the accumulators fit the registers
//! (`TcTactic::is_valid`). A layer fits when A is K-contiguous, B is
//! K-contiguous (`[N, K]`, a Gemm with `trans_b`) or N-contiguous (`[K,
//! N]`: ldmatrix.trans for f16, 32-bit shared loads for tf32, a transpose
//! through registers for int8), and rows start 16-byte aligned: K, and N
//! for an N-contiguous B, multiples of 8 (f16), 4 (f32) or 16 (int8).
//! Other sizes are free: edge tiles are zero-filled.
//!
//! **SIMT** (`simt`, `cuda/gemm_simt.cu`): exact f32 (int32 for int8)
//! multiply-adds for any layout, size and alignment; always a candidate.
//!
//! **GEMV** (`gemv`, `cuda/gemm_gemv.cu`): exact CUDA-core products for
//! GEMMs of at most 16 rows per batch entry (batch-1 classifiers,
//! decoding), each block streaming B for 8 or 32 columns and 1 to 8 rows;
//! any layout, size and alignment.
//!
//! **Heuristic** (the first candidate): GEMV for at most 4 rows, which are
//! memory bound (B read once, by many blocks, beats any tile). Otherwise,
//! for f16 and int8 layers that fit, the tensor-core tactic of least
//! estimated time (`tc::cost`: waves of blocks over the SMs of the target's
//! typical part, occupancy from threads, registers and shared memory, each
//! k-step bound by the tensor cores at the rate the tiles' shared-memory
//! traffic allows or by the exposed load latency), so large GEMMs (4096 x
//! 3072 x 768) get 128x128 or larger tiles, BERT-base's at batch 8 128x64
//! (fuller last wave), and small ones (a batch-32 classifier) 16x64 or 32x32
//! tiles that spread over more SMs. For f32, tf32 tensor cores likewise when
//! the GEMM has at least 2^21 multiply-adds (TensorRT allows TF32 by
//! default), else the exact SIMT kernel. Then the other tensor-core
//! tactics by estimated time, and the GEMV and a few SIMT tactics, for the
//! autotuner.
//!
//! Unsupported (the layer runs on the host): integer and f64 Gemm/MatMul,
//! bf16, MatMul batch broadcasting that needs more than two batch strides
//! per operand, more than 65535 batch entries or row tiles, sizes beyond
//! 32-bit indices, empty outputs, activations without a CUDA expression.

pub mod simt;
pub mod gemv;
pub mod problem;
pub mod tc;

use crate::Tactic;
use crate::{unsupported, Candidate, KernelLaunch, KernelSource, LayerIo, Selection, SmLimits, Unsupported};
use gemv::GemvTactic;
use problem::Problem;
use simt::{AbType, GemmTactic};
use tc::TcTactic;
use trtc_runtime::kernels::KernelArg;

/// f32 GEMMs with at least this many multiply-adds default to tf32.
pub const TF32_MIN_MACS: u64 = 1 << 21;
/// GEMMs with at most this many rows default to the GEMV kernel.
pub const GEMV_FIRST_MAX_ROWS: usize = 4;

/// The candidates of a gemm layer.
pub fn candidates(io: &LayerIo<'_>, limits: &SmLimits) -> Selection {
    let p = Problem::of(io)?;
    let tensor_core: Vec<TcTactic> = match tc::misfit(&p) {
        None => tc::ranked(&p, limits),
        Some(_) => Vec::new(),
    };
    let simt = GemmTactic::for_layer(p.m, p.n, limits);
    let gemv = GemvTactic::for_rows(p.m);
    let macs = p.m as u64 * p.n as u64 * p.k as u64 * p.batch() as u64;
    let mut out = Vec::new();
    if p.m <= GEMV_FIRST_MAX_ROWS {
        push_gemv(&mut out, &p, &gemv)?;
        push_tc(&mut out, &p, &tensor_core)?;
        push_simt(&mut out, &p, &simt, limits)?;
    } else if p.spec.ab != AbType::F32 || macs >= TF32_MIN_MACS {
        push_tc(&mut out, &p, &tensor_core)?;
        push_gemv(&mut out, &p, &gemv)?;
        push_simt(&mut out, &p, &simt, limits)?;
    } else {
        push_simt(&mut out, &p, &simt, limits)?;
        push_gemv(&mut out, &p, &gemv)?;
        push_tc(&mut out, &p, &tensor_core)?;
    }
    if out.is_empty() {
        return unsupported(format!("{}: no valid GEMM tactic", io.op.name()));
    }
    Ok(out)
}

fn push_tc(out: &mut Vec<Candidate>, p: &Problem, tactics: &[TcTactic]) -> Result<(), Unsupported> {
    for t in tactics {
        let Some(kernel) = t.source(&p.spec) else { return unsupported("GEMM: no kernel for these storage types") };
        out.extend(
            launch(p, kernel, t.grid(p), t.threads()).map(|l| Candidate { tactic: Tactic::GemmTc(*t), launches: vec![l] }),
        );
    }
    Ok(())
}

fn push_gemv(out: &mut Vec<Candidate>, p: &Problem, tactics: &[GemvTactic]) -> Result<(), Unsupported> {
    for t in tactics {
        let Some(kernel) = t.source(&p.spec) else { return unsupported("GEMM: no kernel for these storage types") };
        let grid = t.grid(p.m, p.n, p.batch(), p.spec.trans_b);
        out.extend(
            launch(p, kernel, grid, GemvTactic::THREADS).map(|l| Candidate { tactic: Tactic::Gemv(*t), launches: vec![l] }),
        );
    }
    Ok(())
}

fn push_simt(out: &mut Vec<Candidate>, p: &Problem, tactics: &[GemmTactic], limits: &SmLimits) -> Result<(), Unsupported> {
    for t in tactics.iter().filter(|t| t.is_valid(limits)) {
        let Some(kernel) = t.source_for(&p.spec) else { return unsupported("GEMM: no kernel for these storage types") };
        let grid = t.grid(p.m, p.n, p.batch());
        out.extend(launch(p, kernel, grid, t.threads()).map(|l| Candidate { tactic: Tactic::GemmSimt(*t), launches: vec![l] }));
    }
    Ok(())
}

/// The launch of a GEMM kernel on `p`, in the argument order of
/// `gemm_common.cuh` (see `simt`); `None` when the grid exceeds the
/// launch limits.
fn launch(p: &Problem, kernel: KernelSource, grid: [u64; 3], threads: u32) -> Option<KernelLaunch> {
    if grid[0] > u32::MAX as u64 || grid[1] > 65535 || grid[2] > 65535 {
        return None;
    }
    let mut args = vec![KernelArg::Input(0), KernelArg::Input(1)];
    args.extend(p.w_scale.map(KernelArg::Input));
    args.extend(p.addend.as_ref().map(|e| KernelArg::Input(e.input)));
    args.extend(p.residual.map(KernelArg::Input));
    args.push(KernelArg::Output(0));
    args.extend([p.m, p.n, p.k, p.nz[1]].map(|v| KernelArg::I32(v as i32)));
    args.extend([p.sa[0], p.sa[1], p.sb[0], p.sb[1]].map(KernelArg::I64));
    if let Some(e) = &p.addend {
        args.extend(e.strides.map(KernelArg::I64));
    }
    args.extend([p.alpha, p.beta, p.x_scale, p.y_scale].map(KernelArg::F32));
    Some(KernelLaunch { kernel, grid: grid.map(|g| g as u32), block: [threads, 1, 1], shared_bytes: 0, args })
}
