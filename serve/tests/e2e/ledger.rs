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

/// The ledger's app directory, copied with `edit` applied to its manifest.
fn ledger_copy(
    into: &std::path::Path,
    edit: impl FnOnce(&mut Value),
    edit_script: impl FnOnce(String) -> String,
) -> std::path::PathBuf {
    let app = into.join("ledger");
    std::fs::create_dir_all(&app).expect("mkdir");
    let source = repo_path("apps/ledger");
    let script = std::fs::read_to_string(source.join("ledger.rhai")).expect("script");
    std::fs::write(app.join("ledger.rhai"), edit_script(script)).expect("write");
    let text = std::fs::read_to_string(source.join("app.json")).expect("manifest");
    let mut manifest: Value = serde_json::from_str(&text).expect("json");
    edit(&mut manifest);
    std::fs::write(app.join("app.json"), manifest.to_string()).expect("write");
    app
}

/// What the indexes answer, for every owner and account, and what they should answer from
/// the rows alone.
fn index_answers(client: &mut Client, owners: &[String], accounts: i64) -> (Value, Value) {
    let mut by_index = Vec::new();
    let mut by_rows = Vec::new();
    for owner in owners {
        by_index.push(
            client
                .get(&format!("/accounts?owner={}", owner.replace(' ', "+")))
                .json(),
        );
        let mine: Vec<Value> = (1..=accounts)
            .map(|id| client.get(&format!("/accounts/{id}")).json())
            .filter(|account| account["owner"] == json!(owner))
            .collect();
        by_rows.push(json!(mine));
    }
    let all = client.get("/transfers?limit=1000").json();
    for id in 1..=accounts {
        by_index.push(
            client
                .get(&format!("/accounts/{id}/transfers?limit=1000"))
                .json(),
        );
        let mine: Vec<Value> = all
            .as_array()
            .expect("a list")
            .iter()
            .filter(|t| t["from"] == json!(id) || t["to"] == json!(id))
            .cloned()
            .collect();
        by_rows.push(json!(mine));
    }
    (json!(by_index), json!(by_rows))
}

#[test]
fn indexes_are_built_at_a_redeploy_that_adds_them_dropped_by_one_that_does_not_and_survive_kill_9()
{
    let seed = seed("ledger_indexes");
    let mut rng = StdRng::seed_from_u64(seed);
    let dirs = tempfile::tempdir().expect("tempdir");
    let data = dirs.path().join("data");
    // Without the indexes, and without the calls of them (which would not load).
    let without = ledger_copy(
        &dirs.path().join("v1"),
        |manifest| {
            let manifest = manifest.as_object_mut().expect("an object");
            manifest.remove("indexes");
            let routes = manifest["routes"].as_object_mut().expect("routes");
            routes.remove("GET /accounts");
            routes.remove("GET /accounts/{id:int}/transfers");
        },
        |script| {
            let unindexed = script
                .replace("accounts.by_owner.find(request.query.owner, 1000)", "[]")
                .replace("transfers.by_from.find_rev(id, limit)", "[]")
                .replace("transfers.by_to.find_rev(id, limit)", "[]");
            assert_ne!(unindexed, script, "the ledger's index calls were found");
            unindexed
        },
    );
    let with = ledger_copy(&dirs.path().join("v2"), |_| {}, |script| script);
    let owners: Vec<String> = ["ann", "bob", "cy dee"].map(String::from).to_vec();

    // Version 1 has no indexes: accounts and transfers are only rows.
    let server = Launch::new(&without, &data).start();
    let mut client = server.client();
    let accounts = 9;
    for id in 0..accounts {
        let owner = &owners[id as usize % owners.len()];
        let opened = client.post("/accounts", &json!({"owner": owner, "deposit": 500}));
        assert_eq!(opened.status, 201, "{}", opened.text());
    }
    let transfer = |client: &mut Client, rng: &mut StdRng| {
        let from = rng.random_range(1..=accounts);
        let to = from % accounts + 1;
        let amount = rng.random_range(1..=100);
        let answer = client.post(
            "/transfers",
            &json!({"from": from, "to": to, "amount": amount}),
        );
        assert!([201, 409].contains(&answer.status), "{}", answer.text());
    };
    for _ in 0..60 {
        transfer(&mut client, &mut rng);
    }
    // Only POST /accounts exists yet.
    assert_eq!(client.get("/accounts?owner=ann").status, 405);
    server.stop();

    // Version 2 declares them: built from the rows at start, with a line each.
    let server = Launch::new(&with, &data).start();
    let mut client = server.client();
    let (by_index, by_rows) = index_answers(&mut client, &owners, accounts);
    assert_eq!(by_index, by_rows);
    assert!(by_index[0].as_array().is_some_and(|a| a.len() == 3));
    server.wait_for_stderr("index by_owner on accounts(owner): 9 entries");

    // Kept by the writes that follow, and rebuilt after kill -9.
    for _ in 0..60 {
        transfer(&mut client, &mut rng);
    }
    let opened = client.post("/accounts", &json!({"owner": "bob", "deposit": 1}));
    assert_eq!(opened.status, 201);
    let accounts = accounts + 1;
    let (by_index, by_rows) = index_answers(&mut client, &owners, accounts);
    assert_eq!(by_index, by_rows);
    server.signal(libc::SIGKILL);
    drop(server);
    let server = Launch::new(&with, &data).start();
    let mut client = server.client();
    let after = index_answers(&mut client, &owners, accounts);
    assert_eq!(after, (by_index.clone(), by_index));
    server.stop();

    // A redeploy without them forgets them: nothing of them was ever stored.
    let server = Launch::new(&without, &data).start();
    assert!(!server.stderr_text().contains("index by_owner"));
    let mut client = server.client();
    assert_eq!(client.get("/accounts/10").json()["owner"], json!("bob"));
    server.stop();
}
