//! `trtc serve` against the real `tritonclient` (PyPI, in the venv that
//! `scripts/fetch-tritonclient.sh` makes): a model repository of several
//! models and versions is built here, the server is started on free
//! loopback ports, and `tritonclient_check.py` checks every endpoint (HTTP
//! and gRPC), JSON
//! and binary tensors of several types, error answers, malformed traffic, a
//! bounded load and a shutdown with requests in flight, each answer against
//! the CPU executor's output for the same input.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use tract_onnx::pb;
use trtc::build::{build_file, BuildOptions};
use trtc_runtime::{Engine, Tensor};

mod support;
use support::{python, workspace, Server};

// The small ONNX model builders the compiler's tests use.
#[path = "../../compiler/tests/common/mod.rs"]
mod common;
use common::{encode, model, node, value_info};

use common::{F32 as FLOAT, I64 as INT64};
const BOOL: i32 = 9;
const FLOAT16: i32 = 10;

/// FP16, INT64 and BOOL tensors in and out, three outputs.
fn types_model() -> Vec<u8> {
    encode(&model(
        vec![
            node("Add", "add", &["a", "a"], &["a2"]),
            node("Mul", "mul", &["b", "b"], &["b2"]),
            node("Not", "not", &["c"], &["not_c"]),
        ],
        vec![value_info("a", FLOAT16, &[2, 3]), value_info("b", INT64, &[2, 3]), value_info("c", BOOL, &[2, 3])],
        vec![value_info("a2", FLOAT16, &[2, 3]), value_info("b2", INT64, &[2, 3]), value_info("not_c", BOOL, &[2, 3])],
        vec![],
    ))
}

/// A chain of MatMuls by 512x512 weights with Relu over 1536 rows, slow
/// enough on the CPU executor that all eight requests of the shutdown
/// check reach the server while the first runs, even on a loaded machine
/// (with 512 rows, a third of the work, the check sometimes saw fewer than
/// seven queued). Its 3 MiB input stays under gRPC's default
/// 4 MiB message limit, which another check exceeds on purpose.
fn slow_model(layers: usize) -> Vec<u8> {
    let n = 512;
    let rows = 1536;
    let mut nodes = Vec::new();
    let mut init = Vec::new();
    let mut x = "x".to_string();
    for l in 0..layers {
        let w: Vec<f32> = (0..n * n).map(|i| ((i * 7 + l * 13) % 17) as f32 / 17.0 - 0.5).collect();
        init.push(pb::TensorProto {
            name: format!("w{l}"),
            dims: vec![n as i64, n as i64],
            data_type: FLOAT,
            raw_data: w.iter().map(|v| v / n as f32).flat_map(|v| v.to_le_bytes()).collect(),
            ..Default::default()
        });
        let (m, r) = (format!("m{l}"), if l + 1 == layers { "y".to_string() } else { format!("r{l}") });
        nodes.push(node("MatMul", &m, &[&x, &format!("w{l}")], &[&m]));
        nodes.push(node("Relu", &r, &[&m], &[&r]));
        x = r;
    }
    encode(&model(nodes, vec![value_info("x", FLOAT, &[rows, n as i64])], vec![value_info("y", FLOAT, &[rows, n as i64])], init))
}

struct Repo {
    dir: PathBuf,
    refs: PathBuf,
}

fn build(onnx: &Path, engine: &Path, fp16: bool) {
    let mut opts = BuildOptions::default();
    opts.precision.fp16 = fp16;
    let built = build_file(onnx, &opts).unwrap_or_else(|e| panic!("building {}: {e:#}", onnx.display()));
    std::fs::create_dir_all(engine.parent().unwrap()).unwrap();
    std::fs::write(engine, built.engine).unwrap();
}

/// Random inputs for a served version and the CPU executor's outputs for
/// them, as `<model>_<version>.inputs.npz` / `.outputs.npz`.
fn reference(engine: &Path, refs: &Path, tag: &str, seed: u64) {
    let engine = Engine::load(engine).unwrap();
    let inputs: Vec<(String, Tensor)> =
        engine.inputs().iter().map(|b| (b.name.clone(), trtc::random::tensor(&b.ty, seed).unwrap())).collect();
    let refs_in: Vec<(&str, &Tensor)> = inputs.iter().map(|(n, t)| (n.as_str(), t)).collect();
    let outputs = engine.create_context().unwrap().run(&refs_in).unwrap();
    trtc::npz::write_npz(&refs.join(format!("{tag}.inputs.npz")), &inputs).unwrap();
    trtc::npz::write_npz(&refs.join(format!("{tag}.outputs.npz")), &outputs).unwrap();
}

fn make_repository(root: &Path) -> Repo {
    let dir = root.join("models");
    let refs = root.join("refs");
    std::fs::create_dir_all(&refs).unwrap();
    let cnn = workspace().join("testdata/models/example_cnn.onnx");

    // cnn: two versions (FP32 and FP16 builds), two CPU instances.
    build(&cnn, &dir.join("cnn/1/model.engine"), false);
    build(&cnn, &dir.join("cnn/2/model.engine"), true);
    std::fs::write(
        dir.join("cnn/config.pbtxt"),
        "name: \"cnn\"\nplatform: \"trtc_engine\"\nmax_batch_size: 0\nversion_policy: { all { } }\n\
         instance_group [ { count: 2 kind: KIND_CPU } ]\nparameters { key: \"k\" value: { string_value: \"v\" } }\n",
    )
    .unwrap();
    reference(&dir.join("cnn/1/model.engine"), &refs, "cnn_1", 1);
    reference(&dir.join("cnn/2/model.engine"), &refs, "cnn_2", 2);

    // types: no config.pbtxt (completed from the engine); version 3 only.
    let onnx = root.join("types.onnx");
    std::fs::write(&onnx, types_model()).unwrap();
    build(&onnx, &dir.join("types/3/model.engine"), false);
    reference(&dir.join("types/3/model.engine"), &refs, "types_3", 3);

    // slow: one instance, for the load and shutdown checks.
    let onnx = root.join("slow.onnx");
    std::fs::write(&onnx, slow_model(24)).unwrap();
    build(&onnx, &dir.join("slow/1/model.engine"), false);
    std::fs::write(dir.join("slow/config.pbtxt"), "instance_group { count: 1 kind: KIND_CPU }\n").unwrap();
    reference(&dir.join("slow/1/model.engine"), &refs, "slow_1", 4);

    // batched: a batch profile (1 to 16 rows) and the dynamic batcher;
    // max_batch_size comes from the engine. References for requests of 1
    // and of 3 rows, each run alone.
    let onnx = workspace().join("testdata/serve/batch_cnn.onnx");
    let dims = |b: usize| vec![b, 3, 16, 16];
    let profile = trtc::build::ShapeProfile { inputs: vec![("x".into(), [dims(1), dims(4), dims(16)])] };
    let built = build_file(&onnx, &BuildOptions { profiles: vec![profile], ..Default::default() }).unwrap();
    std::fs::create_dir_all(dir.join("batched/1")).unwrap();
    std::fs::write(dir.join("batched/1/model.engine"), &built.engine).unwrap();
    std::fs::write(
        dir.join("batched/config.pbtxt"),
        "dynamic_batching { max_queue_delay_microseconds: 2000 }
instance_group { count: 1 kind: KIND_CPU }
",
    )
    .unwrap();
    let engine = Engine::from_bytes(&built.engine).unwrap();
    for rows in [1, 3] {
        let x = trtc::random::tensor(&trtc_runtime::TensorType::new(trtc_runtime::DType::F32, dims(rows)), rows as u64).unwrap();
        let outputs = engine.create_context().unwrap().run(&[("x", &x)]).unwrap();
        trtc::npz::write_npz(&refs.join(format!("batched_{rows}rows.inputs.npz")), &[("x".to_string(), x)]).unwrap();
        trtc::npz::write_npz(&refs.join(format!("batched_{rows}rows.outputs.npz")), &outputs).unwrap();
    }

    // broken: a configuration with a field of the wrong type; it must be
    // reported, and must not stop the others.
    std::fs::create_dir_all(dir.join("broken/1")).unwrap();
    std::fs::copy(dir.join("cnn/1/model.engine"), dir.join("broken/1/model.engine")).unwrap();
    std::fs::write(dir.join("broken/config.pbtxt"), "max_batch_size: \"eight\"\n").unwrap();

    // gpu: KIND_GPU instances; without a GPU it must be reported unavailable.
    std::fs::create_dir_all(dir.join("gpu/1")).unwrap();
    std::fs::copy(dir.join("cnn/1/model.engine"), dir.join("gpu/1/model.engine")).unwrap();
    std::fs::write(dir.join("gpu/config.pbtxt"), "instance_group [ { kind: KIND_GPU } ]\n").unwrap();

    // missing: a version folder without an engine.
    std::fs::create_dir_all(dir.join("missing/1")).unwrap();
    Repo { dir, refs }
}

/// `trtc-serve WHAT` with a 4 MiB HTTP input limit (which a check exceeds).
fn start_with(what: &[&std::ffi::OsStr]) -> Server {
    let mut args = what.to_vec();
    args.extend([std::ffi::OsStr::new("--http-max-input-size"), std::ffi::OsStr::new("4194304")]);
    support::start(&args, &[])
}

#[test]
fn tritonclient_talks_to_trtc_serve() {
    let root = std::env::temp_dir().join(format!("trtc-serve-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let repo = make_repository(&root);
    // An exit timeout far beyond the 60 s this test waits for the exit: a
    // connection that holds the server open fails the test.
    let mut server =
        start_with(&["--model-repository".as_ref(), repo.dir.as_os_str(), "--exit-timeout-secs".as_ref(), "600".as_ref()]);
    let status = Command::new(python())
        .arg(workspace().join("server/tests/tritonclient_check.py"))
        .args(["--http", &server.http, "--grpc", &server.grpc, "--metrics", &server.metrics])
        .arg("--refs")
        .arg(&repo.refs)
        .args(["--server-pid", &server.child.id().to_string(), "--max-input-size", "4194304"])
        .status()
        .expect("the tritonclient venv's python runs");
    if !status.success() {
        let _ = server.child.kill();
    }
    assert!(status.success(), "tritonclient_check.py failed ({status}); its output is above");

    // The check script ends by sending SIGTERM with requests in flight: the
    // server must exit 0 by itself, having said it stopped.
    let log = exited_cleanly(&mut server, Duration::from_secs(60));
    assert!(log.iter().any(|l| l == "trtc serve: stopped"), "{log:?}");
    let _ = std::fs::remove_dir_all(&root);
}

/// Waits (at most `within`) for a stopped server to exit, checks that it
/// exited 0, and returns the lines it printed since its start-up.
fn exited_cleanly(server: &mut Server, within: Duration) -> Vec<String> {
    let deadline = Instant::now() + within;
    let code = loop {
        if let Some(s) = server.child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "trtc-serve did not exit within {within:?} of SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(code.success(), "trtc-serve exited with {code} after SIGTERM");
    server.log.try_iter().collect()
}

/// The example CNN built as `tiny_cnn.engine` in a fresh folder named
/// after `tag` (and this process); the folder and the engine's path.
fn tiny_engine(tag: &str) -> (PathBuf, PathBuf) {
    let root = std::env::temp_dir().join(format!("{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let engine = root.join("tiny_cnn.engine");
    build(&workspace().join("testdata/models/example_cnn.onnx"), &engine, false);
    (root, engine)
}

/// A GET on the server's HTTP port, the status line and body back.
fn get(addr: &str, path: &str) -> (String, String) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let status = text.lines().next().unwrap_or_default().to_string();
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    (status, body)
}

#[test]
fn serves_one_engine_under_its_file_stem() {
    let (root, engine) = tiny_engine("trtc-serve-one");
    let mut server = start_with(&[engine.as_os_str()]);
    let (status, _) = get(&server.http, "/v2/models/tiny_cnn/versions/1/ready");
    assert!(status.contains(" 200 "), "{status}");
    let (status, _) = get(&server.http, "/v2/health/ready");
    assert!(status.contains(" 200 "), "strict readiness with the one model loaded: {status}");
    let (status, body) = get(&server.http, "/v2/models/tiny_cnn");
    assert!(status.contains(" 200 ") && body.contains("\"versions\":[\"1\"]"), "{status} {body}");
    let (status, body) = get(&server.metrics, "/metrics");
    assert!(
        status.contains(" 200 ") && body.contains("nv_inference_request_success{model=\"tiny_cnn\",version=\"1\"} 0"),
        "{body}"
    );
    server.signal(libc::SIGTERM);
    exited_cleanly(&mut server, Duration::from_secs(60));
    let _ = std::fs::remove_dir_all(&root);
}

/// SIGTERM at once after the server announces its ports (what a supervisor
/// that stops a server it just started does) is a clean stop, exit 0, not
/// death by the signal: the handler is in place before the announcement.
#[test]
fn a_signal_right_after_start_up_stops_the_server_cleanly() {
    let (root, engine) = tiny_engine("trtc-serve-early-signal");
    for attempt in 0..10 {
        let mut server = start_with(&[engine.as_os_str()]);
        let signal = if attempt % 2 == 0 { libc::SIGTERM } else { libc::SIGINT };
        server.signal(signal);
        let code = server.child.wait().unwrap();
        assert!(code.success(), "attempt {attempt}: trtc-serve exited with {code} after signal {signal}");
    }
    let _ = std::fs::remove_dir_all(&root);
}

/// A client that never finishes its request cannot hold the server open
/// past `--exit-timeout-secs` after SIGTERM: the server closes it and exits 0.
#[test]
fn a_stalled_request_does_not_outlast_the_exit_timeout() {
    use std::io::Write;
    let (root, engine) = tiny_engine("trtc-serve-stalled");
    let mut server = start_with(&[engine.as_os_str(), "--exit-timeout-secs".as_ref(), "1".as_ref()]);
    let mut stalled = std::net::TcpStream::connect(&server.http).unwrap();
    write!(stalled, "POST /v2/models/tiny_cnn/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{{\"inputs\"").unwrap();
    stalled.flush().unwrap();
    std::thread::sleep(Duration::from_millis(200));
    server.signal(libc::SIGTERM);
    let log = exited_cleanly(&mut server, Duration::from_secs(20));
    assert!(log.iter().any(|l| l.contains("connections still open after 1 s")), "{log:?}");
    drop(stalled);
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn bad_repositories_and_arguments_are_one_line_errors() {
    let root = std::env::temp_dir().join(format!("trtc-serve-args-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("not-an-engine.engine"), b"hello").unwrap();
    for (args, needle) in [
        (vec!["--model-repository".to_string(), root.join("absent").display().to_string()], "cannot read the model repository"),
        (vec![root.join("not-an-engine.engine").display().to_string()], "not-an-engine.engine"),
        (vec![], "give an engine file or --model-repository DIR"),
        (
            vec!["--host".into(), "localhost:1".into(), "--model-repository".into(), root.display().to_string()],
            "not an IP address",
        ),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_trtc-serve"))
            .args(&args)
            .args(["--http-port", "0", "--metrics-port", "0"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("error:")).collect();
        assert_eq!(lines.len(), 1, "{args:?}: {err}");
        assert!(lines[0].contains(needle), "{args:?}: {err}");
    }
    let _ = std::fs::remove_dir_all(&root);
}
