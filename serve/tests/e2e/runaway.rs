//! Runaway scripts (endless loops, deep recursion, string and array growth) mixed with ordinary
//! traffic: each is stopped with an error for its own request, rolled back, and the owner goes on.

use std::net::SocketAddr;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;

use crate::harness::{scale, seed, test_app_dir, Client, Launch};

const RUNAWAYS: [&str; 5] = [
    "/loop",
    "/recurse",
    "/grow-string",
    "/grow-array",
    "/count-then-loop/c",
];

/// Sends a random mix; returns how many counts of "c" were acknowledged.
fn mixed_traffic(address: SocketAddr, seed: u64, requests: usize) -> u64 {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut client = Client::connect(address);
    let mut counted = 0;
    for _ in 0..requests {
        match rng.random_range(0..10) {
            0..=3 => {
                let response = client.post("/count/c", &json!({}));
                assert_eq!(response.status, 200, "{}", response.text());
                counted += 1;
            }
            4..=5 => {
                let response = client.get("/count/c");
                assert_eq!(response.status, 200, "{}", response.text());
            }
            6 => {
                let response = client.get("/read-loop");
                assert_eq!(response.status, 500, "{}", response.text());
            }
            _ => {
                let path = RUNAWAYS[rng.random_range(0..RUNAWAYS.len())];
                let response = client.post(path, &json!({}));
                assert_eq!(response.status, 500, "{path}: {}", response.text());
                let body = response.json();
                assert!(body["error"].is_string(), "{path}: {body}");
                assert!(
                    body["line"].as_u64().is_some_and(|line| line > 0),
                    "{path}: {body}"
                );
            }
        }
    }
    counted
}

#[test]
fn runaway_scripts_fail_alone_and_change_nothing() {
    let seed = seed("runaway_scripts");
    let data = tempfile::tempdir().expect("tempdir");
    let server = Launch::new(&test_app_dir("faulty"), data.path()).start();
    let address = server.address;
    let clients: Vec<_> = (0..4u64)
        .map(|index| {
            std::thread::spawn(move || mixed_traffic(address, seed + index, 150 * scale()))
        })
        .collect();
    let counted: u64 = clients
        .into_iter()
        .map(|client| client.join().expect("client"))
        .sum();
    let mut client = server.client();
    // Every acknowledged count is there, and not one increment of count-then-loop survived.
    assert_eq!(
        client.get("/count/c").json(),
        json!({"name": "c", "value": counted})
    );
    assert_eq!(client.get("/_pure/health").status, 200);
    eprintln!("runaway_scripts: {counted} counts among the runaways");
    server.stop();
}
