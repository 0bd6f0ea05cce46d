//! Many clients at once: writes are serialized without loss, every read sees whole transactions
//! only, and a client always reads its own acknowledged writes.

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;

use serde_json::{json, Value};

use crate::harness::{scale, scoreboard_dir, test_app_dir, Launch, Server};

fn start(app: &std::path::Path) -> (tempfile::TempDir, Server) {
    let data = tempfile::tempdir().expect("tempdir");
    let server = Launch::new(app, data.path()).start();
    (data, server)
}

/// Each writer posts rising scores for its own players and checks, after every answer, that its
/// next read shows at least that answer (read your writes). Readers meanwhile check that `top`
/// is ordered and holds no player twice, and that a player's figures never go backwards.
#[test]
fn concurrent_posts_and_reads() {
    let (_data, server) = start(&scoreboard_dir());
    let address = server.address;
    let writers = 8;
    let posts_per_writer = 150 * scale();
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..4)
        .map(|reader| {
            let stop = stop.clone();
            std::thread::spawn(move || read_while_writing(address, reader, &stop))
        })
        .collect();
    let handles: Vec<_> = (0..writers)
        .map(|writer| {
            std::thread::spawn(move || write_and_read_back(address, writer, posts_per_writer))
        })
        .collect();
    for handle in handles {
        handle.join().expect("writer");
    }
    stop.store(true, Relaxed);
    let reads: usize = readers
        .into_iter()
        .map(|handle| handle.join().expect("reader"))
        .sum();
    eprintln!(
        "concurrent_posts_and_reads: {} posts, {reads} reads",
        writers * posts_per_writer
    );

    let mut client = server.client();
    for writer in 0..writers {
        for player in 0..3 {
            let name = format!("w{writer}p{player}");
            let answer = client.get(&format!("/players/{name}")).json();
            let posts = (0..posts_per_writer)
                .filter(|post| post % 3 == player)
                .count();
            assert_eq!(answer["posts"], posts, "{answer}");
        }
    }
    server.stop();
}

fn write_and_read_back(address: std::net::SocketAddr, writer: usize, posts: usize) {
    let mut client = crate::harness::Client::connect(address);
    for post in 0..posts {
        let player = format!("w{writer}p{}", post % 3);
        let answer = client.post("/scores", &json!({"player": player, "score": post}));
        assert_eq!(answer.status, 200, "{}", answer.text());
        let answer = answer.json();
        let read = client.get(&format!("/players/{player}")).json();
        assert!(
            read["posts"].as_u64() >= answer["posts"].as_u64(),
            "read {read} after write {answer}"
        );
        assert_eq!(
            read["best"], answer["best"],
            "read {read} after write {answer}"
        );
    }
}

fn read_while_writing(address: std::net::SocketAddr, reader: usize, stop: &AtomicBool) -> usize {
    let mut client = crate::harness::Client::connect(address);
    let mut last_posts = [0u64; 8];
    let mut reads = 0;
    while !stop.load(Relaxed) {
        let top = client.get("/top?n=100").json();
        let entries = top.as_array().expect("array");
        let mut names: Vec<&str> = entries
            .iter()
            .map(|e| e["player"].as_str().expect("name"))
            .collect();
        let ordered = entries.windows(2).all(|pair| {
            let (a, b) = (&pair[0], &pair[1]);
            (b["best"].as_i64(), a["player"].as_str()) < (a["best"].as_i64(), b["player"].as_str())
        });
        assert!(ordered, "top is out of order: {top}");
        names.sort_unstable();
        names.dedup();
        assert_eq!(
            names.len(),
            entries.len(),
            "a player appears twice in top: {top}"
        );
        let writer = reads % 8;
        let read = client.get(&format!("/players/w{writer}p{reader}"));
        if read.status == 200 {
            let posts = read.json()["posts"].as_u64().expect("posts");
            assert!(
                posts >= last_posts[writer],
                "posts went backwards: {posts} < {}",
                last_posts[writer]
            );
            last_posts[writer] = posts;
        }
        reads += 1;
    }
    reads
}

/// Transfers between accounts keep the total constant; a read that saw part of a transfer, or part
/// of a commit group, would see another total.
#[test]
fn reads_never_see_part_of_a_transaction() {
    let (_data, server) = start(&test_app_dir("faulty"));
    let address = server.address;
    let mut client = server.client();
    let setup = client.post("/accounts", &json!({"count": 10, "balance": 100}));
    assert_eq!(setup.status, 200, "{}", setup.text());
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..3)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut client = crate::harness::Client::connect(address);
                let mut reads = 0;
                while !stop.load(Relaxed) {
                    let total = client.get("/accounts/total").json();
                    assert_eq!(total, json!({"accounts": 10, "total": 1000}));
                    reads += 1;
                }
                reads
            })
        })
        .collect();
    let writers: Vec<_> = (0..6)
        .map(|writer| {
            std::thread::spawn(move || {
                let mut client = crate::harness::Client::connect(address);
                for transfer in 0..100 * scale() {
                    let body = json!({"from": (writer + transfer) % 10, "to": (writer * 3 + transfer + 1) % 10, "amount": 7});
                    let answer = client.post("/transfer", &body);
                    assert!(matches!(answer.status, 200 | 409), "{}", answer.text());
                }
            })
        })
        .collect();
    for writer in writers {
        writer.join().expect("writer");
    }
    stop.store(true, Relaxed);
    let reads: usize = readers
        .into_iter()
        .map(|reader| reader.join().expect("reader"))
        .sum();
    eprintln!("reads_never_see_part_of_a_transaction: {reads} reads");
    let total: Value = client.get("/accounts/total").json();
    assert_eq!(total["total"], 1000);
    server.stop();
}
