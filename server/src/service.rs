//! What both front ends (HTTP and gRPC) serve: the repository's models and
//! the metrics they update.

use std::sync::Arc;

use crate::metrics::Metrics;
use crate::repository::Repository;

pub struct Service {
    pub repository: Repository,
    pub metrics: Arc<Metrics>,
    /// The largest request, after decompression for a compressed one.
    pub max_request_bytes: usize,
    /// Becomes true when the server stops: long-lived requests (gRPC
    /// streams) stop taking new work and end.
    pub stopping: tokio::sync::watch::Receiver<bool>,
}
