//! What the server's integration tests share: the workspace, the
//! tritonclient venv's python, and a `trtc-serve` started on free loopback
//! ports.
#![allow(dead_code)]

use std::ffi::OsStr;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("server/ is in the workspace").to_path_buf()
}

/// The python of the venv that `scripts/fetch-tritonclient.sh` makes.
pub fn python() -> PathBuf {
    let p = std::env::var_os("TRTC_TRITONCLIENT_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join(".cache/tritonclient/bin/python"));
    assert!(p.exists(), "{} is missing: run `bash scripts/fetch-tritonclient.sh` (scripts/test.sh does)", p.display());
    p
}

/// A running `trtc-serve`, its addresses, and the lines it printed after
/// them (each is also echoed to the test's stderr).
pub struct Server {
    pub child: Child,
    pub http: String,
    pub grpc: String,
    pub metrics: String,
    pub log: mpsc::Receiver<String>,
    /// The lines printed up to the addresses.
    pub startup: Vec<String>,
}

/// Starts `trtc-serve ARGS` on free loopback ports with `envs` set, and
/// waits (at most 120 s) for it to print its three addresses.
pub fn start(args: &[&OsStr], envs: &[(&str, &OsStr)]) -> Server {
    let mut child = Command::new(env!("CARGO_BIN_EXE_trtc-serve"))
        .args(args)
        .args(["--http-port", "0", "--grpc-port", "0", "--metrics-port", "0"])
        .envs(envs.iter().copied())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("trtc-serve starts");
    let stderr = child.stderr.take().unwrap();
    let (tx, log) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            eprintln!("[server] {line}");
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let (mut http, mut grpc, mut metrics, mut startup) = (None, None, None, Vec::new());
    let deadline = Instant::now() + Duration::from_secs(120);
    while http.is_none() || grpc.is_none() || metrics.is_none() {
        let left = deadline.saturating_duration_since(Instant::now());
        let Ok(line) = log.recv_timeout(left) else {
            let _ = child.kill();
            panic!("trtc-serve did not print its addresses in time: {startup:?}");
        };
        http = http.or(line.strip_prefix("trtc serve: HTTP on http://").map(str::to_string));
        grpc = grpc.or(line.strip_prefix("trtc serve: gRPC on ").map(str::to_string));
        metrics =
            metrics.or(line.strip_prefix("trtc serve: metrics on http://").map(|a| a.trim_end_matches("/metrics").to_string()));
        startup.push(line);
    }
    Server { child, http: http.unwrap(), grpc: grpc.unwrap(), metrics: metrics.unwrap(), log, startup }
}

impl Server {
    /// Sends `signal` (libc::SIGTERM, SIGINT) straight through kill(2): no
    /// `kill` process in between, so it can arrive within microseconds.
    pub fn signal(&self, signal: libc::c_int) {
        let pid = libc::pid_t::try_from(self.child.id()).expect("a pid fits pid_t");
        // SAFETY: kill(2) on the pid of a child not yet waited for.
        assert_eq!(unsafe { libc::kill(pid, signal) }, 0, "kill({pid}, {signal})");
    }
}
