//! The limits that protect the server: mutated bodies, oversized bodies, slow clients, more
//! connections than the cap and than file descriptors.

use std::collections::BTreeMap;
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::os::unix::process::CommandExt as _;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};

use crate::harness::{
    metric_value, scale, scoreboard_dir, seed, wait_until, Launch, Server, WAIT_MAX,
};

fn start(flags: &[(&str, &str)]) -> (tempfile::TempDir, Server) {
    let data = tempfile::tempdir().expect("tempdir");
    let mut launch = Launch::new(&scoreboard_dir(), data.path());
    for (flag, value) in flags {
        launch = launch.flag(flag, value);
    }
    (data, launch.start())
}

/// One random mutation of a valid body: flip, insert, delete or duplicate bytes, or truncate.
fn mutate(rng: &mut StdRng, body: &[u8]) -> Vec<u8> {
    const JSONISH: &[u8] = b"{}[]\":,0123456789-.eE truefalsnul\\\x00\xff";
    let mut bytes = body.to_vec();
    for _ in 0..rng.random_range(1..=4) {
        let at = rng.random_range(0..=bytes.len());
        match rng.random_range(0..5) {
            0 if at < bytes.len() => bytes[at] ^= 1 << rng.random_range(0..8),
            1 => bytes.insert(at, JSONISH[rng.random_range(0..JSONISH.len())]),
            2 if at < bytes.len() => {
                bytes.remove(at);
            }
            3 => {
                let end = rng.random_range(at..=bytes.len());
                let copy = bytes[at..end].to_vec();
                bytes.splice(at..at, copy);
            }
            _ => bytes.truncate(at),
        }
    }
    bytes
}

#[test]
fn mutated_requests_get_4xx_and_change_nothing_else() {
    let seed = seed("mutated_bodies");
    let mut rng = StdRng::seed_from_u64(seed);
    let (_data, server) = start(&[("--sync", "none")]);
    let mut client = server.client();
    let mut model: BTreeMap<String, (i64, u64)> = BTreeMap::new();
    let valid = br#"{"player": "p1", "score": 42}"#;
    let (mut accepted, mut refused) = (0, 0);
    for round in 0..10_000 * scale() {
        let body = mutate(&mut rng, valid);
        let response = client
            .request("POST", "/scores", Some(&body))
            .expect("answered");
        match response.status {
            // A mutation can still be a valid post ("p1" -> "p3", 42 -> 49): then it counts.
            200 => {
                let answer = response.json();
                let player = answer["player"].as_str().expect("player").to_string();
                let score: i64 = serde_json::from_slice::<Value>(&body).expect("valid")["score"]
                    .as_i64()
                    .expect("integer score");
                let entry = model.entry(player).or_insert((score, 0));
                entry.0 = entry.0.max(score);
                entry.1 += 1;
                accepted += 1;
            }
            400..=499 => refused += 1,
            status => panic!(
                "round {round} (seed {seed}): {status} for {:?}",
                String::from_utf8_lossy(&body)
            ),
        }
    }
    eprintln!("mutated_bodies: {accepted} accepted, {refused} refused");
    // The read endpoints with mutated, percent-encoded parameters: answers, never 5xx.
    for round in 0..10_000 * scale() {
        let text = mutate(&mut rng, if round % 2 == 0 { b"10" } else { b"p1" });
        let encoded: String = text.iter().map(|byte| format!("%{byte:02X}")).collect();
        let path = if round % 2 == 0 {
            format!("/top?n={encoded}")
        } else {
            format!("/players/{encoded}")
        };
        let status = client.get(&path).status;
        assert!(
            matches!(status, 200 | 400 | 404),
            "round {round} (seed {seed}): {status} for {path}"
        );
    }
    assert!(refused > accepted, "most mutations must be refused");
    for (player, (best, posts)) in &model {
        let path = format!("/players/{}", percent_encode(player));
        let answer = client.get(&path).json();
        assert_eq!(
            answer,
            json!({"player": player, "best": best, "posts": posts})
        );
    }
    let top = client.get("/top?n=100").json();
    assert_eq!(
        top.as_array().expect("array").len(),
        model.len().min(100),
        "no other players: {top}"
    );
    server.stop();
}

pub fn percent_encode(text: &str) -> String {
    text.bytes()
        .map(|byte| match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => {
                (byte as char).to_string()
            }
            _ => format!("%{byte:02X}"),
        })
        .collect()
}

fn resident_kib(server: &Server) -> u64 {
    let status =
        std::fs::read_to_string(format!("/proc/{}/status", server.child.id())).expect("status");
    let line = status
        .lines()
        .find(|line| line.starts_with("VmRSS:"))
        .expect("VmRSS");
    line.split_whitespace()
        .nth(1)
        .and_then(|kib| kib.parse().ok())
        .expect("kB")
}

#[test]
fn oversized_bodies_and_heads_are_refused_and_memory_stays_flat() {
    let (_data, server) = start(&[("--max-body", "65536")]);
    let mut client = server.client();
    let before = resident_kib(&server);
    let big = vec![b' '; 1 << 20];
    for _ in 0..300 * scale() {
        // The declared length alone is refused...
        let response = client
            .exchange(
                b"POST /scores HTTP/1.1\r\nHost: localhost\r\nContent-Length: 1073741824\r\n\r\n",
            )
            .expect("answered");
        assert_eq!(response.status, 413, "{}", response.text());
        // ...and so is a whole megabyte actually sent, whatever the server read of it.
        let mut request = format!(
            "POST /scores HTTP/1.1\r\nHost: localhost\r\nContent-Length: {}\r\n\r\n",
            big.len()
        )
        .into_bytes();
        request.extend_from_slice(&big);
        match client.exchange(&request) {
            Ok(response) => assert_eq!(response.status, 413, "{}", response.text()),
            // The server may close after answering 413 before the client finished sending.
            Err(error) => assert!(
                matches!(
                    error.kind(),
                    ErrorKind::BrokenPipe | ErrorKind::ConnectionReset
                ),
                "{error}"
            ),
        }
    }
    // Heads over 32 KiB or with over 100 fields: 431, connection closed.
    for _ in 0..50 * scale() {
        let mut head = b"GET /top HTTP/1.1\r\nHost: localhost\r\nX-Big: ".to_vec();
        head.extend_from_slice(&[b'a'; 100_000]);
        head.extend_from_slice(b"\r\n\r\n");
        assert_eq!(client.exchange(&head).expect("answered").status, 431);
        let fields: String = (0..200).map(|i| format!("X-{i}: 1\r\n")).collect();
        let head = format!("GET /top HTTP/1.1\r\nHost: localhost\r\n{fields}\r\n");
        assert_eq!(
            client.exchange(head.as_bytes()).expect("answered").status,
            431
        );
    }
    let after = resident_kib(&server);
    eprintln!("oversized_bodies: resident {before} KiB before, {after} KiB after");
    assert!(
        after < before + 64 * 1024,
        "resident memory grew from {before} to {after} KiB"
    );
    assert_eq!(client.get("/top").json(), json!([]));
    server.stop();
}

/// True once the server has closed the socket (EOF or reset on read).
fn closed_by_server(stream: &mut TcpStream) -> bool {
    let mut byte = [0u8; 1];
    match stream.read(&mut byte) {
        Ok(0) => true,
        Ok(_) => true, // an error response (hyper's 408) also ends the connection
        Err(error) if matches!(error.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => false,
        Err(_) => true,
    }
}

#[test]
fn slow_clients_are_cut_off_and_others_are_served() {
    let (_data, server) = start(&[("--header-timeout-ms", "500"), ("--body-timeout-ms", "500")]);
    let count = 200 * scale();
    let mut sockets: Vec<TcpStream> = (0..count)
        .map(|_| {
            let stream = TcpStream::connect(server.address).expect("connect");
            stream.set_nonblocking(true).expect("nonblocking");
            stream
        })
        .collect();
    // Half send a head one byte at a time; the other half a head, then a body one byte at a time.
    let head = b"POST /scores HTTP/1.1\r\nHost: localhost\r\nContent-Length: 1000\r\n\r\n";
    for (index, socket) in sockets.iter_mut().enumerate() {
        if index % 2 == 1 {
            socket.write_all(head).expect("head");
        }
    }
    let mut open: Vec<usize> = (0..count).collect();
    let mut client = server.client();
    let mut served = 0;
    let mut sent = 0;
    wait_until("every slow client to be closed", || {
        for &index in &open {
            let at = sent % head.len();
            let byte = if index % 2 == 0 {
                &head[at..at + 1]
            } else {
                b" "
            };
            let _ = sockets[index].write(byte);
        }
        sent += 1;
        std::thread::sleep(Duration::from_millis(50));
        open.retain(|&index| !closed_by_server(&mut sockets[index]));
        // Meanwhile, an ordinary client is served as usual.
        assert_eq!(client.get("/top").status, 200);
        served += 1;
        open.is_empty()
    });
    eprintln!(
        "slow_clients: {count} closed after {sent} rounds; {served} requests served meanwhile"
    );
    server.stop();
}

#[test]
fn idle_keep_alive_connections_are_closed() {
    let (_data, server) = start(&[("--header-timeout-ms", "300")]);
    let mut client = server.client();
    assert_eq!(client.get("/top").status, 200);
    let mut stream = TcpStream::connect(server.address).expect("connect");
    stream.set_read_timeout(Some(WAIT_MAX)).expect("timeout");
    stream
        .write_all(b"GET /top HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .expect("write");
    let mut reader = std::io::BufReader::new(stream.try_clone().expect("clone"));
    assert_eq!(
        crate::harness::read_response(&mut reader)
            .expect("answer")
            .status,
        200
    );
    let mut rest = Vec::new();
    // EOF: the server closed the idle connection (the read timeout would fail the test).
    reader.read_to_end(&mut rest).expect("closed by the server");
    server.stop();
}

#[test]
fn connections_past_the_cap_wait_and_are_served() {
    let (_data, server) = start(&[("--max-connections", "16"), ("--header-timeout-ms", "1000")]);
    // 48 idle connections: 16 hold every slot, the rest wait in the listen backlog.
    let idle: Vec<TcpStream> = (0..48)
        .map(|_| TcpStream::connect(server.address).expect("connect"))
        .collect();
    // A new client is served once the idle ones time out and free their slots, and the server
    // never held more connections than the cap.
    let mut client = server.client();
    let metrics = client.get("/_pure/metrics").text();
    let open = metric_value(&metrics, "pure_http_connections_open");
    assert!(
        (1.0..=16.0).contains(&open),
        "{open} connections open past a cap of 16"
    );
    drop(idle);
    assert_eq!(client.get("/_pure/health").status, 200);
    server.stop();
}

#[test]
fn running_out_of_file_descriptors_backs_off_and_recovers() {
    let data = tempfile::tempdir().expect("tempdir");
    let launch = Launch::new(&scoreboard_dir(), data.path())
        .flag("--max-connections", "100000")
        .flag("--header-timeout-ms", "1000");
    let mut command = launch.command();
    // SAFETY: setrlimit is async-signal-safe; the child runs it alone before exec.
    unsafe {
        command.pre_exec(|| {
            let limit = libc::rlimit {
                rlim_cur: 128,
                rlim_max: 128,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let server = Server::start(command);
    let idle: Vec<TcpStream> = (0..300)
        .map(|_| TcpStream::connect(server.address).expect("connect"))
        .collect();
    let mut probe = server.client();
    wait_until("accept to fail with EMFILE", || {
        let metrics = probe.get("/_pure/metrics").text();
        metric_value(&metrics, "pure_http_accept_errors_total") > 0.0
    });
    drop(idle);
    let mut client = server.client();
    assert_eq!(
        client
            .post("/scores", &json!({"player": "a", "score": 1}))
            .status,
        200
    );
    assert_eq!(client.get("/players/a").status, 200);
    server.stop();
}
