//! The log of a new data directory is small and grows in place as the writes need: doubling
//! while the writes between two checkpoints need more room, at once for a write larger than
//! the log can frame, never past its largest size; a restart keeps the grown log and its data.

use std::path::Path;

use pure_runtime::{HandlerError, Request, Runtime, RuntimeOptions};
use serde_json::{json, Value};

use crate::support::{app, body, PATIENT};

fn dump(rt: &Runtime) -> Value {
    rt.read("dump", Request::default())
        .expect("the dump handler works")
        .body
        .to_value()
}

/// Puts a row whose field holds `bytes` bytes of text that does not compress (the log
/// compresses frames).
fn put(rt: &Runtime, key: i64, bytes: usize) -> Result<Value, HandlerError> {
    let text = noise(key as u64, bytes);
    let ops = json!([["put", "kv", [key], {"a": text}]]);
    rt.write("apply", body(json!({"ops": ops, "fail": false})))?
        .blocking_recv()
        .expect("every queued write is answered")
        .map(|answer| answer.body.to_value())
}

fn log_file_bytes(dir: &Path) -> u64 {
    std::fs::metadata(dir.join("log")).expect("the log").len()
}

fn options(first: u64, max: u64) -> RuntimeOptions {
    RuntimeOptions {
        log_capacity_bytes: first,
        log_capacity_max_bytes: max,
        checkpoint_interval_bytes: 1 << 20,
        write_timeout: PATIENT,
        ..RuntimeOptions::default()
    }
}

#[test]
fn a_new_log_is_small_and_grows_as_the_writes_between_checkpoints_need() {
    let dir = tempfile::tempdir().unwrap();
    let header_area = pure_store::LOG_HEADER_AREA_BYTES;
    let rt = Runtime::open(app("review"), dir.path(), options(64 << 10, 4 << 20)).unwrap();
    assert_eq!(rt.metrics().log_capacity_bytes, 64 << 10);
    assert_eq!(log_file_bytes(dir.path()), header_area + (64 << 10));
    // About 2.5 MB of log, with a checkpoint due every 1 MiB: the log doubles until a quarter
    // of it stays free past the interval (2 MiB; the policy's own test says no further, but a
    // checkpoint slowed down on a busy machine may let the log fill, and it then doubles too).
    for i in 0..1200 {
        put(&rt, i % 40, 1500).unwrap();
    }
    let grown = rt.metrics().log_capacity_bytes;
    assert!((2 << 20..=4 << 20).contains(&grown), "{:?}", rt.metrics());
    assert_eq!(log_file_bytes(dir.path()), header_area + grown);
    assert!(rt.metrics().checkpoints_total >= 1);
    let before = dump(&rt);
    rt.shutdown();
    // The directory keeps its grown log (a smaller first capacity is for new directories).
    let rt = Runtime::open(app("review"), dir.path(), options(64 << 10, 4 << 20)).unwrap();
    assert_eq!(rt.metrics().log_capacity_bytes, grown);
    assert_eq!(dump(&rt), before);
    rt.shutdown();
}

#[test]
fn a_write_larger_than_the_log_can_frame_waits_for_it_to_grow() {
    let dir = tempfile::tempdir().unwrap();
    // A frame holds at most half the log: 8 KiB here, where one write may take up to an eighth
    // of the largest log (512 KiB).
    let rt = Runtime::open(app("review"), dir.path(), options(16 << 10, 4 << 20)).unwrap();
    put(&rt, 1, 100).unwrap();
    put(&rt, 2, 300_000).unwrap();
    assert!(
        rt.metrics().log_capacity_bytes >= 600_000,
        "the log grew to frame it: {:?}",
        rt.metrics()
    );
    // Past an eighth of the largest log: refused before it reaches the log, as before.
    match put(&rt, 3, 600_000) {
        Err(HandlerError::Thrown { status: 413, .. }) => {}
        other => panic!("a write past the largest frame is 413, not {other:?}"),
    }
    let before = dump(&rt);
    rt.shutdown();
    let rt = Runtime::open(app("review"), dir.path(), options(16 << 10, 4 << 20)).unwrap();
    assert_eq!(dump(&rt), before);
    assert_eq!(dump(&rt).as_array().map(Vec::len), Some(2));
    rt.shutdown();
}

#[test]
fn a_log_stops_growing_at_its_largest_size() {
    let dir = tempfile::tempdir().unwrap();
    let rt = Runtime::open(app("review"), dir.path(), options(64 << 10, 256 << 10)).unwrap();
    for i in 0..600 {
        put(&rt, i % 40, 1500).unwrap();
    }
    assert_eq!(
        rt.metrics().log_capacity_bytes,
        256 << 10,
        "{:?}",
        rt.metrics()
    );
    assert!(
        rt.metrics().checkpoints_total >= 2,
        "checkpoints free it instead"
    );
    rt.shutdown();
}

/// Text of `bytes` bytes that does not compress, the same for the same `seed`.
fn noise(seed: u64, bytes: usize) -> String {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..bytes)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            char::from(b'a' + (x % 26) as u8)
        })
        .collect()
}

#[test]
fn an_imported_state_gets_the_log_its_checkpoints_want_at_open() {
    let root = tempfile::tempdir().unwrap();
    let input = root.path().join("kv.jsonl");
    // About 1.5 MB of rows that do not compress: the image is about as large.
    let lines: Vec<String> = (0..500)
        .map(|k| json!({"key": k, "row": {"a": noise(k, 3000)}}).to_string())
        .collect();
    std::fs::write(&input, lines.join("\n") + "\n").unwrap();
    let data = root.path().join("data");
    let import = pure_runtime::ImportOptions {
        log_capacity_bytes: 64 << 10,
        ..pure_runtime::ImportOptions::default()
    };
    pure_runtime::import(
        &app("review"),
        &data,
        &[input],
        &import,
        &pure_runtime::Progress::default(),
    )
    .unwrap();
    assert_eq!(
        log_file_bytes(&data),
        pure_store::LOG_HEADER_AREA_BYTES + (64 << 10)
    );
    let rt = Runtime::open(app("review"), &data, options(64 << 10, 64 << 20)).unwrap();
    // Twice the image, with a quarter free besides: 4 MiB. The zeros are written in the
    // background from the open on; the first commit after they are makes it the log's. The
    // writes here stay under half of the first log, where the writes alone would not grow it.
    while rt.metrics().log_capacity_bytes < 4 << 20 {
        assert!(rt.metrics().log_bytes < 30 << 10, "{:?}", rt.metrics());
        std::thread::sleep(std::time::Duration::from_millis(100));
        put(&rt, 1, 10).unwrap();
    }
    assert_eq!(
        rt.metrics().log_capacity_bytes,
        4 << 20,
        "{:?}",
        rt.metrics()
    );
    rt.shutdown();
}
