//! Malformed ONNX never panics: random byte corruptions of real models either
//! build or fail with an error. (A small, deterministic stand-in for a fuzzer.)

use trtc::build::{build_graph, BuildOptions};
use trtc::frontend::onnx::{import_bytes, proto::ExternalDataRoot, ImportOptions};

fn build(bytes: &[u8]) -> anyhow::Result<()> {
    let g = import_bytes(bytes, ExternalDataRoot::default(), &ImportOptions::default())?;
    let built = build_graph(g, &BuildOptions::default())?;
    trtc_runtime::Engine::from_bytes(&built.engine)?;
    Ok(())
}

#[test]
fn corrupted_models_fail_cleanly() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/models");
    let mut rng = trtc::random::Rng::new(42);
    let mut panics = Vec::new();
    let mut tried = 0;
    for name in [
        "example_cnn.onnx",
        "resnet18_legacy.onnx",
        "bert_dynamo.onnx",
        "gpt2_legacy.onnx",
        "speech_lstm_legacy.onnx",
        "timeseries_gru_dynamo.onnx",
    ] {
        let original = std::fs::read(dir.join(name)).unwrap();
        for _ in 0..150 {
            let mut b = original.clone();
            // A few random bytes flipped, or the file cut short.
            if rng.next_u64().is_multiple_of(4) {
                b.truncate((rng.next_u64() as usize) % b.len());
            } else {
                for _ in 0..1 + rng.next_u64() % 4 {
                    let i = (rng.next_u64() as usize) % b.len();
                    b[i] = rng.next_u64() as u8;
                }
            }
            tried += 1;
            if let Err(p) = std::panic::catch_unwind(|| build(&b)) {
                let msg = p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()));
                panics.push(format!("{name}: {}", msg.unwrap_or_default()));
            }
        }
    }
    println!("malformed models: {} handled without a panic, {} panicked", tried - panics.len(), panics.len());
    assert!(panics.is_empty(), "{} of {tried} corrupted models panicked:\n{}", panics.len(), panics.join("\n"));
}
