// Round trips of a 150-byte request and a 100-byte answer, 16 blocking client threads against a
// 2-thread tokio server in the same process; CPU per round trip over loopback TCP and over a Unix
// socket, alternating.
use std::io::{Read, Write};
use std::time::Instant;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const REQ: usize = 150;
const ANS: usize = 100;

fn cpu() -> f64 {
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let t = |v: libc::timeval| v.tv_sec as f64 + v.tv_usec as f64 / 1e6;
    t(u.ru_utime) + t(u.ru_stime)
}

async fn serve<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(mut s: S) {
    let mut buf = [0u8; REQ];
    let ans = [b'a'; ANS];
    loop {
        if s.read_exact(&mut buf).await.is_err() { return; }
        if s.write_all(&ans).await.is_err() { return; }
    }
}

fn clients<S: Read + Write + Send + 'static>(conns: Vec<S>, n: usize) -> (f64, f64) {
    let c0 = cpu();
    let t0 = Instant::now();
    let hs: Vec<_> = conns.into_iter().map(|mut s| std::thread::spawn(move || {
        let req = [b'r'; REQ];
        let mut ans = [0u8; ANS];
        for _ in 0..n { s.write_all(&req).unwrap(); s.read_exact(&mut ans).unwrap(); }
    })).collect();
    for h in hs { h.join().unwrap(); }
    let total = (16 * n) as f64;
    (t0.elapsed().as_secs_f64() / total * 1e6, (cpu() - c0) / total * 1e6)
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let tcp = rt.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
    let addr = tcp.local_addr().unwrap();
    rt.spawn(async move { loop { let (s, _) = tcp.accept().await.unwrap(); s.set_nodelay(true).unwrap(); tokio::spawn(serve(s)); } });
    let path = "/tmp/udsprobe.sock";
    let _ = std::fs::remove_file(path);
    let _g = rt.enter();
    let uds = tokio::net::UnixListener::bind(path).unwrap();
    rt.spawn(async move { loop { let (s, _) = uds.accept().await.unwrap(); tokio::spawn(serve(s)); } });
    let n = 20000;
    for round in 0..5 {
        let conns: Vec<_> = (0..16).map(|_| { let s = std::net::TcpStream::connect(addr).unwrap(); s.set_nodelay(true).unwrap(); s }).collect();
        let (w, c) = clients(conns, n);
        println!("round {round} tcp  wall {w:.2} us/rt  cpu {c:.2} us/rt");
        let conns: Vec<_> = (0..16).map(|_| std::os::unix::net::UnixStream::connect(path).unwrap()).collect();
        let (w, c) = clients(conns, n);
        println!("round {round} unix wall {w:.2} us/rt  cpu {c:.2} us/rt");
    }
}
