//! ONNX bytes through decode, import, every pass and the engine writer;
//! the engine must load back. Any panic or abort is a finding.
#![no_main]

use libfuzzer_sys::fuzz_target;
use trtc::build::{build_graph, BuildOptions};
use trtc::frontend::onnx::{import_bytes, proto::ExternalDataRoot, ImportOptions};

fuzz_target!(|data: &[u8]| {
    let Ok(graph) = import_bytes(data, ExternalDataRoot::default(), &ImportOptions::default()) else { return };
    if let Ok(built) = build_graph(graph, &BuildOptions::default()) {
        trtc_runtime::Engine::from_bytes(&built.engine).expect("an engine trtc wrote loads back");
    }
});
