//! Deliberately wrong kernels the harness must catch.

use crate::*;

/// Deliberately wrong kernels for a `Neg` layer, each of which the harness
/// must report: a wrong value, unwritten outputs, a write past the end of
/// the output, a missing `__syncthreads` (the emulator runs thread 0 up to
/// its next barrier before thread 1 starts, and shared memory starts as NaN
/// bytes), a shared-memory overrun and a misaligned vector store (UBSan), a
/// write to an input (read-only) and a read just past the end of an input.
pub(crate) const CONTROLS: [(&str, &str); 8] = [
    ("copies instead of negating", "if (i < n) out[i] = in[i];"),
    ("writes half the outputs", "if (i < n / 2) out[i] = -in[i];"),
    ("writes one element past the end", "if (i <= n) out[i] = -in[i];"),
    (
        "reads shared memory without a barrier",
        "__shared__ float s[64]; s[threadIdx.x] = i < n ? in[i] : 0.0f; const float v = s[threadIdx.x ^ 1]; \
         if ((i ^ 1) < n) out[i ^ 1] = -v;",
    ),
    (
        "overruns a shared array",
        "__shared__ float s[64]; s[threadIdx.x + 1] = i < n ? in[i] : 0.0f; __syncthreads(); if (i < n) out[i] = -s[threadIdx.x + 1];",
    ),
    ("stores a misaligned float2", "if (2 * i + 2 < n) *(float2*)(out + 2 * i + 1) = make_float2(-in[2 * i + 1], -in[2 * i + 2]);"),
    ("writes its input", "if (i < n) { const float v = in[i]; ((float*)in)[i] = 2.0f * v; out[i] = -v; }"),
    ("reads past the end of its input", "if (i < n) out[i] = -in[i] + 0.0f * in[i + 2];"),
];

pub(crate) fn control_case(b: &mut Builder) -> Case {
    let x = b.data(DType::F32, &[5, 7]);
    Case {
        name: "control".into(),
        family: "control",
        op: Unary::new(UnaryKind::Neg).into(),
        inputs: vec![Some(x)],
        pick: Pick::All,
        int_slack: 0,
        expect_trap: false,
        sm: b.sm,
    }
}

pub(crate) fn control_launch(body: &str, n: usize) -> trtc_kernels::KernelLaunch {
    let source = format!(
        "{COMMON}\nextern \"C\" __global__ void trtc_control(float* out, const float* in, long long n) {{\n    const long long i = blockIdx.x * blockDim.x + threadIdx.x;\n    {body}\n}}\n"
    );
    trtc_kernels::KernelLaunch {
        kernel: trtc_kernels::KernelSource { entry: "trtc_control".into(), source },
        grid: [1, 1, 1],
        block: [64, 1, 1],
        shared_bytes: 0,
        args: vec![KernelArg::Output(0), KernelArg::Input(0), KernelArg::I64(n as i64)],
    }
}
