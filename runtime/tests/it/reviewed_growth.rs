//! Review of d364cae (the log grows in place), through the runtime: faults found, each proved
//! by a test that fails, and the checks that held.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use pure_runtime::{HandlerError, Request, Runtime, RuntimeOptions};
use pure_store::sim::SimDisk;
use pure_store::{DirLock, Io, IoFile, LockError, Mapping, LOG_FILE_NAME};
use serde_json::{json, Value};

use crate::support::{app, body, PATIENT};

fn dump(rt: &Runtime) -> Value {
    rt.read("dump", Request::default())
        .expect("the dump handler works")
        .body
        .to_value()
}

fn text(key: i64, bytes: usize) -> String {
    let mut x = (key as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..bytes)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            char::from(b'a' + (x % 26) as u8)
        })
        .collect()
}

/// Puts a row of `bytes` bytes of text that does not compress; the answer, or `None` if none
/// came within `wait` (or the reply was dropped).
fn put_within(
    rt: &Runtime,
    key: i64,
    bytes: usize,
    wait: Duration,
) -> Option<Result<Value, HandlerError>> {
    let ops = json!([["put", "kv", [key], {"a": text(key, bytes)}]]);
    let reply = match rt.write("apply", body(json!({"ops": ops, "fail": false}))) {
        Ok(reply) => reply,
        Err(e) => return Some(Err(e)),
    };
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(reply.blocking_recv());
    });
    match rx.recv_timeout(wait) {
        Ok(Ok(answer)) => Some(answer.map(|a| a.body.to_value())),
        Ok(Err(_)) | Err(_) => None,
    }
}

fn put(rt: &Runtime, key: i64, bytes: usize) -> Result<Value, HandlerError> {
    put_within(rt, key, bytes, Duration::from_secs(120)).expect("every write is answered")
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

// ---------------------------------------------------------------------------------------------
// Fault: a largest log size (--log-capacity-max) that is not whole 4 KiB units. The runtime
// doubles the log toward it; the last growth, capped at the largest size, panics in
// `LogHeader::grown` (store/src/ring.rs), on the thread that commits.

#[test]
fn reviewed_growth_a_largest_size_not_whole_4k_units() {
    let dir = tempfile::tempdir().unwrap();
    // 300,000 bytes: not whole 4 KiB units (nor whole sectors), as a user may well type.
    let max = 300_000;
    let rt = Runtime::open(app("review"), dir.path(), options(64 << 10, max)).unwrap();
    let mut failures = Vec::new();
    for i in 0..400 {
        match put_within(&rt, i % 40, 1500, Duration::from_secs(60)) {
            Some(Ok(_)) => {}
            other => {
                failures.push((i, format!("{other:?}")));
                break;
            }
        }
    }
    let metrics = rt.metrics();
    let poisoned = rt.poisoned();
    assert!(
        failures.is_empty() && poisoned.is_none(),
        "writes on a log whose largest size is {max} bytes: first failure {failures:?}, \
         poisoned {poisoned:?}, log capacity {}",
        metrics.log_capacity_bytes
    );
    assert!(metrics.log_capacity_bytes <= max);
    rt.shutdown();
}

// ---------------------------------------------------------------------------------------------
// Checks that held (expected to pass).

/// The version-1 directory of an older build: opened, written well past its capacity (laps,
/// checkpoints), it keeps its one header, its ring at 4096 and its size; it reopens with the
/// rows; a write past an eighth of its log is 413, not a wait for a growth that cannot come.
#[test]
fn reviewed_growth_an_old_log_is_never_grown() {
    let fixture = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/review-ed3482c");
    let temp = tempfile::tempdir().unwrap();
    let data = temp.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    for entry in std::fs::read_dir(fixture.join("data")).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), data.join(entry.file_name())).unwrap();
    }
    let log = data.join(LOG_FILE_NAME);
    let header = std::fs::read(&log).unwrap()[..4096].to_vec();
    let length = std::fs::metadata(&log).unwrap().len();
    let rt = Runtime::open(app("review"), &data, options(64 << 10, 64 << 20)).unwrap();
    let capacity = rt.metrics().log_capacity_bytes;
    assert_eq!(capacity, length - 4096);
    for i in 0..1500 {
        put(&rt, 10_000 + i % 50, 1500).unwrap();
    }
    assert!(rt.metrics().checkpoints_total >= 1);
    assert_eq!(rt.metrics().log_capacity_bytes, capacity);
    match put_within(&rt, 20_000, capacity as usize / 4, Duration::from_secs(60)) {
        Some(Err(HandlerError::Thrown { status: 413, .. })) => {}
        other => panic!("a write past an eighth of a log that cannot grow: {other:?}"),
    }
    let before = dump(&rt);
    rt.shutdown();
    drop(rt);
    assert_eq!(std::fs::metadata(&log).unwrap().len(), length);
    assert_eq!(&std::fs::read(&log).unwrap()[..4096], &header[..]);
    let rt = Runtime::open(app("review"), &data, options(64 << 10, 64 << 20)).unwrap();
    assert_eq!(dump(&rt), before);
    rt.shutdown();
}

/// A write larger than the ring can frame, after the small ring has lapped many times (the
/// live part anywhere in it): it waits for the growth and is kept across a restart.
#[test]
fn reviewed_growth_a_large_write_after_laps_of_a_small_ring() {
    let dir = tempfile::tempdir().unwrap();
    let opts = || RuntimeOptions {
        checkpoint_interval_bytes: 4 << 10,
        ..options(16 << 10, 4 << 20)
    };
    let rt = Runtime::open(app("review"), dir.path(), opts()).unwrap();
    for i in 0..300 {
        put(&rt, i % 7, 200).unwrap();
    }
    assert!(rt.metrics().checkpoints_total >= 3, "{:?}", rt.metrics());
    put(&rt, 100, 300_000).unwrap();
    put(&rt, 101, 100).unwrap();
    assert!(rt.metrics().log_capacity_bytes >= 600_000);
    let before = dump(&rt);
    rt.shutdown();
    drop(rt);
    let rt = Runtime::open(app("review"), dir.path(), opts()).unwrap();
    assert_eq!(dump(&rt), before);
    rt.shutdown();
}

// ---------------------------------------------------------------------------------------------
// A simulated disk whose log cannot be extended (a full disk for the fill only), or whose fill
// is held until released.

#[derive(Default)]
struct Gate {
    /// Writes past the log's end fail with ENOSPC.
    full: AtomicBool,
    /// Writes past the log's end wait while this is set.
    hold: AtomicBool,
    /// Writes past the log's end attempted.
    extending: AtomicU64,
}

struct GateIo {
    disk: Arc<SimDisk>,
    gate: Arc<Gate>,
}

struct GateFile {
    inner: Box<dyn IoFile>,
    gate: Option<Arc<Gate>>,
}

impl GateIo {
    fn wrap(&self, path: &Path, inner: Box<dyn IoFile>) -> Box<dyn IoFile> {
        let is_log = path.file_name().is_some_and(|n| n == LOG_FILE_NAME);
        Box::new(GateFile {
            inner,
            gate: is_log.then(|| self.gate.clone()),
        })
    }
}

impl Io for GateIo {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        self.disk.create_dir_all(dir)
    }
    fn list_dir(&self, dir: &Path) -> io::Result<Vec<String>> {
        self.disk.list_dir(dir)
    }
    fn create_file(&self, path: &Path) -> io::Result<Box<dyn IoFile>> {
        let file = self.disk.create_file(path)?;
        Ok(self.wrap(path, file))
    }
    fn open_file(&self, path: &Path) -> io::Result<Box<dyn IoFile>> {
        let file = self.disk.open_file(path)?;
        Ok(self.wrap(path, file))
    }
    fn open_file_read_only(&self, path: &Path) -> io::Result<Box<dyn IoFile>> {
        self.disk.open_file_read_only(path)
    }
    fn map_file(&self, path: &Path) -> io::Result<Mapping> {
        self.disk.map_file(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.disk.rename(from, to)
    }
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.disk.remove_file(path)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.disk.sync_dir(dir)
    }
    fn session_salt(&self) -> u64 {
        self.disk.session_salt()
    }
    fn lock_dir(&self, dir: &Path) -> Result<DirLock, LockError> {
        self.disk.lock_dir(dir)
    }
}

impl IoFile for GateFile {
    fn write_at(&self, bytes: &[u8], offset: u64) -> io::Result<()> {
        if let Some(gate) = &self.gate {
            if offset + bytes.len() as u64 > self.inner.size_bytes()? {
                gate.extending.fetch_add(1, Ordering::SeqCst);
                while gate.hold.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(5));
                }
                if gate.full.load(Ordering::SeqCst) {
                    return Err(io::Error::from_raw_os_error(28 /* ENOSPC */));
                }
            }
        }
        self.inner.write_at(bytes, offset)
    }
    fn read_at(&self, bytes: &mut [u8], offset: u64) -> io::Result<()> {
        self.inner.read_at(bytes, offset)
    }
    fn sync_data(&self) -> io::Result<()> {
        self.inner.sync_data()
    }
    fn size_bytes(&self) -> io::Result<u64> {
        self.inner.size_bytes()
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.inner.set_len(len)
    }
}

fn sim_dir() -> PathBuf {
    PathBuf::from("/sim/data")
}

/// Fills that meet a full disk: the log keeps its size, nothing is poisoned, the writes go on
/// (checkpoints free the log), and they survive a power loss.
#[test]
fn reviewed_growth_fills_that_fail_leave_the_runtime_writing() {
    let disk = SimDisk::new(7);
    let gate = Arc::new(Gate::default());
    gate.full.store(true, Ordering::SeqCst);
    let io = Arc::new(GateIo {
        disk: disk.clone(),
        gate: gate.clone(),
    });
    let opts = || RuntimeOptions {
        sync: pure_store::SyncMode::Always,
        ..options(64 << 10, 4 << 20)
    };
    let rt = Runtime::open_with_io(app("review"), &sim_dir(), opts(), io.clone()).unwrap();
    let log_len = disk.read(&sim_dir().join(LOG_FILE_NAME)).unwrap().len();
    for i in 0..400 {
        put(&rt, i % 40, 1500).unwrap_or_else(|e| panic!("write {i}: {e:?}"));
    }
    assert!(
        gate.extending.load(Ordering::SeqCst) >= 1,
        "a fill was tried"
    );
    assert!(rt.poisoned().is_none());
    assert_eq!(rt.metrics().log_capacity_bytes, 64 << 10);
    assert_eq!(
        disk.read(&sim_dir().join(LOG_FILE_NAME)).unwrap().len(),
        log_len,
        "the failed fill was cut back"
    );
    let before = dump(&rt);
    rt.shutdown();
    drop(rt);
    disk.power_loss();
    gate.full.store(false, Ordering::SeqCst);
    let rt = Runtime::open_with_io(app("review"), &sim_dir(), opts(), io).unwrap();
    assert_eq!(dump(&rt), before);
    rt.shutdown();
}

/// A shutdown while a fill is held waits for it: once `shutdown` returns nothing writes the
/// log any more, and the directory reopens (the grown header or the old one) with every row.
#[test]
fn reviewed_growth_a_shutdown_during_a_fill() {
    let disk = SimDisk::new(8);
    let gate = Arc::new(Gate::default());
    let io = Arc::new(GateIo {
        disk: disk.clone(),
        gate: gate.clone(),
    });
    let rt = Runtime::open_with_io(
        app("review"),
        &sim_dir(),
        options(64 << 10, 4 << 20),
        io.clone(),
    )
    .unwrap();
    gate.hold.store(true, Ordering::SeqCst);
    let mut i = 0;
    while gate.extending.load(Ordering::SeqCst) == 0 {
        put(&rt, i % 40, 1500).unwrap();
        i += 1;
        assert!(i < 2000, "no fill started");
    }
    let before = dump(&rt);
    let gate2 = gate.clone();
    let releaser = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        gate2.hold.store(false, Ordering::SeqCst);
    });
    rt.shutdown();
    let after_shutdown = disk.read(&sim_dir().join(LOG_FILE_NAME)).unwrap();
    releaser.join().unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let later = disk.read(&sim_dir().join(LOG_FILE_NAME)).unwrap();
    let first_difference =
        (0..later.len().max(after_shutdown.len())).find(|&i| later.get(i) != after_shutdown.get(i));
    assert!(
        first_difference.is_none(),
        "the log changed after shutdown returned: {} bytes then, {} bytes later, first \
         difference at byte {first_difference:?}",
        after_shutdown.len(),
        later.len()
    );
    drop(rt);
    disk.power_loss();
    let rt =
        Runtime::open_with_io(app("review"), &sim_dir(), options(64 << 10, 4 << 20), io).unwrap();
    assert_eq!(dump(&rt), before);
    rt.shutdown();
}

// ---------------------------------------------------------------------------------------------
// Fault (minor): a first size that is not whole 512-byte sectors (--log-capacity 100000) makes
// a version-1 log, which never grows, silently: the writes then wait for checkpoints of a
// 100 KB log for good, whatever --log-capacity-max says (store/src/ring.rs `LogHeader::new`,
// store/src/open.rs `create_log`; nothing rounds the first size to whole sectors).

#[test]
fn reviewed_growth_a_first_size_not_whole_sectors_still_grows() {
    let dir = tempfile::tempdir().unwrap();
    let rt = Runtime::open(app("review"), dir.path(), options(100_000, 4 << 20)).unwrap();
    for i in 0..1200 {
        put(&rt, i % 40, 1500).unwrap();
    }
    let capacity = rt.metrics().log_capacity_bytes;
    rt.shutdown();
    assert!(
        capacity > 100_000,
        "a log first made 100000 bytes (not whole sectors) grew to {capacity}, with writes \
         needing more and a largest size of 4 MiB"
    );
}

// ---------------------------------------------------------------------------------------------
// Crashes at a random storage step while the runtime grows the log (its fill on its own
// thread, its header between groups): every acknowledged transfer is recovered, as
// crash::recovery_after_random_crashes_keeps_every_acknowledged_write checks for a log that
// (there) seldom grows.

fn ledger_options() -> RuntimeOptions {
    RuntimeOptions {
        log_capacity_bytes: 16 << 10,
        log_capacity_max_bytes: 1 << 20,
        // Past three quarters of the first sizes: the log doubles while half full.
        checkpoint_interval_bytes: 96 << 10,
        queue_capacity: 64,
        write_timeout: PATIENT,
        ..RuntimeOptions::default()
    }
}

#[test]
fn reviewed_growth_random_crashes_while_the_log_grows() {
    use pure_store::sim::{Faults, SimRng};
    use std::collections::BTreeMap;
    let mut grown_lives = 0;
    for seed in 0..(30 * scale_factor()) {
        let mut rng = SimRng::new(seed ^ 0x5eed);
        let disk = SimDisk::new(seed);
        let dir = Path::new("/sim/ledger");
        let mut acked: BTreeMap<u64, (i64, i64, i64)> = BTreeMap::new();
        for life in 0..3 {
            let rt = Runtime::open_with_io(app("ledger"), dir, ledger_options(), disk.clone())
                .unwrap_or_else(|e| panic!("seed {seed} life {life}: recovery failed: {e}"));
            let recovered = crate::state(&rt);
            let seq = crate::check_ledger(&recovered);
            for (s, (from, to, amount)) in &acked {
                assert!(
                    *s <= seq,
                    "seed {seed} life {life}: acknowledged {s} lost ({seq})"
                );
                let op = &recovered["ops"][*s as usize - 1];
                assert_eq!(
                    (op[1].as_i64(), op[2].as_i64(), op[3].as_i64()),
                    (Some(*from), Some(*to), Some(*amount)),
                    "seed {seed} life {life}: write {s} recovered with other content"
                );
            }
            acked.retain(|s, _| *s <= seq);
            let capacity_before = rt.metrics().log_capacity_bytes;
            disk.set_faults(Faults {
                crash_after_steps: Some(20 + rng.below(600)),
                ..Faults::default()
            });
            for _ in 0..400 {
                let (from, to, amount) = (
                    rng.below(6) as i64,
                    rng.below(6) as i64,
                    rng.below(100) as i64,
                );
                match crate::transfer(&rt, from, to, amount, "") {
                    Ok(seq) => {
                        acked.insert(seq.as_u64().unwrap(), (from, to, amount));
                    }
                    Err(HandlerError::Unavailable { .. }) => break,
                    Err(other) => panic!("seed {seed}: unexpected {other:?}"),
                }
            }
            grown_lives += u32::from(rt.metrics().log_capacity_bytes > capacity_before);
            rt.shutdown();
            drop(rt);
            if rng.one_in(2) {
                disk.power_loss();
            }
            disk.process_crash();
        }
        let rt = Runtime::open_with_io(app("ledger"), dir, ledger_options(), disk.clone())
            .unwrap_or_else(|e| panic!("seed {seed}: last recovery failed: {e}"));
        let seq = crate::check_ledger(&crate::state(&rt));
        assert!(
            acked.keys().all(|s| *s <= seq),
            "seed {seed}: lost acknowledged writes"
        );
        rt.shutdown();
    }
    eprintln!("{grown_lives} lives grew the log");
    assert!(grown_lives >= 10, "lives that grew the log: {grown_lives}");
}

fn scale_factor() -> u64 {
    std::env::var("PURE_TEST_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1)
        .max(1)
}

/// `salvage` of a directory whose log grew (damage in its last, acknowledged-past frames is
/// not needed: a whole directory salvages to itself): the new directory has the grown log's
/// size and opens with the same rows.
#[test]
fn reviewed_growth_salvage_of_a_grown_directory() {
    let temp = tempfile::tempdir().unwrap();
    let data = temp.path().join("data");
    let rt = Runtime::open(app("review"), &data, options(16 << 10, 4 << 20)).unwrap();
    for i in 0..300 {
        put(&rt, i % 30, 1500).unwrap();
    }
    let grown = rt.metrics().log_capacity_bytes;
    assert!(grown > 16 << 10);
    let before = dump(&rt);
    rt.shutdown();
    drop(rt);
    let into = temp.path().join("saved");
    pure_runtime::salvage(&data, &into).expect("salvage");
    let rt = Runtime::open(app("review"), &into, options(16 << 10, 4 << 20)).unwrap();
    assert_eq!(rt.metrics().log_capacity_bytes, grown);
    assert_eq!(dump(&rt), before);
    rt.shutdown();
}
