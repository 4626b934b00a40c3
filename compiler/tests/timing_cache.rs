//! The timing cache and the tactic choice, without a GPU: the file format
//! (round trip, deterministic bytes, merging, every kind of corruption) and
//! `choose` with fake measurements at every optimization level.

use std::cell::RefCell;
use std::path::PathBuf;

use trtc::tuning::{
    choose, fnv1a64, op_signature, source_hash, Choice, Device, Entry, Layer, LoadError, Policy, Timing, TimingCache, TimingKey,
    CANDIDATES_PER_LEVEL, FORMAT_VERSION,
};
use trtc_kernels::linear::gemm::gemv::GemvTactic;
use trtc_kernels::{Candidate, KernelLaunch, KernelSource, LayerIo, Tactic};
use trtc_runtime::ops::elementwise::{Unary, UnaryKind};
use trtc_runtime::ops::Op;
use trtc_runtime::{DType, TensorType};

/// A fresh, empty directory for one test, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn join(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn scratch(name: &str) -> Scratch {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("timing_cache-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    Scratch(dir)
}

fn h200() -> Device {
    Device { gpu: "NVIDIA H200".into(), sm: 90, driver: 12080, nvrtc: (12, 8) }
}

fn a100() -> Device {
    Device { gpu: "NVIDIA A100-SXM4-80GB".into(), sm: 80, driver: 12080, nvrtc: (12, 8) }
}

fn candidate(tactic: Tactic, source: &str) -> Candidate {
    let kernel = KernelSource { entry: "k".into(), source: source.into() };
    Candidate {
        tactic,
        launches: vec![KernelLaunch { kernel, grid: [4, 1, 1], block: [256, 1, 1], shared_bytes: 0, args: vec![] }],
    }
}

/// The `i`-th test tactic (any family does; GEMV's has one number).
fn tac(i: usize) -> Tactic {
    Tactic::Gemv(GemvTactic { rows: i as u32 })
}

/// `n` candidates `tac(0)..tac(n - 1)` with distinct sources.
fn candidates(n: usize) -> Vec<Candidate> {
    (0..n).map(|i| candidate(tac(i), &format!("__global__ void k() {{ /* {i} */ }}"))).collect()
}

const SIG: &str = "Linalg(MatMul) in=[F16[32,768],F16[768,768]] out=[F16[32,768]]";

fn key(device: &Device, tactic: impl ToString) -> TimingKey {
    TimingKey { device: device.clone(), op: SIG.into(), tactic: tactic.to_string() }
}

fn entry(source_hash: u64, median_us: Option<f64>, runs: u32) -> Entry {
    Entry { source_hash, median_us, runs }
}

/// A cache with a few entries, including awkward strings.
fn sample() -> TimingCache {
    let mut c = TimingCache::new();
    c.insert(key(&h200(), "gemm 64x64"), entry(1, Some(12.5), 20));
    c.insert(key(&h200(), "gemm 128x64"), entry(2, Some(0.1 + 0.2), 20));
    c.insert(key(&h200(), "spills"), entry(3, None, 0));
    c.insert(key(&a100(), "gemm 64x64"), entry(1, Some(20.0), 10));
    let odd = Device { gpu: "odd\tname\\with\nescapes\r".into(), sm: 120, driver: -1, nvrtc: (13, 0) };
    c.insert(
        TimingKey { device: odd, op: "op\twith\ttabs".into(), tactic: "ü \\t".into() },
        entry(u64::MAX, Some(1e-300), u32::MAX),
    );
    c
}

/// Timing with fake, deterministic times: `times[i]` for candidate `ti`
/// (`None`: it could not run), counting the calls.
fn fake<'a>(
    times: &'a [Option<f64>],
    calls: &'a RefCell<Vec<Tactic>>,
) -> impl FnMut(&Candidate) -> anyhow::Result<Option<Timing>> + 'a {
    move |c: &Candidate| {
        calls.borrow_mut().push(c.tactic.clone());
        let Tactic::Gemv(g) = &c.tactic else { unreachable!("the test candidates are GEMVs") };
        let i = g.rows as usize;
        Ok(times[i].map(|median_us| Timing { median_us, runs: 10 }))
    }
}

fn no_gpu(_: &Candidate) -> anyhow::Result<Option<Timing>> {
    anyhow::bail!("no CUDA device")
}

fn policy(opt_level: u8) -> Policy {
    Policy { opt_level, error_on_cache_miss: false }
}

fn layer(cands: &[Candidate]) -> Layer<'_> {
    Layer { name: "conv1", signature: SIG, candidates: cands }
}

#[test]
fn round_trip_through_bytes_and_file() {
    let c = sample();
    let bytes = c.to_bytes();
    let back = TimingCache::from_bytes(&bytes).unwrap();
    assert_eq!(back.entries().collect::<Vec<_>>(), c.entries().collect::<Vec<_>>());
    // Times read back exactly.
    assert_eq!(back.get(&key(&h200(), "gemm 128x64"), 2).unwrap().median_us, Some(0.1 + 0.2));

    let dir = scratch("round_trip");
    let path = dir.join("cache.tc");
    let (mut empty, warning) = TimingCache::load(&path).unwrap();
    assert!(empty.is_empty() && warning.is_none(), "a missing file is an empty cache");
    empty.merge(c.clone());
    assert_eq!(empty.save(&path).unwrap(), None);
    let (loaded, warning) = TimingCache::load(&path).unwrap();
    assert_eq!(warning, None);
    assert_eq!(loaded.to_bytes(), bytes);
    // Only the cache file is left in the directory (the temporary one was renamed).
    assert_eq!(std::fs::read_dir(&dir.0).unwrap().count(), 1);
}

#[test]
fn bytes_are_deterministic() {
    let a = sample();
    // The same entries inserted in another order give the same bytes.
    let mut b = TimingCache::new();
    let mut all: Vec<_> = a.entries().map(|(k, e)| (k.clone(), e.clone())).collect();
    all.reverse();
    for (k, e) in all {
        b.insert(k, e);
    }
    assert_eq!(a.to_bytes(), b.to_bytes());
    let text = String::from_utf8(a.to_bytes()).unwrap();
    assert!(text.starts_with(&format!("trtc-timing-cache {FORMAT_VERSION} crc32=")), "{text}");
    assert!(text.contains("NVIDIA H200\t90\t12080\t12.8\t"), "{text}");
}

#[test]
fn merging_caches_saved_concurrently() {
    let dir = scratch("merge");
    let path = dir.join("shared.tc");
    // Two builds load the same (empty) file, then measure.
    let (mut a, _) = TimingCache::load(&path).unwrap();
    let (mut b, _) = TimingCache::load(&path).unwrap();
    a.insert(key(&h200(), "only_a"), entry(1, Some(5.0), 10));
    a.insert(key(&h200(), "both"), entry(7, Some(3.0), 10));
    a.insert(key(&h200(), "tie"), entry(8, Some(2.0), 10));
    b.insert(key(&a100(), "only_b"), entry(2, Some(6.0), 10));
    b.insert(key(&h200(), "both"), entry(7, Some(4.0), 30)); // more runs: wins
    b.insert(key(&h200(), "tie"), entry(8, Some(1.5), 10)); // same runs, smaller time: wins
    a.save(&path).unwrap();
    b.save(&path).unwrap();
    let (merged, warning) = TimingCache::load(&path).unwrap();
    assert_eq!(warning, None);
    assert_eq!(merged.len(), 4);
    assert_eq!(merged.get(&key(&h200(), "only_a"), 1), Some(&entry(1, Some(5.0), 10)));
    assert_eq!(merged.get(&key(&a100(), "only_b"), 2), Some(&entry(2, Some(6.0), 10)));
    assert_eq!(merged.get(&key(&h200(), "both"), 7), Some(&entry(7, Some(4.0), 30)));
    assert_eq!(merged.get(&key(&h200(), "tie"), 8), Some(&entry(8, Some(1.5), 10)));
    // Saving in the other order gives the same file.
    let path2 = dir.join("other_order.tc");
    let (mut a2, mut b2) = (TimingCache::new(), TimingCache::new());
    a2.merge(TimingCache::from_bytes(&a.to_bytes()).unwrap());
    b2.merge(TimingCache::from_bytes(&b.to_bytes()).unwrap());
    b2.save(&path2).unwrap();
    a2.save(&path2).unwrap();
    assert_eq!(std::fs::read(&path2).unwrap(), std::fs::read(&path).unwrap());
    // The saving cache holds the merged entries too.
    assert_eq!(b.to_bytes(), merged.to_bytes());
}

#[test]
fn a_fresh_measurement_of_a_changed_kernel_replaces_the_stale_entry_on_save() {
    let dir = scratch("stale");
    let path = dir.join("cache.tc");
    let mut old = TimingCache::new();
    old.insert(key(&h200(), tac(0)), entry(1, Some(1.0), 100));
    old.save(&path).unwrap();
    // A later build with a changed kernel (source hash 2) measures it again,
    // over fewer runs: its entry still replaces the stale one.
    let (mut new, _) = TimingCache::load(&path).unwrap();
    assert!(new.get(&key(&h200(), tac(0)), 2).is_none());
    new.insert(key(&h200(), tac(0)), entry(2, Some(9.0), 10));
    new.save(&path).unwrap();
    let (loaded, _) = TimingCache::load(&path).unwrap();
    assert_eq!(loaded.get(&key(&h200(), tac(0)), 2), Some(&entry(2, Some(9.0), 10)));
    assert!(loaded.get(&key(&h200(), tac(0)), 1).is_none());
    // A build that only loaded the old entry does not bring it back.
    let mut loaded_before = TimingCache::from_bytes(&old.to_bytes()).unwrap();
    loaded_before.save(&path).unwrap();
    let (loaded, _) = TimingCache::load(&path).unwrap();
    assert_eq!(loaded.get(&key(&h200(), tac(0)), 2), Some(&entry(2, Some(9.0), 10)));
}

/// Loads `bytes` through a file; returns the warning (there must be one).
fn load_warning(bytes: &[u8], path: &std::path::Path) -> String {
    std::fs::write(path, bytes).unwrap();
    let (cache, warning) = TimingCache::load(path).unwrap();
    assert!(cache.is_empty());
    warning.unwrap_or_else(|| panic!("no warning for {:?}", String::from_utf8_lossy(bytes)))
}

#[test]
fn corrupted_files_are_ignored_with_a_warning() {
    let dir = scratch("corrupted");
    let path = dir.join("bad.tc");
    let valid = sample().to_bytes();
    let expected = format!("warning: timing cache {} is corrupted (", path.display());

    // Every truncation of a valid file.
    for len in 0..valid.len() {
        assert!(TimingCache::from_bytes(&valid[..len]).is_err(), "truncated to {len} bytes");
    }
    assert!(load_warning(&valid[..valid.len() / 2], &path).starts_with(&expected));
    assert!(load_warning(&[], &path).ends_with("is corrupted (empty file); ignoring it"));

    // Every single flipped byte (bit 0 and bit 7).
    for i in 0..valid.len() {
        for bit in [0x01, 0x80] {
            let mut bad = valid.clone();
            bad[i] ^= bit;
            assert!(TimingCache::from_bytes(&bad).is_err(), "flipped byte {i} by {bit:#x}");
        }
    }
    let mut flipped = valid.clone();
    *flipped.last_mut().unwrap() ^= 1;
    assert!(load_warning(&flipped, &path).contains("checksum mismatch"));

    // Random bytes, with and without the magic word in front (xorshift, fixed seed).
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for round in 0..2000 {
        let len = (next() % 300) as usize;
        let mut bytes: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        if round % 2 == 1 {
            bytes.splice(0..0, format!("trtc-timing-cache {FORMAT_VERSION} crc32=").bytes());
        }
        assert!(TimingCache::from_bytes(&bytes).is_err());
    }
    assert!(load_warning(b"\x00\xffgarbage", &path).ends_with("is corrupted (bad magic); ignoring it"));

    // A checksum that matches a body that is not a valid cache.
    let body = "gpu\tsm\tdriver\tnvrtc\top\ttactic\tsource\tmedian_us\truns\nx\t90\n";
    let forged = format!("trtc-timing-cache {FORMAT_VERSION} crc32={:08x}\n{body}", crc32fast_hash(body.as_bytes()));
    assert!(load_warning(forged.as_bytes(), &path).contains("bad entry on line 3"));
    let nan = body.replace("x\t90\n", "g\t90\t1\t12.8\top\tt\t0000000000000001\tNaN\t3\n");
    let forged = format!("trtc-timing-cache {FORMAT_VERSION} crc32={:08x}\n{nan}", crc32fast_hash(nan.as_bytes()));
    assert!(load_warning(forged.as_bytes(), &path).contains("bad entry"));

    // Another format version.
    let text = String::from_utf8(valid.clone()).unwrap();
    // Version 1 keyed layers by Debug text; it is read as another version.
    let v1 = text.replacen(&format!("trtc-timing-cache {FORMAT_VERSION} "), "trtc-timing-cache 1 ", 1);
    assert_eq!(TimingCache::from_bytes(v1.as_bytes()).err(), Some(LoadError::Version(1)));
    assert_eq!(
        load_warning(v1.as_bytes(), &path),
        format!(
            "warning: timing cache {} has format version 1, this trtc reads version {FORMAT_VERSION}; ignoring it",
            path.display()
        )
    );

    // Saving over a corrupted file replaces it, with a warning.
    std::fs::write(&path, b"garbage").unwrap();
    let mut c = sample();
    let warning = c.save(&path).unwrap().unwrap();
    assert!(warning.ends_with("is corrupted (bad magic); overwriting it"), "{warning}");
    let (loaded, warning) = TimingCache::load(&path).unwrap();
    assert_eq!((loaded.to_bytes(), warning), (sample().to_bytes(), None));
}

/// CRC-32 (IEEE), bitwise, to forge checksums independently of the code under test.
fn crc32fast_hash(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= b as u32;
        for _ in 0..8 {
            crc = if crc & 1 == 1 { (crc >> 1) ^ 0xedb8_8320 } else { crc >> 1 };
        }
    }
    !crc
}

#[test]
fn fnv1a_matches_the_reference_values() {
    assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
    assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
    assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
}

#[test]
fn source_hash_covers_sources_and_launches() {
    let a = candidate(tac(0), "src");
    assert_eq!(source_hash(&a), source_hash(&a.clone()));
    assert_ne!(source_hash(&a), source_hash(&candidate(tac(0), "src ")));
    let mut b = a.clone();
    b.launches[0].block = [128, 1, 1];
    assert_ne!(source_hash(&a), source_hash(&b));
    let mut c = a.clone();
    c.launches[0].kernel.entry = "k2".into();
    assert_ne!(source_hash(&a), source_hash(&c));
    // The tactic name is in the key, not the hash.
    assert_eq!(source_hash(&a), source_hash(&candidate(tac(1), "src")));
}

#[test]
fn op_signature_has_op_dtypes_and_shapes() {
    let op = Op::from(Unary::new(UnaryKind::Relu));
    let x = TensorType::new(DType::F16, vec![1, 64, 56, 56]);
    let io = LayerIo { op: &op, inputs: vec![Some(&x), None], outputs: vec![&x] };
    let sig = op_signature(&io);
    let code = format!("{:016x}", trtc::tuning::fnv1a64(&op.encoded()));
    assert_eq!(
        sig,
        format!("Relu e{}:{code} in=[f16[1,64,56,56],-] out=[f16[1,64,56,56]]", trtc_runtime::engine::FORMAT_VERSION)
    );
    let y = TensorType::new(DType::F32, vec![1, 64, 56, 56]);
    assert_ne!(sig, op_signature(&LayerIo { op: &op, inputs: vec![Some(&y), None], outputs: vec![&y] }));
    // Any attribute changes the key, not only the op's name.
    let gelu = Op::from(Unary::new(UnaryKind::Gelu));
    let tanh = Op::from(Unary::new(UnaryKind::GeluTanh));
    let key = |op: &Op| op_signature(&LayerIo { op, inputs: vec![Some(&x)], outputs: vec![&x] });
    assert_ne!(key(&gelu), key(&tanh));
    let clip = |max: f64| Op::from(trtc_runtime::ops::elementwise::Clip { min: Some(0.0), max: Some(max) });
    assert_ne!(key(&clip(6.0)), key(&clip(6.5)));
    assert_eq!(key(&clip(6.0)), key(&clip(6.0)));
}

#[test]
fn level_0_takes_the_heuristic_without_timing() {
    let cands = candidates(5);
    let mut cache = TimingCache::new();
    let choice = choose(&layer(&cands), &h200(), &mut cache, Policy { opt_level: 0, error_on_cache_miss: true }, no_gpu).unwrap();
    assert_eq!((choice.index, choice.tactic.clone(), choice.time_us, choice.fallback), (0, tac(0), None, None));
    assert!(cache.is_empty());
    // Out-of-range levels are errors.
    assert!(choose(&layer(&cands), &h200(), &mut cache, policy(6), no_gpu).is_err());
}

#[test]
fn each_level_considers_its_number_of_candidates() {
    let n = 100;
    let cands = candidates(n);
    // The fastest is the last candidate; times decrease with the index.
    let times: Vec<Option<f64>> = (0..n).map(|i| Some(1000.0 - i as f64)).collect();
    for level in 1..=5u8 {
        let calls = RefCell::new(vec![]);
        let mut cache = TimingCache::new();
        let choice = choose(&layer(&cands), &h200(), &mut cache, policy(level), fake(&times, &calls)).unwrap();
        let considered = CANDIDATES_PER_LEVEL[level as usize].min(n);
        assert_eq!(calls.borrow().len(), considered, "level {level}");
        assert_eq!(calls.borrow()[0], tac(0), "the heuristic is always timed");
        assert_eq!(choice.index, considered - 1);
        assert_eq!(choice.time_us, Some(1000.0 - (considered - 1) as f64));
        assert_eq!(choice.runner_up, Some((tac(considered - 2), 1000.0 - (considered - 2) as f64)));
        assert_eq!(
            (choice.considered, choice.measured, choice.cache_hits, choice.from_cache),
            (considered, considered, 0, false)
        );
        assert_eq!(cache.len(), considered);
    }
    assert_eq!(CANDIDATES_PER_LEVEL, [1, 4, 8, 16, 64, usize::MAX]);
}

#[test]
fn a_cache_hit_is_not_measured_and_decides_the_same_way() {
    let cands = candidates(6);
    let times = [Some(5.0), Some(3.0), None, Some(4.0), Some(1.0), Some(2.0)];
    let calls = RefCell::new(vec![]);
    let mut cache = TimingCache::new();
    let first = choose(&layer(&cands), &h200(), &mut cache, policy(2), fake(&times, &calls)).unwrap();
    assert_eq!((first.tactic.clone(), first.time_us), (tac(4), Some(1.0)));
    assert_eq!(first.runner_up, Some((tac(5), 2.0)));
    assert_eq!(calls.borrow().len(), 6);
    // The failed candidate is remembered as "could not run".
    assert_eq!(cache.get(&key(&h200(), tac(2)), source_hash(&cands[2])).unwrap().median_us, None);

    // A warm cache (through the file format) needs no measurement at all,
    // even with --error-on-cache-miss, and gives the same choice.
    let mut warm = TimingCache::from_bytes(&cache.to_bytes()).unwrap();
    let strict = Policy { opt_level: 2, error_on_cache_miss: true };
    let second = choose(&layer(&cands), &h200(), &mut warm, strict, |_: &Candidate| -> anyhow::Result<Option<Timing>> {
        panic!("measured a cached candidate")
    })
    .unwrap();
    assert_eq!(second, Choice { from_cache: true, cache_hits: 6, measured: 0, ..first });
}

#[test]
fn error_on_cache_miss_names_the_layer_and_tactic() {
    let cands = candidates(4);
    let mut cache = TimingCache::new();
    for c in &cands[..3] {
        cache.insert(key(&h200(), &c.tactic), entry(source_hash(c), Some(1.0), 10));
    }
    let strict = Policy { opt_level: 1, error_on_cache_miss: true };
    let calls = RefCell::new(vec![]);
    let err = choose(&layer(&cands), &h200(), &mut cache, strict, fake(&[Some(1.0); 4], &calls)).unwrap_err().to_string();
    assert!(
        err.contains("conv1") && err.contains(&format!("tactic {}", tac(3))) && err.contains("--error-on-cache-miss"),
        "{err}"
    );
    assert!(calls.borrow().is_empty(), "nothing is measured");
}

#[test]
fn without_a_gpu_a_miss_falls_back_to_the_heuristic() {
    let cands = candidates(4);
    let mut cache = TimingCache::new();
    // t1 is cached and fastest, but t2 and t3 cannot be timed.
    cache.insert(key(&h200(), tac(0)), entry(source_hash(&cands[0]), Some(9.0), 10));
    cache.insert(key(&h200(), tac(1)), entry(source_hash(&cands[1]), Some(1.0), 10));
    let choice = choose(&layer(&cands), &h200(), &mut cache, policy(3), no_gpu).unwrap();
    assert_eq!((choice.index, choice.time_us, choice.from_cache), (0, Some(9.0), true));
    let why = choice.fallback.unwrap();
    assert!(why.contains(&format!("could not time tactic {}", tac(2))) && why.contains("no CUDA device"), "{why}");
    assert_eq!(cache.len(), 2, "nothing is added");

    // No candidate could run at all: the heuristic again.
    let calls = RefCell::new(vec![]);
    let choice = choose(&layer(&cands), &h200(), &mut TimingCache::new(), policy(3), fake(&[None; 4], &calls)).unwrap();
    assert_eq!((choice.index, choice.time_us), (0, None));
    assert!(choice.fallback.unwrap().contains("no candidate could run"));
}

#[test]
fn ties_go_to_the_earlier_candidate() {
    let cands = candidates(5);
    let calls = RefCell::new(vec![]);
    let times = [Some(3.0), Some(2.0), Some(2.0), Some(2.0 + 1e-12), Some(2.0)];
    let choice = choose(&layer(&cands), &h200(), &mut TimingCache::new(), policy(5), fake(&times, &calls)).unwrap();
    assert_eq!(choice.tactic, tac(1));
    assert_eq!(choice.runner_up, Some((tac(2), 2.0)));
    // A single candidate is never timed.
    let one = candidates(1);
    let choice =
        choose(&layer(&one), &h200(), &mut TimingCache::new(), Policy { opt_level: 5, error_on_cache_miss: true }, no_gpu)
            .unwrap();
    assert_eq!((choice.tactic.clone(), choice.time_us), (tac(0), None));
}

#[test]
fn a_changed_source_invalidates_its_entry() {
    let cands = candidates(2);
    let mut cache = TimingCache::new();
    cache.insert(key(&h200(), tac(0)), entry(source_hash(&cands[0]), Some(1.0), 10));
    cache.insert(key(&h200(), tac(1)), entry(source_hash(&cands[1]), Some(2.0), 10));
    // t1's kernel changed: it is measured again, and its new time replaces the old one.
    let mut changed = cands.clone();
    changed[1] = candidate(tac(1), "__global__ void k() { /* faster */ }");
    let calls = RefCell::new(vec![]);
    let choice = choose(&layer(&changed), &h200(), &mut cache, policy(1), fake(&[None, Some(0.5)], &calls)).unwrap();
    assert_eq!(*calls.borrow(), [tac(1)]);
    assert_eq!((choice.tactic.clone(), choice.from_cache, choice.cache_hits), (tac(1), false, 1));
    assert_eq!(cache.len(), 2);
    assert!(cache.get(&key(&h200(), tac(1)), source_hash(&cands[1])).is_none());
    assert_eq!(cache.get(&key(&h200(), tac(1)), source_hash(&changed[1])).unwrap().median_us, Some(0.5));
}

#[test]
fn entries_of_another_gpu_are_kept_but_not_used() {
    let dir = scratch("other_gpu");
    let path = dir.join("cache.tc");
    let cands = candidates(2);
    let mut cache = TimingCache::new();
    for (i, c) in cands.iter().enumerate() {
        cache.insert(key(&a100(), &c.tactic), entry(source_hash(c), Some(i as f64), 10));
    }
    cache.save(&path).unwrap();

    let (mut cache, _) = TimingCache::load(&path).unwrap();
    assert_eq!(cache.devices(), vec![a100()]);
    let strict = Policy { opt_level: 1, error_on_cache_miss: true };
    assert!(choose(&layer(&cands), &h200(), &mut cache, strict, no_gpu).is_err(), "the A100's times are not the H200's");
    let other_driver = Device { driver: 12090, ..a100() };
    assert!(choose(&layer(&cands), &other_driver, &mut cache, strict, no_gpu).is_err());
    let other_nvrtc = Device { nvrtc: (12, 9), ..a100() };
    assert!(choose(&layer(&cands), &other_nvrtc, &mut cache, strict, no_gpu).is_err());
    assert_eq!(choose(&layer(&cands), &a100(), &mut cache, strict, no_gpu).unwrap().tactic, tac(0));

    let calls = RefCell::new(vec![]);
    let choice = choose(&layer(&cands), &h200(), &mut cache, policy(1), fake(&[Some(3.0), Some(2.0)], &calls)).unwrap();
    assert_eq!((choice.tactic.clone(), choice.measured), (tac(1), 2));
    cache.save(&path).unwrap();
    let (loaded, _) = TimingCache::load(&path).unwrap();
    assert_eq!(loaded.len(), 4, "both GPUs' entries are in the file");
    assert_eq!(loaded.devices(), vec![a100(), h200()]);
}
