//! A read's read set (`App::run_read_noting`): the tables a read handler read, by every way of
//! reading one (get, exists, a stored field in place, scans, pages, count, an index's find, get,
//! page and count), and only those, in both engines. A live query runs again only when a group
//! writes one of them, so a table missing from the set would be a change never shown.

use std::sync::Arc;

use pure_lang::{App, Execution, Limits, Request, TableSet, Tables, WriteSet};
use serde_json::{json, Value};

const MANIFEST: &str = r#"{"name": "r", "routes": {},
    "tables": {"a": ["n", "on"], "b": ["n"], "c": ["group"], "d": ["n"]},
    "indexes": {"by_group": {"table": "c", "fields": ["group"]},
                "group_one": {"table": "c", "fields": ["group"], "unique": true}}}"#;

const SCRIPT: &str = r#"
fn fill(request) {
    a.put(1, #{ n: 1, on: true });
    a.put(2, #{ n: 2, on: false });
    b.put(1, #{ n: 10 });
    c.put(1, #{ group: 7 });
    d.put(1, #{ n: 5 });
}
fn none(request) { 42 }
fn get_a(request) { a.get(1) }
fn field_a(request) { a.get(1).n + 1 }
fn exists_a(request) { a.exists(9) }
fn scan_b(request) { let n = 0; for row in b.scan((), (), 10) { n += row.n; } n }
fn first_b(request) { b.first((), ()) }
fn page_b(request) { b.scan_page((), (), 5, ()).rows.len() }
fn count_d(request) { d.count() }
fn find_c(request) { c.by_group.find([7], 10).len() }
fn index_get_c(request) { c.group_one.get([7]) }
fn index_count_c(request) { c.by_group.count() }
fn index_page_c(request) { c.by_group.find_page([7], 5, ()).rows.len() }
// Which table it reads next depends on the data: the set holds what this run read.
fn depends(request) {
    let row = a.get(request.body);
    if row.on { b.get(1) } else { d.get(1) }
}
fn thrown(request) { let x = d.get(1); throw #{ status: 404, error: "no" }; }
"#;

fn request(body: Value) -> Request {
    Request {
        body: pure_lang::to_dynamic(&body),
        ..Request::default()
    }
}

fn names(app: &App, set: &TableSet) -> Vec<String> {
    set.iter()
        .map(|t| app.schema().tables[t as usize].name.clone())
        .collect()
}

#[test]
fn a_read_notes_exactly_the_tables_it_read_in_both_engines() {
    let cases: &[(&str, Value, &[&str])] = &[
        ("none", json!(null), &[]),
        ("get_a", json!(null), &["a"]),
        ("field_a", json!(null), &["a"]),
        ("exists_a", json!(null), &["a"]),
        ("scan_b", json!(null), &["b"]),
        ("first_b", json!(null), &["b"]),
        ("page_b", json!(null), &["b"]),
        ("count_d", json!(null), &["d"]),
        ("find_c", json!(null), &["c"]),
        ("index_get_c", json!(null), &["c"]),
        ("index_count_c", json!(null), &["c"]),
        ("index_page_c", json!(null), &["c"]),
        ("depends", json!(1), &["a", "b"]),
        ("depends", json!(2), &["a", "d"]),
        ("thrown", json!(null), &["d"]),
    ];
    for interpreted in [false, true] {
        let mut app = App::from_sources(
            MANIFEST,
            vec![("r.rhai".into(), SCRIPT.into())],
            Limits::default(),
        )
        .expect("loads");
        assert_eq!(app.execution("depends"), Some(Execution::Compiled));
        app.set_interpreted(interpreted);
        let mut tables = Tables::new(app.schema().tables.len());
        tables.set_indexes(app.indexes().to_vec()).expect("indexes");
        app.run_write(
            "fill",
            &request(json!(null)),
            &mut tables,
            &mut WriteSet::default(),
        )
        .expect("fills");
        let snapshot = Arc::new(tables);
        for (handler, body, expected) in cases {
            let (answer, read) =
                app.run_read_noting(handler, &request(body.clone()), snapshot.clone());
            assert_eq!(
                answer.is_ok(),
                *handler != "thrown",
                "{handler} answers (interpreted: {interpreted})"
            );
            assert_eq!(
                names(&app, &read),
                *expected,
                "{handler}({body}) read (interpreted: {interpreted})"
            );
        }
    }
}
