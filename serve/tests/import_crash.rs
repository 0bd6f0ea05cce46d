//! Review test: `pure-serve import` killed with SIGKILL while it writes must not leave a data
//! directory that opens cleanly with fewer rows than were imported (an empty store that a
//! server would then serve as if it were the state).
//!
//! The kill lands when the first store file (`log`) appears anywhere under the scratch
//! directory: in the data directory itself, or in a staging directory beside it. If the import
//! happens to finish first, the directory holds everything and the test passes: it can miss the
//! fault, never invent one. `PURE_SERVE_BIN` runs another build of pure-serve.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use pure_runtime::LogFinding;

const ROWS: u64 = 60_000;

fn binary() -> PathBuf {
    std::env::var_os("PURE_SERVE_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_pure-serve")))
}

/// Whether a file named `log` exists in `dir` or one level below it.
fn has_log(dir: &Path) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.file_name().is_some_and(|n| n == "log") {
            return true;
        }
        if path.is_dir() && path.join("log").exists() {
            return true;
        }
    }
    false
}

#[test]
fn import_killed_while_writing_leaves_no_store_that_opens_with_part_of_the_rows() {
    let root = tempfile::tempdir().expect("scratch");
    let app = root.path().join("app");
    std::fs::create_dir_all(&app).unwrap();
    std::fs::write(
        app.join("app.json"),
        r#"{"name": "big", "routes": {"GET /n": "n"}, "tables": {"t": ["v"]}}"#,
    )
    .unwrap();
    std::fs::write(app.join("main.rhai"), "fn n(request) { t.count() }\n").unwrap();
    let input = root.path().join("t.jsonl");
    {
        use std::io::Write;
        let mut out = std::io::BufWriter::new(std::fs::File::create(&input).unwrap());
        let text = "x".repeat(1500);
        for k in 0..ROWS {
            writeln!(out, r#"{{"key": {k}, "row": {{"v": "{text}{k}"}}}}"#).unwrap();
        }
    }
    let stores = root.path().join("stores");
    std::fs::create_dir_all(&stores).unwrap();
    let data = stores.join("data");
    let mut child = Command::new(binary())
        .arg("import")
        .arg(&app)
        .arg("--data")
        .arg(&data)
        .args(["--log-capacity", &(8u64 << 20).to_string()])
        .arg(&input)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start pure-serve import");
    // No clock: look until a store file shows up or the import is over.
    let killed = loop {
        if has_log(&stores) {
            child.kill().expect("SIGKILL the import");
            break true;
        }
        if child.try_wait().expect("wait").is_some() {
            break false;
        }
        std::thread::yield_now();
    };
    let _ = child.wait();
    eprintln!("killed mid-write: {killed}");

    let inspection = match pure_runtime::inspect(&data) {
        Ok(inspection) => inspection,
        Err(e) => {
            eprintln!("the directory does not open: {e}");
            return;
        }
    };
    if let Some(refusal) = inspection.open_refusal() {
        eprintln!("refused, as it should be: {refusal}");
        return;
    }
    if matches!(inspection.store.log, LogFinding::Missing)
        && inspection.store.checkpoints.is_empty()
    {
        eprintln!("no store in the directory: as it was");
        return;
    }
    let rows: u64 = inspection.tables.iter().map(|(_, n)| n).sum();
    assert_eq!(
        rows, ROWS,
        "after kill -9 the data directory opens cleanly at LSN {} with {:?}: a server would \
         serve this partial state",
        inspection.decoded_lsn, inspection.tables
    );
}
