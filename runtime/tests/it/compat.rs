//! A data directory written by an older build opens in this one with the same rows, and goes on.
//!
//! The fixture (tests/data/review-ed3482c) was written by pure-serve at commit ed3482c, before
//! keys became byte encodings and rows packed bytes, with `tests/data/make-review-fixture.py`:
//! checkpoints and a log after the last one, holding every kind of stored value and key.

use std::path::{Path, PathBuf};

use pure_runtime::{Request, Runtime, RuntimeOptions};
use serde_json::{json, Value};

use crate::{app, body};

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

fn dump(rt: &Runtime) -> Value {
    rt.read("dump", Request::default())
        .expect("the dump handler works")
        .body
        .to_value()
}

#[test]
fn a_directory_written_before_packed_rows_opens_with_the_same_rows() {
    let fixture = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/review-ed3482c");
    let expected: Value =
        serde_json::from_str(&std::fs::read_to_string(fixture.join("dump.json")).unwrap()).unwrap();
    assert!(
        expected.as_array().is_some_and(|rows| rows.len() > 100),
        "the fixture holds rows"
    );
    let temp = tempfile::tempdir().unwrap();
    let data = temp.path().join("data");
    copy_dir(&fixture.join("data"), &data);
    let options = || RuntimeOptions {
        log_capacity_bytes: 1 << 20,
        ..RuntimeOptions::default()
    };

    let rt = Runtime::open(app("review"), &data, options()).expect("the old directory opens");
    assert_eq!(dump(&rt), expected, "the rows the old build answered");
    // It goes on: a write on top, and a reopen that replays it after the old records.
    let ops = json!({"ops": [["put", "kv", [-3], {"a": "after", "b": [1, 2.5]}]], "fail": false});
    rt.write("apply", body(ops))
        .unwrap()
        .blocking_recv()
        .expect("answered")
        .expect("the write succeeds");
    let after = dump(&rt);
    rt.shutdown();
    drop(rt);
    let rt = Runtime::open(app("review"), &data, options()).expect("reopens");
    assert_eq!(dump(&rt), after);
    assert_ne!(after, expected, "the new row is there");
    rt.shutdown();
}
