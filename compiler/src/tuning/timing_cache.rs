//! The timing cache: measured tactic times, kept in a small checksummed
//! text file (the format is described in the [module docs](super)).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;

use super::key::{Device, TimingKey};

/// The first word of a timing cache file.
const MAGIC: &str = "trtc-timing-cache";
/// The format version this trtc reads and writes. Version 2 keys layers by
/// their engine encoding instead of their Debug text.
pub const FORMAT_VERSION: u32 = 2;
/// The column header, the first line under the checksum.
const COLUMNS: &str = "gpu\tsm\tdriver\tnvrtc\top\ttactic\tsource\tmedian_us\truns";

/// One measured tactic.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    /// The [`source_hash`](super::source_hash) of the candidate that was timed.
    pub source_hash: u64,
    /// The median time in microseconds; `None` when the candidate could not
    /// run (it failed to compile, spilled, or its launch failed), which is
    /// remembered too so that a warm cache never needs the GPU.
    pub median_us: Option<f64>,
    /// How many timed runs the median is over (0 when it could not run).
    pub runs: u32,
}

/// Why a timing cache file was not read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LoadError {
    /// Bad magic, checksum, encoding, or a truncated file.
    Corrupted(String),
    /// A valid header with another format version.
    Version(u32),
}

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LoadError::Corrupted(why) => write!(f, "is corrupted ({why})"),
            LoadError::Version(v) => write!(f, "has format version {v}, this trtc reads version {FORMAT_VERSION}"),
        }
    }
}

/// Measured times of tactics, for any number of GPUs, keyed by
/// [`TimingKey`]; see the [module docs](super).
#[derive(Clone, Debug, Default)]
pub struct TimingCache {
    entries: BTreeMap<TimingKey, Entry>,
    /// The keys inserted by this process (not loaded): on a source-hash
    /// conflict with the file at save time, these win.
    fresh: BTreeSet<TimingKey>,
}

impl TimingCache {
    /// An empty cache.
    pub fn new() -> TimingCache {
        TimingCache::default()
    }

    /// The number of entries, for every device.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the cache has no entry.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entry for `key`, if there is one and it was measured on a
    /// candidate with this source hash (an entry for a changed kernel is
    /// never used).
    pub fn get(&self, key: &TimingKey, source_hash: u64) -> Option<&Entry> {
        self.entries.get(key).filter(|e| e.source_hash == source_hash)
    }

    /// Records a measurement, replacing any entry for the same key.
    pub fn insert(&mut self, key: TimingKey, entry: Entry) {
        self.fresh.insert(key.clone());
        self.entries.insert(key, entry);
    }

    /// Every entry, in key order.
    pub fn entries(&self) -> impl Iterator<Item = (&TimingKey, &Entry)> {
        self.entries.iter()
    }

    /// The devices that have entries, in order (e.g. to pick the target of
    /// a build on a machine without a GPU).
    pub fn devices(&self) -> Vec<Device> {
        let set: BTreeSet<&Device> = self.entries.keys().map(|k| &k.device).collect();
        set.into_iter().cloned().collect()
    }

    /// Merges `newer` (typically the file as another build left it) into
    /// this cache. For a key both have: if the source hashes differ, the
    /// entry this process measured wins, else the newer one (the kernel
    /// changed, and the latest measurement is the relevant one); if they are
    /// equal, the entry over more runs wins, then the smaller time (a
    /// measurement beats "could not run"); equal by both, they are the same
    /// entry. So for one kernel source the result depends only on the
    /// contents, not on the order in which builds saved.
    pub fn merge(&mut self, newer: TimingCache) {
        for (key, theirs) in newer.entries {
            match self.entries.get_mut(&key) {
                None => {
                    self.entries.insert(key, theirs);
                }
                Some(ours) => {
                    let keep = if ours.source_hash != theirs.source_hash {
                        self.fresh.contains(&key)
                    } else {
                        let by_runs = theirs.runs.cmp(&ours.runs);
                        by_runs.then_with(|| cmp_time(ours.median_us, theirs.median_us)).is_le()
                    };
                    if !keep {
                        *ours = theirs;
                    }
                }
            }
        }
    }

    /// The file's bytes: deterministic, the same entries give the same bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut body = format!("{COLUMNS}\n");
        for (k, e) in &self.entries {
            let d = &k.device;
            let time = e.median_us.map_or_else(|| "-".to_string(), |t| t.to_string());
            let _ = writeln!(
                body,
                "{}\t{}\t{}\t{}.{}\t{}\t{}\t{:016x}\t{}\t{}",
                escape(&d.gpu),
                d.sm,
                d.driver,
                d.nvrtc.0,
                d.nvrtc.1,
                escape(&k.op),
                escape(&k.tactic),
                e.source_hash,
                time,
                e.runs
            );
        }
        let crc = crc32fast::hash(body.as_bytes());
        format!("{MAGIC} {FORMAT_VERSION} crc32={crc:08x}\n{body}").into_bytes()
    }

    /// Parses a file's bytes; never panics, whatever they are.
    pub fn from_bytes(bytes: &[u8]) -> Result<TimingCache, LoadError> {
        let corrupted = |why: &str| LoadError::Corrupted(why.to_string());
        if !bytes.starts_with(MAGIC.as_bytes()) {
            return Err(corrupted(if bytes.is_empty() { "empty file" } else { "bad magic" }));
        }
        let newline = bytes.iter().position(|&b| b == b'\n').ok_or_else(|| corrupted("truncated header"))?;
        let header = std::str::from_utf8(&bytes[..newline]).map_err(|_| corrupted("bad header"))?;
        let body = &bytes[newline + 1..];
        let mut words = header.split(' ');
        let (magic, version, crc) = (words.next(), words.next(), words.next());
        let version = version.and_then(|v| v.parse::<u32>().ok()).filter(|_| magic == Some(MAGIC));
        let version = version.ok_or_else(|| corrupted("bad header"))?;
        if version != FORMAT_VERSION {
            return Err(LoadError::Version(version));
        }
        let crc = crc
            .and_then(|c| c.strip_prefix("crc32="))
            .filter(|c| c.len() == 8 && words.next().is_none())
            .and_then(|c| u32::from_str_radix(c, 16).ok())
            .ok_or_else(|| corrupted("bad header"))?;
        if crc32fast::hash(body) != crc {
            return Err(corrupted("checksum mismatch"));
        }
        let body = std::str::from_utf8(body).map_err(|_| corrupted("not UTF-8"))?;
        let lines = body.strip_suffix('\n').ok_or_else(|| corrupted("truncated entry"))?;
        let mut lines = lines.split('\n');
        if lines.next() != Some(COLUMNS) {
            return Err(corrupted("bad column header"));
        }
        let mut cache = TimingCache::new();
        for (i, line) in lines.enumerate() {
            let (key, entry) = parse_entry(line).ok_or_else(|| LoadError::Corrupted(format!("bad entry on line {}", i + 3)))?;
            if cache.entries.insert(key, entry).is_some() {
                return Err(LoadError::Corrupted(format!("duplicate entry on line {}", i + 3)));
            }
        }
        Ok(cache)
    }

    /// Loads a cache file. A missing file is an empty cache; a corrupted
    /// one, or one of another format version, is an empty cache plus the
    /// warning the caller prints. Only I/O errors other than "not found"
    /// (e.g. permission denied) are errors.
    pub fn load(path: &Path) -> std::io::Result<(TimingCache, Option<String>)> {
        match trtc_runtime::file::read(path) {
            Err(e) if e.error.kind() == std::io::ErrorKind::NotFound => Ok((TimingCache::new(), None)),
            Err(e) => Err(e.error),
            Ok(bytes) => Ok(match TimingCache::from_bytes(&bytes) {
                Ok(cache) => (cache, None),
                Err(e) => (TimingCache::new(), Some(format!("warning: timing cache {} {e}; ignoring it", path.display()))),
            }),
        }
    }

    /// Saves the cache, merged (see [`merge`](Self::merge)) with what the
    /// file holds now, since another build may have written it meanwhile;
    /// this cache becomes the merged one. The file is replaced atomically (a
    /// temporary file in the same directory, then a rename), so a reader
    /// never sees half a file. Returns a warning when the file on disk was
    /// unreadable as a cache and is overwritten.
    pub fn save(&mut self, path: &Path) -> std::io::Result<Option<String>> {
        let (disk, warning) = TimingCache::load(path)?;
        let warning = warning.map(|w| w.replace("; ignoring it", "; overwriting it"));
        self.merge(disk);
        let written = trtc_runtime::file::write(path, &self.to_bytes()).map_err(|e| e.error);
        written.map(|()| warning)
    }
}

/// Orders times, smaller first, "could not run" (`None`) last.
fn cmp_time(a: Option<f64>, b: Option<f64>) -> std::cmp::Ordering {
    match (a, b) {
        (Some(a), Some(b)) => a.total_cmp(&b),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => std::cmp::Ordering::Equal,
    }
}

/// One entry line: `gpu sm driver nvrtc op tactic source median_us runs`,
/// tab-separated; `None` for anything malformed.
fn parse_entry(line: &str) -> Option<(TimingKey, Entry)> {
    let f: Vec<&str> = line.split('\t').collect();
    let [gpu, sm, driver, nvrtc, op, tactic, source, time, runs] = f[..] else { return None };
    let (major, minor) = nvrtc.split_once('.')?;
    let device = Device {
        gpu: unescape(gpu)?,
        sm: sm.parse().ok()?,
        driver: driver.parse().ok()?,
        nvrtc: (major.parse().ok()?, minor.parse().ok()?),
    };
    let median_us = match time {
        "-" => None,
        t => Some(t.parse::<f64>().ok().filter(|t| t.is_finite() && *t >= 0.0)?),
    };
    let source_hash = if source.len() == 16 { u64::from_str_radix(source, 16).ok()? } else { return None };
    let entry = Entry { source_hash, median_us, runs: runs.parse().ok()? };
    Some((TimingKey { device, op: unescape(op)?, tactic: unescape(tactic)? }, entry))
}

/// Escapes the characters that separate fields and lines (and the escape).
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c => out.push(c),
        }
    }
    out
}

/// Inverts [`escape`]; `None` for an unknown or unfinished escape.
fn unescape(s: &str) -> Option<String> {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        out.push(match c {
            '\\' => match chars.next()? {
                '\\' => '\\',
                't' => '\t',
                'n' => '\n',
                'r' => '\r',
                _ => return None,
            },
            c => c,
        });
    }
    Some(out)
}
