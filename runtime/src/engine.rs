//! The engine file: reading, validating and writing it.
//!
//! Layout (all integers little-endian):
//!
//! ```text
//! 0   magic         b"TRTCENG\0"
//! 8   u32           format version (FORMAT_VERSION)
//! 12  u32           header length H
//! 16  H bytes       header (postcard-encoded `Header`)
//! 16+H u32          CRC-32 of the header bytes
//! ... sections at 256-byte aligned offsets, each with its CRC-32 in the header:
//!     PLAN (postcard-encoded `Plan`), WEIGHTS (raw tensors, 256-byte aligned),
//!     for GPU targets KERNELS (postcard-encoded `KernelTable`: cubins and
//!     per-layer launches), and for engines whose input shapes vary PROFILES
//!     (postcard-encoded `Vec<Profile>`)
//! ```
//!
//! Nothing read from the file is trusted before it is checked: lengths are
//! bounded by the file size before any allocation, checksums are verified
//! before decoding, and the decoded plan is validated (`Plan::validate`).

use crate::error::{Error, Result};
use crate::kernels::KernelTable;
use crate::plan::{Plan, TensorId};
use crate::prepack::PackedWeights;
use crate::profile::Profile;
use crate::tensor::{AlignedBytes, TensorType};
use serde::{Deserialize, Serialize};

pub const MAGIC: &[u8; 8] = b"TRTCENG\0";
/// The newest format this runtime reads and the one it writes.
/// Version 3 appended ops (Det, NegativeLogLikelihoodLoss, the recurrent
/// layers LSTM/GRU/RNN, GridSample, Col2Im, DFT, STFT, RoiAlign) to their families;
/// nothing else changed. Version 4 appended the 8-bit float and 4-bit
/// integer dtypes and the CastNoSaturate and DeformConv ops. Version 5 added
/// the optional PROFILES section (optimization profiles) and appended the
/// DynamicReshape op. Version 6 appended the SliceLike, DynamicResize, DynamicExpand and
/// IndexGrid ops, the profiles' shared dimensions, and DynamicReshape's
/// axes read from other inputs (`ReshapeDim::Of`). Version 7 appended the
/// NonMaxSuppression and NonZero ops (outputs sized by the data),
/// DynamicSlice and DynamicTile. Version 8 appended the Control family
/// (If, Loop and Scan run at run time, holding their branches and bodies
/// as sub-plans) and the SizeOf op. Version 9 appended the Fp8Linear op
/// (FP8 E4M3 convolutions and matrix products). Version 10 added each kernel
/// module's source digest and each layer's tactic to the KERNELS section
/// (GPU engines whose shapes vary compute launches at the bound shapes;
/// older tables decode with empty ones). Version 11 appended the
/// ShapedByValues op (TopK, Reshape, Expand, ConstantOfShape, Range and
/// Slice whose shapes come from values computed at run time) and
/// DynamicReshape's merged axes (`ReshapeDim::Merge`). Version 12 appended
/// ShapedByValues' Resize and Pad (sizes, scales and pads computed at run
/// time: engines whose sizes are read from each run's input shapes). Version
/// 13 appended the `Counts` kernel argument (a GPU layer whose output size
/// depends on the data: NonMaxSuppression's kernels) and the `Control`
/// layer kernels (an If's branches or a Loop's body as kernels, the control
/// decided on the host). An older runtime
/// refuses a newer engine by its version instead of failing to decode it.
pub const FORMAT_VERSION: u32 = 13;
/// The oldest format this runtime reads. A version-2 engine decodes as it
/// did: new op variants only ever go at the end of a family, so the old
/// variants keep their encoding (`runtime/tests/engine_encoding.rs` pins it).
pub const OLDEST_READABLE_VERSION: u32 = 2;
/// Alignment of sections in the file and of weights inside their section.
pub const SECTION_ALIGN: u64 = 256;
/// The version of trtc that writes engines.
pub const TRTC_VERSION: &str = env!("CARGO_PKG_VERSION");

/// What an engine was built for.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Target {
    /// Any machine; only the CPU executor.
    #[default]
    Cpu,
    /// NVIDIA GPUs of one compute capability (e.g. 90 for sm_90).
    Cuda { sm: u32, gpu_name: Option<String> },
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Cpu => f.write_str("cpu"),
            Target::Cuda { sm, gpu_name: Some(g) } => write!(f, "sm_{sm} ({g})"),
            Target::Cuda { sm, gpu_name: None } => write!(f, "sm_{sm}"),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SectionKind {
    Plan,
    Weights,
    Kernels,
    Profiles,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Section {
    pub kind: SectionKind,
    pub offset: u64,
    pub len: u64,
    pub crc32: u32,
}

/// Everything about an engine that is known without decoding its plan.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Header {
    pub trtc_version: String,
    pub target: Target,
    /// The build flags, as the user gave them (for `inspect`).
    pub build_flags: Vec<String>,
    pub sections: Vec<Section>,
}

/// A binding as an application sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BindingInfo {
    pub name: String,
    pub ty: TensorType,
}

/// A loaded, validated engine. Shareable across threads; each thread runs it
/// through its own [`crate::ExecutionContext`].
#[derive(Debug)]
pub struct Engine {
    header: Header,
    format_version: u32,
    plan: Plan,
    weights: AlignedBytes,
    kernels: Option<KernelTable>,
    /// Empty for an engine of fixed shapes.
    profiles: Vec<Profile>,
    inputs: Vec<BindingInfo>,
    outputs: Vec<BindingInfo>,
    /// The CPU executor's packed copies of constants (`crate::prepack`),
    /// made on first use.
    packed: PackedWeights,
}

fn read_u32(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}

/// The format version and trtc version of an engine file, read without
/// loading the rest (like trtexec's `--getPlanVersionOnly`).
pub fn peek_version(bytes: &[u8]) -> Result<(u32, String)> {
    let (version, header) = read_header(bytes)?;
    Ok((version, header.trtc_version))
}

fn read_header(bytes: &[u8]) -> Result<(u32, Header)> {
    if bytes.len() < 16 {
        return Err(Error::invalid(format!("file is {} bytes, too short to be an engine", bytes.len())));
    }
    if &bytes[..8] != MAGIC {
        return Err(Error::invalid("not a trtc engine file (wrong magic bytes)"));
    }
    let version = read_u32(bytes, 8).unwrap_or(0);
    if !(OLDEST_READABLE_VERSION..=FORMAT_VERSION).contains(&version) {
        return Err(Error::invalid(format!(
            "engine format version {version} is not supported: this runtime (trtc {TRTC_VERSION}) reads versions {OLDEST_READABLE_VERSION} to {FORMAT_VERSION}; rebuild the engine with this trtc"
        )));
    }
    let header_len = read_u32(bytes, 12).unwrap_or(0) as usize;
    let header_end = 16usize.checked_add(header_len).filter(|&e| e + 4 <= bytes.len());
    let Some(header_end) = header_end else {
        return Err(Error::invalid("file is truncated (header runs past the end)"));
    };
    let header_bytes = &bytes[16..header_end];
    let crc = read_u32(bytes, header_end).unwrap_or(0);
    if crc32fast::hash(header_bytes) != crc {
        return Err(Error::invalid("header checksum mismatch (the file is corrupted)"));
    }
    let header: Header =
        postcard::from_bytes(header_bytes).map_err(|e| Error::invalid(format!("header does not decode: {e}")))?;
    Ok((version, header))
}

fn section<'a>(bytes: &'a [u8], header: &Header, kind: SectionKind) -> Result<&'a [u8]> {
    optional_section(bytes, header, kind)?.ok_or_else(|| Error::invalid(format!("missing {kind:?} section")))
}

fn optional_section<'a>(bytes: &'a [u8], header: &Header, kind: SectionKind) -> Result<Option<&'a [u8]>> {
    let mut found = header.sections.iter().filter(|s| s.kind == kind);
    let Some(s) = found.next() else { return Ok(None) };
    if found.next().is_some() {
        return Err(Error::invalid(format!("duplicate {kind:?} section")));
    }
    let end = s.offset.checked_add(s.len).filter(|&e| e <= bytes.len() as u64);
    let Some(end) = end else {
        return Err(Error::invalid(format!("file is truncated ({kind:?} section runs past the end)")));
    };
    let data = &bytes[s.offset as usize..end as usize];
    if crc32fast::hash(data) != s.crc32 {
        return Err(Error::invalid(format!("{kind:?} section checksum mismatch (the file is corrupted)")));
    }
    Ok(Some(data))
}

impl Engine {
    /// Reads and validates an engine file.
    pub fn load(path: impl AsRef<std::path::Path>) -> Result<Engine> {
        let path = path.as_ref();
        let bytes = crate::file::read(path)?;
        Engine::from_bytes(&bytes)
    }

    /// Validates and loads an engine from its bytes.
    pub fn from_bytes(bytes: &[u8]) -> Result<Engine> {
        let (format_version, header) = read_header(bytes)?;
        let plan_bytes = section(bytes, &header, SectionKind::Plan)?;
        let weight_bytes = section(bytes, &header, SectionKind::Weights)?;
        let plan: Plan = postcard::from_bytes(plan_bytes).map_err(|e| Error::invalid(format!("plan does not decode: {e}")))?;
        plan.validate(weight_bytes.len() as u64)?;
        let kernels = match (&header.target, optional_section(bytes, &header, SectionKind::Kernels)?) {
            (Target::Cpu, None) => None,
            (Target::Cpu, Some(_)) => return Err(Error::invalid("a CPU engine carries a KERNELS section")),
            (Target::Cuda { .. }, None) => return Err(Error::invalid("a CUDA engine without its KERNELS section")),
            (Target::Cuda { sm, .. }, Some(k)) => {
                let table = KernelTable::decode(k, format_version)
                    .map_err(|e| Error::invalid(format!("kernel table does not decode: {e}")))?;
                if table.sm != *sm {
                    return Err(Error::invalid(format!("kernels for sm_{} in an engine for sm_{sm}", table.sm)));
                }
                table.validate(&plan)?;
                Some(table)
            }
        };
        let profiles: Vec<Profile> = match optional_section(bytes, &header, SectionKind::Profiles)? {
            None => Vec::new(),
            Some(_) if format_version < 5 => return Err(Error::invalid("a PROFILES section in an engine of format version < 5")),
            Some(p) => {
                crate::profile::decode(p, format_version).map_err(|e| Error::invalid(format!("profiles do not decode: {e}")))?
            }
        };
        for p in &profiles {
            p.validate(&plan)?;
        }
        let weights = AlignedBytes::from_bytes(weight_bytes);
        let binding = |id: TensorId, name: &str| BindingInfo { name: name.to_string(), ty: plan.tensors[id].ty.clone() };
        let inputs = plan.inputs.iter().map(|&i| binding(i, &plan.tensors[i].name)).collect();
        let outputs = plan.outputs.iter().map(|(n, i)| binding(*i, n)).collect();
        Ok(Engine { header, format_version, plan, weights, kernels, profiles, inputs, outputs, packed: PackedWeights::new() })
    }

    /// Serializes a plan and its weights (and, for a GPU target, its kernel
    /// table) into engine file bytes. Deterministic: the same arguments give
    /// the same bytes.
    pub fn serialize(
        target: Target,
        build_flags: Vec<String>,
        plan: &Plan,
        weights: &[u8],
        kernels: Option<&KernelTable>,
    ) -> Result<Vec<u8>> {
        Engine::serialize_with_profiles(target, build_flags, plan, weights, kernels, &[])
    }

    /// Like [`Engine::serialize`], for an engine whose input shapes vary
    /// within `profiles` (planned at each input's maximum). With no
    /// profiles, the same bytes as `serialize`.
    pub fn serialize_with_profiles(
        target: Target,
        build_flags: Vec<String>,
        plan: &Plan,
        weights: &[u8],
        kernels: Option<&KernelTable>,
        profiles: &[Profile],
    ) -> Result<Vec<u8>> {
        for p in profiles {
            p.validate(plan)?;
        }
        let encode = |what: &str, r: std::result::Result<Vec<u8>, postcard::Error>| {
            r.map_err(|e| Error::invalid(format!("{what} does not encode: {e}")))
        };
        let mut payloads: Vec<(SectionKind, Vec<u8>)> = vec![(SectionKind::Plan, encode("plan", postcard::to_stdvec(plan))?)];
        match (&target, kernels) {
            (Target::Cpu, None) => {}
            (Target::Cuda { .. }, Some(k)) => {
                payloads.push((SectionKind::Kernels, encode("kernel table", postcard::to_stdvec(k))?))
            }
            _ => return Err(Error::invalid("a kernel table goes with a CUDA target and only with it")),
        }
        if !profiles.is_empty() {
            payloads.push((SectionKind::Profiles, encode("profiles", postcard::to_stdvec(profiles))?));
        }
        // Weights last, so that a reader can map them at an aligned offset.
        let sections_for = |base: u64| {
            let mut at = base;
            let mut v = Vec::new();
            for (kind, data) in payloads.iter().map(|(k, d)| (*k, d.as_slice())).chain([(SectionKind::Weights, weights)]) {
                v.push(Section { kind, offset: at, len: data.len() as u64, crc32: crc32fast::hash(data) });
                at = (at + data.len() as u64).div_ceil(SECTION_ALIGN) * SECTION_ALIGN;
            }
            v
        };
        let mut header = Header { trtc_version: TRTC_VERSION.to_string(), target, build_flags, sections: sections_for(0) };
        // The header's size depends on the section offsets (varints may
        // grow): iterate until it is stable.
        let mut base = 0u64;
        let mut header_bytes;
        loop {
            header.sections = sections_for(base);
            header_bytes = postcard::to_stdvec(&header).map_err(|e| Error::invalid(e.to_string()))?;
            let needed = (16 + header_bytes.len() as u64 + 4).div_ceil(SECTION_ALIGN) * SECTION_ALIGN;
            if needed == base {
                break;
            }
            base = needed;
        }
        let last = header.sections.last().expect("weights section");
        let mut out = Vec::with_capacity((last.offset + last.len) as usize);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        out.extend_from_slice(&(header_bytes.len() as u32).to_le_bytes());
        out.extend_from_slice(&header_bytes);
        out.extend_from_slice(&crc32fast::hash(&header_bytes).to_le_bytes());
        for (s, data) in header.sections.iter().zip(payloads.iter().map(|(_, d)| d.as_slice()).chain([weights])) {
            out.resize(s.offset as usize, 0);
            out.extend_from_slice(data);
        }
        Ok(out)
    }

    pub fn header(&self) -> &Header {
        &self.header
    }

    pub fn format_version(&self) -> u32 {
        self.format_version
    }

    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    pub fn weights(&self) -> &[u8] {
        self.weights.as_slice()
    }

    /// The packed copies of the weights that the CPU executor's fast mode
    /// made so far (see `crate::prepack`).
    pub fn packed_weights(&self) -> &PackedWeights {
        &self.packed
    }

    /// The cubins and per-layer launches of an engine built for a GPU.
    pub fn kernels(&self) -> Option<&KernelTable> {
        self.kernels.as_ref()
    }

    /// Input bindings, in the ONNX model's order. Inputs fixed at build time
    /// are listed by [`Engine::fixed_inputs`] instead.
    /// The optimization profiles (empty when every shape is fixed).
    pub fn profiles(&self) -> &[Profile] {
        &self.profiles
    }

    pub fn inputs(&self) -> &[BindingInfo] {
        &self.inputs
    }

    pub fn outputs(&self) -> &[BindingInfo] {
        &self.outputs
    }

    /// Names of inputs whose value was fixed at build time.
    pub fn fixed_inputs(&self) -> impl Iterator<Item = &str> {
        self.plan.fixed_inputs.iter().map(|f| f.name.as_str())
    }

    /// An execution context on the CPU executor.
    pub fn create_context(&self) -> Result<crate::ExecutionContext<'_>> {
        crate::ExecutionContext::new(self)
    }
}
