//! `now()`, `uuid()` and `random()` through real HTTP: live, fixed for tests, and never drawn
//! again by recovery.

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

use crate::harness::{test_app_dir, wait_until, Launch};

fn millis() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_millis() as i64
}

fn is_uuid_v7(id: &Value) -> bool {
    let id = id.as_str().unwrap_or("");
    let groups: Vec<&str> = id.split('-').collect();
    groups.iter().map(|g| g.len()).collect::<Vec<_>>() == [8, 4, 4, 4, 12]
        && id
            .chars()
            .all(|c| c == '-' || c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        && groups[2].starts_with('7')
        && "89ab".contains(&groups[3][..1])
}

#[test]
fn live_values_are_the_clock_and_fresh_ids_and_recovery_keeps_what_was_drawn() {
    let data = tempfile::tempdir().expect("tempdir");
    let launch = Launch::new(&test_app_dir("accounts"), data.path());
    let server = launch.start();
    let mut client = server.client();
    let before = millis();
    let first = client.post("/draw", &json!({})).json();
    let after = millis();
    let second = client.post("/draw", &json!({})).json();
    // The machine's clock, give or take a second for clocks read on two threads.
    let at = first["at"].as_i64().expect("an integer");
    assert!(
        (before - 1000..=after + 1000).contains(&at),
        "{at} in {before}..{after}"
    );
    assert_eq!(first["same"], json!(true), "one now() for the whole call");
    for id in [&first["id"], &first["other"], &second["id"]] {
        assert!(is_uuid_v7(id), "{id}");
    }
    assert_ne!(first["id"], first["other"]);
    assert_ne!(first["id"], second["id"]);
    assert!((1..=6).contains(&first["dice"].as_i64().expect("an integer")));
    assert!((-5..=5).contains(&first["any"].as_i64().expect("an integer")));
    // Time-ordered: the first 48 bits are the time.
    let prefix = |id: &Value| id.as_str().expect("a string")[..13].replace('-', "");
    assert_eq!(i64::from_str_radix(&prefix(&first["id"]), 16), Ok(at));

    // Recovery applies what was logged and never runs a script: the same time and dice.
    server.stop();
    let server = launch.start();
    let mut client = server.client();
    let id = first["id"].as_str().expect("a string");
    assert_eq!(
        client.get(&format!("/draws/{id}")).json(),
        json!({"at": at, "dice": first["dice"]})
    );

    let response = client.post("/bad-random", &json!({}));
    assert_eq!(response.status, 500);
    let error = response.json();
    assert!(
        error["error"]
            .as_str()
            .expect("a message")
            .contains("above"),
        "{error}"
    );
}

#[test]
fn a_fixed_clock_and_seed_give_the_same_answers_to_the_same_requests() {
    let answers = || {
        let data = tempfile::tempdir().expect("tempdir");
        let server = Launch::new(&test_app_dir("accounts"), data.path())
            .flag("--fixed-now", "1700000000123")
            .flag("--seed", "7")
            .start();
        let mut said = String::new();
        wait_until("the start line for tests", || {
            said.push_str(&server.stderr_text());
            said.contains("for tests: now() is fixed at 1700000000123")
        });
        let mut client = server.client();
        (0..3)
            .map(|_| client.post("/draw", &json!({})).json())
            .collect::<Vec<Value>>()
    };
    let (one, two) = (answers(), answers());
    assert_eq!(one, two);
    assert_eq!(one[0]["at"], json!(1_700_000_000_123_i64));
    assert!(one[0]["id"]
        .as_str()
        .expect("a string")
        .starts_with("018bcfe5-687b-7"));
    assert_ne!(one[0]["id"], one[1]["id"], "seeded is not constant");
}
