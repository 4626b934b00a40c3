//! The scheduler of one model version: a queue of requests and a pool of
//! instances, each a thread that owns one execution context (on the CPU
//! executor or a GPU) and takes the oldest request when it is free.
//!
//! The queue follows Triton's `default_queue_policy`: with `max_queue_size`
//! a full queue answers "unavailable" at once instead of growing, and with
//! `default_timeout_microseconds` a request still waiting past its deadline
//! is answered "unavailable" instead of being run.
//!
//! With [`Batching`] (a model with `max_batch_size` > 0 and
//! `dynamic_batching`), a free instance takes as many queued requests as fit
//! in `max_batch_size` rows, in arrival order and as long as their shapes
//! agree beyond the first axis, runs them as one execution and splits the
//! outputs back by rows, as Triton's dynamic batcher does: a batch goes out
//! at once when it is full or reaches one of the preferred sizes, otherwise
//! when its oldest request has waited `max_queue_delay_microseconds`.

use std::collections::VecDeque;
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;
use trtc_runtime::{Engine, Tensor, TensorType};

use crate::metrics::{Execution, ModelMetrics};
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

/// How requests are batched together (see the module's notes).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Batching {
    pub max_batch_size: usize,
    /// Sorted, each between 1 and `max_batch_size`.
    pub preferred: Vec<usize>,
    pub max_queue_delay: Duration,
}

/// One request waiting for an instance.
pub struct Job {
    /// In the engine's input order.
    pub inputs: Vec<(String, Tensor)>,
    /// The request's rows along the batch axis (1 for a model that does
    /// not batch).
    pub rows: usize,
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
    batching: Option<Batching>,
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
        batching: Option<Batching>,
        metrics: ModelMetrics,
    ) -> Result<Scheduler, String> {
        let queue = Arc::new(Queue {
            state: Mutex::new(State { jobs: VecDeque::new(), closed: false }),
            ready: Condvar::new(),
            policy,
            batching,
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
        Placement::Gpu(ordinal) => match engine.cuda_with_planner(ordinal, std::sync::Arc::new(trtc_kernels::FamilyPlanner)) {
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
    while let Some(batch) = next_batch(queue) {
        let start = Instant::now();
        let waited = batch.iter().map(|job| start - job.enqueued).collect();
        let merged = if batch.len() == 1 { None } else { Some(concatenate(&batch)) };
        let refs: Vec<(&str, &Tensor)> = match &merged {
            Some(Ok(inputs)) => inputs.iter().map(|(n, t)| (n.as_str(), t)).collect(),
            _ => batch[0].inputs.iter().map(|(n, t)| (n.as_str(), t)).collect(),
        };
        let ran = Instant::now();
        let result = match &merged {
            Some(Err(e)) => Err(e.clone()),
            _ => context.run(&refs).map_err(|e| ServeError::internal(format!("execution failed: {e}"))),
        };
        let done = Instant::now();
        let replies: Vec<ServeResult<Outputs>> = match result {
            Ok(outputs) if batch.len() == 1 => vec![Ok(outputs)],
            Ok(outputs) => split(&outputs, &batch),
            Err(e) => vec![Err(e); batch.len()],
        };
        // Recorded before any reply goes out, so that a client that has its
        // answer finds the execution in the metrics and statistics.
        queue.metrics.executed(&Execution {
            requests: batch.len() as u64,
            rows: batch.iter().map(|j| j.rows as u64).sum(),
            succeeded: replies.iter().all(|r| r.is_ok()),
            waited,
            input: ran - start,
            infer: done - ran,
            output: done.elapsed(),
        });
        for (job, reply) in batch.into_iter().zip(replies) {
            let _ = job.reply.send(reply);
        }
    }
}

/// The next requests to run as one execution; `None` once the queue is
/// closed and empty. Requests past their queue timeout are answered here.
fn next_batch(queue: &Queue) -> Option<Vec<Job>> {
    let mut st = queue.state.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        drop_expired(queue, &mut st);
        if st.jobs.is_empty() {
            if st.closed {
                return None;
            }
            st = queue.ready.wait(st).unwrap_or_else(|e| e.into_inner());
            continue;
        }
        let Some(b) = &queue.batching else {
            queue.metrics.pending.dec();
            return st.jobs.pop_front().map(|j| vec![j]);
        };
        // The longest prefix of the queue that fits and agrees in shape,
        // and the rows after each of its requests.
        let mut rows = Vec::new();
        let mut total = 0;
        for job in st.jobs.iter() {
            if total + job.rows > b.max_batch_size || !same_shapes_beyond_batch(&st.jobs[0], job) {
                break;
            }
            total += job.rows;
            rows.push(total);
        }
        let take = |n: usize, st: &mut State| {
            queue.metrics.pending.sub(n as i64);
            let batch = st.jobs.drain(..n).collect();
            if !st.jobs.is_empty() {
                // Another free instance can start on the rest.
                queue.ready.notify_one();
            }
            Some(batch)
        };
        let all_queued = rows.len() == st.jobs.len();
        if total == b.max_batch_size || !all_queued || st.closed {
            // Full, or the next request cannot join: nothing to wait for.
            return take(rows.len().max(1), &mut st);
        }
        if let Some(n) = b.preferred.iter().rev().find_map(|p| rows.iter().position(|r| r == p)) {
            return take(n + 1, &mut st);
        }
        let deadline = st.jobs[0].enqueued + b.max_queue_delay;
        let now = Instant::now();
        if now >= deadline {
            return take(rows.len().max(1), &mut st);
        }
        st = queue.ready.wait_timeout(st, deadline - now).unwrap_or_else(|e| e.into_inner()).0;
    }
}

/// Answers the requests at the front of the queue that waited past the
/// queue policy's timeout.
fn drop_expired(queue: &Queue, st: &mut State) {
    if queue.policy.default_timeout_us == 0 {
        return;
    }
    let timeout = Duration::from_micros(queue.policy.default_timeout_us);
    let now = Instant::now();
    while st.jobs.front().is_some_and(|j| now - j.enqueued > timeout) {
        let job = st.jobs.pop_front().expect("checked above");
        queue.metrics.pending.dec();
        queue.metrics.dropped_from_queue(now - job.enqueued);
        let _ = job.reply.send(Err(ServeError::unavailable("the request timed out in the queue")));
    }
}

fn same_shapes_beyond_batch(a: &Job, b: &Job) -> bool {
    a.inputs.len() == b.inputs.len()
        && a.inputs.iter().zip(&b.inputs).all(|((_, x), (_, y))| x.shape().get(1..) == y.shape().get(1..))
}

/// The batch's inputs, each the requests' tensors one after another along
/// the first axis.
fn concatenate(batch: &[Job]) -> ServeResult<Vec<(String, Tensor)>> {
    let rows: usize = batch.iter().map(|j| j.rows).sum();
    let first = &batch[0];
    let mut merged = Vec::with_capacity(first.inputs.len());
    for (i, (name, t)) in first.inputs.iter().enumerate() {
        let mut shape = t.shape().to_vec();
        shape[0] = rows;
        let mut out = Tensor::zeros(TensorType::new(t.dtype(), shape))
            .map_err(|e| ServeError::internal(format!("cannot batch input '{name}': {e}")))?;
        let mut at = 0;
        for job in batch {
            let bytes = job.inputs[i].1.bytes();
            out.bytes_mut()[at..at + bytes.len()].copy_from_slice(bytes);
            at += bytes.len();
        }
        merged.push((name.clone(), out));
    }
    Ok(merged)
}

/// Each request's rows of the batch's outputs.
fn split(outputs: &Outputs, batch: &[Job]) -> Vec<ServeResult<Outputs>> {
    let rows: usize = batch.iter().map(|j| j.rows).sum();
    if let Some((name, t)) = outputs.iter().find(|(_, t)| t.shape().first() != Some(&rows)) {
        let e = ServeError::internal(format!(
            "output '{name}' of a batch of {rows} has shape {:?}, not {rows} rows: the engine does not batch along its first axis",
            t.shape()
        ));
        return vec![Err(e); batch.len()];
    }
    let mut replies: Vec<ServeResult<Outputs>> = batch.iter().map(|_| Ok(Vec::with_capacity(outputs.len()))).collect();
    for (name, t) in outputs {
        let row_bytes = t.bytes().len() / rows.max(1);
        let mut at = 0;
        for (job, reply) in batch.iter().zip(replies.iter_mut()) {
            let mut shape = t.shape().to_vec();
            shape[0] = job.rows;
            let part = Tensor::from_bytes(TensorType::new(t.dtype(), shape), &t.bytes()[at..at + job.rows * row_bytes]);
            at += job.rows * row_bytes;
            match (part, reply.as_mut()) {
                (Ok(p), Ok(r)) => r.push((name.clone(), p)),
                (Err(e), Ok(_)) => *reply = Err(ServeError::internal(format!("cannot split output '{name}': {e}"))),
                _ => {}
            }
        }
    }
    replies
}
