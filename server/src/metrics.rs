//! Triton's inference metrics, under Triton's names and labels (`model`,
//! `version`) so that existing dashboards and alerts work unchanged, in the
//! Prometheus text format on the metrics port.
//!
//! As in Triton, durations are cumulative counters in microseconds: divide
//! by `nv_inference_request_success` (or `nv_inference_exec_count`) for a
//! mean. `request_duration` is from the request's arrival to its response
//! being ready; `queue_duration` the time waiting for an instance;
//! `compute_input` assembling the execution's inputs; `compute_infer` the
//! execution; `compute_output` splitting its outputs back to requests.
//!
//! The same events feed each model version's [`ModelStatistics`], Triton's
//! statistics extension (`get_inference_statistics`, perf_analyzer's
//! server-side figures): nanoseconds instead of microseconds, and counts
//! per batch size.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use prometheus::{Encoder, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry, TextEncoder};

pub struct Metrics {
    registry: Registry,
    success: IntCounterVec,
    failure: IntCounterVec,
    count: IntCounterVec,
    exec_count: IntCounterVec,
    request_duration: IntCounterVec,
    queue_duration: IntCounterVec,
    compute_input: IntCounterVec,
    compute_infer: IntCounterVec,
    compute_output: IntCounterVec,
    pending: IntGaugeVec,
}

/// One model version's metrics (the label values bound once).
#[derive(Clone)]
pub struct ModelMetrics {
    pub success: IntCounter,
    pub failure: IntCounter,
    pub count: IntCounter,
    pub exec_count: IntCounter,
    pub request_duration: IntCounter,
    pub queue_duration: IntCounter,
    pub compute_input: IntCounter,
    pub compute_infer: IntCounter,
    pub compute_output: IntCounter,
    pub pending: IntGauge,
    statistics: Arc<Mutex<ModelStatistics>>,
}

/// A count of events and their cumulative duration.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StatisticDuration {
    pub count: u64,
    pub ns: u64,
}

impl StatisticDuration {
    fn add(&mut self, count: u64, each: Duration) {
        self.count += count;
        self.ns = self.ns.saturating_add(nanos(each).saturating_mul(count));
    }
}

/// The executions of one batch size (rows), each counted once.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BatchStatistics {
    pub compute_input: StatisticDuration,
    pub compute_infer: StatisticDuration,
    pub compute_output: StatisticDuration,
}

/// One model version's statistics as Triton reports them: `success` and
/// `fail` count requests with their whole duration; `queue` and the
/// `compute_*` phases count the successful requests, each with the phase of
/// the execution it was part of; `batch_stats` count executions by size.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ModelStatistics {
    /// Milliseconds since the Unix epoch at the end of the last execution,
    /// 0 before the first.
    pub last_inference_ms: u64,
    /// Rows inferred (a batched request of 4 rows counts 4).
    pub inference_count: u64,
    pub execution_count: u64,
    pub success: StatisticDuration,
    pub fail: StatisticDuration,
    pub queue: StatisticDuration,
    pub compute_input: StatisticDuration,
    pub compute_infer: StatisticDuration,
    pub compute_output: StatisticDuration,
    /// By batch size in rows.
    pub batches: BTreeMap<u64, BatchStatistics>,
}

/// What one execution did, for [`ModelMetrics::executed`].
pub struct Execution {
    /// The requests it served, and how many rows they held together.
    pub requests: u64,
    pub rows: u64,
    /// Whether it produced each request's outputs.
    pub succeeded: bool,
    pub waited: Vec<Duration>,
    pub input: Duration,
    pub infer: Duration,
    pub output: Duration,
}

impl ModelMetrics {
    /// A request answered with its outputs, `took` after it arrived.
    pub fn request_succeeded(&self, took: Duration) {
        self.success.inc();
        self.request_duration.inc_by(micros(took));
        self.stats().success.add(1, took);
    }

    /// A request answered with an error.
    pub fn request_failed(&self, took: Duration) {
        self.failure.inc();
        self.stats().fail.add(1, took);
    }

    /// A request that left the queue without running (it timed out there).
    pub fn dropped_from_queue(&self, waited: Duration) {
        self.queue_duration.inc_by(micros(waited));
    }

    /// One execution of the model and the requests it served.
    pub fn executed(&self, e: &Execution) {
        let n = e.requests;
        self.exec_count.inc();
        for w in &e.waited {
            self.queue_duration.inc_by(micros(*w));
        }
        self.compute_input.inc_by(micros(e.input) * n);
        self.compute_infer.inc_by(micros(e.infer) * n);
        self.compute_output.inc_by(micros(e.output) * n);
        if e.succeeded {
            self.count.inc_by(e.rows);
        }
        let mut s = self.stats();
        s.execution_count += 1;
        s.last_inference_ms = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
        if !e.succeeded {
            return;
        }
        s.inference_count += e.rows;
        for w in &e.waited {
            s.queue.add(1, *w);
        }
        s.compute_input.add(n, e.input);
        s.compute_infer.add(n, e.infer);
        s.compute_output.add(n, e.output);
        let b = s.batches.entry(e.rows).or_default();
        b.compute_input.add(1, e.input);
        b.compute_infer.add(1, e.infer);
        b.compute_output.add(1, e.output);
    }

    /// A copy of the statistics so far.
    pub fn statistics(&self) -> ModelStatistics {
        self.stats().clone()
    }

    fn stats(&self) -> std::sync::MutexGuard<'_, ModelStatistics> {
        self.statistics.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Microseconds, for the duration counters.
pub fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl Metrics {
    pub fn new() -> Metrics {
        let registry = Registry::new();
        let labels = ["model", "version"];
        let counter = |name: &str, help: &str| {
            let c = IntCounterVec::new(Opts::new(name, help), &labels).expect("a valid metric name");
            registry.register(Box::new(c.clone())).expect("each metric registered once");
            c
        };
        let success = counter("nv_inference_request_success", "Number of successful inference requests, all batch sizes");
        let failure = counter("nv_inference_request_failure", "Number of failed inference requests, all batch sizes");
        let count = counter("nv_inference_count", "Number of inferences performed (does not include cached requests)");
        let exec_count = counter("nv_inference_exec_count", "Number of model executions performed");
        let request_duration =
            counter("nv_inference_request_duration_us", "Cumulative inference request duration in microseconds");
        let queue_duration = counter("nv_inference_queue_duration_us", "Cumulative inference queuing duration in microseconds");
        let compute_input =
            counter("nv_inference_compute_input_duration_us", "Cumulative compute input duration in microseconds");
        let compute_infer =
            counter("nv_inference_compute_infer_duration_us", "Cumulative compute inference duration in microseconds");
        let compute_output =
            counter("nv_inference_compute_output_duration_us", "Cumulative inference compute output duration in microseconds");
        let pending = IntGaugeVec::new(
            Opts::new("nv_inference_pending_request_count", "Instantaneous number of pending requests awaiting execution"),
            &labels,
        )
        .expect("a valid metric name");
        registry.register(Box::new(pending.clone())).expect("each metric registered once");
        Metrics {
            registry,
            success,
            failure,
            count,
            exec_count,
            request_duration,
            queue_duration,
            compute_input,
            compute_infer,
            compute_output,
            pending,
        }
    }

    /// The metrics of one model version; they appear (at zero) from now on.
    pub fn model(&self, model: &str, version: u64) -> ModelMetrics {
        let v = version.to_string();
        let l = [model, v.as_str()];
        ModelMetrics {
            success: self.success.with_label_values(&l),
            failure: self.failure.with_label_values(&l),
            count: self.count.with_label_values(&l),
            exec_count: self.exec_count.with_label_values(&l),
            request_duration: self.request_duration.with_label_values(&l),
            queue_duration: self.queue_duration.with_label_values(&l),
            compute_input: self.compute_input.with_label_values(&l),
            compute_infer: self.compute_infer.with_label_values(&l),
            compute_output: self.compute_output.with_label_values(&l),
            pending: self.pending.with_label_values(&l),
            statistics: Arc::default(),
        }
    }

    /// The Prometheus text exposition of every metric.
    pub fn render(&self) -> String {
        let mut out = Vec::new();
        TextEncoder::new().encode(&self.registry.gather(), &mut out).expect("text encoding into memory");
        String::from_utf8(out).expect("the text format is UTF-8")
    }
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_triton_names_with_model_and_version_labels() {
        let m = Metrics::new();
        let a = m.model("resnet", 2);
        a.success.inc_by(3);
        a.exec_count.inc();
        let text = m.render();
        assert!(text.contains("nv_inference_request_success{model=\"resnet\",version=\"2\"} 3"), "{text}");
        assert!(text.contains("nv_inference_exec_count{model=\"resnet\",version=\"2\"} 1"), "{text}");
        assert!(text.contains("nv_inference_queue_duration_us{model=\"resnet\",version=\"2\"} 0"), "{text}");
        assert!(text.contains("# TYPE nv_inference_count counter"), "{text}");
        assert!(text.contains("# TYPE nv_inference_pending_request_count gauge"), "{text}");
    }

    #[test]
    fn statistics_count_requests_executions_and_batch_sizes() {
        let m = Metrics::new();
        let a = m.model("cnn", 1);
        let ms = Duration::from_millis;
        let batch = |requests: u64, rows: u64, succeeded| Execution {
            requests,
            rows,
            succeeded,
            waited: vec![ms(1); requests as usize],
            input: ms(2),
            infer: ms(3),
            output: ms(4),
        };
        a.executed(&batch(3, 5, true));
        a.executed(&batch(1, 5, true));
        a.executed(&batch(2, 2, false));
        a.request_succeeded(ms(10));
        a.request_failed(ms(20));
        let s = a.statistics();
        assert_eq!((s.execution_count, s.inference_count), (3, 10));
        assert!(s.last_inference_ms > 0);
        assert_eq!(s.queue, StatisticDuration { count: 4, ns: 4_000_000 });
        assert_eq!(s.compute_infer, StatisticDuration { count: 4, ns: 12_000_000 });
        assert_eq!(s.success, StatisticDuration { count: 1, ns: 10_000_000 });
        assert_eq!(s.fail, StatisticDuration { count: 1, ns: 20_000_000 });
        assert_eq!(s.batches.keys().copied().collect::<Vec<_>>(), vec![5]);
        assert_eq!(s.batches[&5].compute_output, StatisticDuration { count: 2, ns: 8_000_000 });
        // The Prometheus counters see every execution, failed ones included.
        let text = m.render();
        assert!(text.contains("nv_inference_exec_count{model=\"cnn\",version=\"1\"} 3"), "{text}");
        assert!(text.contains("nv_inference_count{model=\"cnn\",version=\"1\"} 10"), "{text}");
        assert!(text.contains("nv_inference_queue_duration_us{model=\"cnn\",version=\"1\"} 6000"), "{text}");
    }
}
