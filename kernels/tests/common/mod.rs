//! Helpers shared by the kernel-family tests (`mod common;` in each): the
//! SMs trtc targets, a layer as the plan holds it, the launch checks the
//! executor makes, NVRTC compiles with their cubin and spill checks, and the
//! parameter sizes of a compiled entry point. Each test binary uses a
//! different subset.
#![allow(dead_code)]

use std::ops::RangeInclusive;
use trtc_kernels::{candidates, nvrtc, Candidate, LayerIo, SmLimits};
use trtc_runtime::kernels::KernelArg;
use trtc_runtime::ops::precision::HalfIo;
use trtc_runtime::ops::Op;
use trtc_runtime::{DType, TensorType};

/// The SMs trtc compiles for.
pub const SMS: [u32; 4] = [80, 86, 89, 90];

/// A tensor type of `dtype` and `shape`.
pub fn tensor(dtype: DType, shape: &[usize]) -> TensorType {
    TensorType::new(dtype, shape.to_vec())
}

/// Fails unless libnvrtc can be loaded.
pub fn require_nvrtc() {
    assert!(nvrtc::available(), "libnvrtc is required for the kernel compile tests: {:?}", nvrtc::library().err());
}

/// A layer as the plan holds it (f16 layers wrapped in HalfIo), with the
/// output types its inference gives.
pub struct Layer {
    pub op: Op,
    pub inputs: Vec<Option<TensorType>>,
    pub outputs: Vec<TensorType>,
}

/// What a family's launches must satisfy besides the common rules (unique
/// tactics, a non-empty grid within the hardware's limits, arguments that
/// name tensors the layer has).
pub struct Family {
    /// Threads per block.
    pub threads: RangeInclusive<u32>,
    /// Dynamic shared memory per launch, at most.
    pub max_shared: u32,
    /// How every entry point's name starts.
    pub entry_prefix: &'static str,
    /// Whether compiles check the arguments against the cubin's parameter
    /// sizes.
    pub param_sizes: bool,
}

impl Layer {
    /// `op` on inputs of the given types, as given.
    pub fn infer(op: Op, inputs: Vec<Option<TensorType>>) -> Layer {
        let refs: Vec<Option<&TensorType>> = inputs.iter().map(|t| t.as_ref()).collect();
        let outputs = op.infer(&refs).unwrap_or_else(|e| panic!("{}: {e}", op.name()));
        Layer { op, inputs, outputs }
    }

    /// A layer on inputs of the given types; `half` wraps the op in HalfIo.
    pub fn typed(op: impl Into<Op>, half: bool, inputs: Vec<Option<TensorType>>) -> Layer {
        let op: Op = op.into();
        Layer::infer(if half { HalfIo::new(op).into() } else { op }, inputs)
    }

    pub fn io(&self) -> LayerIo<'_> {
        LayerIo { op: &self.op, inputs: self.inputs.iter().map(|t| t.as_ref()).collect(), outputs: self.outputs.iter().collect() }
    }

    /// The candidates for sm_80, checked against `family`.
    pub fn candidates_of(&self, family: &Family) -> Vec<Candidate> {
        let c = candidates(&self.io(), &SmLimits::for_sm(80)).unwrap_or_else(|e| panic!("{}: {e}", self.op.name()));
        check_candidates(self, &c, family);
        c
    }

    /// Why the layer gets no kernel for sm_80.
    pub fn refused(&self) -> String {
        match candidates(&self.io(), &SmLimits::for_sm(80)) {
            Ok(c) => panic!("{}: expected no kernel, got {}", self.op.name(), c[0].tactic),
            Err(e) => e.0,
        }
    }
}

/// Asserts that no two candidates share a tactic name, and that each name
/// reads back as the same tactic.
pub fn assert_unique_tactics(what: &str, cands: &[Candidate]) {
    for c in cands {
        let name = c.tactic.to_string();
        assert_eq!(name.parse::<trtc_kernels::Tactic>().as_ref(), Ok(&c.tactic), "{what}: tactic {name} does not round-trip");
    }
    let mut tactics: Vec<String> = cands.iter().map(|c| c.tactic.to_string()).collect();
    tactics.sort();
    tactics.dedup();
    assert_eq!(
        tactics.len(),
        cands.len(),
        "{what}: duplicate tactics: {:?}",
        cands.iter().map(|c| &c.tactic).collect::<Vec<_>>()
    );
}

/// Asserts that a grid is non-empty and within the y and z limits.
pub fn assert_grid(what: impl std::fmt::Display, grid: [u32; 3]) {
    assert!(grid.iter().all(|&g| g > 0) && grid[1] <= 65535 && grid[2] <= 65535, "{what}: grid {grid:?}");
}

/// What the executor checks, and unique tactics.
pub fn check_candidates(layer: &Layer, cands: &[Candidate], family: &Family) {
    assert!(!cands.is_empty());
    assert_unique_tactics(layer.op.name(), cands);
    for c in cands {
        assert!(!c.launches.is_empty());
        for l in &c.launches {
            let threads: u32 = l.block.iter().product();
            assert!(family.threads.contains(&threads), "{}: block {:?}", c.tactic, l.block);
            assert_grid(&c.tactic, l.grid);
            assert!(l.shared_bytes <= family.max_shared, "{}: {} bytes of shared memory", c.tactic, l.shared_bytes);
            assert!(l.kernel.entry.starts_with(family.entry_prefix), "{}: entry {}", c.tactic, l.kernel.entry);
            for a in &l.args {
                match *a {
                    KernelArg::Input(k) => {
                        assert!(layer.inputs.get(k as usize).is_some_and(|t| t.is_some()), "{}: {a:?}", c.tactic)
                    }
                    KernelArg::Output(k) => assert!((k as usize) < layer.outputs.len(), "{}: {a:?}", c.tactic),
                    _ => {}
                }
            }
        }
    }
}

/// Compiles `source` for `sm`: a cubin, no spills.
pub fn compile_source(source: &str, name: &str, sm: u32, what: &str) -> nvrtc::Compiled {
    let out = nvrtc::compile(source, name, sm).unwrap_or_else(|e| panic!("{what} for sm_{sm}: {e:#}"));
    assert!(out.cubin.starts_with(b"\x7fELF"), "{what}: not a cubin for sm_{sm}");
    assert_eq!(out.spill_store_bytes(), 0, "{what} spills on sm_{sm}:\n{}", out.log);
    out
}

/// Compiles every launch of `c` for `sms` (see [`compile_source`]); with
/// `param_sizes`, also checks the arguments against the kernel's parameter
/// sizes.
pub fn compile(c: &Candidate, sms: &[u32], param_sizes: bool) {
    for l in &c.launches {
        for &sm in sms {
            let what = format!("{} ({})", c.tactic, l.kernel.entry);
            let out = compile_source(&l.kernel.source, &format!("{}.cu", l.kernel.entry), sm, &what);
            if param_sizes {
                let want: Vec<u32> =
                    l.args.iter().map(|a| if matches!(a, KernelArg::I32(_) | KernelArg::F32(_)) { 4 } else { 8 }).collect();
                assert_eq!(
                    cubin_param_sizes(&out.cubin, &l.kernel.entry),
                    want,
                    "{}: arguments do not match the parameters",
                    l.kernel.entry
                );
            }
        }
    }
}

/// Compiles the heuristic candidate of each layer (checked against
/// `family`) for every SM; returns the heuristic tactics.
pub fn compile_heuristic(layers: &[Layer], family: &Family) -> Vec<String> {
    layers
        .iter()
        .map(|l| {
            let c = l.candidates_of(family);
            compile(&c[0], &SMS, family.param_sizes);
            c[0].tactic.to_string()
        })
        .collect()
}

/// The byte sizes of an entry's parameters, in order, from the cubin's
/// `.nv.info.<entry>` section (EIATTR_KPARAM_INFO records).
pub fn cubin_param_sizes(cubin: &[u8], entry: &str) -> Vec<u32> {
    let u16_at = |o: usize| u16::from_le_bytes([cubin[o], cubin[o + 1]]) as usize;
    let u32_at = |o: usize| u32::from_le_bytes(cubin[o..o + 4].try_into().unwrap());
    let u64_at = |o: usize| u64::from_le_bytes(cubin[o..o + 8].try_into().unwrap()) as usize;
    let (shoff, shentsize, shnum, shstrndx) = (u64_at(0x28), u16_at(0x3a), u16_at(0x3c), u16_at(0x3e));
    let section = |i: usize| {
        let h = shoff + i * shentsize;
        (u32_at(h) as usize, u64_at(h + 24), u64_at(h + 32))
    };
    let strtab = section(shstrndx).1;
    let want = format!(".nv.info.{entry}");
    for i in 0..shnum {
        let (name, off, size) = section(i);
        let start = strtab + name;
        let end = start + cubin[start..].iter().position(|&b| b == 0).unwrap();
        if cubin[start..end] != *want.as_bytes() {
            continue;
        }
        let mut params = Vec::new();
        let mut p = off;
        while p < off + size {
            let (format, attr) = (cubin[p], cubin[p + 1]);
            if format != 4 {
                p += 4;
                continue;
            }
            let len = u16_at(p + 2);
            if attr == 0x17 {
                params.push((u16_at(p + 8), (u32_at(p + 12) >> 18) & 0x3fff));
            }
            p += 4 + len;
        }
        params.sort();
        return params.into_iter().map(|(_, b)| b).collect();
    }
    panic!("no {want} in the cubin")
}
