//! A server's answer as a client reads it, whole, from a connection the answer closes: what
//! `pure-serve test` and `pure-serve export --url` read. Knows nothing of the server's code.

use std::io::Read;
use std::net::TcpStream;

use anyhow::anyhow;

/// An answer: its status, its head's lines after the status line, and its body.
pub struct Answer {
    pub status: u16,
    pub head: String,
    pub body: String,
}

/// Reads the answer to the request written on `stream` (sent with `Connection: close`).
pub fn read_answer(stream: &mut TcpStream) -> anyhow::Result<Answer> {
    let mut bytes = Vec::new();
    stream.read_to_end(&mut bytes)?;
    let text = String::from_utf8_lossy(&bytes);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| anyhow!("an answer without a head"))?;
    let (status_line, head) = head.split_once("\r\n").unwrap_or((head, ""));
    let status = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| anyhow!("an answer without a status"))?;
    Ok(Answer {
        status,
        head: head.to_string(),
        body: body.to_string(),
    })
}
