//! The pure-serve side of `pure-bench scoreboard`: starting the server, or finding a running
//! one.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use anyhow::{anyhow, bail, Context};

use super::wire::Protocol;
use super::{Args, System};

/// pure-serve, started here or already running.
pub(super) struct PureServe {
    pub(super) address: SocketAddr,
    child: Option<Child>,
    pub(super) sync: String,
    /// Its HTTP threads, as the report names them.
    pub(super) threads: String,
}

impl PureServe {
    pub(super) fn external(url: &str) -> anyhow::Result<PureServe> {
        let host = url.trim_start_matches("http://").trim_end_matches('/');
        let address = std::net::ToSocketAddrs::to_socket_addrs(host)
            .with_context(|| format!("resolving {url}"))?
            .next()
            .ok_or_else(|| anyhow!("{url} resolves to no address"))?;
        Ok(PureServe {
            address,
            child: None,
            sync: "as configured".into(),
            threads: "HTTP threads as configured".into(),
        })
    }

    pub(super) fn start(args: &Args, data: &Path) -> anyhow::Result<PureServe> {
        let binary = std::env::current_exe()?.with_file_name("pure-serve");
        if !binary.exists() {
            bail!(
                "{} not found: build it first (cargo build --release -p pure-serve)",
                binary.display()
            );
        }
        let dir = data.join("pure");
        if dir.exists() {
            std::fs::remove_dir_all(&dir).with_context(|| format!("emptying {}", dir.display()))?;
        }
        let mut command = Command::new(&binary);
        command.arg(&args.app).arg("--data").arg(&dir).args([
            "--listen",
            "127.0.0.1:0",
            "--sync",
            &args.sync,
        ]);
        if let Some(threads) = args.server_threads {
            command.args(["--threads", &threads.to_string()]);
        }
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .with_context(|| format!("starting {}", binary.display()))?;
        let stdout = child.stdout.take().expect("piped stdout");
        // From here the child is ours to stop, whatever happens next (see Drop).
        let mut server = PureServe {
            address: SocketAddr::from(([127, 0, 0, 1], 0)),
            child: Some(child),
            sync: args.sync.clone(),
            threads: match args.server_threads {
                Some(n) => format!("{n} HTTP thread(s)"),
                None => "HTTP threads by default (one per core)".into(),
            },
        };
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line)?;
        server.address = line
            .split("http://")
            .nth(1)
            .and_then(|a| a.trim().parse().ok())
            .ok_or_else(|| anyhow!("pure-serve did not print its ready line (got {line:?})"))?;
        Ok(server)
    }
}

/// Stops a pure-serve started here, also when the benchmark fails half-way.
impl Drop for PureServe {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            // SAFETY: kill(2) on our own child, not yet waited for.
            unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
            let _ = child.wait();
        }
    }
}

impl System for PureServe {
    fn name(&self) -> &str {
        "pure-serve"
    }

    fn address(&self) -> SocketAddr {
        self.address
    }

    fn protocol(&self) -> Protocol {
        Protocol::Http
    }

    fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }
}
