//! A blocking HTTP/1.1 client for loopback benchmarks: one keep-alive connection, one request at
//! a time, answers read by Content-Length (all pure-serve sends), and a one-shot GET for the
//! health and metrics pages. Knows HTTP framing only: no app's routes or bodies.

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
        Ok(())
    }

    /// Reads the status line and the headers: the status, and the length of the body.
    fn read_head(&mut self) -> Result<(u16, usize)> {
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
        match length {
            Some(length) => Ok((status, length)),
            None if status == 204 || status == 304 => Ok((status, 0)),
            None => bail!("an answer without Content-Length"),
        }
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
