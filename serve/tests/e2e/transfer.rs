//! `pure-serve import` and `pure-serve export`: rows from JSON Lines into a new data directory
//! that the server then serves, and a stopped server's rows back out, in key order and in the
//! format import reads; and everything either command refuses.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{json, Value};

use crate::harness::{binary, test_app_dir, Launch};

fn catalog() -> PathBuf {
    test_app_dir("catalog")
}

fn run(args: &[&str]) -> Output {
    Command::new(binary())
        .args(args)
        .output()
        .expect("run pure-serve")
}

fn path(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// `pure-serve import APP --data DATA FILES...` with a small log (tests start many stores).
fn import(app: &Path, data: &Path, files: &[PathBuf]) -> Output {
    let mut args = vec![
        "import".to_string(),
        path(app).to_string(),
        "--data".to_string(),
        path(data).to_string(),
        "--log-capacity".to_string(),
        (8 << 20).to_string(),
    ];
    args.extend(files.iter().map(|f| path(f).to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    run(&args)
}

fn export(app: &Path, data: &Path, out: &Path) -> Output {
    run(&[
        "export",
        path(app),
        "--data",
        path(data),
        "--out",
        path(out),
    ])
}

/// Writes `name` (a `<table>.jsonl`) into `dir` with `text`.
fn file(dir: &Path, name: &str, text: &str) -> PathBuf {
    let file = dir.join(name);
    std::fs::write(&file, text).expect("write an input file");
    file
}

/// Every file of a directory with its bytes, by name (empty for a missing directory).
fn files_of(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<_> = entries
        .map(|e| {
            let path = e.expect("entry").path();
            let name = path
                .file_name()
                .expect("name")
                .to_string_lossy()
                .into_owned();
            (name, std::fs::read(&path).expect("read"))
        })
        .collect();
    files.sort();
    files
}

fn text_of(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(name)).unwrap_or_else(|e| panic!("read {name}: {e}"))
}

/// The catalog's input: keys out of order, a blank line, every kind of value, null and
/// missing fields, -0 (the integer 0) and -0.0 (a float), integers past a double's precision.
fn catalog_files(dir: &Path) -> Vec<PathBuf> {
    vec![
        file(
            dir,
            "items.jsonl",
            concat!(
                r#"{"key": 3, "row": {"name": "three", "price": 0.1, "tags": ["a", ["b", 1]], "meta": {"z": 1, "a": {"n": null}}}}"#,
                "\n",
                r#"{"row": {"name": "minus one", "price": -0, "note": null}, "key": -1}"#,
                "\n\n",
                r#"{"key": 2, "row": {"price": 1e300, "name": "two \"quoted\" \u00e9 ☃"}}"#,
                "\r\n",
                r#"{"key": 10, "row": {"price": -0.0, "tags": [], "meta": {}, "note": true}}"#,
            ),
        ),
        file(
            dir,
            "users.jsonl",
            concat!(
                r#"{"key": "bob", "row": {"email": "bob@example.com", "age": -9223372036854775808}}"#,
                "\n",
                r#"{"key": "ann", "row": {"email": "ann@example.com", "age": 9007199254740993}}"#,
                "\n",
                r#"{"key": "", "row": {"age": 1.5}}"#,
                "\n",
                r#"{"key": "Zed", "row": {"email": null}}"#,
                "\n",
            ),
        ),
        file(
            dir,
            "lines.jsonl",
            concat!(
                r#"{"key": [1, "b"], "row": {"qty": 3}}"#,
                "\n",
                r#"{"key": [1, 2], "row": {"qty": 2, "amount": 20.25}}"#,
                "\n",
                r#"{"key": [1], "row": {"qty": 0}}"#,
                "\n",
                r#"{"key": [2, "a", -3, "d"], "row": {}}"#,
                "\n",
                r#"{"key": [1, 1], "row": {"qty": 1, "amount": 10}}"#,
                "\n",
            ),
        ),
        file(
            dir,
            "marks.jsonl",
            "{\"key\": [\"x\", 2], \"row\": {}}\n{\"key\": [\"x\", 1], \"row\": {}}\n",
        ),
    ]
}

/// What export writes for the catalog's input (plus items 5 and 6, which the test writes over
/// HTTP):
/// key order, every declared field in declared order, compact.
const ITEMS: &str = concat!(
    r#"{"key":-1,"row":{"name":"minus one","price":0,"tags":null,"meta":null,"note":null}}"#,
    "\n",
    "{\"key\":2,\"row\":{\"name\":\"two \\\"quoted\\\" \u{e9} \u{2603}\",\"price\":1e+300,\"tags\":null,\"meta\":null,\"note\":null}}",
    "\n",
    r#"{"key":3,"row":{"name":"three","price":0.1,"tags":["a",["b",1]],"meta":{"a":{"n":null},"z":1},"note":null}}"#,
    "\n",
    r#"{"key":5,"row":{"name":"five","price":2.5,"tags":[1,[2]],"meta":null,"note":null}}"#,
    "\n",
    r#"{"key":6,"row":{"name":null,"price":null,"tags":null,"meta":null,"note":"six"}}"#,
    "\n",
    r#"{"key":10,"row":{"name":null,"price":-0.0,"tags":[],"meta":{},"note":true}}"#,
    "\n",
);

const USERS: &str = concat!(
    r#"{"key":"","row":{"email":null,"age":1.5}}"#,
    "\n",
    r#"{"key":"Zed","row":{"email":null,"age":null}}"#,
    "\n",
    r#"{"key":"ann","row":{"email":"ann@example.com","age":9007199254740993}}"#,
    "\n",
    r#"{"key":"bob","row":{"email":"bob@example.com","age":-9223372036854775808}}"#,
    "\n",
);

const LINES: &str = concat!(
    r#"{"key":1,"row":{"qty":0,"amount":null}}"#,
    "\n",
    r#"{"key":[1,1],"row":{"qty":1,"amount":10}}"#,
    "\n",
    r#"{"key":[1,2],"row":{"qty":2,"amount":20.25}}"#,
    "\n",
    r#"{"key":[1,"b"],"row":{"qty":3,"amount":null}}"#,
    "\n",
    r#"{"key":[2,"a",-3,"d"],"row":{"qty":null,"amount":null}}"#,
    "\n",
);

const MARKS: &str = "{\"key\":[\"x\",1],\"row\":{}}\n{\"key\":[\"x\",2],\"row\":{}}\n";

/// Import into a fresh directory; the server opens it with exactly those rows, takes writes
/// (LSN 2 onward, in the log after the imported checkpoint, then in a checkpoint of its own)
/// and recovers them after restarts; export, once stopped, writes the imported rows and the
/// writes, in key order, in the format import reads.
#[test]
fn imported_rows_are_served_written_to_and_exported_in_key_order() {
    let input = tempfile::tempdir().expect("tempdir");
    let root = tempfile::tempdir().expect("tempdir");
    let data = root.path().join("data");
    let imported = import(&catalog(), &data, &catalog_files(input.path()));
    assert_eq!(imported.status.code(), Some(0), "{imported:?}");
    let summary = stdout(&imported);
    assert!(
        summary.contains("imported 15 rows")
            && summary.contains("items 4, lines 5, marks 2, users 4"),
        "{summary}"
    );

    let launch = Launch::new(&catalog(), &data);
    let server = launch.start();
    let mut client = server.client();
    let item = client.get("/items/3");
    assert_eq!(item.status, 200, "{}", item.text());
    assert_eq!(
        item.json(),
        json!({"key": 3, "row": {"name": "three", "price": 0.1, "tags": ["a", ["b", 1]],
               "meta": {"a": {"n": null}, "z": 1}, "note": null}})
    );
    let zero = client.get("/items/-1").json();
    assert!(zero["row"]["price"].is_i64(), "-0 is the integer 0: {zero}");
    let ann = client.get("/users/ann").json();
    assert_eq!(
        ann["row"]["age"].as_i64(),
        Some(9_007_199_254_740_993),
        "{ann}"
    );
    assert_eq!(
        client.get("/lines/1/2").json(),
        json!({"key": [1, 2], "row": {"qty": 2, "amount": 20.25}})
    );
    assert_eq!(
        client.get("/counts").json(),
        json!({"items": 4, "users": 4, "lines": 5, "marks": 2})
    );
    let put = client.post(
        "/items/5",
        &json!({"name": "five", "price": 2.5, "tags": [1, [2]]}),
    );
    assert_eq!(put.status, 200, "{}", put.text());
    server.stop();

    // The write is in the log after the imported checkpoint, and recovers from there. The
    // next one is followed by a checkpoint (which a stop waits for), which replaces the
    // imported one; the state recovers from it.
    let again = Launch::new(&catalog(), &data)
        .flag("--checkpoint-interval", "1")
        .start();
    let mut client = again.client();
    assert_eq!(client.get("/items/5").json()["row"]["name"], "five");
    assert_eq!(client.get("/counts").json()["items"], 5);
    let put = client.post("/items/6", &json!({"note": "six"}));
    assert_eq!(put.status, 200, "{}", put.text());
    again.stop();
    let checkpoints: Vec<String> = files_of(&data)
        .into_iter()
        .map(|(name, _)| name)
        .filter(|name| name.starts_with("checkpoint-"))
        .collect();
    assert!(
        checkpoints.len() == 1 && checkpoints[0] != "checkpoint-00000000000000000001.ckpt",
        "a checkpoint after the import's replaced it: {checkpoints:?}"
    );
    let third = launch.start();
    let mut client = third.client();
    assert_eq!(client.get("/items/6").json()["row"]["note"], "six");
    assert_eq!(client.get("/counts").json()["items"], 6);
    third.stop();

    let out = root.path().join("out");
    let exported = export(&catalog(), &data, &out);
    assert_eq!(exported.status.code(), Some(0), "{exported:?}");
    assert!(
        stdout(&exported).contains("exported 17 rows"),
        "{exported:?}"
    );
    assert_eq!(text_of(&out, "items.jsonl"), ITEMS);
    assert_eq!(text_of(&out, "users.jsonl"), USERS);
    assert_eq!(text_of(&out, "lines.jsonl"), LINES);
    assert_eq!(text_of(&out, "marks.jsonl"), MARKS);
    let names: Vec<String> = files_of(&out).into_iter().map(|(name, _)| name).collect();
    assert_eq!(
        names,
        ["items.jsonl", "lines.jsonl", "marks.jsonl", "users.jsonl"]
    );
}

/// Export, import those files into a new directory, export again: the same bytes.
#[test]
fn export_import_export_gives_the_same_bytes() {
    let input = tempfile::tempdir().expect("tempdir");
    let root = tempfile::tempdir().expect("tempdir");
    let first = root.path().join("first");
    assert_eq!(
        import(&catalog(), &first, &catalog_files(input.path()))
            .status
            .code(),
        Some(0)
    );
    // Some rows written by a handler too, and floats of every magnitude (exact round trip).
    let server = Launch::new(&catalog(), &first).start();
    let mut client = server.client();
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    for id in 100..160 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let float = f64::from_bits(x >> 2); // positive, finite
        let body = json!({"price": float, "tags": [float / 3.0, -float], "meta": {"m": id}});
        let response = client.post(&format!("/items/{id}"), &body);
        assert_eq!(response.status, 200, "{}", response.text());
    }
    server.stop();

    let a = root.path().join("a");
    let exported = export(&catalog(), &first, &a);
    assert_eq!(exported.status.code(), Some(0), "{exported:?}");
    let files: Vec<PathBuf> = files_of(&a)
        .into_iter()
        .map(|(name, _)| a.join(name))
        .collect();
    assert_eq!(files.len(), 4);
    let second = root.path().join("second");
    let imported = import(&catalog(), &second, &files);
    assert_eq!(imported.status.code(), Some(0), "{imported:?}");
    let b = root.path().join("b");
    let exported = export(&catalog(), &second, &b);
    assert_eq!(exported.status.code(), Some(0), "{exported:?}");
    let (a, b) = (files_of(&a), files_of(&b));
    assert_eq!(a.len(), 4);
    for ((name_a, bytes_a), (name_b, bytes_b)) in a.iter().zip(&b) {
        assert_eq!(name_a, name_b);
        assert!(
            bytes_a == bytes_b,
            "{name_a} differs:\n{}\n---\n{}",
            String::from_utf8_lossy(bytes_a),
            String::from_utf8_lossy(bytes_b)
        );
    }
    assert_eq!(a.len(), b.len());
    assert!(
        String::from_utf8_lossy(&a[0].1).lines().count() == 64,
        "items: 4 imported, 60 written"
    );
}

/// Issue 36, item 3: a stored value nested 126 to 128 levels deep was exported, but the line
/// holding it (two levels more) was past serde_json's limit, and importing the export failed
/// (`items.jsonl:2:151: recursion limit exceeded`, exit 7): a backup that could not be
/// restored. Now the deepest value the store takes round-trips byte for byte, and one level
/// deeper is refused at the write.
#[test]
fn the_deepest_storable_value_round_trips_export_import_export() {
    let app = test_app_dir("deep");
    let root = tempfile::tempdir().expect("tempdir");
    let data = root.path().join("data");
    let server = Launch::new(&app, &data).start();
    let mut client = server.client();
    for path in ["/values/1/nested/128", "/values/2/objects/128"] {
        let response = client.request("POST", path, Some(b"")).expect("answered");
        assert_eq!(response.status, 200, "{path}: {}", response.text());
    }
    for path in ["/values/3/nested/129", "/values/3/objects/129"] {
        let response = client.request("POST", path, Some(b"")).expect("answered");
        assert_eq!(response.status, 500, "{path}: {}", response.text());
        assert!(
            response.text().contains("128"),
            "{path}: {}",
            response.text()
        );
    }
    server.stop();

    let first = root.path().join("first");
    let exported = export(&app, &data, &first);
    assert_eq!(exported.status.code(), Some(0), "{exported:?}");
    let objects = format!(r#"{}1{}"#, r#"{"a":"#.repeat(128), "}".repeat(128));
    let expected = format!(
        "{{\"key\":1,\"row\":{{\"value\":{}}}}}\n{{\"key\":2,\"row\":{{\"value\":{objects}}}}}\n",
        crate::depth::nested_text(128)
    );
    assert_eq!(text_of(&first, "values.jsonl"), expected);
    let imported_dir = root.path().join("imported");
    let imported = import(&app, &imported_dir, &[first.join("values.jsonl")]);
    assert_eq!(imported.status.code(), Some(0), "{}", stderr(&imported));
    let second = root.path().join("second");
    let exported = export(&app, &imported_dir, &second);
    assert_eq!(exported.status.code(), Some(0), "{exported:?}");
    assert_eq!(files_of(&first), files_of(&second));

    // A line one level deeper than export can write is refused, naming the field.
    let deeper = file(
        root.path(),
        "values.jsonl",
        &format!(
            "{{\"key\":1,\"row\":{{\"value\":{}}}}}\n",
            crate::depth::nested_text(129)
        ),
    );
    let refused = import(&app, &root.path().join("refused"), &[deeper]);
    assert_eq!(refused.status.code(), Some(7), "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains("values.jsonl:1:153: the field \"value\" nests arrays"),
        "{}",
        stderr(&refused)
    );
}

/// Issue 36: import read a whole line before checking anything (a 300 MB line without a newline
/// peaked at 821 MiB). A line past the maximum is refused once that much of it is read, naming
/// the file, the line and the maximum (exit 7), and nothing is written.
#[test]
fn import_refuses_a_line_over_the_maximum_naming_it() {
    let root = tempfile::tempdir().expect("tempdir");
    let input = root.path().join("values.jsonl");
    // Zeros without a newline, one byte past the maximum: a sparse file, no disk.
    std::fs::File::create(&input)
        .and_then(|f| f.set_len(pure_runtime::LINE_BYTES_MAX as u64 + 1))
        .expect("a sparse input file");
    let data = root.path().join("data");
    let refused = import(&test_app_dir("deep"), &data, &[input]);
    assert_eq!(refused.status.code(), Some(7), "{}", stderr(&refused));
    let wanted = format!(
        "values.jsonl:1: the line is longer than {} bytes",
        pure_runtime::LINE_BYTES_MAX
    );
    assert!(stderr(&refused).contains(&wanted), "{}", stderr(&refused));
    assert!(!data.exists(), "nothing is written");
}

/// A directory holding a store is refused before anything is read, and left exactly as it was.
#[test]
fn import_refuses_a_directory_that_holds_a_store_and_leaves_it_unchanged() {
    let input = tempfile::tempdir().expect("tempdir");
    let data = tempfile::tempdir().expect("tempdir");
    let files = catalog_files(input.path());
    assert_eq!(
        import(&catalog(), data.path(), &files).status.code(),
        Some(0)
    );
    let before = files_of(data.path());
    let again = import(&catalog(), data.path(), &files);
    assert_eq!(again.status.code(), Some(4), "{again:?}");
    let message = stderr(&again);
    assert!(
        message.contains("holds a store already") && message.contains("new or empty"),
        "{message}"
    );
    assert_eq!(files_of(data.path()), before, "the directory is unchanged");
}

/// Each refused input names the file (and line) and what to do; nothing is written: a missing
/// directory is not created, an empty one stays empty.
#[test]
fn import_refuses_bad_input_naming_file_and_line_and_writes_nothing() {
    let input = tempfile::tempdir().expect("tempdir");
    let root = tempfile::tempdir().expect("tempdir");
    let good = catalog_files(input.path());
    let refuse = |files: &[PathBuf], code: i32, wanted: &[&str]| {
        let missing = root.path().join("missing");
        let empty = root.path().join("empty");
        std::fs::create_dir_all(&empty).expect("mkdir");
        for data in [&missing, &empty] {
            let output = import(&catalog(), data, files);
            let message = stderr(&output);
            assert_eq!(output.status.code(), Some(code), "{message}");
            for want in wanted {
                assert!(message.contains(want), "{want:?} not in: {message}");
            }
        }
        assert!(!missing.exists(), "a missing directory is not created");
        assert!(
            files_of(&empty).is_empty(),
            "an empty directory stays empty"
        );
    };
    let with = |name: &str, text: &str| {
        let mut files = good.clone();
        files.retain(|f| !f.ends_with(name));
        files.push(file(&root.path().join("bad"), name, text));
        files
    };
    std::fs::create_dir_all(root.path().join("bad")).expect("mkdir");

    // A table the app does not declare.
    let mut files = good.clone();
    files.push(file(
        input.path(),
        "orders.jsonl",
        "{\"key\": 1, \"row\": {}}\n",
    ));
    refuse(
        &files,
        7,
        &[
            "orders.jsonl",
            "no table \"orders\"",
            "items, lines, marks, users",
        ],
    );
    // A field the table does not declare, on line 2.
    refuse(
        &with(
            "items.jsonl",
            "{\"key\": 1, \"row\": {\"name\": \"a\"}}\n{\"key\": 2, \"row\": {\"colour\": \"red\"}}\n",
        ),
        7,
        &[
            "items.jsonl:2:",
            "declares no field \"colour\"",
            "name, price, tags, meta, note",
        ],
    );
    // A key given twice: both lines named.
    refuse(
        &with(
            "users.jsonl",
            "{\"key\": \"a\", \"row\": {}}\n{\"key\": \"b\", \"row\": {}}\n{\"key\": \"a\", \"row\": {}}\n",
        ),
        7,
        &["users.jsonl:3:", "\"a\" appears twice", "first at line 1"],
    );
    // A line that is not JSON.
    refuse(
        &with(
            "lines.jsonl",
            "{\"key\": [1, 1], \"row\": {}}\n{\"key\": [1, 2], \"row\": {\"qty\": }\n",
        ),
        7,
        &["lines.jsonl:2:", "expected value"],
    );
    // A value no script can hold as a key, and a value over the handlers' limits.
    refuse(
        &with("marks.jsonl", "{\"key\": 1.5, \"row\": {}}\n"),
        7,
        &["marks.jsonl:1:", "is a float"],
    );
    let long = "x".repeat((1 << 20) + 1);
    refuse(
        &with(
            "items.jsonl",
            &format!("{{\"key\": 1, \"row\": {{\"name\": \"{long}\"}}}}\n"),
        ),
        7,
        &["items.jsonl:1:", "string_bytes_max"],
    );
    // Not named <table>.jsonl.
    refuse(
        &[file(input.path(), "items.json", "")],
        7,
        &["items.json", "<table>.jsonl"],
    );
}

/// Export reads only a stopped server's directory: a running one is refused with the
/// "in use" error and exit 4, and nothing is written.
#[test]
fn export_refuses_a_directory_in_use() {
    let input = tempfile::tempdir().expect("tempdir");
    let root = tempfile::tempdir().expect("tempdir");
    let data = root.path().join("data");
    assert_eq!(
        import(&catalog(), &data, &catalog_files(input.path()))
            .status
            .code(),
        Some(0)
    );
    let server = Launch::new(&catalog(), &data).start();
    let out = root.path().join("out");
    let exported = export(&catalog(), &data, &out);
    assert_eq!(exported.status.code(), Some(4), "{exported:?}");
    let message = stderr(&exported);
    assert!(
        message.contains("in use") && message.contains(&format!("PID {}", server.child.id())),
        "{message}"
    );
    assert!(!out.exists(), "nothing written");
    server.stop();
}

/// A directory that would not open cleanly (here a checkpoint with a flipped byte) is refused,
/// pointing to `check`; so is an output directory that is not empty.
#[test]
fn export_refuses_damage_and_a_non_empty_output_directory() {
    let input = tempfile::tempdir().expect("tempdir");
    let root = tempfile::tempdir().expect("tempdir");
    let data = root.path().join("data");
    assert_eq!(
        import(&catalog(), &data, &catalog_files(input.path()))
            .status
            .code(),
        Some(0)
    );
    let out = root.path().join("out");
    std::fs::create_dir_all(&out).expect("mkdir");
    std::fs::write(out.join("keep.txt"), "mine").expect("write");
    let refused = export(&catalog(), &data, &out);
    assert_eq!(refused.status.code(), Some(7), "{refused:?}");
    assert!(stderr(&refused).contains("not empty"), "{refused:?}");
    assert_eq!(files_of(&out).len(), 1, "nothing written next to keep.txt");

    let checkpoint = files_of(&data)
        .into_iter()
        .find(|(name, _)| name.starts_with("checkpoint-"))
        .expect("the import's checkpoint");
    let mut bytes = checkpoint.1;
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x01;
    std::fs::write(data.join(&checkpoint.0), &bytes).expect("damage the checkpoint");
    let out = root.path().join("out2");
    let refused = export(&catalog(), &data, &out);
    assert_eq!(refused.status.code(), Some(4), "{refused:?}");
    let message = stderr(&refused);
    assert!(
        message.contains("does not open cleanly") && message.contains("pure-serve check"),
        "{message}"
    );
    assert!(!out.exists(), "nothing written");
}

/// Tables and fields are matched by name: an app that reorders its fields exports them in its
/// own order, and what it no longer declares is left out with a note for each table and field
/// that holds data.
#[test]
fn export_maps_by_name_and_notes_what_the_app_does_not_declare() {
    let input = tempfile::tempdir().expect("tempdir");
    let root = tempfile::tempdir().expect("tempdir");
    let data = root.path().join("data");
    assert_eq!(
        import(&catalog(), &data, &catalog_files(input.path()))
            .status
            .code(),
        Some(0)
    );
    // The catalog without `marks`, without users.email, with users' fields reordered and a
    // new one.
    let app = root.path().join("app");
    std::fs::create_dir_all(&app).expect("mkdir");
    let manifest: Value = json!({
        "name": "catalog2",
        "tables": {
            "items": ["name", "price", "tags", "meta", "note"],
            "users": ["since", "age"],
            "lines": ["qty", "amount"]
        },
        "routes": {}
    });
    std::fs::write(app.join("app.json"), manifest.to_string()).expect("write app.json");
    std::fs::write(app.join("none.rhai"), "fn none(request) { () }\n").expect("write script");
    let out = root.path().join("out");
    let exported = export(&app, &data, &out);
    assert_eq!(exported.status.code(), Some(0), "{exported:?}");
    let notes = stderr(&exported);
    assert!(
        notes.contains("table marks holds 2 rows") && notes.contains("not exported"),
        "{notes}"
    );
    assert!(
        notes.contains("field users.email holds values in 2 rows"),
        "{notes}"
    );
    assert_eq!(notes.matches("note:").count(), 2, "{notes}");
    assert_eq!(
        text_of(&out, "users.jsonl"),
        concat!(
            r#"{"key":"","row":{"since":null,"age":1.5}}"#,
            "\n",
            r#"{"key":"Zed","row":{"since":null,"age":null}}"#,
            "\n",
            r#"{"key":"ann","row":{"since":null,"age":9007199254740993}}"#,
            "\n",
            r#"{"key":"bob","row":{"since":null,"age":-9223372036854775808}}"#,
            "\n",
        )
    );
    assert!(!out.join("marks.jsonl").exists());
}

/// kill -9 at any moment of an import leaves the data directory as it was (and a new import
/// into it works), or holding every row, or refused by the server: never a store that opens
/// with part of the rows, or none.
#[test]
fn an_import_killed_at_any_moment_leaves_nothing_half_done() {
    let scratch = tempfile::tempdir().expect("scratch dir");
    let rows = 200_000;
    let mut text = String::with_capacity(rows * 48);
    for i in 0..rows {
        text.push_str(&format!(
            "{{\"key\":[{},{}],\"row\":{{\"qty\":{i},\"amount\":{}}}}}\n",
            i / 100,
            i % 100,
            i * 7
        ));
    }
    let lines = file(scratch.path(), "lines.jsonl", &text);
    let import_into = |data: &Path| {
        Command::new(binary())
            .args([
                "import",
                path(&catalog()),
                "--data",
                path(data),
                path(&lines),
            ])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start an import")
    };
    let exported_rows = |data: &Path, out: &Path| -> Option<usize> {
        let output = export(&catalog(), data, out);
        output.status.success().then(|| {
            std::fs::read_to_string(out.join("lines.jsonl"))
                .expect("lines exported")
                .lines()
                .count()
        })
    };
    // How long a whole import takes here: the kills are spread over it (and a little past).
    let started = std::time::Instant::now();
    let whole = scratch.path().join("whole");
    assert!(import_into(&whole).wait().unwrap().success());
    let took = started.elapsed();
    assert_eq!(
        exported_rows(&whole, &scratch.path().join("whole-out")),
        Some(rows)
    );

    let cycles = 16u32;
    let mut outcomes = [0u32; 3];
    for cycle in 0..cycles {
        let data = scratch.path().join(format!("data-{cycle}"));
        std::fs::create_dir(&data).unwrap();
        let mut child = import_into(&data);
        std::thread::sleep(took * 6 * (cycle + 1) / (5 * cycles));
        // SAFETY: kill(2) on our own child, not yet waited for.
        unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
        child.wait().unwrap();
        let store_files: Vec<_> = std::fs::read_dir(&data)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        let out = scratch.path().join(format!("out-{cycle}"));
        if store_files.is_empty() {
            // Untouched: a new import into it works.
            outcomes[0] += 1;
            assert!(
                import_into(&data).wait().unwrap().success(),
                "cycle {cycle}: import again"
            );
            assert_eq!(exported_rows(&data, &out), Some(rows), "cycle {cycle}");
        } else {
            match exported_rows(&data, &out) {
                Some(n) => {
                    outcomes[1] += 1;
                    assert_eq!(
                        n, rows,
                        "cycle {cycle}: a store with part of the rows ({store_files:?})"
                    );
                }
                None => {
                    outcomes[2] += 1;
                    // The server must refuse it too; if it starts instead, stop it and fail.
                    let mut server = Command::new(binary())
                        .args([
                            path(&catalog()),
                            "--data",
                            path(&data),
                            "--listen",
                            "127.0.0.1:0",
                        ])
                        .stdout(std::process::Stdio::piped())
                        .stderr(std::process::Stdio::null())
                        .spawn()
                        .expect("start pure-serve");
                    let mut ready = String::new();
                    let stdout = server.stdout.take().expect("piped");
                    std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut ready)
                        .expect("read pure-serve's output");
                    if !ready.is_empty() {
                        let _ = server.kill();
                        let _ = server.wait();
                        panic!("cycle {cycle}: export refused {store_files:?} but the server served it: {ready}");
                    }
                    let status = server.wait().expect("pure-serve exits");
                    assert_eq!(status.code(), Some(4), "cycle {cycle}: {store_files:?}");
                }
            }
        }
    }
    eprintln!("untouched, whole, refused: {outcomes:?}");
}

/// Two imports into one directory at once: one writes every row, the other is refused (the
/// directory is in use, or holds a store by then), whatever their timing.
#[test]
fn two_imports_into_one_directory_leave_exactly_one_whole_store() {
    let scratch = tempfile::tempdir().expect("scratch dir");
    let rows = 100_000;
    let mut text = String::with_capacity(rows * 48);
    for i in 0..rows {
        text.push_str(&format!(
            "{{\"key\":[{},{}],\"row\":{{\"qty\":{i},\"amount\":1}}}}\n",
            i / 100,
            i % 100
        ));
    }
    let lines = file(scratch.path(), "lines.jsonl", &text);
    let data = scratch.path().join("data");
    let start = || {
        Command::new(binary())
            .args([
                "import",
                path(&catalog()),
                "--data",
                path(&data),
                path(&lines),
            ])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("start an import")
    };
    let (a, b) = (start(), start());
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    assert_eq!(
        u8::from(a.status.success()) + u8::from(b.status.success()),
        1,
        "exactly one import wins:\n{}\n{}",
        stderr(&a),
        stderr(&b)
    );
    let loser = if a.status.success() { &b } else { &a };
    assert!(
        stderr(loser).contains("in use") || stderr(loser).contains("holds a store"),
        "{}",
        stderr(loser)
    );
    let out = scratch.path().join("out");
    assert!(export(&catalog(), &data, &out).status.success());
    let exported = std::fs::read_to_string(out.join("lines.jsonl")).unwrap();
    assert_eq!(exported.lines().count(), rows);
}

/// A running server exports its published state while a client keeps writing (`export --url`,
/// its admin address): the files hold exactly the writes up to the LSN the export names (one
/// client writing in order, one record a write), importing them gives a store that serves that
/// state, and exporting that store again, stopped, gives the same bytes.
#[test]
fn a_running_server_exports_the_state_at_one_lsn_while_writes_go_on() {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::Arc;

    let notes = test_app_dir("notes");
    let root = tempfile::tempdir().expect("tempdir");
    let data = root.path().join("data");
    let server = Launch::new(&notes, &data)
        .flag("--admin-listen", "127.0.0.1:0")
        .start();
    let admin = server.admin_address();
    let mut client = server.client();
    let put = |client: &mut crate::harness::Client, i: u64| {
        let body = serde_json::to_vec(&json!({ "text": format!("n{i}") })).expect("json");
        let answer = client
            .request("PUT", &format!("/notes/{i}"), Some(&body))
            .expect("answered");
        assert_eq!(answer.status, 200, "{}", answer.text());
    };
    // The first write also logs the schema: count from the state after it.
    put(&mut client, 0);
    let health = crate::harness::Client::connect(admin).get("/_pure/health");
    let base = health.json()["durable_lsn"].as_u64().expect("an LSN");

    let stop = Arc::new(AtomicBool::new(false));
    let written = Arc::new(AtomicU64::new(0));
    let writer = {
        let (stop, written) = (stop.clone(), written.clone());
        std::thread::spawn(move || {
            let mut i = 1;
            while !stop.load(Ordering::SeqCst) {
                put(&mut client, i);
                written.store(i, Ordering::SeqCst);
                i += 1;
            }
        })
    };
    crate::harness::wait_until("200 writes", || written.load(Ordering::SeqCst) >= 200);
    let before = written.load(Ordering::SeqCst);
    let out = root.path().join("online");
    let output = run(&[
        "export",
        "--url",
        &format!("http://{admin}"),
        "--out",
        path(&out),
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let said = stdout(&output);
    let lsn: u64 = said
        .split("(LSN ")
        .nth(1)
        .and_then(|rest| rest.split(')').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no LSN in {said:?}"));
    // Writes go on after it: the export held no lock on them.
    let after = written.load(Ordering::SeqCst);
    crate::harness::wait_until("more writes", || {
        written.load(Ordering::SeqCst) >= after + 50
    });
    stop.store(true, Ordering::SeqCst);
    writer.join().expect("the writer");
    let total = written.load(Ordering::SeqCst);

    // Exactly the writes 0..=k, k the LSN's: every write acknowledged before the export began
    // is in it, none is half there, and none past the LSN.
    let k = lsn - base;
    assert!(
        k >= before && k <= total,
        "k {k}, before {before}, total {total}"
    );
    let mut expected: Vec<String> = (0..=k)
        .map(|i| format!(r#"{{"key":"{i}","row":{{"text":"n{i}"}}}}"#))
        .collect();
    expected.sort();
    let mut lines: Vec<String> = text_of(&out, "notes.jsonl")
        .lines()
        .map(String::from)
        .collect();
    lines.sort();
    assert_eq!(lines.len(), expected.len(), "rows at LSN {lsn}");
    assert_eq!(lines, expected);
    assert!(said.contains(&format!("notes {}", k + 1)), "{said}");
    server.stop();

    // The files import into a store that serves that state, and export the same bytes.
    let imported = root.path().join("imported");
    let output = import(&notes, &imported, &[out.join("notes.jsonl")]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let server = Launch::new(&notes, &imported).start();
    let mut client = server.client();
    assert_eq!(client.get(&format!("/notes/{k}")).status, 200);
    assert_eq!(client.get(&format!("/notes/{}", k + 1)).status, 404);
    server.stop();
    let again = root.path().join("again");
    let output = export(&notes, &imported, &again);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(files_of(&again), files_of(&out));
}

/// What an online export refuses: an output directory that is not empty (exit 7, the server
/// going on), a relative path sent to the endpoint itself, and a server that is not there.
#[test]
fn an_online_export_says_what_it_refuses() {
    let notes = test_app_dir("notes");
    let root = tempfile::tempdir().expect("tempdir");
    let server = Launch::new(&notes, &root.path().join("data"))
        .flag("--admin-listen", "127.0.0.1:0")
        .start();
    let admin = server.admin_address();
    let full = root.path().join("full");
    std::fs::create_dir(&full).expect("mkdir");
    std::fs::write(full.join("x"), "x").expect("write");
    let url = format!("http://{admin}");
    let output = run(&["export", "--url", &url, "--out", path(&full)]);
    assert_eq!(output.status.code(), Some(7), "{}", stderr(&output));
    assert!(stderr(&output).contains("not empty"), "{}", stderr(&output));
    let answer = crate::harness::Client::connect(admin)
        .request("POST", "/_pure/export?out=relative/dir", None)
        .expect("answered");
    assert_eq!(answer.status, 400, "{}", answer.text());
    assert!(answer.json()["error"]
        .as_str()
        .unwrap_or("")
        .contains("absolute path"));
    // The app's own address has no export.
    let answer = server
        .client()
        .request("POST", "/_pure/export?out=/tmp/x", None)
        .expect("answered");
    assert_eq!(answer.status, 404, "{}", answer.text());
    server.stop();
    let output = run(&[
        "export",
        "--url",
        &url,
        "--out",
        path(&root.path().join("o")),
    ]);
    assert_eq!(output.status.code(), Some(4), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("is it running"),
        "{}",
        stderr(&output)
    );
}

/// `next_id()`'s counters are part of the state: export writes them (`_ids.jsonl`), import
/// brings them back, and the imported store goes on from the next id, not from 1.
#[test]
fn export_and_import_carry_the_next_ids() {
    let tickets = crate::harness::repo_path("apps/tickets");
    let secrets = tickets.join("tests/secrets.test");
    let root = tempfile::tempdir().expect("tempdir");
    let start = |data: &Path| {
        Launch::new(&tickets, data)
            .flag("--secrets", path(&secrets))
            .start()
    };
    let create = |server: &crate::harness::Server, name: &str| {
        let body = serde_json::to_vec(&json!({"name": name, "capacity": 3})).expect("json");
        let head = format!(
            "POST /events HTTP/1.1\r\nHost: {}\r\nx-api-key: test-key-0123456789\r\n\
             Content-Length: {}\r\n\r\n",
            server.address,
            body.len()
        );
        let mut bytes = head.into_bytes();
        bytes.extend_from_slice(&body);
        let answer = server.client().exchange(&bytes).expect("answered");
        assert_eq!(answer.status, 201, "{}", answer.text());
        answer.json()["id"].clone()
    };
    let data = root.path().join("data");
    let server = start(&data);
    assert_eq!(create(&server, "a"), json!(1));
    assert_eq!(create(&server, "b"), json!(2));
    server.stop();
    let out = root.path().join("out");
    let output = export(&tickets, &data, &out);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(
        text_of(&out, "_ids.jsonl"),
        "{\"key\":\"events\",\"row\":{\"next\":3}}\n"
    );
    let imported = root.path().join("imported");
    let files: Vec<PathBuf> = files_of(&out)
        .into_iter()
        .map(|(name, _)| out.join(name))
        .collect();
    let output = import(&tickets, &imported, &files);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let server = start(&imported);
    assert_eq!(create(&server, "c"), json!(3));
    server.stop();
}
