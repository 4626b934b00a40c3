//! Generates the gRPC service's messages and server trait from
//! `proto/grpc_service.proto`, compiled by protox (no protoc needed).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/grpc_service.proto");
    let descriptors = protox::compile(["grpc_service.proto"], ["proto"])?;
    tonic_prost_build::configure().build_client(false).compile_fds(descriptors)?;
    Ok(())
}
