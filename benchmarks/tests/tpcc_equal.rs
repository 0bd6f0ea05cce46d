//! `pure-bench tpcc-equal`: one stream through Pure (over HTTP), SQLite and grouped SQLite
//! leaves equal answers, equal tables and every consistency condition holding; and a mutated
//! app, whose bug the equality run exists to catch, makes it fail.

mod common;

use std::path::Path;
use std::process::{Command, Output};

use common::{app_dir, mutated, pure_serve_built, text, BIN};

fn equal(app: &Path, transactions: u64, dir: &Path) -> Output {
    Command::new(BIN)
        .arg("tpcc-equal")
        .arg("--app")
        .arg(app)
        .arg("--dir")
        .arg(dir)
        .args(["--warehouses", "1", "--seed", "7"])
        .args(["--transactions", &transactions.to_string()])
        .output()
        .expect("run pure-bench")
}

#[test]
fn two_thousand_transactions_leave_every_engine_equal_and_consistent() {
    if !pure_serve_built() {
        return;
    }
    let scratch = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("scratch dir");
    let output = equal(&app_dir(), 2_000, &scratch.path().join("run"));
    let all = text(&output);
    assert!(output.status.success(), "{all}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("equal: 2000 transactions at W=1"), "{all}");
    assert!(stdout.contains("consistency: all"), "{all}");
    assert!(stdout.contains("round trip: Pure's export"), "{all}");
    // Every type ran, and the 1% of New-Orders that roll back did.
    for kind in [
        "new_order",
        "payment",
        "order_status",
        "delivery",
        "stock_level",
    ] {
        let line = stdout
            .lines()
            .find(|l| l.starts_with(kind))
            .unwrap_or_else(|| panic!("no {kind} count in:\n{all}"));
        let count: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
        assert!(count > 0, "{line}");
    }
    let new_orders = stdout.lines().find(|l| l.starts_with("new_order")).unwrap();
    let rollbacks: u64 = new_orders
        .split_whitespace()
        .nth(2)
        .unwrap()
        .parse()
        .unwrap();
    assert!(rollbacks > 0, "no New-Order rolled back: {new_orders}");
}

#[test]
fn a_payment_that_takes_a_cent_too_little_is_caught() {
    if !pure_serve_built() {
        return;
    }
    let scratch = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("scratch dir");
    let app = mutated(
        scratch.path(),
        "customer_row.c_balance -= h_amount;",
        "customer_row.c_balance -= h_amount - 1;",
    );
    let output = equal(&app, 300, &scratch.path().join("run"));
    let all = text(&output);
    assert!(
        !output.status.success(),
        "the mutation went unnoticed:\n{all}"
    );
    assert!(
        all.contains("answered differently") && all.contains("c_balance"),
        "{all}"
    );
}

#[test]
fn a_new_order_rollback_that_keeps_its_order_is_caught() {
    if !pure_serve_built() {
        return;
    }
    let scratch = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("scratch dir");
    // Answering the rollback instead of throwing it keeps what the handler wrote before: the
    // d_next_o_id increment, the order and its earlier lines.
    let app = mutated(
        scratch.path(),
        "            throw #{\n                status: 422,",
        "            return #{\n                status: 422,",
    );
    let output = equal(&app, 2_000, &scratch.path().join("run"));
    let all = text(&output);
    assert!(
        !output.status.success(),
        "the mutation went unnoticed:\n{all}"
    );
    assert!(all.contains("answered differently"), "{all}");
}
