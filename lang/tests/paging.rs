//! Pages with cursors: `scan_page`, `scan_rev_page` on tables and indexes, and `find_page`,
//! `find_rev_page` on indexes give `#{ rows, next }`; following `next` until it is `()` visits
//! exactly the rows the unpaged call gives, in its order, in both engines; a cursor never leads
//! outside the bounds the handler gives, and one that no page gave is a 400.

use pure_lang::{App, Execution, HandlerError, Limits, Request, Tables, WriteSet};
use serde_json::{json, Value};

const MANIFEST: &str = r#"{"name": "p", "tables": {"items": ["group", "n"]},
    "indexes": {"by_group": {"table": "items", "fields": ["group"]}}, "routes": {}}"#;

/// Each `*_pages` handler follows `next` to the end and answers the keys seen and the pages
/// taken; each `*_all` answers the same rows unpaged.
const SCRIPT: &str = r#"
fn fill(request) {
    for i in 0..25 { items.put(i * 2, #{ group: i % 3, n: i }); }
}
fn keys_of(rows) { let keys = []; for row in rows { keys.push(row.key); } keys }
fn table_pages(request) {
    let b = request.body;
    let keys = [];
    let after = ();
    let pages = 0;
    loop {
        let page = if b.reverse { items.scan_rev_page(b.low, b.high, b.limit, after) }
                   else { items.scan_page(b.low, b.high, b.limit, after) };
        for row in page.rows { keys.push(row.key); }
        pages += 1;
        if page.next == () { break; }
        after = page.next;
    }
    #{ keys: keys, pages: pages }
}
fn table_all(request) {
    let b = request.body;
    keys_of(if b.reverse { items.scan_rev(b.low, b.high, 10000) } else { items.scan(b.low, b.high, 10000) })
}
fn find_pages(request) {
    let b = request.body;
    let keys = [];
    let after = ();
    let pages = 0;
    loop {
        let page = if b.reverse { items.by_group.find_rev_page(b.group, b.limit, after) }
                   else { items.by_group.find_page(b.group, b.limit, after) };
        for row in page.rows { keys.push(row.key); }
        pages += 1;
        if page.next == () { break; }
        after = page.next;
    }
    #{ keys: keys, pages: pages }
}
fn find_all(request) {
    let b = request.body;
    keys_of(if b.reverse { items.by_group.find_rev(b.group, 10000) } else { items.by_group.find(b.group, 10000) })
}
fn index_pages(request) {
    let b = request.body;
    let keys = [];
    let after = ();
    let pages = 0;
    loop {
        let page = if b.reverse { items.by_group.scan_rev_page(b.low, b.high, b.limit, after) }
                   else { items.by_group.scan_page(b.low, b.high, b.limit, after) };
        for row in page.rows { keys.push(row.key); }
        pages += 1;
        if page.next == () { break; }
        after = page.next;
    }
    #{ keys: keys, pages: pages }
}
fn index_all(request) {
    let b = request.body;
    keys_of(if b.reverse { items.by_group.scan_rev(b.low, b.high, 10000) } else { items.by_group.scan(b.low, b.high, 10000) })
}
fn one_page(request) {
    let b = request.body;
    let page = items.scan_page(b.low, b.high, b.limit, b.after);
    #{ keys: keys_of(page.rows), next: page.next }
}
"#;

fn run(app: &App, tables: &mut Tables, handler: &str, body: Value) -> Result<Value, HandlerError> {
    let request = Request {
        body: pure_lang::to_dynamic(&body),
        ..Request::default()
    };
    let mut writes = WriteSet::default();
    app.run_write(handler, &request, tables, &mut writes)
        .map(|answer| serde_json::from_str(&answer.body.to_string()).expect("JSON"))
}

fn loaded(interpreted: bool) -> (App, Tables) {
    let mut app = App::from_sources(
        MANIFEST,
        vec![("p.rhai".into(), SCRIPT.into())],
        Limits::default(),
    )
    .expect("loads");
    app.set_interpreted(interpreted);
    let mut tables = Tables::new(1);
    tables.set_indexes(app.indexes().to_vec()).expect("indexes");
    run(&app, &mut tables, "fill", json!(null)).expect("fills");
    (app, tables)
}

#[test]
fn the_paging_handlers_are_compiled() {
    let (app, _) = loaded(false);
    for handler in ["table_pages", "find_pages", "index_pages", "one_page"] {
        assert_eq!(
            app.execution(handler),
            Some(Execution::Compiled),
            "{handler}"
        );
    }
}

#[test]
fn following_next_visits_exactly_the_unpaged_rows() {
    for interpreted in [false, true] {
        let (app, mut tables) = loaded(interpreted);
        let mode = if interpreted { "in Rhai" } else { "compiled" };
        for reverse in [false, true] {
            for limit in [1, 4, 7, 25, 26, 100] {
                for (low, high) in [
                    (json!(null), json!(null)),
                    (json!(6), json!(31)),
                    (json!(7), json!(8)),
                    (json!(1), json!(2)),
                ] {
                    let body =
                        json!({"low": low, "high": high, "limit": limit, "reverse": reverse});
                    let paged = run(&app, &mut tables, "table_pages", body.clone()).expect("pages");
                    let all = run(&app, &mut tables, "table_all", body.clone()).expect("all");
                    assert_eq!(paged["keys"], all, "{mode}: {body}");
                    let count = all.as_array().expect("keys").len();
                    // One page more than full pages only when the rows fill the last exactly.
                    let pages = paged["pages"].as_u64().expect("pages") as usize;
                    // A full last page knows it is the last: no empty page after it.
                    assert_eq!(pages, count.div_ceil(limit).max(1), "{mode}: {body}");
                    let paged = run(&app, &mut tables, "index_pages", body.clone()).expect("pages");
                    let all = run(&app, &mut tables, "index_all", body.clone()).expect("all");
                    assert_eq!(paged["keys"], all, "{mode}: index {body}");
                }
                for group in [0, 1, 2, 3] {
                    let body = json!({"group": group, "limit": limit, "reverse": reverse});
                    let paged = run(&app, &mut tables, "find_pages", body.clone()).expect("pages");
                    let all = run(&app, &mut tables, "find_all", body.clone()).expect("all");
                    assert_eq!(paged["keys"], all, "{mode}: {body}");
                }
            }
        }
    }
}

#[test]
fn a_cursor_stays_inside_the_bounds_and_a_made_up_one_is_a_400() {
    for interpreted in [false, true] {
        let (app, mut tables) = loaded(interpreted);
        let page = |tables: &mut Tables, low: Value, high: Value, after: Value| {
            run(
                &app,
                tables,
                "one_page",
                json!({"low": low, "high": high, "limit": 3, "after": after}),
            )
        };
        let first = page(&mut tables, json!(10), json!(30), json!(null)).expect("a page");
        assert_eq!(first["keys"], json!([10, 12, 14]));
        let next = first["next"].clone();
        assert!(next.is_string(), "{first}");
        // The cursor of key 14 within other bounds: only what those bounds hold, after 14.
        let narrower = page(&mut tables, json!(20), json!(24), next.clone()).expect("a page");
        assert_eq!(narrower["keys"], json!([20, 22]));
        assert_eq!(narrower["next"], Value::Null);
        let past = page(&mut tables, json!(0), json!(12), next.clone()).expect("a page");
        assert_eq!(past["keys"], json!([]));
        for bad in [json!("zz"), json!("0"), json!(5), json!("ff")] {
            match page(&mut tables, json!(null), json!(null), bad.clone()) {
                Err(HandlerError::Thrown { status: 400, body }) => assert!(
                    body["error"].as_str().unwrap_or("").contains("page cursor"),
                    "{body}"
                ),
                other => panic!("{bad}: expected a 400, got {other:?}"),
            }
        }
        // A limit of 0 is refused: a page must move on.
        let zero = run(
            &app,
            &mut tables,
            "one_page",
            json!({"low": null, "high": null, "limit": 0, "after": null}),
        );
        assert!(matches!(zero, Err(HandlerError::Script { .. })), "{zero:?}");
    }
}
