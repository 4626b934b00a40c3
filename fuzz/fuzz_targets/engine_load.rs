//! Engine bytes through the loader and `inspect`; an engine that loads and
//! has small bindings is also run on zeros.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(engine) = trtc_runtime::Engine::from_bytes(data) else { return };
    let _ = trtc::inspect::text(&engine);
    let _ = trtc::inspect::json(&engine);
    let small = engine.inputs().iter().all(|b| b.ty.checked_bytes().is_some_and(|n| n <= 1 << 16));
    if !small {
        return;
    }
    let inputs: Vec<(String, trtc_runtime::Tensor)> =
        match engine.inputs().iter().map(|b| trtc_runtime::Tensor::zeros(b.ty.clone()).map(|t| (b.name.clone(), t))).collect() {
            Ok(v) => v,
            Err(_) => return,
        };
    let refs: Vec<(&str, &trtc_runtime::Tensor)> = inputs.iter().map(|(n, t)| (n.as_str(), t)).collect();
    if let Ok(mut ctx) = engine.create_context() {
        let _ = ctx.run(&refs);
    }
});
