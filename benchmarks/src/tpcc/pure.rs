//! The Pure side of the TPC-C harness: the population as `pure-serve import` files, the
//! `pure-serve` process (import, serve, export), and a blocking HTTP/1.1 client that sends a
//! transaction and reads its answer.

use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use anyhow::{anyhow, bail, Context, Result};

use super::input::Txn;
use super::population;
use super::rows::{Row, TABLES};
use super::Answer;

/// The pure-serve binary beside this one (cargo builds them into one directory).
pub fn binary() -> Result<PathBuf> {
    let binary = std::env::current_exe()?.with_file_name("pure-serve");
    if !binary.exists() {
        bail!(
            "{} not found: build it first (cargo build --release -p pure-serve)",
            binary.display()
        );
    }
    Ok(binary)
}

/// Writes the population of `warehouses` as `out/<table>.jsonl` (the nine tables; the app's
/// indexes are built from them when the server starts); returns the files and the rows written
/// per file.
pub fn write_population(
    out: &Path,
    seed: u64,
    warehouses: i64,
    progress: &indicatif::ProgressBar,
) -> Result<Vec<(PathBuf, u64)>> {
    std::fs::create_dir_all(out).with_context(|| format!("create {}", out.display()))?;
    let mut writers = Vec::new();
    for table in TABLES {
        let path = out.join(format!("{table}.jsonl"));
        let file =
            std::fs::File::create(&path).with_context(|| format!("create {}", path.display()))?;
        writers.push((path, BufWriter::with_capacity(1 << 20, file), 0u64));
    }
    let mut failed: Option<std::io::Error> = None;
    population::generate(seed, warehouses, &mut |row: Row| {
        if failed.is_some() {
            return;
        }
        let slot = TABLES
            .iter()
            .position(|t| *t == row.table())
            .expect("a table");
        let (_, writer, rows) = &mut writers[slot];
        *rows += 1;
        if let Err(e) = writeln!(writer, "{}", row.line()) {
            failed = Some(e);
        }
        progress.inc(1);
    });
    if let Some(e) = failed {
        return Err(e).context("write the population");
    }
    let mut written = Vec::new();
    for (path, mut writer, rows) in writers {
        writer
            .flush()
            .with_context(|| format!("write {}", path.display()))?;
        written.push((path, rows));
    }
    Ok(written)
}

/// Runs `pure-serve <args>` to completion; its output goes to ours, a failure is an error.
pub fn run_pure_serve(args: &[&std::ffi::OsStr]) -> Result<()> {
    let binary = binary()?;
    // Its report goes to our stderr: our stdout is the benchmark's own report.
    let status = Command::new(&binary)
        .args(args)
        .stdout(std::io::stderr())
        .status()
        .with_context(|| format!("start {}", binary.display()))?;
    if !status.success() {
        bail!("pure-serve {:?} failed: {status}", args);
    }
    Ok(())
}

/// `pure-serve import app --data data files...`.
pub fn import(app: &Path, data: &Path, files: &[PathBuf]) -> Result<()> {
    let mut args: Vec<&std::ffi::OsStr> = vec![
        "import".as_ref(),
        app.as_os_str(),
        "--data".as_ref(),
        data.as_os_str(),
    ];
    args.extend(files.iter().map(|f| f.as_os_str()));
    run_pure_serve(&args)
}

/// `pure-serve export app --data data --out out`.
pub fn export(app: &Path, data: &Path, out: &Path) -> Result<()> {
    run_pure_serve(&[
        "export".as_ref(),
        app.as_os_str(),
        "--data".as_ref(),
        data.as_os_str(),
        "--out".as_ref(),
        out.as_os_str(),
    ])
}

/// A pure-serve started here; stopped (SIGTERM, then waited for) on [`Server::stop`] or drop.
pub struct Server {
    pub address: SocketAddr,
    child: Option<Child>,
}

impl Server {
    pub fn start(app: &Path, data: &Path, extra: &[&str]) -> Result<Server> {
        let binary = binary()?;
        let mut command = Command::new(&binary);
        // SAFETY: prctl in the child between fork and exec touches no memory of ours; it makes
        // the server end with us, whichever way we end (a SIGKILL included).
        unsafe {
            use std::os::unix::process::CommandExt;
            command.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
                Ok(())
            });
        }
        let mut child = command
            .arg(app)
            .arg("--data")
            .arg(data)
            .args(["--listen", "127.0.0.1:0"])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .with_context(|| format!("start {}", binary.display()))?;
        let stdout = child.stdout.take().expect("piped stdout");
        let mut server = Server {
            address: SocketAddr::from(([127, 0, 0, 1], 0)),
            child: Some(child),
        };
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line)?;
        if line.is_empty() {
            let status = server.child.as_mut().expect("running").wait()?;
            bail!("pure-serve ended before it was ready: {status} (its messages are above)");
        }
        server.address = line
            .split("http://")
            .nth(1)
            .and_then(|a| a.trim().parse().ok())
            .ok_or_else(|| anyhow!("pure-serve did not print its ready line (got {line:?})"))?;
        Ok(server)
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// The server's exit status, if it has ended.
    pub fn exited(&mut self) -> Result<Option<std::process::ExitStatus>> {
        match &mut self.child {
            Some(child) => Ok(child.try_wait()?),
            None => Ok(None),
        }
    }

    /// Stops the server cleanly and says whether it exited 0.
    pub fn stop(mut self) -> Result<()> {
        let mut child = self.child.take().expect("running");
        // SAFETY: kill(2) on our own child, not yet waited for.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let status = child.wait()?;
        if !status.success() {
            bail!("pure-serve did not stop cleanly: {status}");
        }
        Ok(())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            // SAFETY: as in `stop`.
            unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
            let _ = child.wait();
        }
    }
}

/// One keep-alive HTTP/1.1 connection, one request at a time.
pub struct Client {
    stream: BufReader<TcpStream>,
    host: String,
    request: Vec<u8>,
    /// A line of the answer's head, kept to be reused.
    line: String,
}

impl Client {
    pub fn connect(address: SocketAddr) -> Result<Client> {
        let stream =
            TcpStream::connect(address).with_context(|| format!("connect to {address}"))?;
        stream.set_nodelay(true)?;
        // Far beyond any answer's time (a write waits at most the server's write timeout), so
        // that a server that stopped answering fails the run instead of hanging it.
        stream.set_read_timeout(Some(std::time::Duration::from_secs(60)))?;
        Ok(Client {
            stream: BufReader::with_capacity(64 << 10, stream),
            host: address.to_string(),
            request: Vec::with_capacity(4096),
            line: String::new(),
        })
    }

    /// Sends `txn` with the timestamp `now` and returns the app's answer.
    pub fn call(&mut self, txn: &Txn, now: i64) -> Result<Answer> {
        let (method, path, body) = txn.http(now);
        let body = body.map(|b| b.to_string()).unwrap_or_default();
        self.send(method, &path, &body)
    }

    /// Sends one request (a body only with POST) and returns the app's answer.
    pub fn send(&mut self, method: &str, path: &str, body: &str) -> Result<Answer> {
        let mut answer = Vec::new();
        let status = self.exchange(method, path, body.as_bytes(), &mut answer)?;
        let body = serde_json::from_slice(&answer).with_context(|| {
            format!(
                "the answer is not JSON: {}",
                String::from_utf8_lossy(&answer)
            )
        })?;
        Ok(Answer { status, body })
    }

    /// Sends one request (with Content-Length when it has a body, or is a POST) and reads the
    /// answer: its status, and its body into `answer` (as bytes, so that a caller that need
    /// not parse it spends nothing on it).
    pub fn exchange(
        &mut self,
        method: &str,
        path: &str,
        body: &[u8],
        answer: &mut Vec<u8>,
    ) -> Result<u16> {
        self.request.clear();
        write!(
            self.request,
            "{method} {path} HTTP/1.1\r\nHost: {}\r\n",
            self.host
        )?;
        if !body.is_empty() || method == "POST" {
            write!(
                self.request,
                "Content-Type: application/json\r\nContent-Length: {}\r\n",
                body.len()
            )?;
        }
        self.request.extend_from_slice(b"\r\n");
        self.request.extend_from_slice(body);
        self.stream.get_mut().write_all(&self.request)?;

        self.line.clear();
        self.stream.read_line(&mut self.line)?;
        let status: u16 = self
            .line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| anyhow!("not an HTTP status line: {:?}", self.line))?;
        let mut length = None;
        loop {
            self.line.clear();
            self.stream.read_line(&mut self.line)?;
            let header = self.line.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':') {
                if name.eq_ignore_ascii_case("content-length") {
                    length = Some(
                        value
                            .trim()
                            .parse::<usize>()
                            .with_context(|| format!("a bad Content-Length: {header}"))?,
                    );
                }
            }
        }
        // A 204 or 304 has no body, and no Content-Length to say so.
        let length = match length {
            Some(length) => length,
            None if status == 204 || status == 304 => 0,
            None => bail!("an answer without Content-Length"),
        };
        answer.resize(length, 0);
        self.stream.read_exact(answer)?;
        Ok(status)
    }
}

/// `GET path` on a connection of its own: the body of a 200 answer as text (the metrics page).
pub fn get_text(address: SocketAddr, path: &str) -> Result<String> {
    let mut stream =
        TcpStream::connect(address).with_context(|| format!("connect to {address}"))?;
    stream.set_read_timeout(Some(std::time::Duration::from_secs(60)))?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
    )?;
    let mut answer = String::new();
    stream
        .read_to_string(&mut answer)
        .with_context(|| format!("read the answer to GET {path}"))?;
    let (head, body) = answer
        .split_once("\r\n\r\n")
        .ok_or_else(|| anyhow!("GET {path}: no end of headers in {answer:?}"))?;
    if !head.starts_with("HTTP/1.1 200") {
        bail!("GET {path}: {}", head.lines().next().unwrap_or(head));
    }
    Ok(body.to_string())
}
