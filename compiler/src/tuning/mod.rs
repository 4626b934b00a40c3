//! Autotuning: the timing cache and the choice of each layer's tactic
//! (design.md §9).
//!
//! # The key
//!
//! A timing is reused only for the same measurement: the same [`Device`]
//! (GPU name, compute capability, driver and NVRTC versions), the same
//! layer as [`op_signature`] describes it (op name, a hash of the op's
//! engine encoding with the engine format version, input and output types;
//! no names, so one cache serves every model),
//! the same tactic string, and the same kernels: [`source_hash`], an FNV-1a
//! hash of the candidate's sources and launch configuration. The first
//! three form the [`TimingKey`]; the source hash is stored in the
//! [`Entry`] with the median time and the number of runs, and a lookup
//! only matches when it is equal, so an entry for a kernel whose source
//! changed is never used, and is replaced when the new kernel is measured.
//! Entries for other devices stay in the file (one file may serve several
//! GPUs) and simply never match.
//!
//! # The file
//!
//! A text file, one entry a line, so it can be read and diffed (tabs
//! shown as two spaces):
//!
//! ```text
//! trtc-timing-cache 2 crc32=1a2b3c4d
//! gpu  sm  driver  nvrtc  op  tactic  source  median_us  runs
//! NVIDIA H200  90  12080  12.8  Linear e2:5f0c…(16 hex digits) in=[f16[32,768],…] out=[…]  gemm_simt 64x64x8 4x4  9f3c…(16 hex digits)  12.5  20
//! ```
//!
//! The first line holds the magic word, the format version
//! ([`FORMAT_VERSION`]) and the CRC-32 of everything after that line. The
//! rest is a column header and the entries, fields separated by tabs (tab,
//! newline, carriage return and backslash escaped with a backslash), sorted
//! by key, so the same entries always give the same bytes. `median_us` is
//! the shortest decimal that reads back as the same `f64`, or `-` for a
//! candidate that could not run. Loading never panics: a missing file is
//! an empty cache; a corrupted one (bad magic, checksum, encoding, a
//! truncated file) or one of another version is an empty cache plus a
//! warning. Saving merges with the file as it is at that moment (another
//! build may share it), then replaces it atomically.
//!
//! # Optimization levels
//!
//! Like TensorRT's builderOptimizationLevel, `--opt-level` says how many of
//! a layer's candidates are considered (the kernel families list the
//! heuristic choice first, and it is always considered):
//!
//! | level | candidates per layer | cost on a cold cache |
//! |-------|----------------------|----------------------|
//! | 0     | 1 (the heuristic)    | none; no GPU or cache needed |
//! | 1     | 4                    | up to 4 compiles and timings per layer |
//! | 2     | 8                    | up to 8 |
//! | 3     | 16 (the default)     | up to 16 |
//! | 4     | 64                   | up to 64 |
//! | 5     | all                  | every valid tactic |
//!
//! A timing is an NVRTC compile (on a CPU thread, overlapped with the GPU)
//! plus warm-up and timed runs on the GPU. With a warm cache no candidate
//! is compiled or timed to choose, whatever the level, and a layer with a
//! single candidate is never timed. Since cached times decide everything,
//! the same model, flags and cache file give the same choices, and so a
//! byte-identical engine.

mod key;
mod timing_cache;
mod choose;
mod tuner;

pub use choose::{choose, Choice, Heuristic, Layer, Policy, TacticChooser, Timing, CANDIDATES_PER_LEVEL, DEFAULT_OPT_LEVEL};
pub use key::{fnv1a64, op_signature, source_hash, Device, TimingKey};
pub use timing_cache::{Entry, LoadError, TimingCache, FORMAT_VERSION};
pub use tuner::{Measure, NoGpu, Tuner};
