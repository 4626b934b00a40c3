//! The scheduler of one model version: a queue of requests and a pool of
//! instances, each a thread that owns one execution context (on the CPU
//! executor or a GPU) and takes the oldest request when it is free.
//!
//! The queue follows Triton's `default_queue_policy`: with `max_queue_size`
//! a full queue answers "unavailable" at once instead of growing, and with
//! `default_timeout_microseconds` a request still waiting past its deadline
//! is answered "unavailable" instead of being run. Engines have static
//! shapes today, so every request is one execution; batching requests
//! together along a batch profile's first dimension comes with dynamic
//! shapes.

use std::collections::VecDeque;
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;
use trtc_runtime::{Engine, Tensor};

use crate::metrics::{micros, ModelMetrics};
use crate::model_config::QueuePolicy;
use crate::protocol::{ServeError, ServeResult};

/// Where an instance runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    Cpu,
    Gpu(usize),
}

impl std::fmt::Display for Placement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Placement::Cpu => f.write_str("CPU"),
            Placement::Gpu(i) => write!(f, "GPU {i}"),
        }
    }
}

pub type Outputs = Vec<(String, Tensor)>;

/// One request waiting for an instance.
pub struct Job {
    pub inputs: Vec<(String, Tensor)>,
    pub enqueued: Instant,
    pub reply: oneshot::Sender<ServeResult<Outputs>>,
}

struct State {
    jobs: VecDeque<Job>,
    closed: bool,
}

struct Queue {
    state: Mutex<State>,
    ready: Condvar,
    policy: QueuePolicy,
    metrics: ModelMetrics,
}

pub struct Scheduler {
    queue: Arc<Queue>,
    workers: Vec<JoinHandle<()>>,
}

impl Scheduler {
    /// Starts one thread per placement, each creating its execution context;
    /// fails (stopping those started) when any context cannot be created.
    pub fn start(
        engine: Arc<Engine>,
        placements: &[Placement],
        policy: QueuePolicy,
        metrics: ModelMetrics,
    ) -> Result<Scheduler, String> {
        let queue = Arc::new(Queue {
            state: Mutex::new(State { jobs: VecDeque::new(), closed: false }),
            ready: Condvar::new(),
            policy,
            metrics,
        });
        let mut s = Scheduler { queue: queue.clone(), workers: Vec::new() };
        for (i, &p) in placements.iter().enumerate() {
            let (started, confirmed) = mpsc::channel();
            let (engine, queue) = (engine.clone(), queue.clone());
            let worker = std::thread::Builder::new()
                .name(format!("trtc-instance-{i}"))
                .spawn(move || instance(&engine, p, &queue, started))
                .map_err(|e| format!("cannot start an instance thread: {e}"))?;
            s.workers.push(worker);
            match confirmed.recv() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => return Err(format!("instance {i} on {p}: {e}")),
                Err(_) => return Err(format!("instance {i} on {p} stopped while starting")),
            }
        }
        Ok(s)
    }

    /// Queues a request, or refuses it when the queue is full or closed.
    pub fn submit(&self, job: Job) -> ServeResult<()> {
        let mut st = self.queue.state.lock().unwrap_or_else(|e| e.into_inner());
        if st.closed {
            return Err(ServeError::unavailable("the server is shutting down"));
        }
        let max = self.queue.policy.max_queue_size;
        if max > 0 && st.jobs.len() >= max {
            return Err(ServeError::unavailable(format!("exceeds the maximum queue size of {max}")));
        }
        st.jobs.push_back(job);
        self.queue.metrics.pending.inc();
        drop(st);
        self.queue.ready.notify_one();
        Ok(())
    }

    /// Stops taking requests, lets the instances finish those queued, and
    /// waits for them.
    pub fn shutdown(&mut self) {
        self.queue.state.lock().unwrap_or_else(|e| e.into_inner()).closed = true;
        self.queue.ready.notify_all();
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}

impl Drop for Scheduler {
    fn drop(&mut self) {
        self.shutdown();
    }
}

enum Context<'e> {
    Cpu(trtc_runtime::ExecutionContext<'e>),
    Gpu(trtc_runtime::CudaExecutionContext<'e>),
}

impl Context<'_> {
    fn run(&mut self, inputs: &[(&str, &Tensor)]) -> trtc_runtime::Result<Outputs> {
        match self {
            Context::Cpu(c) => c.run(inputs),
            Context::Gpu(c) => c.run(inputs),
        }
    }
}

/// One instance's thread: creates its context, says so on `started`, then
/// serves the queue until it is closed and empty.
fn instance(engine: &Engine, placement: Placement, queue: &Queue, started: mpsc::Sender<Result<(), String>>) {
    let gpu = match placement {
        Placement::Gpu(ordinal) => match engine.cuda(ordinal) {
            Ok(g) => Some(g),
            Err(e) => {
                let _ = started.send(Err(e.to_string()));
                return;
            }
        },
        Placement::Cpu => None,
    };
    let context = match placement {
        Placement::Cpu => engine.create_context().map(Context::Cpu),
        Placement::Gpu(_) => gpu.as_ref().expect("made above for a GPU placement").create_context().map(Context::Gpu),
    };
    let mut context = match context {
        Ok(c) => c,
        Err(e) => {
            let _ = started.send(Err(e.to_string()));
            return;
        }
    };
    let _ = started.send(Ok(()));
    let m = &queue.metrics;
    let timeout = Duration::from_micros(queue.policy.default_timeout_us);
    while let Some(job) = next_job(queue) {
        m.pending.dec();
        let start = Instant::now();
        let waited = start - job.enqueued;
        m.queue_duration.inc_by(micros(waited));
        if queue.policy.default_timeout_us > 0 && waited > timeout {
            let _ = job.reply.send(Err(ServeError::unavailable("the request timed out in the queue")));
            continue;
        }
        let refs: Vec<(&str, &Tensor)> = job.inputs.iter().map(|(n, t)| (n.as_str(), t)).collect();
        let ran = Instant::now();
        m.compute_input.inc_by(micros(ran - start));
        let result = context.run(&refs);
        let done = Instant::now();
        m.compute_infer.inc_by(micros(done - ran));
        m.exec_count.inc();
        let reply = result.map_err(|e| ServeError::internal(format!("execution failed: {e}")));
        if reply.is_ok() {
            m.count.inc();
        }
        let _ = job.reply.send(reply);
        m.compute_output.inc_by(micros(done.elapsed()));
    }
}

/// The oldest queued job; `None` once the queue is closed and empty.
fn next_job(queue: &Queue) -> Option<Job> {
    let mut st = queue.state.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        if let Some(job) = st.jobs.pop_front() {
            return Some(job);
        }
        if st.closed {
            return None;
        }
        st = queue.ready.wait(st).unwrap_or_else(|e| e.into_inner());
    }
}
