//! The load generator's connections: one keep-alive socket each, driven by an event loop, with
//! hand-written HTTP/1.1 and RESP2 codecs that reuse their buffers.
//!
//! Why an event loop and not a thread per connection: on a 2-core machine the client shares
//! the cores with the server it measures. A thread per connection sleeps and wakes on every
//! answer; at 64 connections that client spent 16 µs of CPU per HTTP request and 10 per Redis
//! call, as much as the servers, and capped what either could show. Research note 007.

use std::net::SocketAddr;

use anyhow::{anyhow, bail, Context};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// What a connection speaks.
#[derive(Clone, Debug)]
pub(super) enum Protocol {
    /// pure-serve's scoreboard app: `POST /scores` and `GET /players/{player}` in JSON.
    Http,
    /// Redis: `EVALSHA` of the scoreboard script (its SHA1) and `HMGET`.
    Resp { script_sha: String },
}

/// One keep-alive connection: the socket, the request being built, and what arrived past the
/// answers read so far.
pub(super) struct Wire {
    stream: TcpStream,
    protocol: Protocol,
    output: Vec<u8>,
    input: Vec<u8>,
    /// Where a Redis key and score are formatted before they are encoded.
    scratch: Vec<u8>,
    /// The address connected to, as the `Host` header names it: pure-serve answers only the
    /// hosts it allows (on loopback, 127.0.0.1, localhost and [::1]).
    host: String,
}

impl Wire {
    pub(super) async fn connect(address: SocketAddr, protocol: Protocol) -> anyhow::Result<Wire> {
        let stream = TcpStream::connect(address)
            .await
            .with_context(|| format!("connecting to {address}"))?;
        // One request at a time: waiting to coalesce (Nagle) would only add latency.
        stream.set_nodelay(true)?;
        Ok(Wire {
            stream,
            protocol,
            output: Vec::with_capacity(256),
            input: Vec::with_capacity(4096),
            scratch: Vec::with_capacity(64),
            host: address.to_string(),
        })
    }

    /// Records a score for `player`; an error for any answer but a success.
    pub(super) async fn post(&mut self, player: &str, score: i64) -> anyhow::Result<()> {
        use std::io::Write as _;
        let output = &mut self.output;
        output.clear();
        match &self.protocol {
            Protocol::Http => {
                let body_length =
                    r#"{"player":"","score":}"#.len() + player.len() + decimal_length(score);
                write!(
                    output,
                    "POST /scores HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
                     Content-Length: {body_length}\r\n\r\n{{\"player\":\"{player}\",\"score\":{score}}}",
                    self.host
                )?;
                let status = self.exchange_http().await?;
                if status != 200 {
                    bail!("POST /scores answered {status}");
                }
            }
            Protocol::Resp { script_sha } => {
                let scratch = &mut self.scratch;
                scratch.clear();
                write!(scratch, "player:{player}")?;
                let key_end = scratch.len();
                write!(scratch, "{score}")?;
                let (key, score) = scratch.split_at(key_end);
                encode_resp(
                    output,
                    &[
                        b"EVALSHA",
                        script_sha.as_bytes(),
                        b"2",
                        key,
                        b"leaderboard",
                        player.as_bytes(),
                        score,
                    ],
                );
                match self.exchange_resp().await? {
                    Resp::Array(Some(items)) if items.len() == 2 => {}
                    other => bail!("EVALSHA answered {other:?}"),
                }
            }
        }
        Ok(())
    }

    /// Reads `player`; a player not posted yet is a normal answer.
    pub(super) async fn read(&mut self, player: &str) -> anyhow::Result<()> {
        use std::io::Write as _;
        let output = &mut self.output;
        output.clear();
        match &self.protocol {
            Protocol::Http => {
                write!(
                    output,
                    "GET /players/{player} HTTP/1.1\r\nHost: {}\r\n\r\n",
                    self.host
                )?;
                let status = self.exchange_http().await?;
                if status != 200 && status != 404 {
                    bail!("GET /players/{player} answered {status}");
                }
            }
            Protocol::Resp { .. } => {
                let key = &mut self.scratch;
                key.clear();
                write!(key, "player:{player}")?;
                encode_resp(output, &[b"HMGET", key, b"best", b"posts"]);
                match self.exchange_resp().await? {
                    Resp::Array(Some(_)) => {}
                    other => bail!("HMGET answered {other:?}"),
                }
            }
        }
        Ok(())
    }

    /// Sends the request in `output`; the answer's status code once its body has arrived.
    async fn exchange_http(&mut self) -> anyhow::Result<u16> {
        self.stream.write_all(&self.output).await?;
        loop {
            if let Some((status, length)) = parse_http(&self.input)? {
                self.input.drain(..length);
                return Ok(status);
            }
            self.fill().await?;
        }
    }

    async fn exchange_resp(&mut self) -> anyhow::Result<Resp> {
        self.stream.write_all(&self.output).await?;
        loop {
            if let Some(reply) = take_resp(&mut self.input)? {
                return Ok(reply);
            }
            self.fill().await?;
        }
    }

    /// Reads what the socket has into `input`.
    async fn fill(&mut self) -> anyhow::Result<()> {
        if self.input.capacity() - self.input.len() < 1024 {
            self.input.reserve(4096);
        }
        if self.stream.read_buf(&mut self.input).await? == 0 {
            bail!("the server closed the connection");
        }
        Ok(())
    }
}

/// The length of `n` in decimal, sign included.
fn decimal_length(n: i64) -> usize {
    let sign = usize::from(n < 0);
    sign + n
        .unsigned_abs()
        .checked_ilog10()
        .map_or(1, |digits| digits as usize + 1)
}

/// An HTTP/1.1 answer at the front of `input`: its status and its whole length (head and body),
/// or `None` while it is incomplete. pure-serve always sends `Content-Length`.
fn parse_http(input: &[u8]) -> anyhow::Result<Option<(u16, usize)>> {
    let Some(head_end) = input.windows(4).position(|w| w == b"\r\n\r\n") else {
        return Ok(None);
    };
    let head = std::str::from_utf8(&input[..head_end]).context("an answer head not in UTF-8")?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let status = status_line
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| anyhow!("not an HTTP status line: {status_line:?}"))?;
    let mut body_length = None;
    for line in lines {
        if let Some((name, value)) = line.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                body_length = Some(value.trim().parse::<usize>()?);
            }
            if name.eq_ignore_ascii_case("transfer-encoding") {
                bail!("an answer with Transfer-Encoding: {}", value.trim());
            }
        }
    }
    let body_length = body_length.ok_or_else(|| anyhow!("an answer without Content-Length"))?;
    let length = head_end + 4 + body_length;
    Ok((input.len() >= length).then_some((status, length)))
}

/// A RESP2 reply. The payloads are read only through `Debug`, in error messages.
#[derive(Debug)]
#[allow(dead_code)]
pub(super) enum Resp {
    Simple(String),
    Error(String),
    Integer(i64),
    Bulk(Option<Vec<u8>>),
    Array(Option<Vec<Resp>>),
}

/// A command as an array of bulk strings.
pub(super) fn encode_resp(output: &mut Vec<u8>, arguments: &[&[u8]]) {
    use std::io::Write as _;
    // Writing to a Vec cannot fail.
    let _ = write!(output, "*{}\r\n", arguments.len());
    for argument in arguments {
        let _ = write!(output, "${}\r\n", argument.len());
        output.extend_from_slice(argument);
        output.extend_from_slice(b"\r\n");
    }
}

/// The whole RESP2 reply at the front of `input`, taken out of it, or `None` while incomplete. A
/// Redis error reply is an error.
pub(super) fn take_resp(input: &mut Vec<u8>) -> anyhow::Result<Option<Resp>> {
    let Some((reply, length)) = parse_resp(input)? else {
        return Ok(None);
    };
    input.drain(..length);
    match reply {
        Resp::Error(message) => Err(anyhow!("redis error: {message}")),
        reply => Ok(Some(reply)),
    }
}

/// A whole RESP2 reply at the front of `input` and its length, or `None` while incomplete.
pub(super) fn parse_resp(input: &[u8]) -> anyhow::Result<Option<(Resp, usize)>> {
    let Some(line_end) = input.windows(2).position(|w| w == b"\r\n") else {
        return Ok(None);
    };
    let line = std::str::from_utf8(&input[..line_end]).context("a RESP line not in UTF-8")?;
    let after = line_end + 2;
    let (kind, rest) = line.split_at(line.len().min(1));
    Ok(match kind {
        "+" => Some((Resp::Simple(rest.to_string()), after)),
        "-" => Some((Resp::Error(rest.to_string()), after)),
        ":" => Some((Resp::Integer(rest.parse()?), after)),
        "$" => match rest.parse::<i64>()? {
            -1 => Some((Resp::Bulk(None), after)),
            length if length >= 0 => {
                let end = after + length as usize;
                if input.len() < end + 2 {
                    return Ok(None);
                }
                if &input[end..end + 2] != b"\r\n" {
                    bail!("a RESP bulk string longer than its length {length}");
                }
                Some((Resp::Bulk(Some(input[after..end].to_vec())), end + 2))
            }
            length => bail!("a RESP bulk string of length {length}"),
        },
        "*" => match rest.parse::<i64>()? {
            -1 => Some((Resp::Array(None), after)),
            count if count < 0 => bail!("a RESP array of {count} items"),
            count => {
                let mut items = Vec::with_capacity(count as usize);
                let mut at = after;
                for _ in 0..count {
                    match parse_resp(&input[at..])? {
                        Some((item, length)) => {
                            items.push(item);
                            at += length;
                        }
                        None => return Ok(None),
                    }
                }
                Some((Resp::Array(Some(items)), at))
            }
        },
        other => bail!("unexpected RESP type {other:?}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_lengths() {
        for n in [0, 9, 10, 99, 100, -1, -10, i64::MAX, i64::MIN] {
            assert_eq!(decimal_length(n), n.to_string().len(), "{n}");
        }
    }

    #[test]
    fn an_http_answer_is_complete_only_with_its_whole_body() {
        let answer = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 5\r\n\r\n{\"a\":";
        assert!(parse_http(&answer[..answer.len() - 1]).unwrap().is_none());
        assert_eq!(parse_http(answer).unwrap(), Some((200, answer.len())));
        let chunked = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\ncontent-length: 2\r\n\r\n";
        assert!(parse_http(chunked).is_err());
        let mut two = answer.to_vec();
        two.extend_from_slice(b"HTTP/1.1 404");
        assert_eq!(parse_http(&two).unwrap(), Some((200, answer.len())));
    }

    #[test]
    fn a_resp_reply_is_complete_only_with_every_item() {
        let reply = b"*2\r\n$2\r\n17\r\n:3\r\n";
        for cut in 0..reply.len() {
            assert!(parse_resp(&reply[..cut]).unwrap().is_none(), "cut at {cut}");
        }
        match parse_resp(reply).unwrap() {
            Some((Resp::Array(Some(items)), length)) => {
                assert_eq!(length, reply.len());
                assert!(matches!(&items[0], Resp::Bulk(Some(b)) if b == b"17"));
                assert!(matches!(items[1], Resp::Integer(3)));
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            parse_resp(b"-NOSCRIPT x\r\n").unwrap(),
            Some((Resp::Error(_), 13))
        ));
        for broken in [&b"$-2\r\n"[..], b"*-2\r\n", b"$2\r\nabc\r\n"] {
            assert!(parse_resp(broken).is_err(), "{broken:?}");
        }
    }
}
