//! The scheduler's queue policy (Triton's `default_queue_policy`, REJECT):
//! a full queue refuses at once, a request past its timeout is answered
//! "unavailable" instead of run, and a stopped scheduler still answers what
//! it had queued. The dynamic batcher: requests run together up to
//! `max_batch_size` rows, each answered with its own rows, equal to running
//! it alone.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;
use trtc_runtime::{Engine, Tensor};
use trtc_server::metrics::Metrics;
use trtc_server::model_config::QueuePolicy;
use trtc_server::protocol::{ErrorKind, ServeResult};
use trtc_server::scheduler::{Batching, Job, Outputs, Placement, Scheduler};

fn onnx() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/models/example_cnn.onnx")
}

fn engine() -> Arc<Engine> {
    let built = trtc::build::build_file(&onnx(), &Default::default()).unwrap();
    Arc::new(Engine::from_bytes(&built.engine).unwrap())
}

/// testdata/serve/batch_cnn.onnx with a batch profile: `x` from 1x3x16x16
/// to 8x3x16x16.
fn batch_engine() -> Arc<Engine> {
    let dims = |b: usize| vec![b, 3, 16, 16];
    let profile = trtc::build::ShapeProfile { inputs: vec![("x".into(), [dims(1), dims(4), dims(8)])] };
    let opts = trtc::build::BuildOptions { profiles: vec![profile], ..Default::default() };
    let onnx = Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/serve/batch_cnn.onnx");
    let built = trtc::build::build_file(&onnx, &opts).unwrap();
    Arc::new(Engine::from_bytes(&built.engine).unwrap())
}

fn job(engine: &Engine, enqueued: Instant) -> (Job, oneshot::Receiver<ServeResult<Outputs>>) {
    let inputs = engine.inputs().iter().map(|b| (b.name.clone(), Tensor::zeros(b.ty.clone()).unwrap())).collect();
    let (reply, answer) = oneshot::channel();
    (Job { inputs, rows: 1, enqueued, reply }, answer)
}

/// A request of `rows` rows of distinct values (seeded by `seed`).
fn rows_job(rows: usize, seed: usize) -> (Job, oneshot::Receiver<ServeResult<Outputs>>, Tensor) {
    let values: Vec<f32> = (0..rows * 3 * 16 * 16).map(|i| ((i * 7 + seed * 131) % 97) as f32 / 97.0 - 0.5).collect();
    let x = Tensor::from_vec(vec![rows, 3, 16, 16], values).unwrap();
    let (reply, answer) = oneshot::channel();
    (Job { inputs: vec![("x".into(), x.clone())], rows, enqueued: Instant::now(), reply }, answer, x)
}

#[test]
fn a_full_queue_refuses_at_once() {
    let engine = engine();
    let metrics = Metrics::new();
    // No instance: nothing leaves the queue.
    let policy = QueuePolicy { max_queue_size: 2, default_timeout_us: 0 };
    let s = Scheduler::start(engine.clone(), &[], policy, None, metrics.model("m", 1)).unwrap();
    let (a, _ra) = job(&engine, Instant::now());
    let (b, _rb) = job(&engine, Instant::now());
    let (c, _rc) = job(&engine, Instant::now());
    s.submit(a).unwrap();
    s.submit(b).unwrap();
    let e = s.submit(c).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Unavailable);
    assert!(e.message.contains("maximum queue size of 2"), "{e}");
    assert!(metrics.render().contains("nv_inference_pending_request_count{model=\"m\",version=\"1\"} 2"));
}

#[test]
fn requests_past_their_timeout_are_rejected_and_others_run() {
    let engine = engine();
    let metrics = Metrics::new();
    let policy = QueuePolicy { max_queue_size: 0, default_timeout_us: 50_000 };
    let mut s = Scheduler::start(engine.clone(), &[Placement::Cpu], policy, None, metrics.model("m", 1)).unwrap();
    let (late, late_answer) = job(&engine, Instant::now() - Duration::from_secs(1));
    let (fresh, fresh_answer) = job(&engine, Instant::now());
    s.submit(late).unwrap();
    s.submit(fresh).unwrap();
    let e = late_answer.blocking_recv().unwrap().unwrap_err();
    assert_eq!(e.kind, ErrorKind::Unavailable);
    assert!(e.message.contains("timed out"), "{e}");
    let outputs = fresh_answer.blocking_recv().unwrap().unwrap();
    assert_eq!(outputs.len(), engine.outputs().len());
    s.shutdown();
    let text = metrics.render();
    assert!(text.contains("nv_inference_exec_count{model=\"m\",version=\"1\"} 1"), "{text}");
}

#[test]
fn shutdown_answers_everything_queued() {
    let engine = engine();
    let metrics = Metrics::new();
    let mut s =
        Scheduler::start(engine.clone(), &[Placement::Cpu, Placement::Cpu], QueuePolicy::default(), None, metrics.model("m", 1))
            .unwrap();
    let answers: Vec<_> = (0..20)
        .map(|_| {
            let (j, a) = job(&engine, Instant::now());
            s.submit(j).unwrap();
            a
        })
        .collect();
    s.shutdown();
    for a in answers {
        assert!(a.blocking_recv().unwrap().is_ok());
    }
    let (j, _a) = job(&engine, Instant::now());
    assert_eq!(s.submit(j).unwrap_err().kind, ErrorKind::Unavailable);
}

#[test]
fn batched_requests_get_their_own_rows_equal_to_running_alone() {
    let engine = batch_engine();
    let metrics = Metrics::new();
    // A long delay: the batch goes out when it is full (8 rows), not before.
    let batching = Batching { max_batch_size: 8, preferred: vec![], max_queue_delay: Duration::from_secs(30) };
    let mut s =
        Scheduler::start(engine.clone(), &[Placement::Cpu], QueuePolicy::default(), Some(batching), metrics.model("m", 1))
            .unwrap();
    let mut pending = Vec::new();
    for (seed, rows) in [1, 3, 2, 2].into_iter().enumerate() {
        let (j, answer, x) = rows_job(rows, seed);
        s.submit(j).unwrap();
        pending.push((answer, x));
    }
    let mut alone = engine.create_context().unwrap();
    for (answer, x) in pending {
        let got = answer.blocking_recv().unwrap().unwrap();
        let want = alone.run(&[("x", &x)]).unwrap();
        assert_eq!(got.len(), want.len());
        for ((gn, g), (wn, w)) in got.iter().zip(&want) {
            assert_eq!((gn, g.shape()), (wn, w.shape()));
            let (g, w) = (g.as_slice::<f32>().unwrap(), w.as_slice::<f32>().unwrap());
            // The same kernels on more rows: equal up to summation order.
            assert!(g.iter().zip(w).all(|(a, b)| (a - b).abs() <= 1e-5 * (1.0 + b.abs())), "{gn}: {g:?} vs {w:?}");
        }
    }
    s.shutdown();
    let text = metrics.render();
    assert!(text.contains("nv_inference_exec_count{model=\"m\",version=\"1\"} 1"), "{text}");
    assert!(text.contains("nv_inference_count{model=\"m\",version=\"1\"} 8"), "{text}");
}

#[test]
fn a_batch_goes_out_at_a_preferred_size_or_after_the_delay() {
    let engine = batch_engine();
    let metrics = Metrics::new();
    // Five single-row requests with a preferred size of 2: batches of 2 go
    // out as soon as they form, the fifth request after the delay.
    let batching = Batching { max_batch_size: 8, preferred: vec![2], max_queue_delay: Duration::from_millis(200) };
    let mut s =
        Scheduler::start(engine.clone(), &[Placement::Cpu], QueuePolicy::default(), Some(batching), metrics.model("m", 1))
            .unwrap();
    let t0 = Instant::now();
    let answers: Vec<_> = (0..5)
        .map(|i| {
            let (j, a, _) = rows_job(1, i);
            s.submit(j).unwrap();
            a
        })
        .collect();
    for a in answers {
        assert_eq!(a.blocking_recv().unwrap().unwrap()[0].1.shape()[0], 1);
    }
    s.shutdown();
    let text = metrics.render();
    let execs: u64 = text
        .lines()
        .find(|l| l.starts_with("nv_inference_exec_count{"))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
        .unwrap();
    // No batch larger than the preferred 2 (so at least 3 executions), and
    // some batching (fewer than 5).
    assert!((3..5).contains(&execs), "{execs} executions: {text}");
    assert!(text.contains("nv_inference_count{model=\"m\",version=\"1\"} 5"), "{text}");
    // The single request left over waited for the delay, not forever.
    assert!(t0.elapsed() < Duration::from_secs(20));
}
