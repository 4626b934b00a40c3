//! What an attacker (or an unlucky user) hands the command line: special
//! files where a regular one is expected, decompression bombs, engines that
//! declare absurd sizes, attributes of the wrong type, names that would
//! forge output lines, and flags at their limits. Each gets one clear error
//! line and exit 1, promptly: never a hang, a panic, an abort or a silent
//! misreading. (Graph sizes that once overflowed the stack: `scaling.rs`.)

mod common;

use common::*;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use tract_onnx::pb;

/// Runs `trtc`, killing it after `limit` (a hang fails the test instead of
/// hanging it). Returns exit code, stdout and stderr.
fn trtc_within(args: &[&str], limit: Duration) -> (i32, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_trtc"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Read both pipes while waiting: a child blocked on a full pipe would
    // look like a hang.
    let drain = |mut r: Box<dyn std::io::Read + Send>| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = r.read_to_end(&mut v);
            String::from_utf8_lossy(&v).into_owned()
        })
    };
    let out = drain(Box::new(child.stdout.take().unwrap()));
    let err = drain(Box::new(child.stderr.take().unwrap()));
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("trtc {args:?} still running after {limit:?}: it hangs");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    (status.code().unwrap_or(-1), out.join().unwrap(), err.join().unwrap())
}

/// Expects exit 1 within 20 s, and one stderr line containing each needle.
fn expect_error(args: &[&str], needles: &[&str]) -> String {
    let (code, _, err) = trtc_within(args, Duration::from_secs(20));
    assert_eq!(code, 1, "expected exit 1 for {args:?}, stderr: {err}");
    assert!(!err.contains("panicked") && !err.contains("internal error"), "panic for {args:?}: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "expected one line for {args:?}, got: {err}");
    for n in needles {
        assert!(err.contains(n), "expected '{n}' for {args:?} in: {err}");
    }
    err
}

fn s(p: &std::path::Path) -> &str {
    p.to_str().unwrap()
}

fn write_model(dir: &TempDir, name: &str, m: &pb::ModelProto) -> std::path::PathBuf {
    let p = dir.path(name);
    std::fs::write(&p, encode(m)).unwrap();
    p
}

fn build_ok(model: &std::path::Path, engine: &std::path::Path) {
    let (code, _, err) = trtc_within(&["build", s(model), "-o", s(engine)], Duration::from_secs(60));
    assert_eq!(code, 0, "{err}");
}

fn mkfifo(p: &std::path::Path) {
    let c = std::ffi::CString::new(s(p)).unwrap();
    assert_eq!(unsafe { libc_mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo {}", p.display());
}

extern "C" {
    #[link_name = "mkfifo"]
    fn libc_mkfifo(path: *const std::ffi::c_char, mode: u32) -> i32;
}

fn attr(name: &str, f: impl FnOnce(&mut pb::AttributeProto)) -> pb::AttributeProto {
    let mut a = pb::AttributeProto { name: name.into(), ..Default::default() };
    f(&mut a);
    a
}

/// x[2,3] -> op(attribute) -> y.
fn one_op(op: &str, a: pb::AttributeProto) -> pb::ModelProto {
    let mut n = node(op, "the_node", &["x"], &["y"]);
    n.attribute.push(a);
    let mut m = model(vec![n], vec![value_info("x", F32, &[2, 3])], vec![value_info("y", F32, &[2, 3])], vec![]);
    m.graph.as_mut().unwrap().output[0].r#type = None;
    m
}

#[test]
fn special_files_are_refused_at_once_on_every_path() {
    let dir = TempDir::new("fifo");
    let engine = dir.path("mlp.engine");
    let model = write_model(&dir, "mlp.onnx", &mlp());
    build_ok(&model, &engine);
    let fifo = dir.path("fifo");
    mkfifo(&fifo);
    let f = s(&fifo);
    let fifo_err = ["is a FIFO, not a regular file"];
    expect_error(&["build", f, "-o", s(&dir.path("x.engine"))], &fifo_err);
    expect_error(&["build", s(&model), "-o", f], &fifo_err);
    expect_error(&["build", s(&model), "-o", s(&dir.path("y.engine")), "--input-value", &format!("x:{f}")], &fifo_err);
    expect_error(&["run", f], &fifo_err);
    expect_error(&["inspect", f], &fifo_err);
    expect_error(&["inspect", "--version-only", f], &fifo_err);
    expect_error(&["bench", f], &fifo_err);
    expect_error(&["run", s(&engine), "--inputs", f], &fifo_err);
    expect_error(&["run", s(&engine), "--save-outputs", f], &fifo_err);
    expect_error(&["compare", f, f], &fifo_err);
    // A device is no better; and writing there never prints zip's drop
    // warning before the error.
    let e = expect_error(&["run", s(&engine), "--save-outputs", "/dev/full"], &["/dev/full", "character device"]);
    assert!(!e.contains("ZipWriter"), "{e}");
    expect_error(&["run", "/dev/zero"], &["character device"]);
    expect_error(&["run", s(&dir.0)], &["is a directory"]);

    // Calibration: a FIFO among the batches, or as the cache.
    let calib = TempDir::new("fifo-calib");
    mkfifo(&calib.path("b0.npz"));
    let e = expect_error(&["build", s(&model), "-o", s(&dir.path("z.engine")), "--int8", "--calib", s(&calib.0)], &fifo_err);
    assert!(e.contains("b0.npz"), "{e}");
    expect_error(&["calibrate", s(&model), "--calib", s(&calib.0), "-o", s(&dir.path("c.cache"))], &fifo_err);
    expect_error(&["build", s(&model), "-o", s(&dir.path("z.engine")), "--int8", "--calib-cache", f], &fifo_err);
}

#[test]
fn a_timing_cache_that_is_a_fifo_is_refused() {
    // Only GPU targets read a timing cache; building for sm_90 needs NVRTC,
    // which the test script installs (elsewhere the error names NVRTC).
    let dir = TempDir::new("fifo-tc");
    let model = write_model(&dir, "mlp.onnx", &mlp());
    let fifo = dir.path("tc");
    mkfifo(&fifo);
    let (code, _, err) = trtc_within(
        &["build", s(&model), "-o", s(&dir.path("g.engine")), "--target", "sm_90", "--timing-cache", s(&fifo)],
        Duration::from_secs(60),
    );
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("is a FIFO") || err.to_lowercase().contains("nvrtc"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
}

/// An npz archive whose one member declares `shape` of u8 and really
/// inflates to `real` zero bytes (deflated: a few KB per MB).
fn bomb(path: &std::path::Path, member: &str, dims: &str, real: usize) {
    let mut w = zip::ZipWriter::new(std::fs::File::create(path).unwrap());
    w.start_file(member, zip::write::FileOptions::default().compression_method(zip::CompressionMethod::Deflated)).unwrap();
    let mut dict = format!("{{'descr': '|u1', 'fortran_order': False, 'shape': ({dims}), }}");
    while (10 + dict.len() + 1) % 64 != 0 {
        dict.push(' ');
    }
    dict.push('\n');
    w.write_all(b"\x93NUMPY\x01\x00").unwrap();
    w.write_all(&(dict.len() as u16).to_le_bytes()).unwrap();
    w.write_all(dict.as_bytes()).unwrap();
    let zeros = vec![0u8; 1 << 20];
    for _ in 0..real >> 20 {
        w.write_all(&zeros).unwrap();
    }
    w.finish().unwrap();
}

#[test]
fn decompression_bombs_are_refused_before_they_inflate() {
    let dir = TempDir::new("bomb");
    let engine = dir.path("mlp.engine");
    build_ok(&write_model(&dir, "mlp.onnx", &mlp()), &engine);
    // 6 GiB declared, 64 MiB really there: refusing from the header is
    // the only way to answer within the time limit.
    let b = dir.path("bomb.npz");
    bomb(&b, "x.npy", "6442450944,", 64 << 20);
    expect_error(&["run", s(&engine), "--inputs", s(&b)], &["input 'x' must be f32[2,3], got u8[6442450944]"]);
    // A name the engine does not have is refused unread too.
    let other = dir.path("other.npz");
    bomb(&other, "nope.npy", "6442450944,", 1 << 20);
    expect_error(&["run", s(&engine), "--inputs", s(&other)], &["unknown input 'nope'"]);
    // compare: shapes differ, so neither is inflated.
    let small = dir.path("small.npz");
    bomb(&small, "x.npy", "1048576,", 1 << 20);
    let (code, out, err) = trtc_within(&["compare", s(&b), s(&small)], Duration::from_secs(20));
    assert_eq!(code, 1, "{err}");
    assert!(out.contains("SHAPE MISMATCH"), "{out}");
    // Calibration checks each batch's header against the model's input.
    let calib = TempDir::new("bomb-calib");
    bomb(&calib.path("b0.npz"), "x.npy", "6442450944,", 1 << 20);
    expect_error(
        &["calibrate", s(&dir.path("mlp.onnx")), "--calib", s(&calib.0), "-o", s(&dir.path("c.cache"))],
        &["is u8[6442450944], but the engine's input is f32[2,3]"],
    );
    // A member whose data is shorter or longer than its header says.
    let short = dir.path("short.npz");
    bomb(&short, "x.npy", "2, 3", 0);
    expect_error(&["compare", s(&short), s(&short)], &["declares"]);
}

#[test]
fn an_engine_declaring_a_huge_input_is_an_error_without_inputs() {
    // 2^33 f32 elements: 32 GiB, more than a 24 GiB machine has.
    let dir = TempDir::new("huge-input");
    let mut m = model(
        vec![node("Relu", "relu", &["x"], &["y"])],
        vec![value_info("x", F32, &[1 << 33])],
        vec![value_info("y", F32, &[1 << 33])],
        vec![],
    );
    m.graph.as_mut().unwrap().output[0].r#type = None;
    let engine = dir.path("huge.engine");
    build_ok(&write_model(&dir, "huge.onnx", &m), &engine);
    expect_error(&["run", s(&engine)], &["random inputs", "more than the memory available"]);
    expect_error(&["bench", s(&engine)], &["random inputs", "more than the memory available"]);
}

#[test]
fn bench_flags_at_their_limits_are_errors() {
    let dir = TempDir::new("bench-flags");
    let engine = dir.path("mlp.engine");
    build_ok(&write_model(&dir, "mlp.onnx", &mlp()), &engine);
    let e = s(&engine);
    expect_error(&["bench", e, "--iterations", "18446744073709551615"], &["--iterations", "not in 1..=100000000"]);
    expect_error(&["bench", e, "--iterations", "0"], &["--iterations"]);
    expect_error(&["bench", e, "--duration", "1e300"], &["--duration 1e300: too long"]);
    expect_error(&["bench", e, "--duration", "NaN"], &["--duration NaN"]);
    let (code, out, err) = trtc_within(&["bench", e, "--iterations", "2", "--duration", "0"], Duration::from_secs(20));
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("2 iterations"), "{out}");
}

#[test]
fn long_npy_headers_round_trip_through_run() {
    // An output of rank 100,000: its npy header is longer than version 1's
    // u16 length allows, so version 2 is written, and read back.
    let dir = TempDir::new("rank");
    let rank = 100_000;
    let mut m = model(
        vec![node("Reshape", "reshape", &["x", "shape"], &["y"])],
        vec![value_info("x", F32, &[1])],
        vec![value_info("y", F32, &[])],
        vec![i64_tensor("shape", &[rank as i64], &vec![1; rank])],
    );
    m.graph.as_mut().unwrap().output[0].r#type = None;
    let engine = dir.path("rank.engine");
    build_ok(&write_model(&dir, "rank.onnx", &m), &engine);
    let out = dir.path("out.npz");
    let (code, _, err) = trtc_within(&["run", s(&engine), "--save-outputs", s(&out)], Duration::from_secs(60));
    assert_eq!(code, 0, "{err}");
    let back = trtc::npz::read_npz(&out).unwrap();
    assert_eq!(back[0].1.shape().len(), rank);
}

#[test]
fn attributes_of_the_wrong_type_are_errors() {
    let dir = TempDir::new("attr-types");
    let cases: Vec<(&str, pb::AttributeProto, &str)> = vec![
        (
            "LeakyRelu",
            attr("alpha", |a| (a.r#type, a.s) = (3, b"0.1".to_vec())),
            "attribute 'alpha' must be a float (ONNX type FLOAT), got STRING",
        ),
        (
            "LeakyRelu",
            attr("alpha", |a| (a.r#type, a.i) = (2, 1)),
            "attribute 'alpha' must be a float (ONNX type FLOAT), got INT",
        ),
        (
            "Transpose",
            attr("perm", |a| (a.r#type, a.i) = (2, 1)),
            "attribute 'perm' must be a list of ints (ONNX type INTS), got INT",
        ),
        ("Flatten", attr("axis", |a| (a.r#type, a.f) = (1, 1.0)), "attribute 'axis' must be an int (ONNX type INT), got FLOAT"),
        ("Flatten", attr("axis", |a| (a.r#type, a.s) = (3, b"1".to_vec())), "got STRING"),
        ("Flatten", attr("axis", |a| (a.r#type, a.ints) = (7, vec![1])), "got INTS"),
    ];
    for (i, (op, a, needle)) in cases.into_iter().enumerate() {
        let model = write_model(&dir, &format!("m{i}.onnx"), &one_op(op, a));
        expect_error(&["build", s(&model), "-o", s(&dir.path("m.engine"))], &["node 'the_node'", needle]);
    }
    // The right types still build, and old models without a type tag too.
    let model = write_model(&dir, "ok.onnx", &one_op("LeakyRelu", attr("alpha", |a| (a.r#type, a.f) = (1, 0.1))));
    build_ok(&model, &dir.path("ok.engine"));
    let model = write_model(&dir, "untyped.onnx", &one_op("LeakyRelu", attr("alpha", |a| a.f = 0.1)));
    build_ok(&model, &dir.path("untyped.engine"));
}

#[test]
fn compare_tolerance_must_be_a_number_and_nan_errors_fail() {
    let dir = TempDir::new("compare-nan");
    let a = dir.path("a.npz");
    let b = dir.path("b.npz");
    let t = |v: f32| trtc_runtime::Tensor::from_vec(vec![2], vec![1.0f32, v]).unwrap();
    trtc::npz::write_npz(&a, &[("y".into(), t(f32::NAN))]).unwrap();
    trtc::npz::write_npz(&b, &[("y".into(), t(2.0))]).unwrap();
    expect_error(&["compare", s(&a), s(&b), "--tolerance", "NaN"], &["--tolerance", "'NaN' is not a tolerance"]);
    expect_error(&["compare", s(&a), s(&b), "--tolerance=-1"], &["--tolerance"]);
    expect_error(&["compare", s(&a), s(&b), "--tolerance", "1e30"], &["outputs differ"]);
    let (code, _, err) = trtc_within(&["compare", s(&b), s(&b)], Duration::from_secs(20));
    assert_eq!(code, 0, "{err}");
}

#[test]
fn names_cannot_forge_lines_or_escape_the_terminal() {
    let dir = TempDir::new("names");
    let mut m = mlp();
    m.graph.as_mut().unwrap().node.push(node("Frobnicate", "evil\nerror: forged\u{1b}[2J", &["y"], &["z"]));
    let model = write_model(&dir, "evil.onnx", &m);
    let e = expect_error(&["build", s(&model), "-o", s(&dir.path("e.engine"))], &["evil\\nerror: forged\\u{1b}[2J"]);
    assert!(!e.contains('\u{1b}'), "{e}");
    // A malformed npy header: one line too.
    let npy = dir.path("bad.npy");
    std::fs::write(&npy, b"\x93NUMPY\x01\x00\x10\x00{'descr': oops}\n").unwrap();
    expect_error(
        &["build", s(&model), "-o", s(&dir.path("e.engine")), "--input-value", &format!("x:{}", s(&npy))],
        &["malformed npy header"],
    );
    // Command-line mistakes: one line, exit 1, like every error.
    expect_error(&["build", "--fp61"], &["unexpected argument '--fp61'"]);
    expect_error(&["frobnicate"], &["unrecognized subcommand"]);
}

#[test]
fn graphs_that_break_onnx_rules_are_refused() {
    let dir = TempDir::new("ssa");
    let two_writers = model(
        vec![node("Relu", "first", &["x"], &["y"]), node("Neg", "second", &["x"], &["y"])],
        vec![value_info("x", F32, &[2])],
        vec![value_info("y", F32, &[2])],
        vec![],
    );
    let m = write_model(&dir, "two.onnx", &two_writers);
    expect_error(
        &["build", s(&m), "-o", s(&dir.path("e"))],
        &["tensor 'y' is written by two nodes, 'first' (Relu) and 'second' (Neg)"],
    );
    let mut twice = mlp();
    let out = twice.graph.as_ref().unwrap().output[0].clone();
    twice.graph.as_mut().unwrap().output.push(out);
    let m = write_model(&dir, "twice.onnx", &twice);
    expect_error(&["build", s(&m), "-o", s(&dir.path("e"))], &["graph output 'y' is listed twice"]);
    let cycle = model(
        vec![node("Relu", "a", &["x", "c"], &["b"]), node("Relu", "b", &["b"], &["c"])],
        vec![value_info("x", F32, &[2])],
        vec![value_info("c", F32, &[2])],
        vec![],
    );
    let m = write_model(&dir, "cycle.onnx", &cycle);
    expect_error(&["build", s(&m), "-o", s(&dir.path("e"))], &["cycle"]);
}

#[test]
fn flags_naming_what_the_model_does_not_have_are_errors() {
    let dir = TempDir::new("flags");
    let model = write_model(&dir, "mlp.onnx", &mlp());
    let npy = dir.path("v.npy");
    let mut f = std::fs::File::create(&npy).unwrap();
    trtc::npz::write_npy(&mut f, &trtc_runtime::Tensor::from_vec(vec![1], vec![1i64]).unwrap()).unwrap();
    let m = s(&model);
    let o = dir.path("e.engine");
    expect_error(
        &["build", m, "-o", s(&o), "--input-value", &format!("nosuch:{}", s(&npy))],
        &["--input-value names 'nosuch'", "\"x\""],
    );
    expect_error(&["build", m, "-o", s(&o), "--shape", "x:4x3"], &["--shape x: dimension 0 is 4, but the model fixes it at 2"]);
    build_ok(&model, &o);
    let (code, _, err) = trtc_within(&["build", m, "-o", s(&o), "--shape", "x:2x3"], Duration::from_secs(30));
    assert_eq!(code, 0, "{err}");
}

#[test]
fn output_names_that_are_not_safe_member_names_are_refused_when_saved() {
    let dir = TempDir::new("member-names");
    let mut m = mlp();
    let g = m.graph.as_mut().unwrap();
    g.node.last_mut().unwrap().output[0] = "../../escape".into();
    g.output[0].name = "../../escape".into();
    let model = write_model(&dir, "m.onnx", &m);
    let engine = dir.path("m.engine");
    build_ok(&model, &engine);
    expect_error(&["run", s(&engine), "--save-outputs", s(&dir.path("o.npz"))], &["'../../escape' cannot be an npz member name"]);
    assert!(!dir.path("o.npz").exists(), "a partial file was left behind");
}
