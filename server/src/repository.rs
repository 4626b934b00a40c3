//! The model repository, in Triton's layout: `DIR/<model>/config.pbtxt`
//! (optional) and `DIR/<model>/<version>/model.engine`, one folder per
//! numbered version. Each served version is loaded into a [`LoadedModel`]
//! with its scheduler; a model or version that fails to load is kept with
//! its reason (readiness and the repository index report it) and does not
//! stop the others. A scheduler stops, after its queued requests, when the
//! last reference to its model is dropped.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use std::time::Instant;

use tokio::sync::oneshot;
use trtc_runtime::{Engine, Tensor};

use crate::metrics::{Metrics, ModelMetrics};
use crate::model_config::{InstanceGroup, InstanceKind, ModelConfig, VersionPolicy};
use crate::protocol::{Datatype, ErrorKind, ServeError, ServeResult};
use crate::scheduler::{Batching, Job, Outputs, Placement, Scheduler};
use crate::shapes::{EngineShapes, InputSpec};

/// A model version ready to serve.
pub struct LoadedModel {
    pub name: String,
    pub version: u64,
    /// Completed from the engine: every input and output is listed.
    pub config: ModelConfig,
    /// The instance groups as resolved (no `KIND_AUTO` left).
    pub instance_groups: Vec<InstanceGroup>,
    pub engine: Arc<Engine>,
    /// What each input takes in a request, in the engine's input order.
    pub inputs: Vec<InputSpec>,
    pub scheduler: Scheduler,
    pub metrics: ModelMetrics,
}

impl LoadedModel {
    /// What a request's input must be, or the error naming the model's.
    pub fn input(&self, name: &str) -> ServeResult<&InputSpec> {
        self.inputs.iter().find(|b| b.name == name).ok_or_else(|| {
            let names: Vec<&str> = self.inputs.iter().map(|b| b.name.as_str()).collect();
            ServeError::invalid(format!("unknown input '{}'; the model's inputs are {names:?}", printable(name)))
        })
    }

    /// Checks a request's requested outputs, each of which must be the
    /// model's, and returns the positions of the first request of each name:
    /// a name may come more than once, and Triton answers it once.
    pub fn check_outputs<'a>(&self, names: impl IntoIterator<Item = &'a str>) -> ServeResult<Vec<usize>> {
        let mut firsts: Vec<(usize, &str)> = Vec::new();
        for (i, name) in names.into_iter().enumerate() {
            if !self.engine.outputs().iter().any(|b| b.name == name) {
                let names: Vec<&str> = self.engine.outputs().iter().map(|b| b.name.as_str()).collect();
                return Err(ServeError::invalid(format!(
                    "unknown output '{}'; the model's outputs are {names:?}",
                    printable(name)
                )));
            }
            if !firsts.iter().any(|&(_, seen)| seen == name) {
                firsts.push((i, name));
            }
        }
        Ok(firsts.into_iter().map(|(i, _)| i).collect())
    }

    /// Queues a request's decoded inputs (each checked by
    /// [`crate::protocol::check_input`]) and waits for the outputs. Every
    /// input must be given once; when the model batches, all with the same
    /// number of rows.
    pub async fn infer(&self, mut inputs: Vec<(String, Tensor)>) -> ServeResult<Outputs> {
        for (i, (name, _)) in inputs.iter().enumerate() {
            if inputs[..i].iter().any(|(n, _)| n == name) {
                return Err(ServeError::invalid(format!("input '{}' is given twice", printable(name))));
            }
        }
        if let Some(missing) = self.inputs.iter().find(|b| !inputs.iter().any(|(n, _)| *n == b.name)) {
            return Err(ServeError::invalid(format!("missing input '{}'", missing.name)));
        }
        // The engine's input order, which batches are concatenated in.
        inputs.sort_by_key(|(n, _)| self.inputs.iter().position(|b| b.name == *n));
        let rows = if self.config.max_batch_size > 0 {
            let first = |t: &Tensor| t.shape().first().copied().unwrap_or(0);
            let rows = first(&inputs[0].1);
            if let Some((name, t)) = inputs.iter().find(|(_, t)| first(t) != rows) {
                return Err(ServeError::invalid(format!(
                    "input '{name}' has a batch of {} where '{}' has {rows}: all inputs must have the same batch size",
                    first(t),
                    inputs[0].0
                )));
            }
            rows
        } else {
            1
        };
        let (reply, answer) = oneshot::channel();
        self.scheduler.submit(Job { inputs, rows, enqueued: Instant::now(), reply })?;
        answer.await.map_err(|_| ServeError::internal("the instance stopped before answering"))?
    }
}

/// A version's state: ready, or why not.
pub enum VersionState {
    Ready(Arc<LoadedModel>),
    Unavailable(String),
}

/// A model of the repository: its versions by number, or the reason none
/// could be considered (an unreadable or invalid `config.pbtxt`).
pub struct ModelEntry {
    pub name: String,
    pub versions: BTreeMap<u64, VersionState>,
    pub error: Option<String>,
}

impl ModelEntry {
    /// The loaded versions, lowest number first.
    pub fn ready(&self) -> impl DoubleEndedIterator<Item = &Arc<LoadedModel>> {
        self.versions.values().filter_map(|v| match v {
            VersionState::Ready(m) => Some(m),
            VersionState::Unavailable(_) => None,
        })
    }

    pub fn is_ready(&self) -> bool {
        self.error.is_none() && !self.versions.is_empty() && self.versions.values().all(|v| matches!(v, VersionState::Ready(_)))
    }
}

pub struct Repository {
    pub models: BTreeMap<String, ModelEntry>,
}

/// What loading prints: one line per problem, for the server's log.
pub type LoadLog = Vec<String>;

impl Repository {
    /// Loads every model folder under `dir`. Fails only when `dir` itself
    /// cannot be read; problems with single models are kept in their entries
    /// and logged.
    pub fn load(dir: &Path, metrics: &Metrics) -> Result<(Repository, LoadLog), String> {
        let read = std::fs::read_dir(dir).map_err(|e| format!("cannot read the model repository {}: {e}", dir.display()))?;
        let mut names = Vec::new();
        for entry in read {
            let entry = entry.map_err(|e| format!("cannot read the model repository {}: {e}", dir.display()))?;
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                if let Some(n) = entry.file_name().to_str() {
                    if !n.starts_with('.') {
                        names.push(n.to_string());
                    }
                }
            }
        }
        names.sort();
        let mut log = Vec::new();
        let mut models = BTreeMap::new();
        for name in names {
            let entry = load_model(&dir.join(&name), &name, metrics, &mut log);
            models.insert(name, entry);
        }
        Ok((Repository { models }, log))
    }

    /// Serves one engine file as version 1 of a model named after its stem.
    pub fn single(engine: &Path, metrics: &Metrics) -> Result<Repository, String> {
        let name = engine
            .file_stem()
            .and_then(|s| s.to_str())
            .filter(|s| !s.is_empty())
            .ok_or_else(|| format!("{}: the engine's file name gives no model name", engine.display()))?
            .to_string();
        let state = load_version(engine, &name, 1, ModelConfig::empty(&name), metrics);
        if let VersionState::Unavailable(e) = &state {
            return Err(e.clone());
        }
        let entry = ModelEntry { name: name.clone(), versions: BTreeMap::from([(1, state)]), error: None };
        Ok(Repository { models: BTreeMap::from([(name, entry)]) })
    }

    /// The versions a model's metadata lists: the one a request named, or
    /// every ready one.
    pub fn listed_versions(&self, m: &LoadedModel, version: Option<&str>) -> Vec<String> {
        if version.is_some_and(|v| !v.is_empty()) {
            return vec![m.version.to_string()];
        }
        self.models.get(&m.name).map_or_else(Vec::new, |entry| entry.ready().map(|m| m.version.to_string()).collect())
    }

    /// Strict readiness, as Triton's default: every model's every version
    /// loaded.
    pub fn is_ready(&self) -> bool {
        self.models.values().all(ModelEntry::is_ready)
    }

    /// The loaded versions that a statistics request names, as Triton
    /// answers it: every model's without a model name, every version of
    /// the model without a version, else that one version. An unknown model
    /// or version is an invalid argument here (400, INVALID_ARGUMENT), as
    /// Triton answers statistics requests, not "not found".
    pub fn loaded(&self, model: Option<&str>, version: Option<&str>) -> ServeResult<Vec<Arc<LoadedModel>>> {
        match (model.filter(|m| !m.is_empty()), version.filter(|v| !v.is_empty())) {
            (None, _) => Ok(self.models.values().flat_map(ModelEntry::ready).cloned().collect()),
            (Some(m), Some(v)) => match self.get(m, Some(v)) {
                Ok(loaded) => Ok(vec![loaded]),
                Err(e) if e.kind == ErrorKind::NotFound => Err(ServeError::invalid(e.message)),
                Err(e) => Err(e),
            },
            (Some(m), None) => match self.models.get(m) {
                Some(entry) => Ok(entry.ready().cloned().collect()),
                None => Err(ServeError::invalid(format!("unknown model '{}'", printable(m)))),
            },
        }
    }

    /// The model version a request names: the given version, or the highest
    /// ready one.
    pub fn get(&self, model: &str, version: Option<&str>) -> ServeResult<Arc<LoadedModel>> {
        let Some(entry) = self.models.get(model) else {
            return Err(ServeError::not_found(format!("unknown model '{}'", printable(model))));
        };
        if let Some(e) = &entry.error {
            return Err(ServeError::unavailable(format!("model '{model}' is not available: {e}")));
        }
        match version.filter(|v| !v.is_empty()) {
            Some(v) => {
                let n: u64 = v.parse().map_err(|_| ServeError::invalid(format!("'{}' is not a model version", printable(v))))?;
                match entry.versions.get(&n) {
                    Some(VersionState::Ready(m)) => Ok(m.clone()),
                    Some(VersionState::Unavailable(e)) => {
                        Err(ServeError::unavailable(format!("version {n} of model '{model}' is not available: {e}")))
                    }
                    None => Err(ServeError::not_found(format!("model '{model}' has no version {n}"))),
                }
            }
            None => entry
                .ready()
                .next_back()
                .cloned()
                .ok_or_else(|| ServeError::unavailable(format!("model '{model}' has no version ready"))),
        }
    }
}

/// A name from a request, with control characters escaped for messages.
pub fn printable(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars().take(200) {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

fn load_model(dir: &Path, name: &str, metrics: &Metrics, log: &mut LoadLog) -> ModelEntry {
    let mut entry = ModelEntry { name: name.to_string(), versions: BTreeMap::new(), error: None };
    let config_path = dir.join("config.pbtxt");
    let config = if config_path.exists() {
        let parsed = trtc_runtime::file::read(&config_path)
            .map_err(|e| format!("{}: {e}", config_path.display()))
            .and_then(|b| String::from_utf8(b).map_err(|_| format!("{}: not UTF-8 text", config_path.display())))
            .and_then(|text| ModelConfig::parse(&config_path, &text, name));
        match parsed {
            Ok((c, warnings)) => {
                log.extend(warnings.into_iter().map(|w| format!("warning: {w}")));
                c
            }
            Err(e) => {
                log.push(format!("model '{name}': {e}"));
                entry.error = Some(e);
                return entry;
            }
        }
    } else {
        ModelConfig::empty(name)
    };
    let present = match numbered_folders(dir) {
        Ok(p) => p,
        Err(e) => {
            log.push(format!("model '{name}': {e}"));
            entry.error = Some(e);
            return entry;
        }
    };
    let selected = config.version_policy.select(&present);
    if selected.is_empty() {
        let e = match &config.version_policy {
            VersionPolicy::Specific(v) => format!("none of the versions {v:?} of the version policy is in {}", dir.display()),
            _ => format!("no numbered version folder in {}", dir.display()),
        };
        log.push(format!("model '{name}': {e}"));
        entry.error = Some(e);
        return entry;
    }
    for v in selected {
        let path = dir.join(v.to_string()).join(&config.default_model_filename);
        let state = load_version(&path, name, v, config.clone(), metrics);
        if let VersionState::Unavailable(e) = &state {
            log.push(format!("model '{name}' version {v}: {e}"));
        }
        entry.versions.insert(v, state);
    }
    entry
}

/// The numbered subfolders of a model folder.
fn numbered_folders(dir: &Path) -> Result<Vec<u64>, String> {
    let read = std::fs::read_dir(dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
    let mut v = Vec::new();
    for entry in read.flatten() {
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        if let (true, Some(Ok(n))) = (is_dir, entry.file_name().to_str().map(str::parse::<u64>)) {
            v.push(n);
        }
    }
    Ok(v)
}

fn load_version(path: &Path, name: &str, version: u64, mut config: ModelConfig, metrics: &Metrics) -> VersionState {
    let loaded = (|| -> Result<LoadedModel, String> {
        let engine = Arc::new(Engine::load(path).map_err(|e| {
            // I/O errors name the file already; format errors do not.
            let e = e.to_string();
            let p = path.display().to_string();
            if e.starts_with(&p) {
                e
            } else {
                format!("{p}: {e}")
            }
        })?);
        for b in engine.inputs().iter().chain(engine.outputs()) {
            if Datatype::of(b.ty.dtype) == Datatype::Bytes {
                return Err(format!(
                    "{}: binding '{}' is {}, which the inference protocol has no datatype for (export the model with it cast to a wider type at the boundary)",
                    path.display(),
                    b.name,
                    b.ty.dtype
                ));
            }
        }
        let shapes = EngineShapes::of(&engine);
        config.complete(&shapes).map_err(|e| format!("{}: {e}", path.display()))?;
        let inputs = config.input_specs(&shapes);
        let groups = resolve_instance_groups(&config.instance_groups, &engine)?;
        let placements: Vec<Placement> = groups.iter().flat_map(placements).collect();
        let model_metrics = metrics.model(name, version);
        let policy = config.dynamic_batching.as_ref().map(|d| d.queue.clone()).unwrap_or_default();
        let batching = config.dynamic_batching.as_ref().filter(|_| config.max_batch_size > 0).map(|d| {
            let mut preferred = d.preferred_batch_size.clone();
            preferred.sort_unstable();
            Batching {
                max_batch_size: config.max_batch_size,
                preferred,
                max_queue_delay: std::time::Duration::from_micros(d.max_queue_delay_us),
            }
        });
        let scheduler = Scheduler::start(engine.clone(), &placements, policy, batching, model_metrics.clone())?;
        Ok(LoadedModel {
            name: name.to_string(),
            version,
            config,
            instance_groups: groups,
            engine,
            inputs,
            scheduler,
            metrics: model_metrics,
        })
    })();
    match loaded {
        Ok(m) => VersionState::Ready(Arc::new(m)),
        Err(e) => VersionState::Unavailable(e),
    }
}

fn placements(g: &InstanceGroup) -> Vec<Placement> {
    match g.kind {
        InstanceKind::Gpu => g.gpus.iter().flat_map(|&d| std::iter::repeat_n(Placement::Gpu(d), g.count)).collect(),
        _ => vec![Placement::Cpu; g.count],
    }
}

/// Replaces `KIND_AUTO` (and an absent `instance_group`) by GPU 0 when the
/// engine has kernels that run on it, the CPU otherwise, and a `KIND_GPU`
/// group without `gpus` by every GPU.
fn resolve_instance_groups(groups: &[InstanceGroup], engine: &Engine) -> Result<Vec<InstanceGroup>, String> {
    let default = [InstanceGroup { count: 1, kind: InstanceKind::Auto, gpus: Vec::new() }];
    let groups = if groups.is_empty() { &default[..] } else { groups };
    let gpu_fits =
        || engine.kernels().is_some() && engine.cuda_with_planner(0, std::sync::Arc::new(trtc_kernels::FamilyPlanner)).is_ok();
    groups
        .iter()
        .map(|g| {
            let mut g = g.clone();
            match g.kind {
                InstanceKind::Auto if gpu_fits() => {
                    g.kind = InstanceKind::Gpu;
                    g.gpus = vec![0];
                }
                InstanceKind::Auto => g.kind = InstanceKind::Cpu,
                InstanceKind::Gpu if g.gpus.is_empty() => {
                    let n = trtc_runtime::executor::cuda::device_count().map_err(|e| format!("KIND_GPU: {e}"))?;
                    if n == 0 {
                        return Err("KIND_GPU: the driver lists no GPU".to_string());
                    }
                    g.gpus = (0..n).collect();
                }
                _ => {}
            }
            Ok(g)
        })
        .collect()
}
