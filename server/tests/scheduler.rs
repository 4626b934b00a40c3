//! The scheduler's queue policy (Triton's `default_queue_policy`, REJECT):
//! a full queue refuses at once, a request past its timeout is answered
//! "unavailable" instead of run, and a stopped scheduler still answers what
//! it had queued.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;
use trtc_runtime::{Engine, Tensor};
use trtc_server::metrics::Metrics;
use trtc_server::model_config::QueuePolicy;
use trtc_server::protocol::{ErrorKind, ServeResult};
use trtc_server::scheduler::{Job, Outputs, Placement, Scheduler};

fn engine() -> Arc<Engine> {
    let onnx = Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/models/example_cnn.onnx");
    let built = trtc::build::build_file(&onnx, &Default::default()).unwrap();
    Arc::new(Engine::from_bytes(&built.engine).unwrap())
}

fn job(engine: &Engine, enqueued: Instant) -> (Job, oneshot::Receiver<ServeResult<Outputs>>) {
    let inputs = engine.inputs().iter().map(|b| (b.name.clone(), Tensor::zeros(b.ty.clone()).unwrap())).collect();
    let (reply, answer) = oneshot::channel();
    (Job { inputs, enqueued, reply }, answer)
}

#[test]
fn a_full_queue_refuses_at_once() {
    let engine = engine();
    let metrics = Metrics::new();
    // No instance: nothing leaves the queue.
    let policy = QueuePolicy { max_queue_size: 2, default_timeout_us: 0 };
    let s = Scheduler::start(engine.clone(), &[], policy, metrics.model("m", 1)).unwrap();
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
    let mut s = Scheduler::start(engine.clone(), &[Placement::Cpu], policy, metrics.model("m", 1)).unwrap();
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
        Scheduler::start(engine.clone(), &[Placement::Cpu, Placement::Cpu], QueuePolicy::default(), metrics.model("m", 1))
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
