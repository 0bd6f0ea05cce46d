//! What a handler may store: values nested deeper than the decoder of records, images and packed
//! rows follows are refused when stored (a script error naming the limit), never stored and then
//! unreadable.

use pure_lang::{App, HandlerError, Limits, Request, Tables, WriteSet};

const MANIFEST: &str = r#"{ "name": "r", "routes": {}, "tables": { "t": ["v", "w"] } }"#;

fn script(depth: usize) -> String {
    format!(
        r#"
fn deep(req) {{
    let a = [];
    for i in 0..{depth} {{ a = [a]; }}
    t.insert(1, #{{ v: a, w: 1 }});
    let r = t.get(1);
    let x = r.v;
    r.w = 2;
    r.save();
    t.get(1).w
}}
"#
    )
}

fn run(depth: usize) -> Result<serde_json::Value, HandlerError> {
    let app = App::from_sources(
        MANIFEST,
        vec![("a.rhai".into(), script(depth))],
        Limits::default(),
    )
    .expect("compiles");
    let mut tables = Tables::new(app.schema().tables.len());
    let mut writes = WriteSet::default();
    app.run_write("deep", &Request::default(), &mut tables, &mut writes)
        .map(|answer| answer.body.to_value())
}

#[test]
fn a_value_nested_within_the_limit_is_stored_and_read_back() {
    // 127 wraps of an empty array: 128 arrays, the most the decoder follows.
    assert_eq!(
        run(127).expect("stored and read back"),
        serde_json::json!(2)
    );
}

#[test]
fn a_value_nested_past_the_limit_is_refused_when_stored() {
    match run(200) {
        Err(HandlerError::Script { message, .. }) => {
            assert!(message.contains("nest"), "{message}");
        }
        other => panic!("expected a script error naming the nesting limit, got {other:?}"),
    }
}
