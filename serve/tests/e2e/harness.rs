//! The test harness: starts the built `pure-serve` binary on a free loopback port, and talks to it
//! with a tiny HTTP/1.1 client over `std::net::TcpStream` (small enough to also send the malformed,
//! slow and oversized requests a real client library refuses to send).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

/// Upper bound on any wait for the server (start, answer, exit): generous for a loaded 2-core CI
/// machine; reaching it means the test fails, not that it sleeps that long.
pub const WAIT_MAX: Duration = Duration::from_secs(60);

/// The pure-serve under test: this build's, or `PURE_SERVE_BIN` (to run the suite against
/// another build, such as the commit before a fix, to see its new tests fail there).
pub fn binary() -> String {
    std::env::var("PURE_SERVE_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_pure-serve").into())
}

pub fn repo_path(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(relative)
}

pub fn scoreboard_dir() -> PathBuf {
    repo_path("apps/scoreboard")
}

pub fn test_app_dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/apps")
        .join(name)
}

/// A running pure-serve process.
pub struct Server {
    pub child: Child,
    pub address: SocketAddr,
    stderr: mpsc::Receiver<String>,
    /// The addresses standard output announces after the ready line's.
    announced: mpsc::Receiver<String>,
}

/// How to start a server: the app, the data directory and extra flags.
pub struct Launch {
    pub program: Vec<String>,
    pub app_dir: PathBuf,
    pub data_dir: PathBuf,
    pub flags: Vec<String>,
}

impl Launch {
    pub fn new(app_dir: &Path, data_dir: &Path) -> Launch {
        Launch {
            program: vec![binary()],
            app_dir: app_dir.to_path_buf(),
            data_dir: data_dir.to_path_buf(),
            // 8 MiB of log rather than the default 256: every test server preallocates its log
            // by writing zeros, and dozens of them start during a run.
            flags: vec!["--log-capacity".into(), (8 << 20).to_string()],
        }
    }

    /// Adds `flag value`, or sets the value of a flag given before.
    pub fn flag(mut self, flag: &str, value: &str) -> Launch {
        match self.flags.iter().position(|given| given == flag) {
            Some(at) => self.flags[at + 1] = value.to_string(),
            None => {
                self.flags.push(flag.to_string());
                self.flags.push(value.to_string());
            }
        }
        self
    }

    /// A flag without a value (`--access-log`).
    pub fn switch(mut self, flag: &str) -> Launch {
        if !self.flags.iter().any(|given| given == flag) {
            self.flags.push(flag.to_string());
        }
        self
    }

    /// Runs the server under another program (strace), which gets the server's command after it.
    pub fn wrapped(mut self, wrapper: &[&str]) -> Launch {
        let mut program: Vec<String> = wrapper.iter().map(|s| s.to_string()).collect();
        program.append(&mut self.program);
        self.program = program;
        self
    }

    pub fn command(&self) -> Command {
        let mut command = Command::new(&self.program[0]);
        command.args(&self.program[1..]);
        command.arg(&self.app_dir).arg("--data").arg(&self.data_dir);
        if !self.flags.iter().any(|given| given == "--listen") {
            command.args(["--listen", "127.0.0.1:0"]);
        }
        command.args(&self.flags);
        command
    }

    /// Starts the server and waits for its ready line.
    pub fn start(&self) -> Server {
        Server::start(self.command())
    }
}

impl Server {
    pub fn start(command: Command) -> Server {
        Server::start_then(command, |_| {})
    }

    /// Starts the server, calls `before_ready` with its process id at once, then waits for its
    /// ready line.
    pub fn start_then(mut command: Command, before_ready: impl FnOnce(u32)) -> Server {
        command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // Its own process group, so that dropping the server also ends a wrapped one (strace
        // detaches from, rather than kills, its tracee when it is killed).
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        let mut child = command.spawn().expect("spawn pure-serve");
        before_ready(child.id());
        let stdout = child.stdout.take().expect("piped stdout");
        let stderr = child.stderr.take().expect("piped stderr");
        let (stderr_sender, stderr_lines) = mpsc::channel();
        std::thread::spawn(move || forward_lines(stderr, stderr_sender));
        let (ready_sender, ready) = mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            while let Some(Ok(line)) = lines.next() {
                if let Some(url) = line.split("http://").nth(1) {
                    let _ = ready_sender.send(url.trim().to_string());
                }
            }
        });
        let Ok(address) = ready.recv_timeout(WAIT_MAX) else {
            let _ = child.kill();
            let errors: Vec<String> = stderr_lines.try_iter().collect();
            panic!(
                "pure-serve did not print its ready line; stderr:\n{}",
                errors.join("\n")
            );
        };
        let address = address.parse().expect("the ready line holds host:port");
        Server {
            child,
            address,
            stderr: stderr_lines,
            announced: ready,
        }
    }

    pub fn client(&self) -> Client {
        Client::connect(self.address)
    }

    /// The admin address (`--admin-listen`), as the line after the ready line announces it.
    pub fn admin_address(&self) -> SocketAddr {
        let url = self
            .announced
            .recv_timeout(WAIT_MAX)
            .expect("pure-serve announces its admin address");
        let address = url.strip_suffix("/_pure/").unwrap_or(&url);
        address.parse().expect("the admin line holds host:port")
    }

    /// Sends a signal (libc) to the server process.
    pub fn signal(&self, signal: i32) {
        // SAFETY: kill(2) on a child we own; the pid is valid until we wait for it.
        let result = unsafe { libc::kill(self.child.id() as i32, signal) };
        assert_eq!(result, 0, "kill({}, {signal})", self.child.id());
    }

    /// Waits for the process to exit, bounded by `WAIT_MAX`.
    pub fn wait(&mut self) -> ExitStatus {
        let deadline = Instant::now() + WAIT_MAX;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "pure-serve did not exit within {WAIT_MAX:?}"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Stops with SIGTERM and asserts the clean exit status.
    pub fn stop(mut self) {
        self.signal(libc::SIGTERM);
        let status = self.wait();
        assert_eq!(
            status.code(),
            Some(0),
            "clean shutdown; stderr:\n{}",
            self.stderr_text()
        );
    }

    /// What the server wrote to stderr so far.
    pub fn stderr_text(&self) -> String {
        self.stderr.try_iter().collect::<Vec<_>>().join("\n")
    }

    /// Waits until the server's standard error has said `needle` (its lines arrive through a
    /// thread, perhaps after the ready line); returns what it said until then.
    pub fn wait_for_stderr(&self, needle: &str) -> String {
        let mut seen = String::new();
        wait_until(needle, || {
            seen.push_str(&self.stderr_text());
            seen.push('\n');
            seen.contains(needle)
        });
        seen
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if self.child.try_wait().is_ok_and(|status| status.is_none()) {
            // SAFETY: kill(2) on the process group of a child we have not yet waited for.
            unsafe { libc::kill(-(self.child.id() as i32), libc::SIGKILL) };
        }
        let _ = self.child.wait();
    }
}

fn forward_lines(stream: impl Read, sender: mpsc::Sender<String>) {
    for line in BufReader::new(stream).lines() {
        let Ok(line) = line else { return };
        if sender.send(line).is_err() {
            return;
        }
    }
}

/// A response as the test client read it.
#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|error| {
            panic!(
                "status {} body is not JSON ({error}): {:?}",
                self.status,
                self.text()
            )
        })
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// A keep-alive HTTP/1.1 client on one connection; reconnects after the server closed it.
pub struct Client {
    address: SocketAddr,
    /// The local address to connect from (another loopback address is another peer).
    source: Option<std::net::Ipv4Addr>,
    stream: Option<BufReader<TcpStream>>,
}

impl Client {
    pub fn connect(address: SocketAddr) -> Client {
        Client {
            address,
            source: None,
            stream: None,
        }
    }

    pub fn connect_from(address: SocketAddr, source: std::net::Ipv4Addr) -> Client {
        Client {
            source: Some(source),
            ..Client::connect(address)
        }
    }

    pub fn get(&mut self, path: &str) -> Response {
        self.request("GET", path, None).expect("GET answered")
    }

    pub fn post(&mut self, path: &str, body: &Value) -> Response {
        let body = serde_json::to_vec(body).expect("serialize");
        self.request("POST", path, Some(&body))
            .expect("POST answered")
    }

    /// Sends one request and reads its response. An I/O error (the server died) is returned,
    /// and the next request opens a new connection.
    pub fn request(
        &mut self,
        method: &str,
        path: &str,
        body: Option<&[u8]>,
    ) -> std::io::Result<Response> {
        let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {}\r\n", self.address);
        if let Some(body) = body {
            head.push_str(&format!(
                "Content-Type: application/json\r\nContent-Length: {}\r\n",
                body.len()
            ));
        }
        head.push_str("\r\n");
        let mut bytes = head.into_bytes();
        bytes.extend_from_slice(body.unwrap_or_default());
        self.exchange(&bytes)
    }

    /// Sends raw bytes as one request and reads one response.
    pub fn exchange(&mut self, bytes: &[u8]) -> std::io::Result<Response> {
        let result = self.try_exchange(bytes);
        let closes = match &result {
            Ok(response) => response.header("connection") == Some("close"),
            Err(_) => true,
        };
        if closes {
            self.stream = None;
        }
        result
    }

    fn try_exchange(&mut self, bytes: &[u8]) -> std::io::Result<Response> {
        if self.stream.is_none() {
            let stream = match self.source {
                Some(source) => try_connect_from(source, self.address)?,
                None => TcpStream::connect(self.address)?,
            };
            stream.set_nodelay(true)?;
            stream.set_read_timeout(Some(WAIT_MAX))?;
            self.stream = Some(BufReader::new(stream));
        }
        let stream = self.stream.as_mut().expect("connected above");
        stream.get_mut().write_all(bytes)?;
        read_response(stream)
    }
}

/// Reads one response with a Content-Length body (pure-serve always sends one).
pub fn read_response(stream: &mut impl BufRead) -> std::io::Result<Response> {
    let mut line = String::new();
    if stream.read_line(&mut line)? == 0 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "connection closed",
        ));
    }
    let status = line
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("bad status line {line:?}")))?;
    let mut headers = Vec::new();
    loop {
        line.clear();
        stream.read_line(&mut line)?;
        let trimmed = line.trim_end();
        if trimmed.is_empty() {
            break;
        }
        if let Some((name, value)) = trimmed.split_once(':') {
            headers.push((name.trim().to_string(), value.trim().to_string()));
        }
    }
    let length = headers
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, value)| value.parse::<usize>().ok())
        .unwrap_or(0);
    let mut body = vec![0; length];
    stream.read_exact(&mut body)?;
    Ok(Response {
        status,
        headers,
        body,
    })
}

/// A connection to `to` from the local address `source` (loopback has many: 127.0.0.2 can be
/// another peer than 127.0.0.1).
pub fn connect_from(source: std::net::Ipv4Addr, to: SocketAddr) -> TcpStream {
    let stream = try_connect_from(source, to).expect("connect");
    stream.set_read_timeout(Some(WAIT_MAX)).expect("timeout");
    stream
}

fn try_connect_from(source: std::net::Ipv4Addr, to: SocketAddr) -> std::io::Result<TcpStream> {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)?;
    socket.bind(&SocketAddr::new(source.into(), 0).into())?;
    socket.connect(&to.into())?;
    Ok(socket.into())
}

/// The value of an unlabelled metric in Prometheus text.
pub fn metric_value(metrics: &str, name: &str) -> f64 {
    metrics
        .lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no metric {name} in:\n{metrics}"))
}

/// The seed of a randomized test: `PURE_TEST_SEED` to replay, otherwise fresh; printed either way.
pub fn seed(test: &str) -> u64 {
    let seed = std::env::var("PURE_TEST_SEED")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or_else(rand::random);
    eprintln!("{test}: seed {seed} (replay with PURE_TEST_SEED={seed})");
    seed
}

/// How much work the heavier tests do: 1 in CI, more with `PURE_TEST_SCALE`.
pub fn scale() -> usize {
    std::env::var("PURE_TEST_SCALE")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(1)
        .max(1)
}

/// Polls `condition` until it holds, failing the test after `WAIT_MAX`.
pub fn wait_until(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT_MAX;
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// One Server-Sent Event as a client reads it (fields it did not carry are `None`).
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub id: Option<u64>,
    /// `event:` (none for a plain message).
    pub name: Option<String>,
    pub data: String,
}

impl Event {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.data).unwrap_or_else(|e| panic!("{e}: {:?}", self.data))
    }
}

/// An open event stream (a GET with `Accept: text/event-stream`), read as `EventSource` reads
/// one: chunked transfer decoding, then events separated by blank lines; comments and
/// `retry:`-only blocks are skipped.
pub struct Events {
    stream: BufReader<TcpStream>,
    pub headers: Vec<(String, String)>,
    /// Decoded bytes not yet parsed into events.
    pending: Vec<u8>,
    /// The last `retry:` the server asked for.
    pub retry: Option<u64>,
    /// Every byte of the body decoded so far.
    pub bytes_read: usize,
}

impl Events {
    /// Subscribes to `path`; a response other than 200 is returned as `Err`.
    pub fn open(
        address: SocketAddr,
        path: &str,
        last_event_id: Option<u64>,
    ) -> Result<Events, Response> {
        let stream = TcpStream::connect(address).expect("connect");
        Events::open_on(stream, address, path, last_event_id)
    }

    /// `open` on a connected socket (one with a small receive buffer, from another address).
    pub fn open_on(
        mut stream: TcpStream,
        address: SocketAddr,
        path: &str,
        last_event_id: Option<u64>,
    ) -> Result<Events, Response> {
        stream.set_read_timeout(Some(WAIT_MAX)).expect("timeout");
        let mut head =
            format!("GET {path} HTTP/1.1\r\nHost: {address}\r\nAccept: text/event-stream\r\n");
        if let Some(id) = last_event_id {
            head.push_str(&format!("Last-Event-ID: {id}\r\n"));
        }
        head.push_str("\r\n");
        stream.write_all(head.as_bytes()).expect("send");
        let mut stream = BufReader::new(stream);
        let mut line = String::new();
        stream.read_line(&mut line).expect("status line");
        let status: u16 = line
            .split_whitespace()
            .nth(1)
            .and_then(|code| code.parse().ok())
            .unwrap_or_else(|| panic!("bad status line {line:?}"));
        let mut headers = Vec::new();
        loop {
            line.clear();
            stream.read_line(&mut line).expect("header");
            let trimmed = line.trim_end();
            if trimmed.is_empty() {
                break;
            }
            if let Some((name, value)) = trimmed.split_once(':') {
                headers.push((name.trim().to_string(), value.trim().to_string()));
            }
        }
        if status != 200 {
            let length = headers
                .iter()
                .find(|(name, _)| name.eq_ignore_ascii_case("content-length"))
                .and_then(|(_, value)| value.parse::<usize>().ok())
                .unwrap_or(0);
            let mut body = vec![0; length];
            stream.read_exact(&mut body).expect("error body");
            return Err(Response {
                status,
                headers,
                body,
            });
        }
        Ok(Events {
            stream,
            headers,
            pending: Vec::new(),
            retry: None,
            bytes_read: 0,
        })
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The next event; `Ok(None)` once the server ended the stream cleanly (the last chunk).
    pub fn next(&mut self) -> std::io::Result<Option<Event>> {
        loop {
            if let Some(end) = self.pending.windows(2).position(|w| w == b"\n\n") {
                let block: Vec<u8> = self.pending.drain(..end + 2).collect();
                if let Some(event) = self.parse(&block[..end]) {
                    return Ok(Some(event));
                }
                continue;
            }
            if !self.read_chunk()? {
                return Ok(None);
            }
        }
    }

    /// Reads one chunk of the body into `pending`; false at the last chunk.
    fn read_chunk(&mut self) -> std::io::Result<bool> {
        let mut line = String::new();
        if self.stream.read_line(&mut line)? == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "the stream was cut without its last chunk",
            ));
        }
        let size = usize::from_str_radix(line.trim(), 16)
            .map_err(|_| std::io::Error::other(format!("bad chunk size {line:?}")))?;
        let mut chunk = vec![0; size + 2];
        self.stream.read_exact(&mut chunk)?;
        if size == 0 {
            return Ok(false);
        }
        self.bytes_read += size;
        self.pending.extend_from_slice(&chunk[..size]);
        Ok(true)
    }

    fn parse(&mut self, block: &[u8]) -> Option<Event> {
        let text = String::from_utf8_lossy(block);
        let mut event = Event {
            id: None,
            name: None,
            data: String::new(),
        };
        let mut has_data = false;
        for line in text.lines() {
            let (field, value) = line.split_once(':').unwrap_or((line, ""));
            let value = value.strip_prefix(' ').unwrap_or(value);
            match field {
                "" => {} // a comment
                "id" => event.id = Some(value.parse().expect("ids are LSNs")),
                "event" => event.name = Some(value.to_string()),
                "retry" => self.retry = Some(value.parse().expect("retry is ms")),
                "data" => {
                    if has_data {
                        event.data.push('\n');
                    }
                    event.data.push_str(value);
                    has_data = true;
                }
                other => panic!("unknown field {other:?} in {text:?}"),
            }
        }
        has_data.then_some(event)
    }
}
