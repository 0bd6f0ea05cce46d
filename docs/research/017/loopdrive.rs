// Prototype: N keep-alive connections doing PUT /kv/{key}, either one OS thread each (blocking)
// or all on one thread's event loop (tokio current_thread). Prints µs per op and process CPU.
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Instant;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn cpu() -> f64 {
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    (u.ru_utime.tv_sec as f64 + u.ru_stime.tv_sec as f64) * 1e6
        + (u.ru_utime.tv_usec as f64 + u.ru_stime.tv_usec as f64)
}

fn request(i: u64, n: u64) -> Vec<u8> {
    let key = format!("{:016}", (i.wrapping_mul(0x9E3779B97F4A7C15) >> 11) % n);
    let body = format!("{{\"value\":\"{}\"}}", "v".repeat(100));
    format!(
        "PUT /kv/{key} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let addr: SocketAddr = a[1].parse().unwrap();
    let conns: u64 = a[2].parse().unwrap();
    let ops: u64 = a[3].parse().unwrap();
    let mode = a[4].clone();
    let batch = a.get(5).map(|s| s == "batch").unwrap_or(false);
    let set_batch = move || if batch {
        let param = libc::sched_param { sched_priority: 0 };
        assert_eq!(unsafe { libc::sched_setscheduler(0, libc::SCHED_BATCH, &param) }, 0);
    };
    set_batch();
    let per = ops / conns;
    let c0 = cpu();
    let t0 = Instant::now();
    if mode == "threads" {
        std::thread::scope(|s| {
            for c in 0..conns {
                s.spawn(move || {
                    set_batch();
                    let st = TcpStream::connect(addr).unwrap();
                    st.set_nodelay(true).unwrap();
                    let mut r = BufReader::new(st.try_clone().unwrap());
                    let mut w = st;
                    let mut line = String::new();
                    for i in 0..per {
                        w.write_all(&request(c * per + i, 100000)).unwrap();
                        let mut len = 0;
                        loop {
                            line.clear();
                            r.read_line(&mut line).unwrap();
                            if line == "\r\n" { break; }
                            if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") { len = v.trim().parse().unwrap(); }
                        }
                        let mut b = vec![0; len];
                        r.read_exact(&mut b).unwrap();
                    }
                });
            }
        });
    } else {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async move {
            let mut tasks = Vec::new();
            for c in 0..conns {
                tasks.push(tokio::spawn(async move {
                    let mut st = tokio::net::TcpStream::connect(addr).await.unwrap();
                    st.set_nodelay(true).unwrap();
                    let mut buf = vec![0u8; 4096];
                    for i in 0..per {
                        st.write_all(&request(c * per + i, 100000)).await.unwrap();
                        let mut have = 0;
                        loop {
                            let n = st.read(&mut buf[have..]).await.unwrap();
                            assert!(n > 0);
                            have += n;
                            let text = &buf[..have];
                            if let Some(end) = text.windows(4).position(|w| w == b"\r\n\r\n") {
                                let head = String::from_utf8_lossy(&text[..end]).to_ascii_lowercase();
                                let len: usize = head.lines().find_map(|l| l.strip_prefix("content-length:")).map(|v| v.trim().parse().unwrap()).unwrap_or(0);
                                if have >= end + 4 + len { break; }
                            }
                        }
                    }
                }));
            }
            for t in tasks { t.await.unwrap(); }
        });
    }
    let wall = t0.elapsed().as_secs_f64() * 1e6;
    let n = (per * conns) as f64;
    println!("{mode}: {:.2} us/op, client cpu {:.2} us/op", wall / n, (cpu() - c0) / n);
}
