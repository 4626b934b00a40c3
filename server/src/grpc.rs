//! The gRPC front end: `inference.GRPCInferenceService` as Triton serves it
//! (ServerLive, ServerReady, ModelReady, ServerMetadata, ModelMetadata,
//! ModelConfig, ModelInfer, ModelStreamInfer, ModelStatistics,
//! RepositoryIndex; other RPCs answer UNIMPLEMENTED). Inputs come as `raw_input_contents` or typed `contents`;
//! outputs always go back as `raw_output_contents`, which is what
//! tritonclient reads.

use std::sync::Arc;
use std::time::Instant;

use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};
use trtc_runtime::{DType, Tensor, TensorType};

use crate::metrics::{ModelStatistics, StatisticDuration};
use crate::model_config::{InstanceKind, ModelConfig, TensorConfig, VersionPolicy};
use crate::protocol::{check_input, decode_tensor, Datatype, ErrorKind, ServeError, ServeResult, TensorData};
use crate::repository::{LoadedModel, VersionState};
use crate::service::Service;

/// The messages and service trait generated from `proto/grpc_service.proto`.
pub mod proto {
    tonic::include_proto!("inference");
}

use proto::grpc_inference_service_server::{GrpcInferenceService, GrpcInferenceServiceServer};

/// The gRPC service over the same models as the HTTP one.
pub struct Grpc {
    pub service: Arc<Service>,
}

/// The tonic service, with the request size limit.
pub fn server(service: Arc<Service>) -> GrpcInferenceServiceServer<Grpc> {
    let max_message_bytes = service.max_request_bytes;
    GrpcInferenceServiceServer::new(Grpc { service })
        .max_decoding_message_size(max_message_bytes)
        .max_encoding_message_size(usize::MAX)
}

fn status(e: ServeError) -> Status {
    match e.kind {
        ErrorKind::InvalidArgument => Status::invalid_argument(e.message),
        ErrorKind::NotFound => Status::not_found(e.message),
        ErrorKind::Unavailable => Status::unavailable(e.message),
        ErrorKind::Internal => Status::internal(e.message),
    }
}

/// Shapes as Triton gives them: -1 for the batch and for dims that vary.
fn tensor_metadata(config: &ModelConfig, listed: &[TensorConfig]) -> Vec<proto::model_metadata_response::TensorMetadata> {
    listed
        .iter()
        .map(|t| proto::model_metadata_response::TensorMetadata {
            name: t.name.clone(),
            datatype: Datatype::of(t.dtype).name().to_string(),
            shape: config.metadata_shape(t),
        })
        .collect()
}

#[tonic::async_trait]
impl GrpcInferenceService for Grpc {
    async fn server_live(&self, _: Request<proto::ServerLiveRequest>) -> Result<Response<proto::ServerLiveResponse>, Status> {
        Ok(Response::new(proto::ServerLiveResponse { live: true }))
    }

    async fn server_ready(&self, _: Request<proto::ServerReadyRequest>) -> Result<Response<proto::ServerReadyResponse>, Status> {
        Ok(Response::new(proto::ServerReadyResponse { ready: self.service.repository.is_ready() }))
    }

    async fn model_ready(&self, r: Request<proto::ModelReadyRequest>) -> Result<Response<proto::ModelReadyResponse>, Status> {
        let r = r.into_inner();
        let ready = self.service.repository.get(&r.name, Some(&r.version)).is_ok();
        Ok(Response::new(proto::ModelReadyResponse { ready }))
    }

    async fn server_metadata(
        &self,
        _: Request<proto::ServerMetadataRequest>,
    ) -> Result<Response<proto::ServerMetadataResponse>, Status> {
        Ok(Response::new(proto::ServerMetadataResponse {
            name: "trtc".into(),
            version: trtc_runtime::engine::TRTC_VERSION.into(),
            extensions: vec!["binary_tensor_data".into(), "model_configuration".into(), "statistics".into()],
        }))
    }

    async fn model_metadata(
        &self,
        r: Request<proto::ModelMetadataRequest>,
    ) -> Result<Response<proto::ModelMetadataResponse>, Status> {
        let r = r.into_inner();
        let m = self.service.repository.get(&r.name, Some(&r.version)).map_err(status)?;
        let versions = self.service.repository.listed_versions(&m, Some(&r.version));
        Ok(Response::new(proto::ModelMetadataResponse {
            name: m.name.clone(),
            versions,
            platform: "trtc_engine".into(),
            inputs: tensor_metadata(&m.config, &m.config.inputs),
            outputs: tensor_metadata(&m.config, &m.config.outputs),
        }))
    }

    async fn model_config(&self, r: Request<proto::ModelConfigRequest>) -> Result<Response<proto::ModelConfigResponse>, Status> {
        let r = r.into_inner();
        let m = self.service.repository.get(&r.name, Some(&r.version)).map_err(status)?;
        Ok(Response::new(proto::ModelConfigResponse { config: Some(config_proto(&m.config, &m)) }))
    }

    async fn model_statistics(
        &self,
        r: Request<proto::ModelStatisticsRequest>,
    ) -> Result<Response<proto::ModelStatisticsResponse>, Status> {
        let r = r.into_inner();
        let models = self.service.repository.loaded(Some(&r.name), Some(&r.version)).map_err(status)?;
        let model_stats = models.iter().map(|m| statistics_proto(&m.name, m.version, m.metrics.statistics())).collect();
        Ok(Response::new(proto::ModelStatisticsResponse { model_stats }))
    }

    async fn repository_index(
        &self,
        r: Request<proto::RepositoryIndexRequest>,
    ) -> Result<Response<proto::RepositoryIndexResponse>, Status> {
        let ready_only = r.into_inner().ready;
        let mut models = Vec::new();
        for (name, entry) in &self.service.repository.models {
            if let (Some(e), false) = (&entry.error, ready_only) {
                models.push(proto::repository_index_response::ModelIndex {
                    name: name.clone(),
                    version: String::new(),
                    state: "UNAVAILABLE".into(),
                    reason: e.clone(),
                });
            }
            for (v, state) in &entry.versions {
                let (state, reason) = match state {
                    VersionState::Ready(_) => ("READY", String::new()),
                    VersionState::Unavailable(_) if ready_only => continue,
                    VersionState::Unavailable(e) => ("UNAVAILABLE", e.clone()),
                };
                models.push(proto::repository_index_response::ModelIndex {
                    name: name.clone(),
                    version: v.to_string(),
                    state: state.into(),
                    reason,
                });
            }
        }
        Ok(Response::new(proto::RepositoryIndexResponse { models }))
    }

    async fn model_infer(&self, r: Request<proto::ModelInferRequest>) -> Result<Response<proto::ModelInferResponse>, Status> {
        answer(&self.service, &r.into_inner()).await.map(Response::new).map_err(status)
    }

    type ModelStreamInferStream = ReceiverStream<Result<proto::ModelStreamInferResponse, Status>>;

    /// The streaming form of ModelInfer, as tritonclient's `start_stream` /
    /// `async_stream_infer` use it: each request on the stream is answered
    /// once, as soon as it is done (not necessarily in order: clients match
    /// answers by `id`), with its error in `error_message` instead of
    /// ending the stream. At most [`STREAM_IN_FLIGHT`] requests of one
    /// stream run at a time; the next is read when one finishes. When the
    /// server stops, the stream ends after answering the requests it has.
    async fn model_stream_infer(
        &self,
        r: Request<Streaming<proto::ModelInferRequest>>,
    ) -> Result<Response<Self::ModelStreamInferStream>, Status> {
        let mut requests = r.into_inner();
        let (tx, rx) = tokio::sync::mpsc::channel(STREAM_IN_FLIGHT);
        let service = self.service.clone();
        let mut stopping = service.stopping.clone();
        tokio::spawn(async move {
            let mut running = tokio::task::JoinSet::new();
            loop {
                if running.len() >= STREAM_IN_FLIGHT {
                    running.join_next().await;
                }
                // When the server stops, the stream takes no new request:
                // those running are answered, then the stream ends.
                let next = tokio::select! {
                    _ = stopping.wait_for(|s| *s) => break,
                    next = requests.message() => next,
                };
                let r = match next {
                    Ok(Some(r)) => r,
                    Ok(None) => break,
                    Err(e) => {
                        let _ = tx.send(Err(e)).await;
                        break;
                    }
                };
                let (service, tx) = (service.clone(), tx.clone());
                running.spawn(async move {
                    let reply = match answer(&service, &r).await {
                        Ok(response) => {
                            proto::ModelStreamInferResponse { error_message: String::new(), infer_response: Some(response) }
                        }
                        Err(e) => proto::ModelStreamInferResponse {
                            error_message: e.message,
                            infer_response: Some(proto::ModelInferResponse {
                                model_name: r.model_name,
                                model_version: r.model_version,
                                id: r.id,
                                ..Default::default()
                            }),
                        },
                    };
                    let _ = tx.send(Ok(reply)).await;
                });
            }
            while running.join_next().await.is_some() {}
        });
        Ok(Response::new(ReceiverStream::new(rx)))
    }
}

/// The most requests of one ModelStreamInfer stream that run at once.
const STREAM_IN_FLIGHT: usize = 64;

/// Runs one inference request and counts it in the model's metrics.
async fn answer(service: &Service, r: &proto::ModelInferRequest) -> ServeResult<proto::ModelInferResponse> {
    let arrived = Instant::now();
    let m = service.repository.get(&r.model_name, Some(&r.model_version))?;
    let result = infer(&m, r).await;
    match &result {
        Ok(_) => m.metrics.request_succeeded(arrived.elapsed()),
        Err(_) => m.metrics.request_failed(arrived.elapsed()),
    }
    result
}

async fn infer(m: &LoadedModel, r: &proto::ModelInferRequest) -> ServeResult<proto::ModelInferResponse> {
    let (inputs, wanted) = parse_infer_request(m, r)?;
    let mut outputs = m.infer(inputs).await?;
    let mut response = proto::ModelInferResponse {
        model_name: m.name.clone(),
        model_version: m.version.to_string(),
        id: r.id.clone(),
        ..Default::default()
    };
    for name in wanted {
        let k = outputs
            .iter()
            .position(|(n, _)| *n == name)
            .ok_or_else(|| ServeError::internal(format!("the execution gave no output '{name}'")))?;
        let (_, t) = outputs.swap_remove(k);
        response.outputs.push(proto::model_infer_response::InferOutputTensor {
            name,
            datatype: Datatype::of(t.dtype()).name().to_string(),
            shape: t.shape().iter().map(|&d| d as i64).collect(),
            ..Default::default()
        });
        response.raw_output_contents.push(t.bytes().to_vec());
    }
    Ok(response)
}

/// A decoded request's inputs and the names of the outputs to return.
pub type ParsedRequest = (Vec<(String, Tensor)>, Vec<String>);

/// Decodes a gRPC inference request's tensors and checks them, and the
/// requested outputs, against the model.
pub fn parse_infer_request(m: &LoadedModel, r: &proto::ModelInferRequest) -> ServeResult<ParsedRequest> {
    let raw = !r.raw_input_contents.is_empty();
    if raw && r.raw_input_contents.len() != r.inputs.len() {
        return Err(ServeError::invalid(format!(
            "{} raw_input_contents for {} inputs; give one per input, in order",
            r.raw_input_contents.len(),
            r.inputs.len()
        )));
    }
    let mut inputs = Vec::with_capacity(r.inputs.len());
    for (k, i) in r.inputs.iter().enumerate() {
        let ty = check_input(m.input(&i.name)?, &i.datatype, &i.shape)?;
        let tensor = match (raw, &i.contents) {
            (true, Some(_)) => {
                return Err(ServeError::invalid(format!("input '{}': contents and raw_input_contents are both given", i.name)))
            }
            (true, None) => decode_tensor(&i.name, &ty, TensorData::Raw(&r.raw_input_contents[k]))?,
            (false, Some(c)) => typed_contents(&i.name, &ty, c)?,
            (false, None) => return Err(ServeError::invalid(format!("input '{}' has no contents", i.name))),
        };
        inputs.push((i.name.clone(), tensor));
    }
    let wanted: Vec<String> = if r.outputs.is_empty() {
        m.engine.outputs().iter().map(|b| b.name.clone()).collect()
    } else {
        let firsts = m.check_outputs(r.outputs.iter().map(|o| o.name.as_str()))?;
        firsts.into_iter().map(|i| r.outputs[i].name.clone()).collect()
    };
    Ok((inputs, wanted))
}

/// Decodes `InferTensorContents`, the typed form: the field that holds the
/// datatype, with exactly as many values as the shape.
fn typed_contents(name: &str, ty: &TensorType, c: &proto::InferTensorContents) -> ServeResult<Tensor> {
    let wrong = || ServeError::invalid(format!("input '{name}': the contents do not hold {}", Datatype::of(ty.dtype).name()));
    let count = match ty.dtype {
        DType::Bool => c.bool_contents.len(),
        DType::I8 | DType::I16 | DType::I32 => c.int_contents.len(),
        DType::I64 => c.int64_contents.len(),
        DType::U8 | DType::U16 | DType::U32 => c.uint_contents.len(),
        DType::U64 => c.uint64_contents.len(),
        DType::F32 => c.fp32_contents.len(),
        DType::F64 => c.fp64_contents.len(),
        _ => {
            return Err(ServeError::invalid(format!(
                "input '{name}': {} has no typed contents; send it in raw_input_contents",
                Datatype::of(ty.dtype).name()
            )))
        }
    };
    if count != ty.len() {
        return Err(if count == 0 {
            wrong()
        } else {
            ServeError::invalid(format!("input '{name}': {count} values for shape {:?}, which needs {}", ty.shape, ty.len()))
        });
    }
    let mut bytes = Vec::with_capacity(ty.bytes());
    macro_rules! narrow {
        ($values:expr, $t:ty) => {
            for &v in $values {
                let x = <$t>::try_from(v).map_err(|_| {
                    ServeError::invalid(format!("input '{name}': {v} is out of range for {}", Datatype::of(ty.dtype).name()))
                })?;
                bytes.extend_from_slice(&x.to_le_bytes());
            }
        };
    }
    match ty.dtype {
        DType::Bool => bytes.extend(c.bool_contents.iter().map(|&b| b as u8)),
        DType::I8 => narrow!(&c.int_contents, i8),
        DType::I16 => narrow!(&c.int_contents, i16),
        DType::I32 => narrow!(&c.int_contents, i32),
        DType::I64 => narrow!(&c.int64_contents, i64),
        DType::U8 => narrow!(&c.uint_contents, u8),
        DType::U16 => narrow!(&c.uint_contents, u16),
        DType::U32 => narrow!(&c.uint_contents, u32),
        DType::U64 => narrow!(&c.uint64_contents, u64),
        DType::F32 => c.fp32_contents.iter().for_each(|v| bytes.extend_from_slice(&v.to_le_bytes())),
        DType::F64 => c.fp64_contents.iter().for_each(|v| bytes.extend_from_slice(&v.to_le_bytes())),
        _ => unreachable!("refused above"),
    }
    decode_tensor(name, ty, TensorData::Raw(&bytes))
}

fn data_type(d: DType) -> i32 {
    use proto::DataType as P;
    (match d {
        DType::Bool => P::TypeBool,
        DType::U8 => P::TypeUint8,
        DType::U16 => P::TypeUint16,
        DType::U32 => P::TypeUint32,
        DType::U64 => P::TypeUint64,
        DType::I8 => P::TypeInt8,
        DType::I16 => P::TypeInt16,
        DType::I32 => P::TypeInt32,
        DType::I64 => P::TypeInt64,
        DType::F16 => P::TypeFp16,
        DType::F32 => P::TypeFp32,
        DType::F64 => P::TypeFp64,
        DType::BF16 => P::TypeBf16,
        // Models binding types the protocol lacks are not loaded.
        _ => P::TypeInvalid,
    }) as i32
}

fn config_proto(c: &ModelConfig, m: &LoadedModel) -> proto::ModelConfig {
    use proto::model_version_policy::{All, Latest, PolicyChoice, Specific};
    let input =
        |t: &TensorConfig| proto::ModelInput { name: t.name.clone(), data_type: data_type(t.dtype), dims: t.dims.clone() };
    let output =
        |t: &TensorConfig| proto::ModelOutput { name: t.name.clone(), data_type: data_type(t.dtype), dims: t.dims.clone() };
    let policy = match &c.version_policy {
        VersionPolicy::Latest(n) => PolicyChoice::Latest(Latest { num_versions: *n as u32 }),
        VersionPolicy::All => PolicyChoice::All(All {}),
        VersionPolicy::Specific(v) => PolicyChoice::Specific(Specific { versions: v.iter().map(|&x| x as i64).collect() }),
    };
    proto::ModelConfig {
        name: c.name.clone(),
        platform: "trtc_engine".into(),
        backend: "trtc".into(),
        version_policy: Some(proto::ModelVersionPolicy { policy_choice: Some(policy) }),
        max_batch_size: c.max_batch_size as i32,
        input: c.inputs.iter().map(input).collect(),
        output: c.outputs.iter().map(output).collect(),
        instance_group: m
            .instance_groups
            .iter()
            .enumerate()
            .map(|(i, g)| proto::ModelInstanceGroup {
                name: format!("{}_{i}", c.name),
                count: g.count as i32,
                gpus: g.gpus.iter().map(|&x| x as i32).collect(),
                kind: match g.kind {
                    InstanceKind::Auto => proto::model_instance_group::Kind::Auto,
                    InstanceKind::Gpu => proto::model_instance_group::Kind::Gpu,
                    InstanceKind::Cpu => proto::model_instance_group::Kind::Cpu,
                } as i32,
            })
            .collect(),
        default_model_filename: c.default_model_filename.clone(),
        scheduling_choice: c.dynamic_batching.as_ref().map(|d| {
            proto::model_config::SchedulingChoice::DynamicBatching(proto::ModelDynamicBatching {
                preferred_batch_size: d.preferred_batch_size.iter().map(|&x| x as i32).collect(),
                max_queue_delay_microseconds: d.max_queue_delay_us,
                default_queue_policy: Some(proto::ModelQueuePolicy {
                    timeout_action: 0,
                    default_timeout_microseconds: d.queue.default_timeout_us,
                    allow_timeout_override: false,
                    max_queue_size: d.queue.max_queue_size as u32,
                }),
            })
        }),
    }
}

fn statistics_proto(name: &str, version: u64, st: ModelStatistics) -> proto::ModelStatistics {
    let d = |d: StatisticDuration| Some(proto::StatisticDuration { count: d.count, ns: d.ns });
    proto::ModelStatistics {
        name: name.to_string(),
        version: version.to_string(),
        last_inference: st.last_inference_ms,
        inference_count: st.inference_count,
        execution_count: st.execution_count,
        inference_stats: Some(proto::InferStatistics {
            success: d(st.success),
            fail: d(st.fail),
            queue: d(st.queue),
            compute_input: d(st.compute_input),
            compute_infer: d(st.compute_infer),
            compute_output: d(st.compute_output),
            cache_hit: d(StatisticDuration::default()),
            cache_miss: d(StatisticDuration::default()),
        }),
        batch_stats: st
            .batches
            .iter()
            .map(|(&batch_size, b)| proto::InferBatchStatistics {
                batch_size,
                compute_input: d(b.compute_input),
                compute_infer: d(b.compute_infer),
                compute_output: d(b.compute_output),
            })
            .collect(),
        memory_usage: Vec::new(),
    }
}
