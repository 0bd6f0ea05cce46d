//! The bundled ledger app (apps/ledger): transfers from several clients at once keep every
//! balance non-negative and the sum of balances exact, requests that do not match the declared
//! shapes are refused before they write anything, and all of it survives kill -9.

use rand::{rngs::StdRng, Rng, SeedableRng};
use serde_json::{json, Value};

use crate::harness::{repo_path, scale, seed, Client, Launch};

const ACCOUNTS: i64 = 8;
const DEPOSIT: i64 = 1_000;

/// Every account's balance, and the totals the writes kept.
fn state(client: &mut Client) -> (Vec<i64>, Value) {
    let balances = (1..=ACCOUNTS)
        .map(|id| {
            let account = client.get(&format!("/accounts/{id}"));
            assert_eq!(account.status, 200, "{}", account.text());
            account.json()["balance"].as_i64().expect("a balance")
        })
        .collect();
    (balances, client.get("/totals").json())
}

#[test]
fn transfers_keep_the_sum_exact_refusals_write_nothing_and_kill_9_loses_nothing() {
    let seed = seed("ledger_transfers");
    let data = tempfile::tempdir().expect("tempdir");
    let launch = Launch::new(&repo_path("apps/ledger"), data.path());
    let server = launch.start();
    let mut client = server.client();
    for id in 1..=ACCOUNTS {
        let opened = client.post(
            "/accounts",
            &json!({"owner": format!("owner {id}"), "deposit": DEPOSIT}),
        );
        assert_eq!(opened.status, 201, "{}", opened.text());
        assert_eq!(
            opened.header("location"),
            Some(format!("/accounts/{id}").as_str())
        );
    }

    // Four clients move money at random; some transfers ask for more than the account holds.
    let per_client = 150 * scale();
    let workers: Vec<_> = (0..4u64)
        .map(|worker| {
            let address = server.address;
            std::thread::spawn(move || {
                let mut rng = StdRng::seed_from_u64(seed ^ worker);
                let mut client = Client::connect(address);
                let (mut moved, mut refused) = (0, 0);
                for _ in 0..per_client {
                    let from = rng.random_range(1..=ACCOUNTS);
                    let to = (from + rng.random_range(1..ACCOUNTS) - 1) % ACCOUNTS + 1;
                    let amount = rng.random_range(1..=400);
                    let body = json!({"from": from, "to": to, "amount": amount});
                    let answer = client.post("/transfers", &body);
                    match answer.status {
                        201 => moved += 1,
                        409 => refused += 1,
                        other => panic!("transfer {body}: {other} {}", answer.text()),
                    }
                }
                (moved, refused)
            })
        })
        .collect();
    let (mut moved, mut refused) = (0, 0);
    for worker in workers {
        let (m, r) = worker.join().expect("a client");
        moved += m;
        refused += r;
    }
    eprintln!("ledger_transfers: {moved} transfers, {refused} refused for too little money");
    assert!(
        moved > 0 && refused > 0,
        "both outcomes happen: {moved} {refused}"
    );

    // Requests the declarations refuse: 400 each, and nothing is written.
    let before = state(&mut client);
    for (path, body) in [
        ("/transfers", json!({"from": 1, "to": 2})),
        ("/transfers", json!({"from": 1, "to": 2, "amount": -5})),
        (
            "/transfers",
            json!({"from": 1, "to": 2, "amount": 5, "memo": "x"}),
        ),
        ("/transfers", json!([1, 2, 5])),
        ("/accounts", json!({"owner": 7})),
        ("/accounts/1/deposits", json!({"amount": 1.5})),
        ("/accounts/x/deposits", json!({"amount": 1})),
    ] {
        let answer = client.post(path, &body);
        assert_eq!(answer.status, 400, "{path} {body}: {}", answer.text());
        assert!(answer.json()["error"].is_string());
    }
    let after = state(&mut client);
    assert_eq!(before, after, "a refused request changed the ledger");

    let (balances, totals) = after;
    assert!(balances.iter().all(|&b| b >= 0), "{balances:?}");
    assert_eq!(balances.iter().sum::<i64>(), ACCOUNTS * DEPOSIT);
    assert_eq!(
        totals,
        json!({"accounts": ACCOUNTS, "balance": ACCOUNTS * DEPOSIT})
    );
    let listed = client.get("/transfers?limit=1000").json();
    let listed = listed.as_array().expect("a list");
    assert_eq!(listed.len() as u64, moved.min(1000));

    // Every acknowledged transfer survives kill -9, and the sum with them.
    server.signal(libc::SIGKILL);
    drop(server);
    let server = launch.start();
    let mut client = server.client();
    let (again, totals_again) = state(&mut client);
    assert_eq!((again, totals_again), (balances, totals));
    let newest = client.get("/transfers?limit=1").json();
    assert_eq!(
        newest[0]["id"],
        json!(moved),
        "the last acknowledged transfer is there"
    );
    server.stop();
}
