//! A model's configuration, Triton's `ModelConfig` restricted to what trtc
//! serves: read from `config.pbtxt` (the typed reading of a [`pbtxt`] tree),
//! or completed from the engine's bindings when the file is absent or leaves
//! fields out, like Triton's auto-complete for TensorRT plans.
//!
//! Fields trtc does not act on are reported as warnings, fields of the wrong
//! kind or value are errors naming the file, line and field.

use std::path::Path;

use serde_json::{json, Value as Json};
use trtc_runtime::DType;

use crate::pbtxt::{self, Field, Message, Value};
use crate::protocol::Datatype;
use crate::shapes::{BindingShape, EngineShapes, InputSpec};

/// One input or output as the configuration declares it.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorConfig {
    pub name: String,
    pub dtype: DType,
    /// Dimensions without the batch dimension when `max_batch_size > 0`;
    /// -1 is a dimension that varies.
    pub dims: Vec<i64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InstanceKind {
    /// Triton's `KIND_AUTO` (the default): a GPU when the engine has kernels
    /// for this machine's GPU, the CPU executor otherwise.
    Auto,
    Cpu,
    Gpu,
}

/// `instance_group`: how many execution contexts, and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InstanceGroup {
    pub count: usize,
    pub kind: InstanceKind,
    /// For `KIND_GPU`: the GPU ordinals (empty: GPU 0).
    pub gpus: Vec<usize>,
}

/// `dynamic_batching` and its `default_queue_policy`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DynamicBatching {
    pub preferred_batch_size: Vec<usize>,
    pub max_queue_delay_us: u64,
    pub queue: QueuePolicy,
}

/// Limits on a model's queue (Triton's `ModelQueuePolicy`, REJECT action).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QueuePolicy {
    /// 0: unbounded.
    pub max_queue_size: usize,
    /// 0: no timeout.
    pub default_timeout_us: u64,
}

/// Which of the numbered versions in the model's folder are served.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VersionPolicy {
    Latest(usize),
    All,
    Specific(Vec<u64>),
}

impl VersionPolicy {
    /// The versions to serve out of those present.
    pub fn select(&self, present: &[u64]) -> Vec<u64> {
        let mut v: Vec<u64> = present.to_vec();
        v.sort_unstable();
        match self {
            VersionPolicy::Latest(n) => v.split_off(v.len().saturating_sub(*n)),
            VersionPolicy::All => v,
            VersionPolicy::Specific(wanted) => v.into_iter().filter(|x| wanted.contains(x)).collect(),
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct ModelConfig {
    pub name: String,
    /// 0: requests are not batched together, and `dims` are whole shapes.
    pub max_batch_size: usize,
    /// Whether `config.pbtxt` gave `max_batch_size` (else it comes from the
    /// engine: its batch profile's maximum, or 0).
    pub max_batch_size_set: bool,
    pub inputs: Vec<TensorConfig>,
    pub outputs: Vec<TensorConfig>,
    pub dynamic_batching: Option<DynamicBatching>,
    /// Empty: decided from the engine (see `repository`).
    pub instance_groups: Vec<InstanceGroup>,
    pub version_policy: VersionPolicy,
    pub default_model_filename: String,
}

/// The file name an engine is looked up under in each version folder.
pub const DEFAULT_MODEL_FILENAME: &str = "model.engine";

impl ModelConfig {
    /// The configuration of a model with no `config.pbtxt`.
    pub fn empty(name: &str) -> ModelConfig {
        ModelConfig {
            name: name.to_string(),
            max_batch_size: 0,
            max_batch_size_set: false,
            inputs: Vec::new(),
            outputs: Vec::new(),
            dynamic_batching: None,
            instance_groups: Vec::new(),
            version_policy: VersionPolicy::Latest(1),
            default_model_filename: DEFAULT_MODEL_FILENAME.to_string(),
        }
    }

    /// Reads `config.pbtxt` text. `name` is the model's folder name; a
    /// `name` field, when present, must agree. Returns the configuration and
    /// the warnings about fields that are ignored.
    pub fn parse(file: &Path, text: &str, name: &str) -> Result<(ModelConfig, Vec<String>), String> {
        let at = |line: usize| format!("{}:{line}", file.display());
        let tree = pbtxt::parse(text).map_err(|e| format!("{}:{}: {}", file.display(), e.line, e.message))?;
        let mut r = Reader { at: &at, warnings: Vec::new() };
        let mut c = ModelConfig::empty(name);
        for f in &tree.fields {
            match f.name.as_str() {
                "name" => {
                    let n = r.string(f)?;
                    if n != name {
                        return Err(format!("{}: name \"{n}\" differs from the model's folder name \"{name}\"", at(f.line)));
                    }
                }
                "platform" | "backend" => {
                    let p = r.string(f)?;
                    if !matches!(p.as_str(), "trtc_engine" | "trtc" | "tensorrt_plan" | "tensorrt") {
                        return Err(format!("{}: {} \"{p}\" is not served by trtc (use \"trtc_engine\")", at(f.line), f.name));
                    }
                }
                "max_batch_size" => {
                    c.max_batch_size = usize::try_from(r.unsigned(f)?).unwrap_or(usize::MAX);
                    c.max_batch_size_set = true;
                }
                "input" => c.inputs.push(r.tensor(f)?),
                "output" => c.outputs.push(r.tensor(f)?),
                "dynamic_batching" => c.dynamic_batching = Some(r.dynamic_batching(f)?),
                "instance_group" => c.instance_groups.push(r.instance_group(f)?),
                "version_policy" => c.version_policy = r.version_policy(f)?,
                "default_model_filename" => {
                    let n = r.string(f)?;
                    if n.is_empty() || n.contains(['/', '\\']) || n == "." || n == ".." {
                        return Err(format!("{}: default_model_filename \"{n}\" must be a plain file name", at(f.line)));
                    }
                    c.default_model_filename = n;
                }
                _ => r.ignore(f),
            }
        }
        Ok((c, r.warnings))
    }

    /// Checks the configuration against an engine's bindings and fills in
    /// what it leaves out: `max_batch_size` from the engine's batch profile,
    /// inputs and outputs absent from the file from the engine. Every input
    /// and output the file lists must be the engine's, of its type, with
    /// dims inside the engine's ranges (without the batch axis when
    /// `max_batch_size` > 0).
    pub fn complete(&mut self, shapes: &EngineShapes) -> Result<(), String> {
        if !self.max_batch_size_set {
            self.max_batch_size = shapes.max_batch.unwrap_or(0);
        }
        if self.max_batch_size > 0 {
            match shapes.max_batch {
                None if !shapes.data_sized_outputs.is_empty() => {
                    return Err(format!(
                        "max_batch_size {} cannot batch this engine: its outputs {:?} are sized by the data (their \
                         rows do not follow the batch); serve it with max_batch_size: 0",
                        self.max_batch_size, shapes.data_sized_outputs
                    ))
                }
                None => {
                    return Err(format!(
                        "max_batch_size {} needs an engine built with a batch profile (every input's and output's first \
                         dimension from 1 to the maximum batch, e.g. trtc build --min-shapes x:1x3x224x224 --opt-shapes \
                         x:8x3x224x224 --max-shapes x:32x3x224x224); this engine has none, so serve it with \
                         max_batch_size: 0",
                        self.max_batch_size
                    ))
                }
                Some(m) if self.max_batch_size > m => {
                    return Err(format!(
                        "max_batch_size {} exceeds the largest batch of the engine's profile, {m}",
                        self.max_batch_size
                    ))
                }
                Some(_) => {}
            }
        }
        if let Some(d) = &self.dynamic_batching {
            if let Some(&p) = d.preferred_batch_size.iter().find(|&&p| p == 0 || p > self.max_batch_size.max(1)) {
                return Err(format!(
                    "dynamic_batching: preferred_batch_size {p} is not between 1 and max_batch_size {}",
                    self.max_batch_size
                ));
            }
        }
        let batched = self.max_batch_size > 0;
        for (kind, listed, bindings) in
            [("input", &mut self.inputs, &shapes.inputs), ("output", &mut self.outputs, &shapes.outputs)]
        {
            for t in listed.iter() {
                let Some(b) = bindings.iter().find(|b| b.name == t.name) else {
                    let names: Vec<&str> = bindings.iter().map(|b| b.name.as_str()).collect();
                    return Err(format!("{kind} '{}' is not one of the engine's {kind}s {names:?}", t.name));
                };
                check_binding(kind, t, b, batched)?;
            }
            if kind == "input" && !listed.is_empty() && listed.len() != bindings.len() {
                let missing: Vec<&str> =
                    bindings.iter().filter(|b| !listed.iter().any(|t| t.name == b.name)).map(|b| b.name.as_str()).collect();
                return Err(format!("the configuration lists the inputs but leaves out {missing:?}"));
            }
            if listed.is_empty() {
                *listed = bindings.iter().map(|b| binding_config(b, batched)).collect();
            }
        }
        Ok(())
    }

    /// What each of the engine's inputs takes in a request, once the
    /// configuration is complete (in the engine's input order).
    pub fn input_specs(&self, shapes: &EngineShapes) -> Vec<InputSpec> {
        let batched = self.max_batch_size > 0;
        shapes
            .inputs
            .iter()
            .map(|b| {
                let mut axes = b.axes[usize::from(batched)..].to_vec();
                if let Some(t) = self.inputs.iter().find(|t| t.name == b.name) {
                    for (a, &d) in axes.iter_mut().zip(&t.dims) {
                        if d >= 0 {
                            *a = (d as usize, d as usize);
                        }
                    }
                }
                InputSpec { name: b.name.clone(), dtype: b.dtype, max_batch: self.max_batch_size, axes }
            })
            .collect()
    }

    /// A tensor's shape in the model metadata: dims, after a -1 for the
    /// batch when the model batches.
    pub fn metadata_shape(&self, t: &TensorConfig) -> Vec<i64> {
        let batch = (self.max_batch_size > 0).then_some(-1);
        batch.into_iter().chain(t.dims.iter().copied()).collect()
    }

    /// The configuration as Triton's JSON form of `ModelConfig`
    /// (`GET /v2/models/{m}/config`).
    pub fn to_json(&self, instance_groups: &[InstanceGroup]) -> Json {
        let tensor = |t: &TensorConfig| {
            json!({
                "name": t.name,
                "data_type": format!("TYPE_{}", config_type_name(t.dtype)),
                "dims": t.dims,
            })
        };
        let mut m = serde_json::Map::new();
        m.insert("name".into(), json!(self.name));
        m.insert("platform".into(), json!("trtc_engine"));
        m.insert("backend".into(), json!("trtc"));
        m.insert("max_batch_size".into(), json!(self.max_batch_size));
        m.insert("input".into(), Json::Array(self.inputs.iter().map(tensor).collect()));
        m.insert("output".into(), Json::Array(self.outputs.iter().map(tensor).collect()));
        m.insert(
            "version_policy".into(),
            match &self.version_policy {
                VersionPolicy::Latest(n) => json!({ "latest": { "num_versions": n } }),
                VersionPolicy::All => json!({ "all": {} }),
                VersionPolicy::Specific(v) => json!({ "specific": { "versions": v } }),
            },
        );
        m.insert(
            "instance_group".into(),
            Json::Array(
                instance_groups
                    .iter()
                    .enumerate()
                    .map(|(i, g)| {
                        json!({
                            "name": format!("{}_{i}", self.name),
                            "kind": match g.kind {
                                InstanceKind::Auto => "KIND_AUTO",
                                InstanceKind::Cpu => "KIND_CPU",
                                InstanceKind::Gpu => "KIND_GPU",
                            },
                            "count": g.count,
                            "gpus": g.gpus,
                        })
                    })
                    .collect(),
            ),
        );
        if let Some(d) = &self.dynamic_batching {
            m.insert(
                "dynamic_batching".into(),
                json!({
                    "preferred_batch_size": d.preferred_batch_size,
                    "max_queue_delay_microseconds": d.max_queue_delay_us,
                    "default_queue_policy": {
                        "max_queue_size": d.queue.max_queue_size,
                        "default_timeout_microseconds": d.queue.default_timeout_us,
                        "timeout_action": "REJECT",
                    },
                }),
            );
        }
        m.insert("default_model_filename".into(), json!(self.default_model_filename));
        Json::Object(m)
    }
}

/// A binding's dims: -1 on axes that vary, without the batch axis when
/// `batched`.
fn binding_dims(b: &BindingShape, batched: bool) -> Vec<i64> {
    let axes = b.axes.get(usize::from(batched)..).unwrap_or_default();
    axes.iter().map(|&(lo, hi)| if lo == hi { lo as i64 } else { -1 }).collect()
}

fn binding_config(b: &BindingShape, batched: bool) -> TensorConfig {
    TensorConfig { name: b.name.clone(), dtype: b.dtype, dims: binding_dims(b, batched) }
}

fn check_binding(kind: &str, t: &TensorConfig, b: &BindingShape, batched: bool) -> Result<(), String> {
    if t.dtype != b.dtype {
        return Err(format!(
            "{kind} '{}' is TYPE_{} in the configuration but {} in the engine",
            t.name,
            config_type_name(t.dtype),
            config_type_name(b.dtype)
        ));
    }
    let axes = b.axes.get(usize::from(batched)..).unwrap_or_default();
    let fits = t.dims.len() == axes.len()
        && t.dims.iter().zip(axes).all(|(&c, &(lo, hi))| c == -1 || (c >= lo as i64 && c <= hi as i64));
    if !fits {
        let without = if batched { " (without the batch dimension)" } else { "" };
        return Err(format!(
            "{kind} '{}' has dims {:?} in the configuration but {:?}{without} in the engine",
            t.name,
            t.dims,
            binding_dims(b, batched)
        ));
    }
    Ok(())
}

/// The `TYPE_*` suffix of a dtype in `config.pbtxt` (`TYPE_FP32` and so on).
pub fn config_type_name(d: DType) -> &'static str {
    Datatype::of(d).name()
}

/// Reads typed values out of tree fields, with the file position in errors.
struct Reader<'a> {
    at: &'a dyn Fn(usize) -> String,
    warnings: Vec<String>,
}

impl Reader<'_> {
    fn wrong(&self, f: &Field, expected: &str) -> String {
        format!("{}: field '{}' must be {expected}, got {}", (self.at)(f.line), f.name, f.value.kind())
    }

    fn ignore(&mut self, f: &Field) {
        let w = format!("{}: field '{}' is not used by trtc and is ignored", (self.at)(f.line), f.name);
        if !self.warnings.contains(&w) {
            self.warnings.push(w);
        }
    }

    fn string(&self, f: &Field) -> Result<String, String> {
        match &f.value {
            Value::String(s) => Ok(s.clone()),
            _ => Err(self.wrong(f, "a string")),
        }
    }

    fn integer(&self, f: &Field) -> Result<i64, String> {
        match &f.value {
            Value::Number(n) => {
                n.parse::<i64>().map_err(|_| format!("{}: field '{}' must be an integer, got {n}", (self.at)(f.line), f.name))
            }
            _ => Err(self.wrong(f, "an integer")),
        }
    }

    fn unsigned(&self, f: &Field) -> Result<u64, String> {
        let v = self.integer(f)?;
        u64::try_from(v).map_err(|_| format!("{}: field '{}' must not be negative, got {v}", (self.at)(f.line), f.name))
    }

    fn ident(&self, f: &Field) -> Result<String, String> {
        match &f.value {
            Value::Ident(s) => Ok(s.clone()),
            _ => Err(self.wrong(f, "an enum value")),
        }
    }

    fn boolean(&self, f: &Field) -> Result<bool, String> {
        match &f.value {
            Value::Ident(s) if s == "true" => Ok(true),
            Value::Ident(s) if s == "false" => Ok(false),
            _ => Err(self.wrong(f, "true or false")),
        }
    }

    fn message<'f>(&self, f: &'f Field) -> Result<&'f Message, String> {
        match &f.value {
            Value::Message(m) => Ok(m),
            _ => Err(self.wrong(f, "a message")),
        }
    }

    fn tensor(&mut self, f: &Field) -> Result<TensorConfig, String> {
        let m = self.message(f)?;
        let (mut name, mut dtype, mut dims) = (None, None, Vec::new());
        for g in &m.fields {
            match g.name.as_str() {
                "name" => name = Some(self.string(g)?),
                "data_type" => {
                    let t = self.ident(g)?;
                    let d = t
                        .strip_prefix("TYPE_")
                        .and_then(Datatype::parse)
                        .and_then(Datatype::dtype)
                        .ok_or_else(|| format!("{}: data_type {t} is not a tensor type trtc serves", (self.at)(g.line)))?;
                    dtype = Some(d);
                }
                "dims" => {
                    let d = self.integer(g)?;
                    if d < -1 {
                        return Err(format!("{}: dims must be -1 or at least 0, got {d}", (self.at)(g.line)));
                    }
                    dims.push(d);
                }
                "optional" | "is_shape_tensor" | "allow_ragged_batch" => {
                    if self.boolean(g)? {
                        return Err(format!("{}: '{}: true' is not supported by trtc", (self.at)(g.line), g.name));
                    }
                }
                _ => self.ignore(g),
            }
        }
        let what = &f.name;
        let name = name.ok_or_else(|| format!("{}: {what} without a name", (self.at)(f.line)))?;
        let dtype = dtype.ok_or_else(|| format!("{}: {what} '{name}' without a data_type", (self.at)(f.line)))?;
        Ok(TensorConfig { name, dtype, dims })
    }

    fn dynamic_batching(&mut self, f: &Field) -> Result<DynamicBatching, String> {
        let m = self.message(f)?;
        let mut d = DynamicBatching::default();
        for g in &m.fields {
            match g.name.as_str() {
                "preferred_batch_size" => d.preferred_batch_size.push(self.unsigned(g)? as usize),
                "max_queue_delay_microseconds" => d.max_queue_delay_us = self.unsigned(g)?,
                "default_queue_policy" => {
                    for h in &self.message(g)?.fields {
                        match h.name.as_str() {
                            "max_queue_size" => d.queue.max_queue_size = self.unsigned(h)? as usize,
                            "default_timeout_microseconds" => d.queue.default_timeout_us = self.unsigned(h)?,
                            "timeout_action" => {
                                if self.ident(h)? != "REJECT" {
                                    return Err(format!("{}: only timeout_action REJECT is supported", (self.at)(h.line)));
                                }
                            }
                            _ => self.ignore(h),
                        }
                    }
                }
                _ => self.ignore(g),
            }
        }
        Ok(d)
    }

    fn instance_group(&mut self, f: &Field) -> Result<InstanceGroup, String> {
        let m = self.message(f)?;
        let mut g = InstanceGroup { count: 1, kind: InstanceKind::Auto, gpus: Vec::new() };
        for h in &m.fields {
            match h.name.as_str() {
                "count" => {
                    g.count = self.unsigned(h)? as usize;
                    if g.count == 0 || g.count > 256 {
                        return Err(format!("{}: count must be 1 to 256, got {}", (self.at)(h.line), g.count));
                    }
                }
                "kind" => {
                    g.kind = match self.ident(h)?.as_str() {
                        "KIND_CPU" => InstanceKind::Cpu,
                        "KIND_GPU" => InstanceKind::Gpu,
                        "KIND_AUTO" => InstanceKind::Auto,
                        other => {
                            return Err(format!("{}: kind {other} is not KIND_CPU, KIND_GPU or KIND_AUTO", (self.at)(h.line)))
                        }
                    }
                }
                "gpus" => g.gpus.push(self.unsigned(h)? as usize),
                "name" => {
                    self.string(h)?;
                }
                _ => self.ignore(h),
            }
        }
        if g.kind == InstanceKind::Auto && !g.gpus.is_empty() {
            g.kind = InstanceKind::Gpu;
        }
        Ok(g)
    }

    fn version_policy(&mut self, f: &Field) -> Result<VersionPolicy, String> {
        let m = self.message(f)?;
        let [g] = m.fields.as_slice() else {
            return Err(format!("{}: version_policy must hold exactly one of latest, all, specific", (self.at)(f.line)));
        };
        let inner = self.message(g)?;
        match g.name.as_str() {
            "latest" => {
                let mut n = 1;
                for h in &inner.fields {
                    match h.name.as_str() {
                        "num_versions" => n = self.unsigned(h)? as usize,
                        _ => self.ignore(h),
                    }
                }
                if n == 0 {
                    return Err(format!("{}: num_versions must be at least 1", (self.at)(g.line)));
                }
                Ok(VersionPolicy::Latest(n))
            }
            "all" => Ok(VersionPolicy::All),
            "specific" => {
                let mut v = Vec::new();
                for h in &inner.fields {
                    match h.name.as_str() {
                        "versions" => v.push(self.unsigned(h)?),
                        _ => self.ignore(h),
                    }
                }
                Ok(VersionPolicy::Specific(v))
            }
            other => Err(format!("{}: version_policy '{other}' is not latest, all or specific", (self.at)(g.line))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use trtc_runtime::{BindingInfo, TensorType};

    fn parse(text: &str) -> Result<(ModelConfig, Vec<String>), String> {
        ModelConfig::parse(Path::new("m/config.pbtxt"), text, "m")
    }

    #[test]
    fn reads_the_served_subset() {
        let (c, warnings) = parse(
            r#"
            name: "m"
            platform: "tensorrt_plan"
            max_batch_size: 0
            input [ { name: "x" data_type: TYPE_FP32 dims: [ 1, 3, 8, 8 ] } ]
            output { name: "y" data_type: TYPE_FP16 dims: [ 1, 10 ] label_filename: "labels.txt" }
            dynamic_batching {
              preferred_batch_size: [ 4, 8 ]
              max_queue_delay_microseconds: 100
              default_queue_policy { max_queue_size: 16 default_timeout_microseconds: 5000 }
            }
            instance_group [ { count: 2 kind: KIND_CPU } ]
            version_policy: { specific: { versions: [1, 3] } }
            optimization { priority: PRIORITY_MAX }
            "#,
        )
        .unwrap();
        assert_eq!(c.inputs, [TensorConfig { name: "x".into(), dtype: DType::F32, dims: vec![1, 3, 8, 8] }]);
        assert_eq!(c.outputs[0].dtype, DType::F16);
        let d = c.dynamic_batching.unwrap();
        assert_eq!(d.preferred_batch_size, [4, 8]);
        assert_eq!(d.queue, QueuePolicy { max_queue_size: 16, default_timeout_us: 5000 });
        assert_eq!(c.instance_groups, [InstanceGroup { count: 2, kind: InstanceKind::Cpu, gpus: vec![] }]);
        assert_eq!(c.version_policy, VersionPolicy::Specific(vec![1, 3]));
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(warnings[0].contains("m/config.pbtxt:6: field 'label_filename'"), "{warnings:?}");
        assert!(warnings[1].contains("'optimization'"), "{warnings:?}");
    }

    #[test]
    fn wrong_fields_are_errors_naming_file_line_and_field() {
        for (text, needle) in [
            ("max_batch_size: \"8\"", "m/config.pbtxt:1: field 'max_batch_size' must be an integer, got a string"),
            ("max_batch_size: -1", "must not be negative"),
            ("name: \"other\"", "differs from the model's folder name"),
            ("platform: \"onnxruntime_onnx\"", "not served by trtc"),
            ("input { name: \"x\" data_type: TYPE_STRING dims: 1 }", "TYPE_STRING is not a tensor type"),
            ("input { data_type: TYPE_FP32 }", "input without a name"),
            ("input { name: \"x\" }", "without a data_type"),
            ("input { name: \"x\" data_type: TYPE_FP32 dims: -2 }", "dims must be -1"),
            ("instance_group { count: 0 }", "count must be 1 to 256"),
            ("instance_group { kind: KIND_MODEL }", "kind KIND_MODEL"),
            ("version_policy { latest { num_versions: 0 } }", "at least 1"),
            ("version_policy { }", "exactly one of"),
            ("default_model_filename: \"../x\"", "plain file name"),
            ("dynamic_batching { default_queue_policy { timeout_action: DELAY } }", "REJECT"),
            ("input: 3", "field 'input' must be a message, got a number"),
            ("name: \"m\" max_batch_size 3", "m/config.pbtxt:1: expected ':'"),
        ] {
            let e = parse(text).unwrap_err();
            assert!(e.contains(needle), "{text}: {e}");
        }
    }

    #[test]
    fn version_policies_select() {
        let present = [3, 1, 10, 2];
        assert_eq!(VersionPolicy::Latest(1).select(&present), [10]);
        assert_eq!(VersionPolicy::Latest(2).select(&present), [3, 10]);
        assert_eq!(VersionPolicy::Latest(9).select(&present), [1, 2, 3, 10]);
        assert_eq!(VersionPolicy::All.select(&present), [1, 2, 3, 10]);
        assert_eq!(VersionPolicy::Specific(vec![2, 7]).select(&present), [2]);
    }

    #[test]
    fn completes_from_the_engine_and_checks_what_is_listed() {
        let b = |n: &str, d, s: &[usize]| BindingInfo { name: n.into(), ty: TensorType::new(d, s.to_vec()) };
        let shapes =
            EngineShapes::fixed(&[b("x", DType::F32, &[1, 3]), b("mask", DType::I64, &[1, 3])], &[b("y", DType::F32, &[1, 2])]);
        let mut c = ModelConfig::empty("m");
        c.complete(&shapes).unwrap();
        assert_eq!(c.inputs.len(), 2);
        assert_eq!(c.outputs[0].dims, [1, 2]);
        assert_eq!(c.max_batch_size, 0);

        let t = |n: &str, d, dims: &[i64]| TensorConfig { name: n.into(), dtype: d, dims: dims.to_vec() };
        for (ins, outs, mbs, needle) in [
            (vec![t("x", DType::F32, &[1, 3])], vec![], 0, "leaves out [\"mask\"]"),
            (vec![t("x", DType::F16, &[1, 3]), t("mask", DType::I64, &[1, 3])], vec![], 0, "TYPE_FP16 in the configuration"),
            (vec![t("x", DType::F32, &[3]), t("mask", DType::I64, &[1, 3])], vec![], 0, "dims [3]"),
            (vec![], vec![t("z", DType::F32, &[1, 2])], 0, "output 'z' is not one of"),
            (vec![], vec![], 4, "batch profile"),
        ] {
            let mut c = ModelConfig::empty("m");
            c.inputs = ins;
            c.outputs = outs;
            c.max_batch_size = mbs;
            c.max_batch_size_set = true;
            let e = c.complete(&shapes).unwrap_err();
            assert!(e.contains(needle), "{e}");
        }
        let mut c = ModelConfig::empty("m");
        c.inputs = vec![t("x", DType::F32, &[-1, 3]), t("mask", DType::I64, &[1, 3])];
        c.outputs = vec![t("y", DType::F32, &[1, 2])];
        c.complete(&shapes).unwrap();
        assert_eq!(c.outputs.len(), 1);
    }

    #[test]
    fn a_batch_profile_gives_max_batch_size_and_dims_without_the_batch() {
        let r = |n: &str, axes: &[(usize, usize)]| BindingShape { name: n.into(), dtype: DType::F32, axes: axes.to_vec() };
        let shapes = EngineShapes::with_batch(vec![r("x", &[(1, 16), (3, 3), (8, 32)])], vec![r("y", &[(1, 16), (10, 10)])]);
        let mut c = ModelConfig::empty("m");
        c.complete(&shapes).unwrap();
        assert_eq!(c.max_batch_size, 16);
        assert_eq!(c.inputs[0].dims, [3, -1]);
        assert_eq!(c.metadata_shape(&c.inputs[0]), [-1, 3, -1]);
        assert_eq!(c.outputs[0].dims, [10]);
        assert_eq!(c.input_specs(&shapes)[0].describe(), "[1..16,3,8..32]");

        // A configuration may lower the batch and fix a varying dim.
        let (mut c, _) = parse("max_batch_size: 4 input { name: \"x\" data_type: TYPE_FP32 dims: [3, 16] }").unwrap();
        c.complete(&shapes).unwrap();
        assert_eq!(c.input_specs(&shapes)[0].describe(), "[1..4,3,16]");
        // Or turn batching off: then dims are whole shapes.
        let (mut c, _) = parse("max_batch_size: 0").unwrap();
        c.complete(&shapes).unwrap();
        assert_eq!(c.inputs[0].dims, [-1, 3, -1]);
        assert_eq!(c.input_specs(&shapes)[0].describe(), "[1..16,3,8..32]");

        for (text, needle) in [
            ("max_batch_size: 32", "exceeds the largest batch of the engine's profile, 16"),
            ("max_batch_size: 8 input { name: \"x\" data_type: TYPE_FP32 dims: [3, 64] }", "(without the batch dimension)"),
            ("max_batch_size: 8 dynamic_batching { preferred_batch_size: [4, 9] }", "preferred_batch_size 9"),
        ] {
            let (mut c, _) = parse(text).unwrap();
            let e = c.complete(&shapes).unwrap_err();
            assert!(e.contains(needle), "{text}: {e}");
        }
    }
}
