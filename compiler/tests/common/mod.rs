//! Small ONNX models written in Rust, for tests that need a precise graph.
#![allow(dead_code)]

use prost::Message;
use tract_onnx::pb;

pub fn value_info(name: &str, elem_type: i32, dims: &[i64]) -> pb::ValueInfoProto {
    value_info_dims(name, elem_type, dims.iter().map(|&d| pb::tensor_shape_proto::dimension::Value::DimValue(d)).collect())
}

pub fn value_info_dims(name: &str, elem_type: i32, dims: Vec<pb::tensor_shape_proto::dimension::Value>) -> pb::ValueInfoProto {
    pb::ValueInfoProto {
        name: name.into(),
        r#type: Some(pb::TypeProto {
            denotation: String::new(),
            value: Some(pb::type_proto::Value::TensorType(pb::type_proto::Tensor {
                elem_type,
                shape: Some(pb::TensorShapeProto {
                    dim: dims
                        .into_iter()
                        .map(|v| pb::tensor_shape_proto::Dimension { denotation: String::new(), value: Some(v) })
                        .collect(),
                }),
            })),
        }),
        doc_string: String::new(),
    }
}

pub const F32: i32 = 1;
pub const I64: i32 = 7;

pub fn f32_tensor(name: &str, dims: &[i64], values: &[f32]) -> pb::TensorProto {
    pb::TensorProto {
        name: name.into(),
        dims: dims.to_vec(),
        data_type: F32,
        raw_data: values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        ..Default::default()
    }
}

pub fn i64_tensor(name: &str, dims: &[i64], values: &[i64]) -> pb::TensorProto {
    pb::TensorProto { name: name.into(), dims: dims.to_vec(), data_type: I64, int64_data: values.to_vec(), ..Default::default() }
}

pub fn node(op: &str, name: &str, inputs: &[&str], outputs: &[&str]) -> pb::NodeProto {
    pb::NodeProto {
        op_type: op.into(),
        name: name.into(),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: outputs.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    }
}

pub fn int_attr(name: &str, v: i64) -> pb::AttributeProto {
    pb::AttributeProto { name: name.into(), r#type: 2, i: v, ..Default::default() }
}

pub fn model(
    nodes: Vec<pb::NodeProto>,
    inputs: Vec<pb::ValueInfoProto>,
    outputs: Vec<pb::ValueInfoProto>,
    initializers: Vec<pb::TensorProto>,
) -> pb::ModelProto {
    pb::ModelProto {
        ir_version: 8,
        opset_import: vec![pb::OperatorSetIdProto { domain: String::new(), version: 17 }],
        producer_name: "trtc-tests".into(),
        graph: Some(pb::GraphProto {
            node: nodes,
            name: "test".into(),
            initializer: initializers,
            input: inputs,
            output: outputs,
            ..Default::default()
        }),
        ..Default::default()
    }
}

pub fn encode(m: &pb::ModelProto) -> Vec<u8> {
    m.encode_to_vec()
}

/// x[2,3] -> MatMul(w[3,4]) -> Add(b[4]) -> Reshape([4,2]) -> Softmax(axis -1) -> y
pub fn mlp() -> pb::ModelProto {
    let w: Vec<f32> = (0..12).map(|i| (i as f32 - 6.0) / 10.0).collect();
    let mut sm = node("Softmax", "softmax", &["r"], &["y"]);
    sm.attribute.push(int_attr("axis", -1));
    model(
        vec![
            node("MatMul", "fc/matmul", &["x", "w"], &["h"]),
            node("Add", "fc/add", &["h", "b"], &["hb"]),
            node("Reshape", "reshape", &["hb", "shape"], &["r"]),
            sm,
        ],
        vec![value_info("x", F32, &[2, 3])],
        vec![value_info("y", F32, &[4, 2])],
        vec![f32_tensor("w", &[3, 4], &w), f32_tensor("b", &[4], &[0.1, -0.2, 0.3, 0.0]), i64_tensor("shape", &[2], &[4, -1])],
    )
}

/// A temporary directory removed on drop.
pub struct TempDir(pub std::path::PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!("trtc-test-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }

    pub fn path(&self, name: &str) -> std::path::PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Every `.onnx` model in `testdata/models`, sorted.
pub fn testdata_models() -> Vec<std::path::PathBuf> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/models");
    let mut v: Vec<std::path::PathBuf> = std::fs::read_dir(&dir)
        .expect("testdata/models")
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "onnx"))
        .collect();
    v.sort();
    v
}

/// A model's name without `.onnx`.
pub fn stem(model: &std::path::Path) -> String {
    model.file_stem().expect("model file name").to_string_lossy().to_string()
}

/// A testdata model's recorded `inputs` or `outputs` (onnxruntime's).
pub fn testdata_npz(model: &std::path::Path, which: &str) -> Vec<(String, trtc_runtime::Tensor)> {
    let path = model.with_file_name(format!("{}.{which}.npz", stem(model)));
    trtc::npz::read_npz(&path).unwrap_or_else(|e| panic!("{e:#}"))
}

/// Builds a model with the default options, runs it on the CPU executor
/// with its recorded `inputs` and returns the worst output error relative
/// to scale against its recorded `outputs` (onnxruntime's); an output
/// missing, extra or of the wrong shape is an error.
/// The worst error of the exact and the fast CPU modes.
pub fn worst_error_against_recorded(model: &std::path::Path) -> anyhow::Result<f64> {
    let inputs = testdata_npz(model, "inputs");
    let expected = testdata_npz(model, "outputs");
    let built = trtc::build::build_file(model, &trtc::build::BuildOptions::default())?;
    let engine = trtc_runtime::Engine::from_bytes(&built.engine)?;
    let refs: Vec<(&str, &trtc_runtime::Tensor)> = inputs.iter().map(|(n, t)| (n.as_str(), t)).collect();
    // The reference mode on one thread, and the fast mode on three (what
    // `trtc run` uses): the worst of both.
    let mut worst = 0f64;
    for (math, threads) in [(trtc_runtime::math::Math::Exact, 1), (trtc_runtime::math::Math::Fast, 3)] {
        let mut ctx = engine.create_context()?;
        ctx.set_math(math);
        ctx.set_threads(threads)?;
        let outputs = ctx.run(&refs)?;
        anyhow::ensure!(outputs.len() == expected.len(), "{} outputs, onnxruntime has {}", outputs.len(), expected.len());
        for d in trtc::compare::diff_all(&outputs, &expected)? {
            anyhow::ensure!(d.shape_ok, "output {} has the wrong shape", d.name);
            worst = worst.max(d.max_rel_to_scale);
        }
    }
    Ok(worst)
}

pub fn ints_attr(name: &str, v: &[i64]) -> pb::AttributeProto {
    pb::AttributeProto { name: name.into(), r#type: 7, ints: v.to_vec(), ..Default::default() }
}
