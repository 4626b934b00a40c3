//! The generic map kernel every elementwise op instantiates: a grid-stride
//! loop over the output's elements in which each input is read at its
//! numpy-broadcast offset and one output element is written.
//!
//! Broadcasting is planned here, as the CPU reference plans it: size-1
//! output dimensions are dropped and adjacent dimensions merged wherever
//! every input is broadcast along both or along neither. Each input is then
//! read either at the output's own index (same shape), at offset 0 (one
//! element), or through per-dimension strides passed as arguments, so the
//! source depends only on the merged rank and on which inputs need strides.
//!
//! The 1-D launch tactics (threads per block, elements per thread) are shared
//! with the movement family.

pub use crate::tactic::Launch1d;
use crate::Tactic;
use crate::{unsupported, Candidate, KernelLaunch, KernelSource, SmLimits, COMMON};
use trtc_runtime::kernels::KernelArg;

/// The most merged dimensions a map or copy kernel indexes.
pub const MAX_RANK: usize = 8;

/// Integer helpers of the elementwise kernels.
pub const MATH: &str = include_str!("../../cuda/elementwise_math.cuh");

/// How a map kernel reads one input at output element `i`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Access {
    /// The input has the output's shape: element `i`.
    Same,
    /// The input holds one element: element 0.
    Scalar,
    /// Element `Σ coord[d] * strides[d]` over the merged dimensions.
    Strided(Vec<u64>),
}

/// The merged iteration space of inputs broadcast to an output.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Broadcast {
    /// Output elements.
    pub n: u64,
    /// Merged output dimensions, outermost first.
    pub dims: Vec<u64>,
    pub access: Vec<Access>,
    /// Whether every index and offset fits 32-bit index arithmetic.
    pub idx32: bool,
}

impl Broadcast {
    /// Plans inputs of `shapes` broadcast to `out` (each must broadcast to
    /// it exactly); unsupported when more than [`MAX_RANK`] merged dimensions
    /// remain.
    pub fn new(out: &[usize], shapes: &[&[usize]]) -> Result<Broadcast, crate::Unsupported> {
        let rank = out.len();
        for s in shapes {
            let ok = s.len() <= rank && s.iter().enumerate().all(|(i, &d)| d == out[rank - s.len() + i] || d == 1);
            if !ok {
                return unsupported(format!("shape {s:?} does not broadcast to {out:?}"));
            }
        }
        let broadcast = |k: usize, d: usize| {
            let s = shapes[k];
            let off = rank - s.len();
            d < off || s[d - off] == 1
        };
        let mut dims: Vec<u64> = Vec::new();
        let mut patterns: Vec<Vec<bool>> = Vec::new();
        for (d, &size) in out.iter().enumerate() {
            if size == 1 {
                continue;
            }
            let pattern: Vec<bool> = (0..shapes.len()).map(|k| broadcast(k, d)).collect();
            match (dims.last_mut(), patterns.last()) {
                (Some(last), Some(p)) if *p == pattern => *last *= size as u64,
                _ => {
                    dims.push(size as u64);
                    patterns.push(pattern);
                }
            }
        }
        let n: u64 = out.iter().map(|&d| d as u64).product();
        let access = (0..shapes.len())
            .map(|k| {
                if patterns.iter().all(|p| !p[k]) {
                    Access::Same
                } else if patterns.iter().all(|p| p[k]) {
                    Access::Scalar
                } else {
                    let mut strides = vec![0u64; dims.len()];
                    let mut acc = 1u64;
                    for d in (0..dims.len()).rev() {
                        if !patterns[d][k] {
                            strides[d] = acc;
                            acc *= dims[d];
                        }
                    }
                    Access::Strided(strides)
                }
            })
            .collect::<Vec<_>>();
        let strided = access.iter().any(|a| matches!(a, Access::Strided(_)));
        if strided && dims.len() > MAX_RANK {
            return unsupported(format!("broadcast to {out:?} needs {} merged dimensions (at most {MAX_RANK})", dims.len()));
        }
        Ok(Broadcast { n, dims, access, idx32: fits_idx32(n) })
    }

    /// `inputs` inputs of `n` elements each, all read at the output's index.
    pub fn same(n: u64, inputs: usize) -> Broadcast {
        Broadcast { n, dims: vec![n], access: vec![Access::Same; inputs], idx32: fits_idx32(n) }
    }

    /// Dimensions the kernel decomposes the output index over: none when no
    /// input needs strides.
    fn index_rank(&self) -> usize {
        if self.access.iter().any(|a| matches!(a, Access::Strided(_))) {
            self.dims.len()
        } else {
            0
        }
    }
}

/// Whether a loop over `n` elements (and offsets below `n`) can use 32-bit
/// unsigned indices, grid-stride increments included.
pub fn fits_idx32(n: u64) -> bool {
    n < (1u64 << 31)
}

/// One map kernel: types, extra parameters and the per-element body.
///
/// In the body, `i` is the output index (type `IDX`), `q` points at the
/// output element, and `p0`, `p1`, ... at each broadcast input's element.
#[derive(Clone, Debug)]
pub struct MapKernel {
    /// The entry point, e.g. `trtc_elementwise_binary`.
    pub entry: String,
    /// Device code placed after the common helpers (definitions the body uses).
    pub prelude: String,
    /// C type of the output elements.
    pub out_type: String,
    /// C type of each broadcast input and the argument that passes it.
    pub inputs: Vec<(String, KernelArg)>,
    /// Further parameters after the sizes: C declaration and argument.
    pub params: Vec<(String, KernelArg)>,
    pub body: String,
}

impl MapKernel {
    /// The source and the arguments of this kernel for one broadcast plan.
    pub fn instantiate(&self, b: &Broadcast) -> (KernelSource, Vec<KernelArg>) {
        let rank = b.index_rank();
        let idx = if b.idx32 { "unsigned int" } else { "unsigned long long" };
        let mut params = vec![format!("{}* __restrict__ out", self.out_type)];
        let mut args = vec![KernelArg::Output(0)];
        for (k, (ty, arg)) in self.inputs.iter().enumerate() {
            params.push(format!("const {ty}* __restrict__ in{k}"));
            args.push(*arg);
        }
        params.push("long long n_".into());
        args.push(KernelArg::I64(b.n as i64));
        for d in 1..rank {
            params.push(format!("long long dim{d}_"));
            args.push(KernelArg::I64(b.dims[d] as i64));
        }
        let mut index = String::new();
        for (k, a) in b.access.iter().enumerate() {
            if let Access::Strided(strides) = a {
                for (d, &s) in strides.iter().enumerate() {
                    params.push(format!("long long st{k}_{d}"));
                    args.push(KernelArg::I64(s as i64));
                }
                index.push_str(&format!("        IDX o{k} = 0;\n"));
            }
        }
        for (decl, arg) in &self.params {
            params.push(decl.clone());
            args.push(*arg);
        }
        if rank > 0 {
            // Peel the coordinates off the output index, innermost first.
            index.push_str("        {\n            IDX r = i;\n");
            for d in (0..rank).rev() {
                let used = b.access.iter().any(|a| matches!(a, Access::Strided(s) if s[d] != 0));
                let c = if d == 0 {
                    "r".to_string()
                } else {
                    if used {
                        index.push_str(&format!("            const IDX c{d} = r % (IDX)dim{d}_;\n"));
                    }
                    index.push_str(&format!("            r /= (IDX)dim{d}_;\n"));
                    format!("c{d}")
                };
                for (k, a) in b.access.iter().enumerate() {
                    if let Access::Strided(s) = a {
                        if s[d] != 0 {
                            index.push_str(&format!("            o{k} += {c} * (IDX)st{k}_{d};\n"));
                        }
                    }
                }
            }
            index.push_str("        }\n");
        }
        for (k, (ty, _)) in self.inputs.iter().enumerate() {
            let off = match &b.access[k] {
                Access::Same => "i".to_string(),
                Access::Scalar => "0".to_string(),
                Access::Strided(_) => format!("o{k}"),
            };
            index.push_str(&format!("        const {ty}* p{k} = in{k} + {off};\n"));
        }
        let source = format!(
            "{COMMON}\n{MATH}\n#define IDX {idx}\n{prelude}\nextern \"C\" __global__ void {entry}({params}) {{\n    const IDX n = (IDX)n_;\n    for (IDX i = (IDX)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (IDX)gridDim.x * blockDim.x) {{\n{index}        {out}* q = out + i;\n{body}\n    }}\n}}\n",
            prelude = self.prelude,
            entry = self.entry,
            params = params.join(", "),
            out = self.out_type,
            body = indent(&self.body, 8),
        );
        (KernelSource { entry: self.entry.clone(), source }, args)
    }

    /// Every launch tactic of this kernel on `b`, the heuristic first; the
    /// tactic names start with `family`.
    pub fn candidates(&self, family: &str, b: &Broadcast, limits: &SmLimits) -> Vec<Candidate> {
        let (kernel, args) = self.instantiate(b);
        Launch1d::candidates(family, &kernel, &args, b.n, limits)
    }
}

fn indent(text: &str, by: usize) -> String {
    let pad = " ".repeat(by);
    text.lines().map(|l| format!("{pad}{l}")).collect::<Vec<_>>().join("\n")
}

impl Launch1d {
    /// The tactics in the order the families offer them: 256 threads with one
    /// element each first (enough blocks to fill every SM several times over
    /// for any tensor worth a launch), then smaller and larger blocks, then
    /// fewer blocks with several elements per thread.
    pub fn all(limits: &SmLimits) -> Vec<Launch1d> {
        [(256, 1), (128, 1), (512, 1), (256, 4), (1024, 1)]
            .into_iter()
            .map(|(block, per_thread)| Launch1d { block, per_thread })
            .filter(|l| l.block <= limits.max_threads_per_block)
            .collect()
    }

    /// Grid and block for `n` elements.
    pub fn geometry(&self, n: u64) -> ([u32; 3], [u32; 3]) {
        let per_block = self.block as u64 * self.per_thread as u64;
        let blocks = n.div_ceil(per_block).clamp(1, 65535 * 8);
        ([blocks as u32, 1, 1], [self.block, 1, 1])
    }

    /// The launch of `kernel` over `n` elements.
    pub fn launch(&self, kernel: &KernelSource, args: Vec<KernelArg>, n: u64) -> KernelLaunch {
        let (grid, block) = self.geometry(n);
        KernelLaunch { kernel: kernel.clone(), grid, block, shared_bytes: 0, args }
    }

    /// One candidate per launch shape of a layer computed by one
    /// grid-stride `kernel` over `n` elements, named `family <shape>`.
    pub fn candidates(family: &str, kernel: &KernelSource, args: &[KernelArg], n: u64, limits: &SmLimits) -> Vec<Candidate> {
        Launch1d::all(limits)
            .into_iter()
            .map(|l| Candidate {
                tactic: Tactic::Launch { family: family.to_string(), launch: l },
                launches: vec![l.launch(kernel, args.to_vec(), n)],
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channel_broadcast_merges_spatial_dims() {
        let b = Broadcast::new(&[2, 3, 4, 5], &[&[2, 3, 4, 5], &[1, 3, 1, 1]]).unwrap();
        assert_eq!(b.dims, vec![2, 3, 20]);
        assert_eq!(b.access, vec![Access::Same, Access::Strided(vec![0, 1, 0])]);
        let s = Broadcast::new(&[2, 3], &[&[2, 3], &[]]).unwrap();
        assert_eq!(s.access, vec![Access::Same, Access::Scalar]);
    }
}
