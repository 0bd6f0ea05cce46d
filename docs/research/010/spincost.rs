// Syncer CPU per write for one-at-a-time writes with a pause after each answer (research note
// 010). Written by a reviewer; to run it: cp docs/research/010/spincost.rs runtime/tests/ &&
// cargo test --release -p pure-runtime --test spincost -- --nocapture
#[allow(dead_code)]
#[path = "it/support.rs"]
mod support;
use std::time::{Duration, Instant};
use pure_runtime::{Runtime, RuntimeOptions};
use serde_json::json;
use support::{app, body};

fn cpu_ticks(name: &str) -> u64 {
    for entry in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let dir = entry.path();
        if std::fs::read_to_string(dir.join("comm")).unwrap_or_default().trim() == name {
            let stat = std::fs::read_to_string(dir.join("stat")).unwrap();
            let after = stat.rsplit_once(')').unwrap().1;
            let f: Vec<&str> = after.split_whitespace().collect();
            return f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap();
        }
    }
    panic!("no {name}")
}

#[test]
fn spin_cost() {
    for think_us in [0u64, 400, 1000] {
        let dir = tempfile::tempdir().unwrap();
        let rt = Runtime::open(app("ledger"), dir.path(), RuntimeOptions::default()).unwrap();
        let _ = rt.write("transfer", body(json!({"from": 1, "to": 2, "amount": 1}))).unwrap().blocking_recv();
        std::thread::sleep(Duration::from_millis(50));
        let c0 = cpu_ticks("pure-syncer");
        let t = Instant::now();
        let n = 1500;
        for i in 0..n {
            let r = rt.write("transfer", body(json!({"from": i % 7, "to": 100 + i % 5, "amount": 1}))).unwrap();
            r.blocking_recv().unwrap().unwrap();
            if think_us > 0 { std::thread::sleep(Duration::from_micros(think_us)); }
        }
        let wall = t.elapsed();
        let c1 = cpu_ticks("pure-syncer");
        eprintln!("think {think_us:4} µs: {n} writes in {wall:?}; syncer CPU {} ms = {:.0} µs/write, groups {}", (c1 - c0) * 10, (c1 - c0) as f64 * 10_000.0 / n as f64, rt.metrics().groups_total);
        rt.shutdown();
    }
}
