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

use std::time::Duration;

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
}

/// Microseconds, for the duration counters.
pub fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
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
}
