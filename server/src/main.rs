//! `trtc-serve` (also run as `trtc serve`): loads a model repository, or one
//! engine, and serves it over HTTP and gRPC with metrics on a third port, until
//! SIGINT or SIGTERM; then it stops accepting, finishes the requests in
//! flight (closing what is still open after `--exit-timeout-secs`) and
//! exits 0.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{anyhow, bail, Context, Result};
use axum::serve::ListenerExt;
use clap::Parser;
use tokio::sync::watch;
use trtc_server::grpc;
use trtc_server::http;
use trtc_server::metrics::Metrics;
use trtc_server::repository::{Repository, VersionState};
use trtc_server::service::Service;

#[derive(Parser)]
#[command(name = "trtc serve", version, about = "Serves trtc engines to Triton's clients (KServe v2 over HTTP and gRPC).")]
struct Args {
    /// One engine file to serve, as version 1 of a model named after its file stem.
    engine: Option<PathBuf>,
    /// A model repository in Triton's layout: DIR/<model>/[config.pbtxt], DIR/<model>/<version>/model.engine.
    #[arg(long, value_name = "DIR")]
    model_repository: Option<PathBuf>,
    /// The address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// The HTTP port (0: any free port, printed at start).
    #[arg(long, default_value_t = 8000)]
    http_port: u16,
    /// The gRPC port (0: any free port).
    #[arg(long, default_value_t = 8001)]
    grpc_port: u16,
    /// The port of the Prometheus metrics endpoint, /metrics (0: any free port).
    #[arg(long, default_value_t = 8002)]
    metrics_port: u16,
    /// The largest request in bytes: an HTTP body (JSON and binary tensors
    /// together) or a gRPC message.
    #[arg(long, default_value_t = 64 << 20, value_name = "BYTES")]
    http_max_input_size: usize,
    /// After SIGINT or SIGTERM, how long to wait for the requests and
    /// connections in flight before closing them anyway (Triton's
    /// `--exit-timeout-secs`).
    #[arg(long, default_value_t = 30, value_name = "SECONDS")]
    exit_timeout_secs: u64,
}

fn main() -> ExitCode {
    match run(Args::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let message = format!("{e:#}").replace(['\n', '\r'], " ");
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: Args) -> Result<()> {
    let metrics = Arc::new(Metrics::new());
    let repository = match (&args.engine, &args.model_repository) {
        (Some(_), Some(_)) => bail!("give an engine or --model-repository, not both"),
        (None, None) => bail!("give an engine file or --model-repository DIR"),
        (Some(engine), None) => Repository::single(engine, &metrics).map_err(|e| anyhow!(e))?,
        (None, Some(dir)) => {
            let (repository, log) = Repository::load(dir, &metrics).map_err(|e| anyhow!(e))?;
            for line in log {
                eprintln!("trtc serve: {line}");
            }
            repository
        }
    };
    for (name, entry) in &repository.models {
        for (v, state) in &entry.versions {
            if let VersionState::Ready(m) = state {
                let groups: Vec<String> =
                    m.instance_groups.iter().map(|g| format!("{}x {:?}", g.count, g.kind).to_lowercase()).collect();
                eprintln!("trtc serve: model '{name}' version {v} ready ({})", groups.join(", "));
            }
        }
    }
    if repository.models.is_empty() {
        eprintln!("trtc serve: the model repository holds no model folder");
    }
    let (stop, stopped) = watch::channel(false);
    let service = Arc::new(Service {
        repository,
        metrics: metrics.clone(),
        max_request_bytes: args.http_max_input_size,
        stopping: stopped.clone(),
    });

    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().context("cannot start the async runtime")?;
    let served = service.clone();
    let served_grpc = service.clone();
    runtime.block_on(async move {
        // SIGINT and SIGTERM are handled from here on, before the ports are
        // announced: a client (or a test) that stops the server as soon as it
        // sees them gets a clean shutdown, not death by the signal.
        let stop_signal = StopSignal::install()?;
        let bind = |port: u16| {
            let host = args.host.clone();
            async move {
                let ip: std::net::IpAddr = host.parse().map_err(|_| anyhow!("--host {host}: not an IP address"))?;
                let addr = SocketAddr::new(ip, port);
                tokio::net::TcpListener::bind(addr).await.with_context(|| format!("cannot listen on {addr}"))
            }
        };
        let http_listener = bind(args.http_port).await?;
        let grpc_listener = bind(args.grpc_port).await?;
        let metrics_listener = bind(args.metrics_port).await?;
        eprintln!("trtc serve: HTTP on http://{}", http_listener.local_addr()?);
        eprintln!("trtc serve: gRPC on {}", grpc_listener.local_addr()?);
        eprintln!("trtc serve: metrics on http://{}/metrics", metrics_listener.local_addr()?);

        let until_stopped = |mut rx: watch::Receiver<bool>| async move {
            let _ = rx.wait_for(|s| *s).await;
        };
        let http_server =
            axum::serve(nodelay(http_listener), http::router(served)).with_graceful_shutdown(until_stopped(stopped.clone()));
        let grpc_server =
            tonic::transport::Server::builder().add_service(grpc::server(served_grpc)).serve_with_incoming_shutdown(
                tonic::transport::server::TcpIncoming::from(grpc_listener).with_nodelay(Some(true)),
                until_stopped(stopped.clone()),
            );
        let metrics_server =
            axum::serve(metrics_listener, http::metrics_router(metrics)).with_graceful_shutdown(until_stopped(stopped));
        let http_task = tokio::spawn(async move { http_server.await });
        let grpc_task = tokio::spawn(grpc_server);
        let metrics_task = tokio::spawn(async move { metrics_server.await });

        stop_signal.received().await;
        eprintln!("trtc serve: stopping: no new connections, finishing the requests in flight");
        let _ = stop.send(true);
        let finished = async {
            http_task.await.context("the HTTP server failed")?.context("the HTTP server failed")?;
            grpc_task.await.context("the gRPC server failed")?.context("the gRPC server failed")?;
            metrics_task.await.context("the metrics server failed")?.context("the metrics server failed")
        };
        let exit_timeout = std::time::Duration::from_secs(args.exit_timeout_secs);
        match tokio::time::timeout(exit_timeout, finished).await {
            Ok(result) => result?,
            Err(_) => eprintln!(
                "trtc serve: connections still open after {} s (--exit-timeout-secs): closing them",
                args.exit_timeout_secs
            ),
        }
        Ok::<(), anyhow::Error>(())
    })?;
    // The last references to the models go here (the runtime's tasks held
    // the others): each scheduler finishes its queue and joins its instances.
    drop(runtime);
    drop(service);
    eprintln!("trtc serve: stopped");
    Ok(())
}

/// Responses go out at once, not held back by Nagle's algorithm.
fn nodelay(listener: tokio::net::TcpListener) -> impl axum::serve::Listener<Addr = SocketAddr> {
    listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    })
}

/// SIGTERM and SIGINT, caught: the process keeps running until the server
/// has stopped.
struct StopSignal {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
}

impl StopSignal {
    fn install() -> Result<StopSignal> {
        use tokio::signal::unix::{signal, SignalKind};
        let term = signal(SignalKind::terminate()).context("cannot handle SIGTERM")?;
        let int = signal(SignalKind::interrupt()).context("cannot handle SIGINT")?;
        Ok(StopSignal { term, int })
    }

    async fn received(mut self) {
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.int.recv() => {}
        }
    }
}
