//! What a timing is filed under: the device, the layer's op signature, the
//! tactic, and a hash of the candidate's kernels.

use trtc_kernels::{Candidate, LayerIo};

/// The GPU and toolchain a timing was measured with. A timing is only
/// reused on the same GPU model, compute capability, driver and NVRTC
/// version, since any of them can change which tactic is fastest.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Device {
    /// The GPU's name as the driver reports it, e.g. `NVIDIA H200`.
    pub gpu: String,
    /// The compute capability as `10 * major + minor`, e.g. `90`.
    pub sm: u32,
    /// The driver's CUDA version as `cuDriverGetVersion` reports it, e.g. `12080`.
    pub driver: i32,
    /// NVRTC's `(major, minor)` version.
    pub nvrtc: (i32, i32),
}

/// The part of a timing's key that says which measurement it is: device,
/// op signature and tactic. The hash of the candidate's kernels is kept in
/// the [`Entry`](super::Entry) instead, so that a kernel whose source
/// changed replaces its old timing rather than piling up next to it; a
/// lookup only matches when the hash is equal.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TimingKey {
    pub device: Device,
    /// The layer as [`op_signature`] describes it.
    pub op: String,
    /// The candidate's tactic, e.g. `gemm_simt 64x64x8 4x4`.
    pub tactic: String,
}

/// A complete description of what a layer computes, independent of the
/// model it comes from (no tensor names, no buffer offsets): the op's name,
/// the engine format version and a hash of the op's engine encoding (every
/// attribute; see [`Op::encoded`](trtc_runtime::Op::encoded)), then the
/// type of every input and output, e.g.
/// `Relu e2:5f0c8e9a1b2c3d4e in=[f16[1,64,56,56]] out=[f16[1,64,56,56]]`.
/// An absent optional input is written `-`. Layout is part of the shapes
/// and the op's attributes, so it is covered too. The key never depends on
/// `Debug` output, which is free to change; it changes when the engine
/// format does, and old timings are then measured again.
pub fn op_signature(io: &LayerIo<'_>) -> String {
    let inputs: Vec<String> = io.inputs.iter().map(|t| t.map_or_else(|| "-".to_string(), |t| t.to_string())).collect();
    let outputs: Vec<String> = io.outputs.iter().map(|t| t.to_string()).collect();
    format!(
        "{} e{}:{:016x} in=[{}] out=[{}]",
        io.op.name(),
        trtc_runtime::engine::FORMAT_VERSION,
        fnv1a64(&io.op.encoded()),
        inputs.join(","),
        outputs.join(",")
    )
}

/// A stable 64-bit hash (FNV-1a) of everything a candidate runs: each
/// launch's entry point, source, grid, block, shared memory and arguments.
/// Stable across Rust versions and platforms, unlike std's `DefaultHasher`.
pub fn source_hash(candidate: &Candidate) -> u64 {
    let mut h = Fnv1a::new();
    for launch in &candidate.launches {
        h.field(launch.kernel.entry.as_bytes());
        h.field(launch.kernel.source.as_bytes());
        for v in launch.grid.iter().chain(&launch.block).chain([&launch.shared_bytes]) {
            h.field(&v.to_le_bytes());
        }
        h.field(&postcard::to_stdvec(&launch.args).expect("kernel arguments always encode"));
    }
    h.0
}

/// The FNV-1a 64-bit hash of `bytes` (exposed so tests can check it
/// against the published reference values).
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h = Fnv1a::new();
    h.bytes(bytes);
    h.0
}

/// FNV-1a, 64 bits, fed incrementally.
struct Fnv1a(u64);

impl Fnv1a {
    fn new() -> Fnv1a {
        Fnv1a(0xcbf2_9ce4_8422_2325)
    }

    fn bytes(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    /// Hashes a length-prefixed field, so that field boundaries matter
    /// (`"ab" + "c"` and `"a" + "bc"` hash differently).
    fn field(&mut self, bytes: &[u8]) {
        self.bytes(&(bytes.len() as u64).to_le_bytes());
        self.bytes(bytes);
    }
}
