//! `pure-serve test APP_DIR`: runs an app's transcripts (`APP_DIR/tests/*.transcript`), each
//! against a fresh server of its own, and says where an answer differs; `--update` writes the
//! answers the app gives into the transcripts instead (golden files).
//!
//! A transcript is a list of exchanges: a request line `METHOD PATH [JSON BODY]`, the request's
//! headers if any (`name: value` lines), then the expected answer `STATUS [JSON]` (without JSON
//! only the status is compared) and the answer's headers to check, if any (`name: value` lines;
//! `name:` alone says the answer has none; headers not listed are not compared). `#` starts a
//! comment line; blank lines separate exchanges. A line `#! --flag value ...` gives the server
//! more flags (`--secrets FILE` names a file beside the transcript); a line `restart` stops the server (SIGTERM, as an operator would) and starts it
//! again on the same data: what follows tests what recovery brings back; a line `advance MS`
//! moves the server's fixed clock `MS` milliseconds forward and waits until the scheduled
//! entries due by then have run (`POST /_pure/clock?advance=MS` on its admin address).
//!
//! The server is this binary, started as `pure-serve APP_DIR` on a fresh data directory, on a
//! free port of 127.0.0.1, with `--sync none` (a test's data is thrown away) and a fixed world
//! (`--fixed-now 1767225600000 --seed 1`, unless the transcript's flags say otherwise), so
//! that answers holding the time, an id or a random number compare exactly, run after run.
//! It knows nothing of the runtime: it speaks HTTP to the server as a client would.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use serde_json::Value;

use crate::exit;

/// The time `now()` answers in a transcript unless its flags say otherwise: 2026-01-01 UTC.
const FIXED_NOW_MS: i64 = 1_767_225_600_000;

enum Line {
    /// A line kept as it is: a comment, a flag line, a blank line.
    Verbatim(String),
    /// `restart`, as written.
    Restart(String),
    /// `advance MS`, as written, and MS.
    Advance(String, i64),
    Exchange(Exchange),
}

struct Exchange {
    /// The request's line number (from 1) and text, as written.
    line: usize,
    request_text: String,
    method: String,
    path: String,
    body: Option<String>,
    /// The request's headers, as (name, value).
    headers: Vec<(String, String)>,
    /// The request's header lines as written.
    header_lines: Vec<String>,
    status: u16,
    expected: Option<Value>,
    /// The expected answer's line as written, rewritten by `--update` only when it differs.
    answer_text: String,
    /// The answer's headers to check: (line as written, name in lower case, value).
    expected_headers: Vec<(String, String, String)>,
}

/// `name: value`, a header line, as (name, value); `None` for any other line.
fn header_line(line: &str) -> Option<(String, String)> {
    // A comment stays one, even `#note: ...`.
    if line.trim_start().starts_with('#') {
        return None;
    }
    let (name, value) = line.trim().split_once(':')?;
    let token = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_!#$%&'*+.^`|~".contains(&b));
    token.then(|| (name.to_ascii_lowercase(), value.trim().to_string()))
}

fn parse(text: &str, file: &Path) -> anyhow::Result<(Vec<Line>, Vec<String>)> {
    let mut lines = Vec::new();
    let mut flags = Vec::new();
    let mut numbered = text.lines().enumerate().map(|(i, l)| (i + 1, l));
    while let Some((number, raw)) = numbered.next() {
        let line = raw.trim();
        if let Some(more) = line.strip_prefix("#!") {
            flags.extend(more.split_whitespace().map(str::to_string));
            lines.push(Line::Verbatim(raw.to_string()));
            continue;
        }
        if line.is_empty() || line.starts_with('#') {
            lines.push(Line::Verbatim(raw.to_string()));
            continue;
        }
        if line == "restart" {
            lines.push(Line::Restart(raw.to_string()));
            continue;
        }
        let at = |n: usize| format!("{}:{n}", file.display());
        if let Some(ms) = line.strip_prefix("advance ") {
            let ms = ms
                .trim()
                .parse()
                .ok()
                .filter(|ms| *ms >= 0)
                .with_context(|| {
                    format!(
                        "{}: advance takes the milliseconds to move the clock",
                        at(number)
                    )
                })?;
            lines.push(Line::Advance(raw.to_string(), ms));
            continue;
        }
        let mut parts = line.splitn(3, ' ');
        let method = parts.next().unwrap_or_default().to_string();
        let path = parts
            .next()
            .filter(|p| p.starts_with('/'))
            .with_context(|| format!("{}: a request is METHOD /PATH [JSON BODY]", at(number)))?
            .to_string();
        let body = parts.next().map(str::to_string);
        let mut headers = Vec::new();
        let mut header_lines = Vec::new();
        let (answer_line, answer_raw) = loop {
            let (n, l) = numbered
                .by_ref()
                .find(|(_, l)| !l.trim().is_empty() && !l.trim().starts_with('#'))
                .with_context(|| {
                    format!("{}: a request without its expected answer", at(number))
                })?;
            match header_line(l).filter(|_| !l.trim().starts_with(|c: char| c.is_ascii_digit())) {
                Some(header) => {
                    headers.push(header);
                    header_lines.push(l.to_string());
                }
                None => break (n, l),
            }
        };
        let answer = answer_raw.trim();
        let (status, expected) = answer.split_once(' ').unwrap_or((answer, ""));
        let status = status
            .parse()
            .with_context(|| format!("{}: an answer is STATUS [JSON]", at(answer_line)))?;
        let expected = match expected.trim() {
            "" => None,
            // As deep as an answer may be (serde_json's own limit is one level short).
            json => Some(
                pure_lang::parse_json(json)
                    .map_err(|e| anyhow!(e))
                    .with_context(|| format!("{}: the expected JSON", at(answer_line)))?,
            ),
        };
        // The answer's headers: the `name: value` lines right after it.
        let mut expected_headers = Vec::new();
        while let Some((_, next)) = numbered.clone().next() {
            let Some((name, value)) = header_line(next) else {
                break;
            };
            numbered.next();
            expected_headers.push((next.to_string(), name, value));
        }
        lines.push(Line::Exchange(Exchange {
            line: number,
            request_text: raw.to_string(),
            method,
            path,
            body,
            headers,
            header_lines,
            status,
            expected,
            answer_text: answer_raw.to_string(),
            expected_headers,
        }));
    }
    Ok((lines, flags))
}

/// A server started for one transcript, on its data directory.
struct Server {
    child: Child,
    address: SocketAddr,
    /// The admin address, when the transcript moves the clock.
    admin: Option<SocketAddr>,
}

impl Server {
    /// Starts a server with its fixed clock at `now_ms`.
    fn start(
        app_dir: &Path,
        data: &Path,
        flags: &[String],
        (admin, now_ms): (bool, i64),
    ) -> anyhow::Result<Server> {
        let binary = std::env::current_exe().context("finding this program")?;
        let mut args: Vec<String> = vec![
            "--listen".into(),
            "127.0.0.1:0".into(),
            "--sync".into(),
            "none".into(),
        ];
        args.extend(["--fixed-now".into(), now_ms.to_string()]);
        if !flags.iter().any(|f| f == "--seed") {
            args.extend(["--seed".into(), "1".into()]);
        }
        if admin {
            args.extend(["--admin-listen".into(), "127.0.0.1:0".into()]);
        }
        args.extend(flags.iter().cloned());
        let mut child = Command::new(binary)
            .arg(app_dir)
            .arg("--data")
            .arg(data)
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .context("starting pure-serve")?;
        let stderr = child.stderr.take().expect("piped");
        // The server's log is shown only when it does not start; drained meanwhile so that a
        // full pipe never blocks it.
        let log = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = BufReader::new(stderr).read_to_string(&mut text);
            text
        });
        let mut stdout = BufReader::new(child.stdout.take().expect("piped"));
        let mut ready = String::new();
        let read = stdout.read_line(&mut ready);
        let mut admin_line = String::new();
        if admin {
            let _ = stdout.read_line(&mut admin_line);
        }
        let admin_address = admin_line
            .trim()
            .rsplit_once("http://")
            .and_then(|(_, address)| address.trim_end_matches("/_pure/").parse().ok());
        // Whatever it prints later is read too: a closed pipe would fail its next line.
        std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
        let address = ready
            .trim()
            .rsplit_once("http://")
            .and_then(|(_, address)| address.parse().ok());
        match (read, address) {
            (Ok(_), Some(address)) if admin_address.is_some() || !admin => Ok(Server {
                child,
                address,
                admin: admin_address,
            }),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                let log = log.join().unwrap_or_default();
                bail!("the server did not start:\n{}", log.trim_end())
            }
        }
    }

    fn stop(mut self) -> anyhow::Result<()> {
        // SAFETY: kill(2) on our own child's pid, which has not been waited for.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let status = self.child.wait().context("waiting for the server")?;
        if !status.success() {
            bail!("the server stopped with {status}");
        }
        Ok(())
    }

    /// Moves the server's clock `ms` forward; returns once what fell due has run.
    fn advance(&self, ms: i64) -> anyhow::Result<()> {
        let admin = self.admin.context("the server has no admin address")?;
        let mut stream = TcpStream::connect(admin).context("connecting to the admin address")?;
        stream.set_read_timeout(Some(Duration::from_secs(60)))?;
        write!(
            stream,
            "POST /_pure/clock?advance={ms} HTTP/1.1\r\nHost: {admin}\r\nConnection: close\r\n\
             Content-Length: 0\r\n\r\n"
        )?;
        let answer = crate::client::read_answer(&mut stream)?;
        if answer.status != 200 {
            bail!("advance {ms}: {} {}", answer.status, answer.body);
        }
        Ok(())
    }

    /// Sends one request and returns the answer's status, headers (names in lower case) and
    /// body.
    fn exchange(
        &self,
        exchange: &Exchange,
    ) -> anyhow::Result<(u16, Vec<(String, String)>, String)> {
        let mut stream = TcpStream::connect(self.address).context("connecting to the server")?;
        stream.set_read_timeout(Some(Duration::from_secs(60)))?;
        let body = exchange.body.as_deref().unwrap_or("");
        let mut head = format!(
            "{} {} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\n",
            exchange.method,
            exchange.path,
            self.address,
            body.len()
        );
        for (name, value) in &exchange.headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        write!(stream, "{head}\r\n{body}")?;
        let answer = crate::client::read_answer(&mut stream)?;
        let headers = answer.head.split("\r\n").filter_map(header_line).collect();
        Ok((answer.status, headers, answer.body))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs one transcript; returns how many exchanges differed, and (with `update`) the text to
/// write back.
fn run_one(app_dir: &Path, file: &Path, update: bool) -> anyhow::Result<(usize, usize, String)> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    let (lines, mut flags) = parse(&text, file)?;
    // A file a flag names is found beside the transcript, wherever the test runs from.
    for at in 1..flags.len() {
        if flags[at - 1] == "--secrets" && Path::new(&flags[at]).is_relative() {
            let beside = file.parent().unwrap_or(Path::new(".")).join(&flags[at]);
            flags[at] = beside.display().to_string();
        }
    }
    // The clock starts where the flags say and goes on across restarts from where `advance`
    // moved it: a restart is a stop and a start, not a trip back in time.
    let mut now_ms: i64 = FIXED_NOW_MS;
    if let Some(at) = flags.iter().position(|f| f == "--fixed-now") {
        let value = flags.get(at + 1).cloned().unwrap_or_default();
        now_ms = value
            .parse()
            .with_context(|| format!("{}: --fixed-now {value:?}", file.display()))?;
        flags.drain(at..(at + 2).min(flags.len()));
    }
    let data = tempfile::tempdir().context("a data directory for the test")?;
    let admin = lines.iter().any(|line| matches!(line, Line::Advance(..)));
    let mut server = Some(Server::start(
        app_dir,
        data.path(),
        &flags,
        (admin, now_ms),
    )?);
    let (mut differed, mut exchanges) = (0, 0);
    let mut out = Vec::new();
    for line in lines {
        match line {
            Line::Verbatim(raw) => out.push(raw),
            Line::Restart(raw) => {
                server.take().expect("a running server").stop()?;
                server = Some(Server::start(
                    app_dir,
                    data.path(),
                    &flags,
                    (admin, now_ms),
                )?);
                out.push(raw);
            }
            Line::Advance(raw, ms) => {
                let running = server.as_ref().expect("a running server");
                running
                    .advance(ms)
                    .with_context(|| format!("{}: {}", file.display(), raw.trim()))?;
                now_ms = now_ms.saturating_add(ms);
                out.push(raw);
            }
            Line::Exchange(exchange) => {
                exchanges += 1;
                let running = server.as_ref().expect("a running server");
                let (status, headers, body) = running.exchange(&exchange)?;
                let actual: Option<Value> = pure_lang::parse_json(&body).ok();
                let header = |name: &str| {
                    headers
                        .iter()
                        .find(|(n, _)| n == name)
                        .map(|(_, v)| v.as_str())
                };
                // Each listed header as the answer has it: `name: value`, or `name: ` and
                // nothing when it has none.
                let actual_headers: Vec<String> = exchange
                    .expected_headers
                    .iter()
                    .map(|(_, name, _)| format!("{name}: {}", header(name).unwrap_or("")))
                    .collect();
                // `name:` with no value: the answer must not have it.
                let headers_same = exchange
                    .expected_headers
                    .iter()
                    .all(|(_, name, value)| header(name).unwrap_or("") == value.as_str());
                let same = status == exchange.status
                    && headers_same
                    && exchange
                        .expected
                        .as_ref()
                        .is_none_or(|expected| actual.as_ref() == Some(expected));
                out.push(exchange.request_text.clone());
                out.extend(exchange.header_lines.iter().cloned());
                let written_headers = exchange.expected_headers.iter().map(|(l, _, _)| l.clone());
                if same {
                    out.push(exchange.answer_text);
                    out.extend(written_headers);
                    continue;
                }
                differed += 1;
                let actual_line = match &actual {
                    Some(json) => format!("{status} {json}"),
                    None if body.is_empty() => status.to_string(),
                    None => format!("{status} {body}"),
                };
                if update {
                    out.push(actual_line);
                    out.extend(actual_headers);
                } else {
                    let expected_headers: String = exchange
                        .expected_headers
                        .iter()
                        .map(|(line, _, _)| format!("\n            {}", line.trim()))
                        .collect();
                    let actual_headers: String = actual_headers
                        .iter()
                        .map(|line| format!("\n            {line}"))
                        .collect();
                    println!(
                        "{}:{}: {}\n  expected: {}{expected_headers}\n  actual:   {}{actual_headers}",
                        file.display(),
                        exchange.line,
                        exchange.request_text.trim(),
                        exchange.answer_text.trim(),
                        actual_line
                    );
                    out.push(exchange.answer_text);
                    out.extend(written_headers);
                }
            }
        }
    }
    server.take().expect("a running server").stop()?;
    let mut written = out.join("\n");
    if text.ends_with('\n') {
        written.push('\n');
    }
    Ok((differed, exchanges, written))
}

/// `pure-serve test`: 0 when every exchange of every transcript answered as written (or, with
/// `update`, once the transcripts are rewritten), 1 when one did not, 3 when there is no
/// transcript to run or one cannot be read.
pub fn run(app_dir: &Path, update: bool) -> Result<u8, exit::Failure> {
    let tests = app_dir.join("tests");
    let no_transcripts = || {
        anyhow!(
            "no transcripts in {} (files named *.transcript: requests, each followed by the \
             answer it must get; the guide's \"Testing an app\" shows one)",
            tests.display()
        )
    };
    if !tests.exists() && app_dir.join("app.json").exists() {
        return Err(exit::Failure::new(exit::APP, no_transcripts()));
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(&tests)
        .with_context(|| format!("reading {}", tests.display()))
        .map_err(|e| exit::Failure::new(exit::APP, e))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|e| e == "transcript"))
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(exit::Failure::new(exit::APP, no_transcripts()));
    }
    let mut failed = 0;
    for file in &files {
        let (differed, exchanges, text) =
            run_one(app_dir, file, update).map_err(|e| exit::Failure::new(exit::APP, e))?;
        let name = file.display();
        if update && differed > 0 {
            std::fs::write(file, text)
                .with_context(|| format!("writing {name}"))
                .map_err(exit::Failure::internal)?;
            println!("{name}: {differed} of {exchanges} answers rewritten");
        } else if differed > 0 {
            println!("{name}: {differed} of {exchanges} answers differ");
            failed += 1;
        } else {
            println!("{name}: {exchanges} answers as written");
        }
    }
    Ok(u8::from(failed > 0))
}
