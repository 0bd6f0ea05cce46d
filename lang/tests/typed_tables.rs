//! Typed tables: a table declared as an object of field names and types keeps its fields in the
//! order written, refuses a write of the wrong type (or one that leaves a required field unset)
//! with a script error naming the table, the field and the value, in Rhai's evaluator and in the
//! compiled path alike, and lets an optional field be unset. Mistakes in the declaration stop the
//! app from loading.

use pure_lang::{App, FieldKind, HandlerError, Limits, LoadError, Request, Tables, WriteSet};
use serde_json::{json, Value};

/// Fields written out of alphabetical order: slots follow the text.
const MANIFEST: &str = r#"{ "name": "typed", "routes": {}, "tables": {
    "orders": { "o_c_id": "int!", "o_entry_d": "int!", "o_carrier_id": "int", "note": "string",
                "tags": "array", "extra": "any", "price": { "type": "float", "required": true } },
    "plain": ["a", "b"]
} }"#;

const SCRIPT: &str = r#"
fn positional(req) { orders.insert(1, [7, 100, (), "n", [1], #{}, 2.5]); orders.get(1).to_map() }
fn by_name(req) { orders.put(2, req.body); orders.get(2).to_map() }
fn set_field(req) {
    orders.put(3, #{ o_c_id: 1, o_entry_d: 2, price: 1.0 });
    let r = orders.get(3);
    r[req.body.field] = req.body.value;
    r.save();
    orders.get(3).to_map()
}
fn set_carrier(req) {
    orders.put(4, #{ o_c_id: 1, o_entry_d: 2, price: 1.0 });
    let r = orders.get(4);
    r.o_carrier_id = req.body.value;
    r.save();
    r.o_carrier_id
}
fn all_prices(req) { orders.put_all(req.body, "price"); orders.count() }
fn untyped(req) { plain.put(1, #{ a: "x", b: 1.5 }); plain.get(1).to_map() }
"#;

fn app(interpreted: bool) -> App {
    let mut app = App::from_sources(
        MANIFEST,
        vec![("t.rhai".into(), SCRIPT.to_string())],
        Limits::default(),
    )
    .expect("loads");
    app.set_interpreted(interpreted);
    app
}

/// The handler's answer, or its error's message; the same in Rhai and compiled.
fn call(handler: &str, body: Value) -> Result<Value, String> {
    let results: Vec<Result<Value, String>> = [false, true]
        .into_iter()
        .map(|interpreted| {
            let app = app(interpreted);
            let mut tables = Tables::new(app.schema().tables.len());
            let mut writes = WriteSet::default();
            let request = Request {
                body: pure_lang::to_dynamic(&body),
                ..Request::default()
            };
            app.run_write(handler, &request, &mut tables, &mut writes)
                .map(|answer| answer.body.to_value())
                .map_err(|e| match e {
                    HandlerError::Script { message, .. } => message,
                    other => format!("{other:?}"),
                })
        })
        .collect();
    assert_eq!(
        results[0], results[1],
        "compiled and Rhai agree: {handler} {body}"
    );
    results[0].clone()
}

#[test]
fn an_object_declares_fields_in_the_order_written_with_their_types() {
    let app = app(false);
    let orders = &app.schema().tables[app.schema().table_id("orders").unwrap() as usize];
    assert_eq!(
        orders.fields,
        [
            "o_c_id",
            "o_entry_d",
            "o_carrier_id",
            "note",
            "tags",
            "extra",
            "price"
        ]
    );
    let kinds: Vec<(FieldKind, bool)> = orders.types.iter().map(|t| (t.kind, t.required)).collect();
    assert_eq!(
        kinds,
        [
            (FieldKind::Int, true),
            (FieldKind::Int, true),
            (FieldKind::Int, false),
            (FieldKind::String, false),
            (FieldKind::Array, false),
            (FieldKind::Any, false),
            (FieldKind::Float, true),
        ]
    );
    // A positional row lands in that order.
    assert_eq!(
        call("positional", Value::Null),
        Ok(
            json!({"o_c_id": 7, "o_entry_d": 100, "o_carrier_id": null, "note": "n",
                  "tags": [1], "extra": {}, "price": 2.5})
        )
    );
    // A list still declares fields of any type.
    assert_eq!(
        call("untyped", Value::Null),
        Ok(json!({"a": "x", "b": 1.5}))
    );
}

#[test]
fn a_write_of_the_wrong_type_names_table_field_and_value() {
    let good = json!({"o_c_id": 1, "o_entry_d": 2, "price": 0.5});
    assert!(call("by_name", good.clone()).is_ok());
    let cases = [
        (
            json!({"o_c_id": "12", "o_entry_d": 2, "price": 0.5}),
            r#"table orders: o_c_id is declared a required int, not a string ("12")"#,
        ),
        (
            json!({"o_entry_d": 2, "price": 0.5}),
            "table orders: o_c_id is declared a required int, not ()",
        ),
        (
            json!({"o_c_id": 1, "o_entry_d": 2, "price": 1}),
            "table orders: price is declared a required float, not an int 1",
        ),
        (
            json!({"o_c_id": 1, "o_entry_d": 2, "price": 0.5, "tags": {"a": 1}}),
            "table orders: tags is declared an array, not a map of 1 entries",
        ),
        (
            json!({"o_c_id": 1, "o_entry_d": 2, "price": 0.5, "note": true}),
            "table orders: note is declared a string, not a bool true",
        ),
    ];
    for (body, says) in cases {
        let refused = call("by_name", body.clone()).expect_err("refused");
        assert!(refused.contains(says), "{body}: {refused}");
    }
    // A field set on a row, by name or by index, is checked when it is set.
    let refused =
        call("set_field", json!({"field": "o_entry_d", "value": 2.5})).expect_err("refused");
    assert!(
        refused.contains("table orders: o_entry_d is declared a required int, not a float 2.5"),
        "{refused}"
    );
    let refused =
        call("set_field", json!({"field": "o_c_id", "value": null})).expect_err("refused");
    assert!(refused.contains("not ()"), "{refused}");
    assert!(call("set_field", json!({"field": "extra", "value": [1, "x"]})).is_ok());
    // An optional field may be unset, or hold its type.
    assert_eq!(call("set_carrier", json!({"value": null})), Ok(Value::Null));
    assert_eq!(call("set_carrier", json!({"value": 3})), Ok(json!(3)));
    assert!(call("set_carrier", json!({"value": "3"})).is_err());
    // put_all with a field leaves the others unset: required ones refuse it.
    let refused = call("all_prices", json!({"a": 1.5})).expect_err("refused");
    assert!(
        refused.contains("o_c_id is declared a required int"),
        "{refused}"
    );
}

#[test]
fn mistakes_in_a_typed_declaration_stop_the_load() {
    for (tables, says) in [
        (r#"{"t": {"a": "integer"}}"#, r#"unknown type "integer""#),
        (r#"{"t": {"a": "any!"}}"#, r#""any" cannot be required"#),
        (r#"{"t": {"a": 3}}"#, "a type is a name"),
        (
            r#"{"t": {"a": {"type": "int", "optional": true}}}"#,
            r#"unknown key "optional""#,
        ),
        (
            r#"{"t": {"a": {"type": "int", "required": "yes"}}}"#,
            "must be true or false",
        ),
        (r#"{"t": {"key": "int"}}"#, "other than \"key\""),
    ] {
        let manifest = format!(r#"{{ "name": "m", "routes": {{}}, "tables": {tables} }}"#);
        let refused = App::from_sources(&manifest, vec![], Limits::default())
            .err()
            .unwrap_or_else(|| panic!("{tables} loads"));
        let message = match &refused {
            LoadError::Manifest { message, .. } => message.clone(),
            other => format!("{other:?}"),
        };
        assert!(message.contains(says), "{tables}: {message}");
    }
}

/// A field that a row's table does not declare, read or written on a local that holds the row
/// (or on `t.get(k)` itself), stops the load with its position, where it used to fail each call
/// that reached it. Locals the check cannot be sure of are left to run time.
#[test]
fn a_field_its_rows_table_does_not_declare_stops_the_load() {
    let manifest = r#"{ "name": "m", "routes": {}, "tables": { "items": ["name", "price"] } }"#;
    let load = |script: &str| {
        App::from_sources(
            manifest,
            vec![("a.rhai".into(), script.into())],
            Limits::default(),
        )
    };
    for (script, says) in [
        (
            "fn f(r) {\n let i = items.get(1);\n i.nme }",
            r#"a.rhai:3:4: i is a row of table items, which has no field "nme": did you mean "name"? (declared: name, price)"#,
        ),
        (
            "fn f(r) { let i = items.get(1); i.colour = 1; i.save() }",
            r#"no field "colour""#,
        ),
        (
            "fn f(r) { for i in items.scan(0, 9, 9) { print(i.prise); } }",
            r#"did you mean "price"?"#,
        ),
        (
            "fn f(r) { let i = items.first(0, 9); i.x.len() }",
            r#"no field "x""#,
        ),
        (
            "fn f(r) { items.get(1).nam }",
            r#"items.get(..) is a row of table items, which has no field "nam""#,
        ),
    ] {
        let refused = load(script)
            .err()
            .unwrap_or_else(|| panic!("{script} loads"));
        assert!(refused.to_string().contains(says), "{script}: {refused}");
    }
    // Not decided at load: a local assigned again or declared twice, a table's name used as a
    // local; `key` and declared fields are rows' own.
    for script in [
        "fn f(r) { let i = items.get(1); i = #{ nme: 1 }; i.nme }",
        "fn f(r) { let i = items.get(1); if true { let i = #{ nme: 1 }; i.nme } }",
        "fn f(items) { let i = items.get(1); i.nme }",
        "fn f(r) { let i = items.get(1); i.key }",
        "fn f(r) { let i = items.get(1); i.name + i.price + items.get(2).price }",
    ] {
        assert!(load(script).is_ok(), "{script}: {:?}", load(script).err());
    }
}
