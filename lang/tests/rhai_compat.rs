//! Rhai's functions that Pure registers again behind the depth rule (`to_json`, `parse_json`)
//! give exactly what Rhai's own give for values within the rule, and refusing `curry`'s calls
//! leaves the word free. (Found by review: the first override of `to_json` wrote Rust's debug
//! text, not JSON, and disabling the symbol `curry` reserved the word everywhere.)

use pure_lang::{App, Limits, Request, Tables, WriteSet};
use serde_json::Value;

const MANIFEST: &str = r#"{ "name": "n", "routes": {}, "tables": { "t": ["v"] } }"#;

/// A Rhai engine as Rhai's packages make it, with lang's Rhai features (`metadata` among
/// them): the reference for what a script's `to_json` gave before the override.
fn rhai_eval(expr: &str) -> String {
    let engine = rhai::Engine::new();
    engine
        .eval::<String>(expr)
        .unwrap_or_else(|e| panic!("rhai: {expr}: {e}"))
}

/// The same expression in a Pure handler.
fn pure_eval(expr: &str) -> String {
    let script = format!("fn h(req) {{ {expr} }}");
    let files = vec![("a.rhai".to_string(), script)];
    let app = App::from_sources(MANIFEST, files, Limits::default()).expect("loads");
    let mut tables = Tables::new(app.schema().tables.len());
    let mut writes = WriteSet::default();
    let answer = app
        .run_write("h", &Request::default(), &mut tables, &mut writes)
        .unwrap_or_else(|e| panic!("pure: {expr}: {e}"));
    match answer.body.to_value() {
        Value::String(s) => s,
        other => panic!("pure: {expr}: not a string: {other}"),
    }
}

/// With the `metadata` feature lang builds Rhai with, Rhai's `to_json` is serde_json's text of
/// the map. (`rhai::format_map_as_json`, used at first, writes strings and keys with Rust's
/// `Debug` (`"\u{1}"`, not JSON), NaN and infinities as `NaN` and `inf`, a char as `'x'`.)
#[test]
fn to_json_of_a_map_within_the_rule_is_what_rhai_gives() {
    let cases = [
        r#"#{a: 1, b: "x", c: (), d: true}.to_json()"#,
        r#"#{f: 1.0, g: 0.1, h: 1e20, i: -2.5e-8}.to_json()"#,
        r#"#{a: [1, [2, ()], #{b: 1.5}]}.to_json()"#,
        r#"#{s: "quote \" backslash \\ tab \t newline \n"}.to_json()"#,
        "#{s: \"control \\x01 and del \\x7f\"}.to_json()",
        r#"#{"odd\u0002key": 1}.to_json()"#,
        r#"#{c: 'x'}.to_json()"#,
        r#"#{n: 0.0 / 0.0, i: 1.0 / 0.0}.to_json()"#,
    ];
    let mut differ = Vec::new();
    for case in cases {
        let (rhai, pure) = (rhai_eval(case), pure_eval(case));
        if rhai != pure {
            differ.push(format!("{case}\n    rhai: {rhai}\n    pure: {pure}"));
        }
    }
    assert!(differ.is_empty(), "to_json differs:\n{}", differ.join("\n"));
}

/// What `to_json` gives is JSON (a script's own `parse_json` of it works).
#[test]
fn to_json_of_a_string_with_a_control_character_is_json() {
    let text = pure_eval("#{s: \"a\\x01b\"}.to_json()");
    assert!(
        serde_json::from_str::<Value>(&text).is_ok(),
        "not JSON: {text}"
    );
}

/// `parse_json`: Pure reads the text with serde_json into a `Value` (after counting its depth),
/// then makes it a script value; Rhai's read it into a Dynamic directly. The values and their
/// types agree.
#[test]
fn parse_json_gives_what_rhai_gives() {
    let cases = [
        r#"{"a": 1, "b": 1.0, "c": 1e3, "d": -0.0, "e": 9223372036854775807}"#,
        r#"{"big": 9223372036854775808, "bigger": 18446744073709551616, "neg": -9223372036854775809}"#,
        r#"{"s": "\u00e9\n\"", "n": null, "t": true, "l": [1, [2.5, null], {"x": "y"}]}"#,
        r#"{"f": 0.30000000000000004, "g": 1.7976931348623157e308, "h": 5e-324}"#,
    ];
    let mut differ = Vec::new();
    for case in cases {
        let expr = format!(
            "let v = parse_json({case:?}); let out = \"\"; \
             for k in v.keys() {{ out += `${{k}}:${{type_of(v[k])}}:${{v[k]}};`; }} out"
        );
        let (rhai, pure) = (rhai_eval(&expr), pure_eval(&expr));
        if rhai != pure {
            differ.push(format!("{case}\n    rhai: {rhai}\n    pure: {pure}"));
        }
    }
    assert!(
        differ.is_empty(),
        "parse_json differs:\n{}",
        differ.join("\n")
    );
}

/// Only `curry`'s calls are refused: a field or a key named so compiles wherever Rhai itself
/// allows one (Rhai reserves the word as a variable, a bare property or a bare map key:
/// `req.body["curry"]` and `#{"curry": 1}` are how a script names it).
#[test]
fn a_field_named_curry_still_compiles() {
    let mut failed = Vec::new();
    for script in [
        "fn h(req) { req.body[\"curry\"] }",
        "fn h(req) { let m = #{\"curry\": 1}; m[\"curry\"] }",
    ] {
        let files = vec![("a.rhai".to_string(), script.to_string())];
        if let Err(e) = App::from_sources(MANIFEST, files, Limits::default()) {
            failed.push(format!("{script}: {e}"));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

/// Nor can a script reach `curry` by name through a function pointer.
#[test]
fn curry_cannot_be_reached_through_a_function_pointer() {
    let script = "fn g(a, b) { a }\n\
        fn h(req) { let c = Fn(\"curry\"); let f = c.call(Fn(\"g\"), 5); type_of(f) }";
    let files = vec![("a.rhai".to_string(), script.to_string())];
    let Ok(app) = App::from_sources(MANIFEST, files, Limits::default()) else {
        return;
    };
    let mut tables = Tables::new(app.schema().tables.len());
    let mut writes = WriteSet::default();
    let answer = app.run_write("h", &Request::default(), &mut tables, &mut writes);
    assert!(answer.is_err(), "curry reached: {answer:?}");
}
