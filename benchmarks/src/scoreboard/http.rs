//! The pure-serve side of `pure-bench scoreboard`: starting the server (or finding a running
//! one) and a hand-written HTTP/1.1 keep-alive client for its answers.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use anyhow::{anyhow, bail, Context};

use super::{Args, Connection, System};

/// pure-serve, started here or already running.
pub(super) struct PureServe {
    pub(super) address: SocketAddr,
    child: Option<Child>,
    pub(super) sync: String,
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
        let mut child = Command::new(&binary)
            .arg(&args.app)
            .arg("--data")
            .arg(&dir)
            .args(["--listen", "127.0.0.1:0", "--sync", &args.sync])
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

    fn connect(&self) -> anyhow::Result<Box<dyn Connection>> {
        let stream = TcpStream::connect(self.address)?;
        stream.set_nodelay(true)?;
        Ok(Box::new(HttpConnection {
            reader: BufReader::new(stream.try_clone()?),
            writer: stream,
            buffer: Vec::new(),
        }))
    }

    fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }
}

/// A hand-written HTTP/1.1 keep-alive client: enough for pure-serve's Content-Length answers.
struct HttpConnection {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
    buffer: Vec<u8>,
}

impl HttpConnection {
    fn exchange(&mut self, request: &[u8]) -> anyhow::Result<()> {
        self.writer.write_all(request)?;
        let mut line = String::new();
        self.reader.read_line(&mut line)?;
        let status = line.split_whitespace().nth(1).unwrap_or("").to_string();
        let ok = status == "200";
        let mut length = 0;
        loop {
            line.clear();
            if self.reader.read_line(&mut line)? == 0 {
                bail!("connection closed");
            }
            let header = line.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':') {
                if name.eq_ignore_ascii_case("content-length") {
                    length = value.trim().parse()?;
                }
            }
        }
        self.buffer.resize(length, 0);
        self.reader.read_exact(&mut self.buffer)?;
        if !ok {
            bail!("status {status}: {}", String::from_utf8_lossy(&self.buffer));
        }
        Ok(())
    }
}

impl Connection for HttpConnection {
    fn post(&mut self, player: &str, score: i64) -> anyhow::Result<()> {
        let body = format!("{{\"player\":\"{player}\",\"score\":{score}}}");
        let request = format!(
            "POST /scores HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        self.exchange(request.as_bytes())
    }

    fn read(&mut self, player: &str) -> anyhow::Result<()> {
        let request = format!("GET /players/{player} HTTP/1.1\r\nHost: bench\r\n\r\n");
        match self.exchange(request.as_bytes()) {
            // A player not posted yet is a normal answer for a read.
            Err(error) if error.to_string().starts_with("status 404") => Ok(()),
            other => other,
        }
    }
}
