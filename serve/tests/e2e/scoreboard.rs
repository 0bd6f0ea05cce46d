//! The scoreboard app's API contract, request by request.

use serde_json::{json, Value};

use crate::harness::{scoreboard_dir, Client, Launch, Server};

fn start() -> (tempfile::TempDir, Server) {
    let data = tempfile::tempdir().expect("tempdir");
    let server = Launch::new(&scoreboard_dir(), data.path()).start();
    (data, server)
}

fn post(client: &mut Client, player: &str, score: i64) -> Value {
    let response = client.post("/scores", &json!({ "player": player, "score": score }));
    assert_eq!(
        response.status,
        200,
        "post {player} {score}: {}",
        response.text()
    );
    response.json()
}

#[test]
fn posts_keep_the_best_score_and_count_posts() {
    let (_data, server) = start();
    let mut client = server.client();
    assert_eq!(
        post(&mut client, "ann", 10),
        json!({"player": "ann", "best": 10, "posts": 1})
    );
    assert_eq!(
        post(&mut client, "ann", 7),
        json!({"player": "ann", "best": 10, "posts": 2})
    );
    assert_eq!(
        post(&mut client, "ann", 12),
        json!({"player": "ann", "best": 12, "posts": 3})
    );
    assert_eq!(
        post(&mut client, "bob", -5),
        json!({"player": "bob", "best": -5, "posts": 1})
    );
    let response = client.get("/players/ann");
    assert_eq!(response.status, 200);
    assert_eq!(
        response.json(),
        json!({"player": "ann", "best": 12, "posts": 3})
    );
    let response = client.get("/players/nobody");
    assert_eq!(response.status, 404);
    assert!(response.json()["error"].is_string(), "{}", response.text());
    server.stop();
}

#[test]
fn player_names_are_percent_decoded_and_measured_in_characters() {
    let (_data, server) = start();
    let mut client = server.client();
    let name = "anne marie/ü?&";
    post(&mut client, name, 3);
    let response = client.get("/players/anne%20marie%2F%C3%BC%3F%26");
    assert_eq!(
        response.json(),
        json!({"player": name, "best": 3, "posts": 1})
    );
    // 64 characters is the limit, not 64 bytes.
    let long: String = "é".repeat(64);
    post(&mut client, &long, 1);
    let too_long: String = "é".repeat(65);
    let response = client.post("/scores", &json!({"player": too_long, "score": 1}));
    assert_eq!(response.status, 400, "{}", response.text());
    server.stop();
}

#[test]
fn top_orders_by_best_then_name_and_checks_n() {
    let (_data, server) = start();
    let mut client = server.client();
    let posts = [
        ("dan", 5),
        ("cat", 9),
        ("bea", 5),
        ("al", 1),
        ("eve", 9),
        ("cat", 2),
        ("al", 7),
    ];
    for (player, score) in posts {
        post(&mut client, player, score);
    }
    let expected = json!([
        {"player": "cat", "best": 9}, {"player": "eve", "best": 9}, {"player": "al", "best": 7},
        {"player": "bea", "best": 5}, {"player": "dan", "best": 5},
    ]);
    assert_eq!(client.get("/top").json(), expected);
    assert_eq!(
        client.get("/top?n=2").json(),
        json!(expected.as_array().expect("array")[..2])
    );
    assert_eq!(client.get("/top?n=100").json(), expected);
    for bad in ["0", "101", "-1", "abc", "1.5", "", "99999999999999999999"] {
        let response = client.get(&format!("/top?n={bad}"));
        assert_eq!(response.status, 400, "n={bad}: {}", response.text());
        assert!(response.json()["error"].is_string());
    }
    server.stop();
}

#[test]
fn top_holds_ten_by_default() {
    let (_data, server) = start();
    let mut client = server.client();
    for index in 0..15 {
        post(&mut client, &format!("p{index:02}"), index);
    }
    let top = client.get("/top").json();
    let names: Vec<&str> = top
        .as_array()
        .expect("array")
        .iter()
        .map(|e| e["player"].as_str().expect("name"))
        .collect();
    let expected: Vec<String> = (5..15).rev().map(|index| format!("p{index:02}")).collect();
    assert_eq!(names, expected);
    server.stop();
}

#[test]
fn extreme_scores_keep_their_order() {
    let (_data, server) = start();
    let mut client = server.client();
    post(&mut client, "min", i64::MIN);
    post(&mut client, "max", i64::MAX);
    post(&mut client, "zero", 0);
    let expected = json!([
        {"player": "max", "best": i64::MAX}, {"player": "zero", "best": 0},
        {"player": "min", "best": i64::MIN},
    ]);
    assert_eq!(client.get("/top").json(), expected);
    server.stop();
}

/// Bodies that are not `{"player": 1..64 chars, "score": integer}`.
pub fn malformed_shapes() -> Vec<Value> {
    vec![
        json!({"score": 1}),
        json!({"player": "x"}),
        json!({"player": 1, "score": 1}),
        json!({"player": "x", "score": "1"}),
        json!({"player": "x", "score": 1.5}),
        json!({"player": "x", "score": true}),
        json!({"player": "x", "score": null}),
        json!({"player": "", "score": 1}),
        json!({"player": "x".repeat(65), "score": 1}),
        json!({"player": {"name": "x"}, "score": 1}),
        json!({"player": ["x"], "score": 1}),
        json!({"player": "x", "score": {"value": 1}}),
        json!({"player": "x", "score": [1]}),
        json!({"player": "x", "score": 1, "extra": {"nested": true}}),
        json!([{"player": "x", "score": 1}]),
        json!("x"),
        json!(1),
        json!(null),
    ]
}

#[test]
fn malformed_posts_get_400_and_write_nothing() {
    let (_data, server) = start();
    let mut client = server.client();
    post(&mut client, "x", 5);
    for body in malformed_shapes() {
        let response = client.post("/scores", &body);
        assert_eq!(response.status, 400, "{body}: {}", response.text());
        assert!(response.json()["error"].is_string(), "{}", response.text());
    }
    let response = client.request("POST", "/scores", None).expect("answered");
    assert_eq!(response.status, 400, "no body: {}", response.text());
    assert_eq!(
        client.get("/players/x").json(),
        json!({"player": "x", "best": 5, "posts": 1})
    );
    assert_eq!(
        client.get("/top?n=100").json(),
        json!([{"player": "x", "best": 5}])
    );
    server.stop();
}

#[test]
fn state_survives_a_restart() {
    let data = tempfile::tempdir().expect("tempdir");
    let launch = Launch::new(&scoreboard_dir(), data.path());
    let server = launch.start();
    let mut client = server.client();
    post(&mut client, "ann", 10);
    post(&mut client, "bob", 20);
    server.stop();
    let server = launch.start();
    let mut client = server.client();
    assert_eq!(
        client.get("/players/ann").json(),
        json!({"player": "ann", "best": 10, "posts": 1})
    );
    assert_eq!(
        post(&mut client, "ann", 30),
        json!({"player": "ann", "best": 30, "posts": 2})
    );
    let top = json!([{"player": "ann", "best": 30}, {"player": "bob", "best": 20}]);
    assert_eq!(client.get("/top").json(), top);
    server.stop();
}

/// Data written by the scoreboard of before its declared index (a `leaderboard` table kept by
/// the handler) is served by today's: the index is built from `players` at start, and the old
/// table, which the manifest no longer declares, is left alone.
#[test]
fn data_of_the_hand_kept_leaderboard_serves_the_same_board() {
    let data = tempfile::tempdir().expect("tempdir");
    let old = Launch::new(&crate::harness::test_app_dir("scoreboard-v1"), data.path()).start();
    let mut client = old.client();
    for (player, score) in [
        ("ann", 10),
        ("bob", 20),
        ("cy", 20),
        ("ann", 30),
        ("dee", -5),
    ] {
        post(&mut client, player, score);
    }
    let board = client.get("/top?n=10").json();
    assert_eq!(
        board,
        json!([
            {"player": "ann", "best": 30},
            {"player": "bob", "best": 20},
            {"player": "cy", "best": 20},
            {"player": "dee", "best": -5}
        ])
    );
    old.stop();

    let new = Launch::new(&scoreboard_dir(), data.path()).start();
    new.wait_for_stderr("index by_best on players(best descending)");
    let mut client = new.client();
    assert_eq!(client.get("/top?n=10").json(), board);
    post(&mut client, "bob", 40);
    assert_eq!(
        client.get("/top?n=2").json(),
        json!([{"player": "bob", "best": 40}, {"player": "ann", "best": 30}])
    );
    new.stop();
}
