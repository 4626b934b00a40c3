//! The HTTP front end: KServe v2 REST endpoints as Triton serves them, with
//! Triton's binary tensor extension in both directions (the JSON header's
//! length in `Inference-Header-Content-Length`, each binary tensor's size in
//! its `binary_data_size` parameter, binary outputs asked for with
//! `binary_data` or `binary_data_output`). Errors are `{"error": "..."}`
//! with a 4xx status for the client's mistakes and 5xx for the server's.

use std::sync::Arc;
use std::time::Instant;

use axum::body::{Body, Bytes};
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use trtc_runtime::Tensor;

use crate::metrics::{Metrics, ModelStatistics, StatisticDuration};
use crate::model_config::TensorConfig;
use crate::protocol::{check_input, decode_tensor, tensor_to_json, Datatype, ErrorKind, ServeError, ServeResult, TensorData};
use crate::repository::{printable, LoadedModel, VersionState};
use crate::service::Service;

/// The header that gives the JSON part's length in a binary request or
/// response.
pub const HEADER_LENGTH: &str = "inference-header-content-length";

/// The inference endpoints (`/v2/...`).
pub fn router(service: Arc<Service>) -> Router {
    let max_body_bytes = service.max_request_bytes;
    Router::new()
        .route("/v2", get(server_metadata))
        .route("/v2/health/live", get(live))
        .route("/v2/health/ready", get(ready))
        .route("/v2/repository/index", post(repository_index))
        .route("/v2/models/stats", get(all_statistics))
        .route("/v2/models/{model}/stats", get(model_statistics))
        .route("/v2/models/{model}/versions/{version}/stats", get(model_statistics_v))
        .route("/v2/models/{model}", get(model_metadata))
        .route("/v2/models/{model}/ready", get(model_ready))
        .route("/v2/models/{model}/config", get(model_config))
        .route("/v2/models/{model}/infer", post(infer))
        .route("/v2/models/{model}/versions/{version}", get(model_metadata_v))
        .route("/v2/models/{model}/versions/{version}/ready", get(model_ready_v))
        .route("/v2/models/{model}/versions/{version}/config", get(model_config_v))
        .route("/v2/models/{model}/versions/{version}/infer", post(infer_v))
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(max_body_bytes))
        .with_state(service)
}

/// The metrics endpoint (`/metrics`), served on its own port as Triton does.
pub fn metrics_router(metrics: Arc<Metrics>) -> Router {
    Router::new()
        .route(
            "/metrics",
            get(|State(m): State<Arc<Metrics>>| async move {
                ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], m.render())
            }),
        )
        .fallback(not_found)
        .with_state(metrics)
}

fn error(e: ServeError) -> Response {
    let status = match e.kind {
        ErrorKind::InvalidArgument => StatusCode::BAD_REQUEST,
        ErrorKind::NotFound => StatusCode::NOT_FOUND,
        ErrorKind::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        ErrorKind::Internal => StatusCode::INTERNAL_SERVER_ERROR,
    };
    (status, Json(json!({ "error": e.message }))).into_response()
}

async fn not_found() -> Response {
    error(ServeError::not_found("no such endpoint"))
}

async fn live() -> StatusCode {
    StatusCode::OK
}

async fn ready(State(s): State<Arc<Service>>) -> Response {
    if s.repository.is_ready() {
        StatusCode::OK.into_response()
    } else {
        error(ServeError::unavailable("not every model is ready"))
    }
}

async fn server_metadata() -> Json<Value> {
    Json(json!({
        "name": "trtc",
        "version": trtc_runtime::engine::TRTC_VERSION,
        "extensions": ["binary_tensor_data", "model_configuration", "statistics"],
    }))
}

async fn repository_index(State(s): State<Arc<Service>>) -> Json<Value> {
    let mut index = Vec::new();
    for (name, entry) in &s.repository.models {
        if let Some(e) = &entry.error {
            index.push(json!({ "name": name, "state": "UNAVAILABLE", "reason": e }));
        }
        for (v, state) in &entry.versions {
            index.push(match state {
                VersionState::Ready(_) => json!({ "name": name, "version": v.to_string(), "state": "READY" }),
                VersionState::Unavailable(e) => {
                    json!({ "name": name, "version": v.to_string(), "state": "UNAVAILABLE", "reason": e })
                }
            });
        }
    }
    Json(Value::Array(index))
}

async fn all_statistics(State(s): State<Arc<Service>>) -> Response {
    statistics(&s, None, None)
}

async fn model_statistics(State(s): State<Arc<Service>>, Path(model): Path<String>) -> Response {
    statistics(&s, Some(&model), None)
}

async fn model_statistics_v(State(s): State<Arc<Service>>, Path((model, version)): Path<(String, String)>) -> Response {
    statistics(&s, Some(&model), Some(&version))
}

/// Triton's statistics extension: `{"model_stats": [...]}`, durations in
/// nanoseconds.
fn statistics(s: &Service, model: Option<&str>, version: Option<&str>) -> Response {
    let models = match s.repository.loaded(model, version) {
        Ok(m) => m,
        Err(e) => return error(e),
    };
    let duration = |d: StatisticDuration| json!({ "count": d.count, "ns": d.ns });
    let entry = |name: &str, version: u64, st: ModelStatistics| {
        let batches: Vec<Value> = st
            .batches
            .iter()
            .map(|(size, b)| {
                json!({
                    "batch_size": size,
                    "compute_input": duration(b.compute_input),
                    "compute_infer": duration(b.compute_infer),
                    "compute_output": duration(b.compute_output),
                })
            })
            .collect();
        json!({
            "name": name,
            "version": version.to_string(),
            "last_inference": st.last_inference_ms,
            "inference_count": st.inference_count,
            "execution_count": st.execution_count,
            "inference_stats": {
                "success": duration(st.success),
                "fail": duration(st.fail),
                "queue": duration(st.queue),
                "compute_input": duration(st.compute_input),
                "compute_infer": duration(st.compute_infer),
                "compute_output": duration(st.compute_output),
                "cache_hit": duration(StatisticDuration::default()),
                "cache_miss": duration(StatisticDuration::default()),
            },
            "response_stats": {},
            "batch_stats": batches,
            "memory_usage": [],
        })
    };
    let stats: Vec<Value> = models.iter().map(|m| entry(&m.name, m.version, m.metrics.statistics())).collect();
    Json(json!({ "model_stats": stats })).into_response()
}

fn metadata(s: &Service, model: &str, version: Option<&str>) -> ServeResult<Value> {
    let m = s.repository.get(model, version)?;
    let versions = s.repository.listed_versions(&m, version);
    // Shapes as Triton gives them: -1 for the batch and for dims that vary.
    let tensors = |listed: &[TensorConfig]| -> Vec<Value> {
        listed
            .iter()
            .map(|t| json!({ "name": t.name, "datatype": Datatype::of(t.dtype).name(), "shape": m.config.metadata_shape(t) }))
            .collect()
    };
    Ok(json!({
        "name": m.name,
        "versions": versions,
        "platform": "trtc_engine",
        "inputs": tensors(&m.config.inputs),
        "outputs": tensors(&m.config.outputs),
    }))
}

async fn model_metadata(State(s): State<Arc<Service>>, Path(model): Path<String>) -> Response {
    metadata(&s, &model, None).map_or_else(error, |v| Json(v).into_response())
}

async fn model_metadata_v(State(s): State<Arc<Service>>, Path((model, version)): Path<(String, String)>) -> Response {
    metadata(&s, &model, Some(&version)).map_or_else(error, |v| Json(v).into_response())
}

fn readiness(s: &Service, model: &str, version: Option<&str>) -> Response {
    match s.repository.get(model, version) {
        Ok(_) => StatusCode::OK.into_response(),
        Err(e) => error(e),
    }
}

async fn model_ready(State(s): State<Arc<Service>>, Path(model): Path<String>) -> Response {
    readiness(&s, &model, None)
}

async fn model_ready_v(State(s): State<Arc<Service>>, Path((model, version)): Path<(String, String)>) -> Response {
    readiness(&s, &model, Some(&version))
}

fn config(s: &Service, model: &str, version: Option<&str>) -> ServeResult<Value> {
    let m = s.repository.get(model, version)?;
    Ok(m.config.to_json(&m.instance_groups))
}

async fn model_config(State(s): State<Arc<Service>>, Path(model): Path<String>) -> Response {
    config(&s, &model, None).map_or_else(error, |v| Json(v).into_response())
}

async fn model_config_v(State(s): State<Arc<Service>>, Path((model, version)): Path<(String, String)>) -> Response {
    config(&s, &model, Some(&version)).map_or_else(error, |v| Json(v).into_response())
}

async fn infer(
    State(s): State<Arc<Service>>,
    Path(model): Path<String>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    infer_any(&s, &model, None, &headers, body).await
}

async fn infer_v(
    State(s): State<Arc<Service>>,
    Path((model, version)): Path<(String, String)>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    infer_any(&s, &model, Some(&version), &headers, body).await
}

async fn infer_any(
    s: &Service,
    model: &str,
    version: Option<&str>,
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let arrived = Instant::now();
    let m = match s.repository.get(model, version) {
        Ok(m) => m,
        Err(e) => return error(e),
    };
    let result = match body {
        Ok(body) => infer_on(&m, headers, &body, s.max_request_bytes).await,
        Err(rejection) => {
            let status = rejection.status();
            let e = ServeError::invalid(format!("cannot read the request body: {}", rejection.body_text()));
            m.metrics.request_failed(arrived.elapsed());
            let mut r = error(e);
            *r.status_mut() = status;
            return r;
        }
    };
    match result {
        Ok(response) => {
            m.metrics.request_succeeded(arrived.elapsed());
            response
        }
        Err(e) => {
            m.metrics.request_failed(arrived.elapsed());
            error(e)
        }
    }
}

#[derive(Deserialize)]
struct RequestJson {
    id: Option<String>,
    #[serde(default)]
    parameters: Map<String, Value>,
    inputs: Vec<InputJson>,
    outputs: Option<Vec<OutputJson>>,
}

#[derive(Deserialize)]
struct InputJson {
    name: String,
    shape: Vec<i64>,
    datatype: String,
    #[serde(default)]
    parameters: Map<String, Value>,
    data: Option<Value>,
}

#[derive(Deserialize)]
struct OutputJson {
    name: String,
    #[serde(default)]
    parameters: Map<String, Value>,
}

fn bool_parameter(p: &Map<String, Value>, key: &str, what: &str) -> ServeResult<Option<bool>> {
    match p.get(key) {
        None => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(v) => Err(ServeError::invalid(format!("{what}: parameter '{key}' must be true or false, got {v}"))),
    }
}

/// An inference request decoded and checked against its model, ready to
/// queue.
pub struct ParsedRequest {
    pub id: Option<String>,
    pub inputs: Vec<(String, Tensor)>,
    /// The outputs to return, each with whether it goes back as binary data.
    pub outputs: Vec<(String, bool)>,
}

/// The headers of an inference request that shape how its body is read.
#[derive(Clone, Copy)]
pub struct RequestHeaders<'a> {
    /// `gzip`, `deflate` (zlib) or `identity`, as tritonclient's
    /// `request_compression_algorithm` sends them.
    pub content_encoding: Option<&'a [u8]>,
    /// `Inference-Header-Content-Length`: the JSON's length in the
    /// uncompressed body.
    pub header_length: Option<&'a [u8]>,
    /// The most bytes a compressed body may inflate to.
    pub max_body_bytes: usize,
}

/// A response body compression the client accepts.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Compression {
    Gzip,
    Deflate,
}

/// The first of gzip and deflate that `Accept-Encoding` lists (without
/// `q=0`), as tritonclient's `response_compression_algorithm` asks.
fn accepted_compression(headers: &HeaderMap) -> Option<Compression> {
    let accept = headers.get(header::ACCEPT_ENCODING)?.to_str().ok()?;
    accept.split(',').find_map(|item| {
        let mut parts = item.split(';').map(str::trim);
        let coding = parts.next()?;
        if parts.any(|p| p.replace(' ', "") == "q=0") {
            return None;
        }
        match coding {
            "gzip" => Some(Compression::Gzip),
            "deflate" => Some(Compression::Deflate),
            _ => None,
        }
    })
}

async fn infer_on(m: &LoadedModel, headers: &HeaderMap, body: &[u8], max_body_bytes: usize) -> ServeResult<Response> {
    let h = RequestHeaders {
        content_encoding: headers.get(header::CONTENT_ENCODING).map(|v| v.as_bytes()),
        header_length: headers.get(HEADER_LENGTH).map(|v| v.as_bytes()),
        max_body_bytes,
    };
    let request = parse_infer_request(m, h, body)?;
    let wanted = request.outputs;
    let outputs = m.infer(request.inputs).await?;
    encode_response(m, request.id, &wanted, &outputs, accepted_compression(headers))
}

/// The body, inflated when it is compressed; never more than `limit` bytes.
fn inflate<'b>(encoding: Option<&[u8]>, body: &'b [u8], limit: usize) -> ServeResult<std::borrow::Cow<'b, [u8]>> {
    use std::io::Read;
    let mut reader: Box<dyn Read + '_> = match encoding {
        None | Some(b"identity") => return Ok(std::borrow::Cow::Borrowed(body)),
        Some(b"gzip") => Box::new(flate2::read::GzDecoder::new(body)),
        Some(b"deflate") => Box::new(flate2::read::ZlibDecoder::new(body)),
        Some(other) => {
            return Err(ServeError::invalid(format!(
                "Content-Encoding {} is not supported (gzip, deflate or identity)",
                printable(&String::from_utf8_lossy(other))
            )))
        }
    };
    let mut out = Vec::new();
    (&mut reader)
        .take(limit as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| ServeError::invalid(format!("cannot decompress the request body: {e}")))?;
    if out.len() > limit {
        return Err(ServeError::invalid(format!("the request body inflates to more than the limit of {limit} bytes")));
    }
    Ok(std::borrow::Cow::Owned(out))
}

/// Decodes an HTTP inference request (JSON, with binary tensors after it
/// when `header_length` is given) and checks it against the model: inputs
/// of its types and shapes, known outputs. Sizes are checked before any
/// tensor is allocated.
pub fn parse_infer_request(m: &LoadedModel, headers: RequestHeaders<'_>, body: &[u8]) -> ServeResult<ParsedRequest> {
    let body = inflate(headers.content_encoding, body, headers.max_body_bytes)?;
    let body: &[u8] = &body;
    let json_len = match headers.header_length {
        None => body.len(),
        Some(v) => {
            let n: usize = std::str::from_utf8(v)
                .ok()
                .and_then(|t| t.trim().parse().ok())
                .ok_or_else(|| ServeError::invalid("Inference-Header-Content-Length is not a number"))?;
            if n > body.len() {
                return Err(ServeError::invalid(format!(
                    "Inference-Header-Content-Length {n} is larger than the body of {} bytes",
                    body.len()
                )));
            }
            n
        }
    };
    let request: RequestJson = serde_json::from_slice(&body[..json_len])
        .map_err(|e| ServeError::invalid(format!("malformed inference request: {e}")))?;
    let mut binary = &body[json_len..];

    // Inputs: each of the engine's (the model checks each is given once).
    let mut inputs: Vec<(String, Tensor)> = Vec::with_capacity(request.inputs.len());
    for i in &request.inputs {
        let ty = check_input(m.input(&i.name)?, &i.datatype, &i.shape)?;
        let data = match (i.parameters.get("binary_data_size"), &i.data) {
            (Some(size), None) => {
                let size = size.as_u64().ok_or_else(|| {
                    ServeError::invalid(format!("input '{}': binary_data_size must be an unsigned integer", i.name))
                })?;
                if size > binary.len() as u64 {
                    return Err(ServeError::invalid(format!(
                        "input '{}': binary_data_size {size} is more than the {} bytes of binary data left in the body",
                        i.name,
                        binary.len()
                    )));
                }
                let (this, rest) = binary.split_at(size as usize);
                binary = rest;
                TensorData::Raw(this)
            }
            (None, Some(data)) => TensorData::Json(data),
            (Some(_), Some(_)) => {
                return Err(ServeError::invalid(format!("input '{}' has both 'data' and binary_data_size", i.name)));
            }
            (None, None) => return Err(ServeError::invalid(format!("input '{}' has no 'data' and no binary_data_size", i.name))),
        };
        inputs.push((i.name.clone(), decode_tensor(&i.name, &ty, data)?));
    }
    if !binary.is_empty() {
        return Err(ServeError::invalid(format!("{} bytes of binary data after the last binary input", binary.len())));
    }

    // Outputs: the requested ones (all when none are named), each in JSON or
    // binary form.
    let binary_default = bool_parameter(&request.parameters, "binary_data_output", "the request")?.unwrap_or(false);
    let wanted: Vec<(String, bool)> = match &request.outputs {
        None => m.engine.outputs().iter().map(|b| (b.name.clone(), binary_default)).collect(),
        Some(outs) => {
            let firsts = m.check_outputs(outs.iter().map(|o| o.name.as_str()))?;
            let mut w: Vec<(String, bool)> = Vec::new();
            for o in firsts.into_iter().map(|i| &outs[i]) {
                if o.parameters.contains_key("classification") {
                    return Err(ServeError::invalid(format!(
                        "output '{}': the classification extension is not supported",
                        o.name
                    )));
                }
                let bin =
                    bool_parameter(&o.parameters, "binary_data", &format!("output '{}'", o.name))?.unwrap_or(binary_default);
                w.push((o.name.clone(), bin));
            }
            w
        }
    };
    Ok(ParsedRequest { id: request.id, inputs, outputs: wanted })
}

fn encode_response(
    m: &LoadedModel,
    id: Option<String>,
    wanted: &[(String, bool)],
    outputs: &[(String, Tensor)],
    compression: Option<Compression>,
) -> ServeResult<Response> {
    let mut header_outputs = Vec::with_capacity(wanted.len());
    let mut blobs: Vec<&[u8]> = Vec::new();
    for (name, bin) in wanted {
        let t = &outputs
            .iter()
            .find(|(n, _)| n == name)
            .ok_or_else(|| ServeError::internal(format!("the execution gave no output '{name}'")))?
            .1;
        let mut o = json!({ "name": name, "datatype": Datatype::of(t.dtype()).name(), "shape": t.shape() });
        if *bin {
            o["parameters"] = json!({ "binary_data_size": t.bytes().len() });
            blobs.push(t.bytes());
        } else {
            o["data"] = tensor_to_json(t);
        }
        header_outputs.push(o);
    }
    let mut head = json!({ "model_name": m.name, "model_version": m.version.to_string(), "outputs": header_outputs });
    if let Some(id) = id {
        head["id"] = json!(id);
    }
    let head = serde_json::to_vec(&head).map_err(|e| ServeError::internal(format!("cannot encode the response: {e}")))?;
    let head_len = head.len();
    let mut body = head;
    for b in &blobs {
        body.extend_from_slice(b);
    }
    let body = match compression {
        None => body,
        Some(c) => compress(c, &body).map_err(|e| ServeError::internal(format!("cannot compress the response: {e}")))?,
    };
    let mut r = Response::new(Body::from(body));
    let content_type = if blobs.is_empty() { "application/json" } else { "application/octet-stream" };
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    if !blobs.is_empty() {
        // The JSON's length in the uncompressed body, as for requests.
        r.headers_mut().insert(HEADER_LENGTH, HeaderValue::from(head_len));
    }
    if let Some(c) = compression {
        let name = if c == Compression::Gzip { "gzip" } else { "deflate" };
        r.headers_mut().insert(header::CONTENT_ENCODING, HeaderValue::from_static(name));
    }
    Ok(r)
}

fn compress(c: Compression, body: &[u8]) -> std::io::Result<Vec<u8>> {
    use std::io::Write;
    let level = flate2::Compression::fast();
    match c {
        Compression::Gzip => {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), level);
            e.write_all(body)?;
            e.finish()
        }
        Compression::Deflate => {
            let mut e = flate2::write::ZlibEncoder::new(Vec::new(), level);
            e.write_all(body)?;
            e.finish()
        }
    }
}
