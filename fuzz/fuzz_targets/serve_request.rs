//! The server's request parsing: bytes as an HTTP inference request (JSON
//! header, binary tensors after it), as a protobuf gRPC `ModelInferRequest`,
//! and as `config.pbtxt` text, each against the example CNN's engine. The
//! first byte picks the form; for HTTP the next two give the
//! `Inference-Header-Content-Length` (0xffff: none), and `form / 3 % 3` its
//! Content-Encoding (none, gzip, deflate).
#![no_main]

use std::path::Path;
use std::sync::{Arc, OnceLock};

use libfuzzer_sys::fuzz_target;
use prost::Message;
use trtc_server::grpc::proto::ModelInferRequest;
use trtc_server::http::RequestHeaders;
use trtc_server::metrics::Metrics;
use trtc_server::model_config::ModelConfig;
use trtc_server::repository::{LoadedModel, Repository};

fn model() -> &'static Arc<LoadedModel> {
    static MODEL: OnceLock<Arc<LoadedModel>> = OnceLock::new();
    MODEL.get_or_init(|| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let built = trtc::build::build_file(&root.join("testdata/models/example_cnn.onnx"), &Default::default())
            .expect("the example model builds");
        let path = std::env::temp_dir().join(format!("trtc-fuzz-serve-{}.engine", std::process::id()));
        std::fs::write(&path, built.engine).expect("a temporary engine file");
        let repository = Repository::single(&path, &Metrics::new()).expect("the example engine loads");
        let _ = std::fs::remove_file(&path);
        let name = repository.models.keys().next().expect("one model").clone();
        // The model (and its scheduler) lives on in this reference.
        repository.get(&name, None).expect("the model is ready")
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&form, rest)) = data.split_first() else { return };
    match form % 3 {
        0 => {
            if rest.len() < 2 {
                return;
            }
            let n = u16::from_le_bytes([rest[0], rest[1]]);
            let length = n.to_string();
            let headers = RequestHeaders {
                content_encoding: [None, Some(&b"gzip"[..]), Some(&b"deflate"[..])][(form / 3 % 3) as usize],
                header_length: (n != u16::MAX).then_some(length.as_bytes()),
                max_body_bytes: 1 << 20,
            };
            let _ = trtc_server::http::parse_infer_request(model(), headers, &rest[2..]);
        }
        1 => {
            if let Ok(request) = ModelInferRequest::decode(rest) {
                let _ = trtc_server::grpc::parse_infer_request(model(), &request);
            }
        }
        _ => {
            if let Ok(text) = std::str::from_utf8(rest) {
                let _ = ModelConfig::parse(Path::new("config.pbtxt"), text, "m");
            }
        }
    }
});
