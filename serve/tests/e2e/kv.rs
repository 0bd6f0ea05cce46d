//! The kv app (apps/kv) at its bounds and under a crash: values of exactly 64 KiB are taken
//! and one byte more is refused with nothing written, and a batch is one transaction, whole or
//! absent after kill -9.

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;

use serde_json::{json, Value};

use crate::harness::{repo_path, Client, Launch};

fn put(client: &mut Client, key: &str, value: &str) -> u16 {
    let body = serde_json::to_vec(&json!({ "value": value })).expect("json");
    client
        .request("PUT", &format!("/kv/{key}"), Some(&body))
        .expect("answered")
        .status
}

#[test]
fn values_and_keys_are_taken_up_to_their_bounds_in_bytes_and_refused_past_them() {
    let data = tempfile::tempdir().expect("tempdir");
    let server = Launch::new(&repo_path("apps/kv"), data.path()).start();
    let mut client = server.client();

    // 65,536 bytes, in ASCII and in two-byte characters: taken, and read back whole.
    for (key, value) in [("ascii", "v".repeat(65_536)), ("utf8", "é".repeat(32_768))] {
        assert_eq!(put(&mut client, key, &value), 204, "{key}");
        let got = client.get(&format!("/kv/{key}"));
        assert_eq!(got.status, 200);
        assert_eq!(got.json()["value"], Value::from(value));
    }
    // One byte more: refused, and the entry keeps its value (or stays absent).
    for (key, value) in [
        ("ascii", "w".repeat(65_537)),
        ("utf8", "é".repeat(32_768) + "a"),
        ("fresh", "x".repeat(65_537)),
    ] {
        let body = serde_json::to_vec(&json!({ "value": value })).expect("json");
        let answer = client
            .request("PUT", &format!("/kv/{key}"), Some(&body))
            .expect("answered");
        assert_eq!(answer.status, 400, "{key}: {}", answer.text());
        assert!(
            answer.json()["error"]
                .as_str()
                .is_some_and(|e| e.contains("at most 65536 bytes")),
            "{}",
            answer.text()
        );
    }
    assert_eq!(
        client.get("/kv/ascii").json()["value"],
        Value::from("v".repeat(65_536))
    );
    assert_eq!(client.get("/kv/fresh").status, 404);

    // Keys: 256 bytes taken, 257 refused, counted in bytes after percent-decoding.
    let key = "k".repeat(256);
    assert_eq!(put(&mut client, &key, "a"), 204);
    assert_eq!(client.get(&format!("/kv/{key}")).status, 200);
    assert_eq!(put(&mut client, &"k".repeat(257), "a"), 400);
    let two_byte = "%C3%A9".repeat(128); // 128 "é": 256 bytes
    assert_eq!(put(&mut client, &two_byte, "a"), 204);
    assert_eq!(put(&mut client, &format!("{two_byte}a"), "a"), 400);

    // A batch with one value past the bound writes none of its entries.
    let answer = client.post(
        "/kv",
        &json!({ "put": { "b1": "ok", "b2": "x".repeat(65_537) }, "delete": ["ascii"] }),
    );
    assert_eq!(answer.status, 400, "{}", answer.text());
    assert_eq!(client.get("/kv/b1").status, 404);
    assert_eq!(client.get("/kv/ascii").status, 200);
    // A batch its handler refuses (a key both put and deleted) writes none either.
    let answer = client.post(
        "/kv",
        &json!({ "put": { "b1": "ok", "ascii": "new" }, "delete": ["ascii"] }),
    );
    assert_eq!(answer.status, 400, "{}", answer.text());
    assert_eq!(client.get("/kv/b1").status, 404);
    assert_eq!(
        client.get("/kv/ascii").json()["value"],
        Value::from("v".repeat(65_536))
    );
    server.stop();
}

/// Batches of `WIDTH` entries, each entry's value naming its batch, are sent without pause
/// while the server is killed; after a restart every acknowledged batch is whole and every
/// other batch is whole or absent.
#[test]
fn a_batch_is_whole_or_absent_after_kill_9() {
    const WIDTH: usize = 40;
    const CYCLES: usize = 3;
    let data = tempfile::tempdir().expect("tempdir");
    let launch = Launch::new(&repo_path("apps/kv"), data.path());
    let mut acknowledged: Vec<u64> = Vec::new();
    let mut sent = 0u64;
    for cycle in 0..CYCLES {
        let mut server = launch.start();
        let address = server.address;
        let stop = Arc::new(AtomicBool::new(false));
        let first = sent;
        let writer = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut client = Client::connect(address);
                let mut acked = Vec::new();
                let mut n = first;
                while !stop.load(Relaxed) {
                    // Every batch overwrites the same keys, so that a torn batch would show as
                    // keys naming different batches.
                    let put: serde_json::Map<String, Value> = (0..WIDTH)
                        .map(|i| (format!("key{i:03}"), Value::from(format!("batch{n}"))))
                        .collect();
                    let body = serde_json::to_vec(&json!({ "put": put })).expect("json");
                    match client.request("POST", "/kv", Some(&body)) {
                        Ok(answer) if answer.status == 200 => acked.push(n),
                        Ok(answer) => assert!(answer.status >= 500, "{}", answer.text()),
                        Err(_) => break,
                    }
                    n += 1;
                }
                (acked, n)
            })
        };
        // Kill once some batches were acknowledged (the server counts them, not a clock).
        let mut client = server.client();
        crate::harness::wait_until("batches acknowledged", || {
            client
                .get("/kv/key000")
                .json()
                .get("value")
                .and_then(Value::as_str)
                .and_then(|v| v.strip_prefix("batch"))
                .and_then(|n| n.parse::<u64>().ok())
                .is_some_and(|n| n >= first + 20)
        });
        server.signal(libc::SIGKILL);
        server.wait();
        stop.store(true, Relaxed);
        let (acked, next) = writer.join().expect("writer");
        acknowledged.extend(acked);
        // `next` was in flight when the server died: written or not, but never acknowledged.
        let in_flight = next;
        sent = next + 1;

        let server = launch.start();
        let mut client = server.client();
        let page = client.get(&format!("/kv?limit={}", WIDTH + 10)).json();
        let entries = page["entries"].as_array().expect("entries");
        assert_eq!(entries.len(), WIDTH, "cycle {cycle}: {page}");
        let values: Vec<&str> = entries
            .iter()
            .map(|e| e["value"].as_str().expect("value"))
            .collect();
        assert!(
            values.iter().all(|v| *v == values[0]),
            "cycle {cycle}: a torn batch: {values:?}"
        );
        let survived: u64 = values[0]["batch".len()..].parse().expect("batch number");
        let last_acked = *acknowledged.last().expect("some batches acknowledged");
        assert!(
            survived >= last_acked && survived <= in_flight,
            "cycle {cycle}: batch {survived} survived; {last_acked} was the last acknowledged, \
             {in_flight} the one in flight"
        );
        server.stop();
    }
}

/// Review (issue 17): the app takes values of up to 64 KiB, and a range answers up to `limit`
/// (default 100) of them; but the page the range handler builds is held to the handlers'
/// `string_bytes_max` (1 MiB), so a range over 16 or more values of 64 KiB is a 500
/// ("limit exceeded: size (Length of string)") instead of a page, even at the default limit.
/// The README promises "at most `limit` of them"; nothing says a range can fail on what the
/// app itself accepted.
#[test]
fn a_range_over_large_values_answers_a_page_not_a_500() {
    let data = tempfile::tempdir().expect("tempdir");
    let server = Launch::new(&repo_path("apps/kv"), data.path()).start();
    let mut client = server.client();
    let value = "v".repeat(65_536);
    for i in 0..20 {
        assert_eq!(put(&mut client, &format!("big{i:02}"), &value), 204);
    }
    for path in ["/kv", "/kv?limit=16", "/kv?reverse=true"] {
        let answer = client.get(path);
        assert_eq!(answer.status, 200, "{path}: {}", answer.text());
        // A page may hold fewer than `limit` entries, as long as `next` leads on to the rest.
        let page = answer.json();
        let entries = page["entries"].as_array().expect("entries");
        assert!(!entries.is_empty(), "{path}: an empty page");
        assert!(
            entries.len() == 20 || !page["next"].is_null(),
            "{path}: {} entries and no next",
            entries.len()
        );
    }
    // A page ends at 1,048,576 characters of keys and values: 16 of these entries. Following
    // `next` either way visits every key once.
    for reverse in [false, true] {
        let mut keys = Vec::new();
        let mut bound: Option<String> = None;
        let mut pages = 0;
        loop {
            let path = match (&bound, reverse) {
                (None, false) => "/kv".to_string(),
                (None, true) => "/kv?reverse=true".to_string(),
                (Some(b), false) => format!("/kv?from={b}"),
                (Some(b), true) => format!("/kv?reverse=true&to={b}"),
            };
            let page = client.get(&path).json();
            let entries = page["entries"].as_array().expect("entries");
            if pages == 0 {
                assert_eq!(entries.len(), 16, "{path}");
            }
            pages += 1;
            keys.extend(
                entries
                    .iter()
                    .map(|e| e["key"].as_str().unwrap().to_string()),
            );
            match page["next"].as_str() {
                Some(next) => bound = Some(next.to_string()),
                None => break,
            }
        }
        let mut expected: Vec<String> = (0..20).map(|i| format!("big{i:02}")).collect();
        if reverse {
            expected.reverse();
        }
        assert_eq!(keys, expected, "reverse={reverse}");
        assert_eq!(pages, 2, "reverse={reverse}");
    }
    server.stop();
}

/// Review (issue 17): the README says a body over `--max-body` is 413 and to "raise it for
/// batches of large values"; but with `--max-body` raised, a batch holding more than 1 MiB of
/// strings is still 413, refused by the handlers' `string_bytes_max`, so no flag lets a batch
/// of 20 values of 64 KiB through.
#[test]
fn a_batch_of_large_values_is_taken_once_max_body_is_raised() {
    let data = tempfile::tempdir().expect("tempdir");
    // A log of 32 MiB lets one write take 4 MiB of it (an eighth, as the default log does).
    let server = Launch::new(&repo_path("apps/kv"), data.path())
        .flag("--max-body", &(16 << 20).to_string())
        .flag("--log-capacity", &(32 << 20).to_string())
        .start();
    let mut client = server.client();
    let value = "v".repeat(65_536);
    let batch = |first: usize, count: usize| {
        let put: serde_json::Map<String, Value> = (first..first + count)
            .map(|i| (format!("big{i:03}"), Value::from(value.clone())))
            .collect();
        json!({ "put": put })
    };
    let answer = client.post("/kv", &batch(0, 20));
    assert_eq!(answer.status, 200, "{}", answer.text());
    // More than one write may take in the log: refused as too large, and nothing is written.
    let answer = client.post("/kv", &batch(100, 70));
    assert_eq!(answer.status, 413, "{}", answer.text());
    let error = answer.json()["error"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        error.contains("more than one write may take (")
            && error.ends_with("split them into smaller writes")
            && !error.contains("  "),
        "{error}"
    );
    assert_eq!(client.get("/kv/big100").status, 404);
    assert_eq!(client.get("/kv/big019").status, 200);
    server.stop();
}

/// The largest batches the README promises: a delete of 49,900 keys that are all there, a put
/// and a delete of that many each in one batch, and a delete of exactly 50,000 keys are
/// answered 200, within the operations and time the app gives its handlers (the defaults
/// stopped the first with a 500); 50,001 keys are refused.
#[test]
fn batches_up_to_the_documented_entries_are_answered() {
    let data = tempfile::tempdir().expect("tempdir");
    let server = Launch::new(&repo_path("apps/kv"), data.path())
        .flag("--max-body", "4194304")
        .start();
    let mut client = server.client();
    let n = 49_900;
    let put = |keys: std::ops::Range<usize>| {
        keys.map(|i| (format!("m{i:06}"), Value::from("")))
            .collect::<serde_json::Map<String, Value>>()
    };
    let answer = client.post("/kv", &json!({ "put": put(0..n) }));
    assert_eq!(answer.status, 200, "{}", answer.text());
    let delete: Vec<String> = (0..n).map(|i| format!("m{i:06}")).collect();
    let answer = client.post("/kv", &json!({ "delete": delete }));
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert_eq!(answer.json()["deleted"], Value::from(n));
    assert_eq!(client.get("/kv/m000000").status, 404);

    // Both halves at once: the puts, then deletes of keys that are not there.
    let absent: Vec<String> = (0..n).map(|i| format!("x{i:06}")).collect();
    let answer = client.post("/kv", &json!({ "put": put(0..n), "delete": absent }));
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert_eq!(answer.json()["put"], Value::from(n));
    assert_eq!(answer.json()["deleted"], Value::from(0));
    assert_eq!(client.get(&format!("/kv/m{:06}", n - 1)).status, 200);

    // A delete of exactly 50,000 keys is the array limit itself: taken; one more is 413.
    let keys = |count: usize| (0..count).map(|i| format!("d{i:06}")).collect::<Vec<_>>();
    let answer = client.post("/kv", &json!({ "delete": keys(50_000) }));
    assert_eq!(answer.status, 200, "{}", answer.text());
    let answer = client.post("/kv", &json!({ "delete": keys(50_001) }));
    assert_eq!(answer.status, 413, "{}", answer.text());
    server.stop();
}

/// Every byte of a query value percent-encoded but letters and digits.
fn encoded(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// Paging by `next`, forward and in reverse, with random bounds and limits over random key
/// sets (keys with `/ % ? & + space`, multi-byte characters and NUL), visits exactly the keys
/// of the range, in order, each once: checked against a sorted set.
#[test]
fn paging_by_next_visits_each_key_of_a_range_once_in_order() {
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    use std::collections::BTreeSet;

    let mut rng = StdRng::seed_from_u64(crate::harness::seed("kv paging"));
    let data = tempfile::tempdir().expect("tempdir");
    let server = Launch::new(&repo_path("apps/kv"), data.path()).start();
    let mut client = server.client();
    let alphabet: Vec<&str> = vec![
        "a", "b", "z", "A", "0", "9", "/", "%", "?", "&", "+", " ", "é", "日", "😀", "~", "\u{0}",
    ];
    let word = |rng: &mut StdRng, most: usize| -> String {
        let len = rng.random_range(1..=most);
        (0..len)
            .map(|_| alphabet[rng.random_range(0..alphabet.len())])
            .collect()
    };
    let mut keys = BTreeSet::new();
    for round in 0..8 {
        // Add keys, and delete some of the old ones, in one batch.
        let added: BTreeSet<String> = (0..rng.random_range(1..60))
            .map(|_| word(&mut rng, 4))
            .collect();
        let deleted: Vec<String> = keys
            .iter()
            .filter(|k| !added.contains(*k) && rng.random_bool(0.2))
            .cloned()
            .collect();
        let put: serde_json::Map<String, Value> = added
            .iter()
            .map(|k| (k.clone(), Value::from(format!("v{round}"))))
            .collect();
        let answer = client.post("/kv", &json!({ "put": put, "delete": deleted }));
        assert_eq!(answer.status, 200, "{}", answer.text());
        keys.extend(added);
        for k in &deleted {
            keys.remove(k);
        }
        for _ in 0..10 {
            let mut from = rng.random_bool(0.5).then(|| word(&mut rng, 2));
            let mut to = rng.random_bool(0.5).then(|| word(&mut rng, 2));
            let limit = [1, 2, 3, 7, 1000][rng.random_range(0..5)];
            let reverse = rng.random_bool(0.5);
            // Key order is the byte order of UTF-8, which is Rust's order of strings.
            let mut expected: Vec<&String> = keys
                .iter()
                .filter(|k| from.as_ref().is_none_or(|f| *k >= f))
                .filter(|k| to.as_ref().is_none_or(|t| *k < t))
                .collect();
            if reverse {
                expected.reverse();
            }
            let mut seen: Vec<String> = Vec::new();
            let mut pages = 0;
            loop {
                let mut path = format!("/kv?limit={limit}&reverse={reverse}");
                if let Some(f) = &from {
                    path.push_str(&format!("&from={}", encoded(f)));
                }
                if let Some(t) = &to {
                    path.push_str(&format!("&to={}", encoded(t)));
                }
                let answer = client.get(&path);
                assert_eq!(answer.status, 200, "{path}: {}", answer.text());
                let page = answer.json();
                let entries = page["entries"].as_array().expect("entries");
                assert!(entries.len() <= limit, "{path}");
                seen.extend(
                    entries
                        .iter()
                        .map(|e| e["key"].as_str().unwrap().to_string()),
                );
                pages += 1;
                assert!(pages <= keys.len() + 1, "{path}: paging does not end");
                match page["next"].as_str() {
                    Some(next) if reverse => to = Some(next.to_string()),
                    Some(next) => from = Some(next.to_string()),
                    None => break,
                }
            }
            let seen: Vec<&String> = seen.iter().collect();
            assert_eq!(
                seen, expected,
                "round {round}, limit {limit}, reverse {reverse}"
            );
        }
    }
    server.stop();
}

/// A batch that names a key twice is a 400 that says so, even when the body also passes a limit
/// after the repeat: the repeat, earlier in the text, is what the client gets to fix first.
#[test]
fn a_repeated_key_is_refused_400_even_when_a_limit_follows() {
    let data = tempfile::tempdir().expect("tempdir");
    let server = Launch::new(&repo_path("apps/kv"), data.path()).start();
    let mut client = server.client();
    let zeros = vec!["0"; 50_001].join(",");
    let body = format!(r#"{{"put": {{"b": "1", "a": "2", "b": "3", "z": [{zeros}]}}}}"#);
    let answer = client
        .request("POST", "/kv", Some(body.as_bytes()))
        .expect("answered");
    assert_eq!(answer.status, 400, "{}", answer.text());
    assert!(answer.text().contains("appears twice"), "{}", answer.text());
}

/// The server runs without transparent huge pages (research note 019): a fillbatch-sized
/// batch grows the state, and no memory of the process is a huge page.
#[cfg(target_os = "linux")]
#[test]
fn the_server_holds_its_state_without_huge_pages() {
    let data = tempfile::tempdir().expect("tempdir");
    let server = Launch::new(&repo_path("apps/kv"), data.path())
        .flag("--max-body", "8000000")
        .start();
    let pid = server.child.id();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    // Linux 6.x reports the process's flag; older kernels do not have the line.
    if let Some(line) = status.lines().find(|l| l.starts_with("THP_enabled:")) {
        assert_eq!(line.split_whitespace().nth(1), Some("0"), "{line}");
    }
    let mut client = server.client();
    for batch in 0..8 {
        let put: serde_json::Map<String, Value> = (0..5_000)
            .map(|i| (format!("{batch:02}{i:014}"), json!("v".repeat(100))))
            .collect();
        let answer = client.post("/kv", &json!({ "put": put }));
        assert_eq!(answer.status, 200, "{}", answer.text());
    }
    let smaps = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).expect("smaps");
    let huge: u64 = smaps
        .lines()
        .filter(|l| l.starts_with("AnonHugePages:"))
        .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        .sum();
    assert_eq!(huge, 0, "{smaps}");
}
