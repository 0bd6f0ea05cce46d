//! The pure-serve side of `pure-bench scoreboard`: a server the harness starts
//! ([`crate::harness::serve::Server`]) on an emptied data directory, or one already running at a
//! URL.

use std::net::SocketAddr;
use std::path::Path;

use anyhow::{anyhow, Context};

use super::wire::Protocol;
use super::{Args, System};
use crate::harness::serve::Server;

/// pure-serve, started here (and stopped when this is dropped) or already running.
pub(super) struct PureServe {
    pub(super) address: SocketAddr,
    server: Option<Server>,
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
            server: None,
            sync: "as configured".into(),
            threads: "HTTP threads as configured".into(),
        })
    }

    pub(super) fn start(args: &Args, data: &Path) -> anyhow::Result<PureServe> {
        let dir = data.join("pure");
        if dir.exists() {
            std::fs::remove_dir_all(&dir).with_context(|| format!("emptying {}", dir.display()))?;
        }
        let threads = args.server_threads.map(|n| n.to_string());
        let mut flags = vec!["--sync", &args.sync];
        if let Some(threads) = &threads {
            flags.extend(["--threads", threads]);
        }
        let server = Server::start(&args.app, &dir, &flags)?;
        Ok(PureServe {
            address: server.address,
            server: Some(server),
            sync: args.sync.clone(),
            threads: match args.server_threads {
                Some(n) => format!("{n} HTTP thread(s)"),
                None => "HTTP threads by default (one per core)".into(),
            },
        })
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
        self.server.as_ref().map(Server::pid)
    }
}
