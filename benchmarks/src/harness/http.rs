//! HTTP/1.1 clients for loopback benchmarks: one keep-alive connection, one request at a time,
//! answers read by Content-Length (all pure-serve sends), blocking (`Client`) or on an event loop
//! (`AsyncClient`); and a one-shot GET for the health and metrics pages. Knows HTTP framing
//! only: no app's routes or bodies.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};

use anyhow::{anyhow, bail, Context, Result};
use serde_json::Value;

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

    /// Sends one request (a body only with POST) and returns the answer's status and JSON body.
    pub fn send(&mut self, method: &str, path: &str, body: &str) -> Result<(u16, Value)> {
        let mut answer = Vec::new();
        let status = self.exchange(method, path, body.as_bytes(), &mut answer)?;
        let body = serde_json::from_slice(&answer).with_context(|| {
            format!(
                "the answer is not JSON: {}",
                String::from_utf8_lossy(&answer)
            )
        })?;
        Ok((status, body))
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
        self.write_request(method, path, body)?;
        let (status, length) = self.read_head()?;
        answer.resize(length, 0);
        self.stream.read_exact(answer)?;
        Ok(status)
    }

    fn write_request(&mut self, method: &str, path: &str, body: &[u8]) -> Result<()> {
        put_request(&mut self.request, &self.host, method, path, body)?;
        self.stream.get_mut().write_all(&self.request)?;
        Ok(())
    }

    /// Reads the status line and the headers: the status, and the length of the body.
    fn read_head(&mut self) -> Result<(u16, usize)> {
        self.line.clear();
        loop {
            let at = self.line.len();
            if self.stream.read_line(&mut self.line)? == 0 {
                bail!("the connection closed before the answer's head ended");
            }
            if self.line[at..].trim_end().is_empty() {
                return parse_head(&self.line);
            }
        }
    }
}

/// `request` becomes the request's bytes (with Content-Length when it has a body, or is a
/// POST).
fn put_request(
    request: &mut Vec<u8>,
    host: &str,
    method: &str,
    path: &str,
    body: &[u8],
) -> Result<()> {
    request.clear();
    write!(request, "{method} {path} HTTP/1.1\r\nHost: {host}\r\n")?;
    if !body.is_empty() || method == "POST" {
        write!(
            request,
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            body.len()
        )?;
    }
    request.extend_from_slice(b"\r\n");
    request.extend_from_slice(body);
    Ok(())
}

/// The status and the body's length, from an answer's head (its status line and headers).
fn parse_head(head: &str) -> Result<(u16, usize)> {
    let mut lines = head.split("\r\n");
    let first = lines.next().unwrap_or_default();
    let status: u16 = first
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| anyhow!("not an HTTP status line: {first:?}"))?;
    let mut length = None;
    for header in lines {
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
    match length {
        Some(length) => Ok((status, length)),
        None if status == 204 || status == 304 => Ok((status, 0)),
        None => bail!("an answer without Content-Length"),
    }
}

/// The same connection driven by an event loop: many of them share one thread, where a
/// blocking client takes a thread each, which sleeps and wakes on every answer (research note
/// 007: on 2 cores the client then competes with the server it measures).
pub struct AsyncClient {
    stream: tokio::net::TcpStream,
    host: String,
    request: Vec<u8>,
    /// What has arrived and is not yet read: an answer's head and body.
    input: Vec<u8>,
}

impl AsyncClient {
    pub async fn connect(address: SocketAddr) -> Result<AsyncClient> {
        let stream = tokio::net::TcpStream::connect(address)
            .await
            .with_context(|| format!("connect to {address}"))?;
        stream.set_nodelay(true)?;
        Ok(AsyncClient {
            stream,
            host: address.to_string(),
            request: Vec::with_capacity(4096),
            input: Vec::with_capacity(64 << 10),
        })
    }

    /// Sends one request (a body only with POST) and returns the answer's status and JSON body.
    pub async fn send(&mut self, method: &str, path: &str, body: &str) -> Result<(u16, Value)> {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        put_request(&mut self.request, &self.host, method, path, body.as_bytes())?;
        self.stream.write_all(&self.request).await?;
        self.input.clear();
        let mut head = None;
        let (status, body_at, body_end) = loop {
            if head.is_none() {
                if let Some(at) = self.input.windows(4).position(|w| w == b"\r\n\r\n") {
                    let text = std::str::from_utf8(&self.input[..at])
                        .context("an answer's head that is not UTF-8")?;
                    let (status, length) = parse_head(text)?;
                    head = Some((status, at + 4, at + 4 + length));
                }
            }
            if let Some((status, body_at, body_end)) = head {
                if self.input.len() >= body_end {
                    break (status, body_at, body_end);
                }
            }
            self.input.reserve(4096);
            // As the blocking client: a server that stopped answering fails the run.
            let read = tokio::time::timeout(
                std::time::Duration::from_secs(60),
                self.stream.read_buf(&mut self.input),
            )
            .await
            .map_err(|_| anyhow!("no answer within 60 s"))??;
            if read == 0 {
                bail!("the connection closed before the answer ended");
            }
        };
        let answer = &self.input[body_at..body_end];
        let body = serde_json::from_slice(answer).with_context(|| {
            format!(
                "the answer is not JSON: {}",
                String::from_utf8_lossy(answer)
            )
        })?;
        Ok((status, body))
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
