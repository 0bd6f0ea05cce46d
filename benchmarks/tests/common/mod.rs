//! What the TPC-C tests of pure-bench share: the binaries, the app, and mutated copies of it.

#![allow(dead_code)] // each test file uses its own part of this module

use std::path::{Path, PathBuf};
use std::process::Output;

pub const BIN: &str = env!("CARGO_BIN_EXE_pure-bench");

pub fn app_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../apps/tpcc")
}

/// Whether pure-serve is built beside pure-bench: `cargo test --workspace` builds it, `cargo
/// test -p pure-bench` alone does not. Without it the Pure engines cannot run: that is a
/// failure in the README's test command (`--workspace`), and said loudly otherwise.
pub fn pure_serve_built() -> bool {
    let built = Path::new(BIN).with_file_name("pure-serve").exists();
    if !built {
        assert!(
            std::env::var_os("PURE_BENCH_ALLOW_NO_SERVE").is_some(),
            "pure-serve is not built beside {BIN}: run `cargo test --workspace --profile checked` \
             (or set PURE_BENCH_ALLOW_NO_SERVE=1 to skip these tests)"
        );
        eprintln!("SKIPPED: pure-serve is not built");
    }
    built
}

pub fn scratch() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("scratch dir")
}

/// A finished command's status and output, for assertion messages.
pub fn text(output: &Output) -> String {
    format!(
        "status {}\nstdout:\n{}\nstderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// Copies the app into `scratch/app` with one replacement in its script (which must apply
/// exactly once).
pub fn mutated(scratch: &Path, from: &str, to: &str) -> PathBuf {
    let dir = scratch.join("app");
    std::fs::create_dir_all(&dir).unwrap();
    for file in ["app.json", "tpcc.rhai"] {
        std::fs::copy(app_dir().join(file), dir.join(file)).unwrap();
    }
    let script = std::fs::read_to_string(dir.join("tpcc.rhai")).unwrap();
    assert_eq!(
        script.matches(from).count(),
        1,
        "the mutation {from:?} must apply once"
    );
    std::fs::write(dir.join("tpcc.rhai"), script.replacen(from, to, 1)).unwrap();
    dir
}
