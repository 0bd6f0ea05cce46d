//! A simulated disk for tests: `SimDisk` implements `Io` in memory and models what the store's
//! crash-safety argument assumes of a real disk (docs/store-format.md):
//!
//! - every file keeps its durable bytes and, separately, the writes not yet synced (the page
//!   cache shows both); `sync_data` makes a file's writes durable;
//! - creates, renames and removes are durable only after `sync_dir` of their directory;
//! - `power_loss` resolves every unsynced write as applied whole, dropped, or applied for a
//!   random subset of its 512-byte sectors, in random order, and keeps a random subset of the
//!   unsynced directory operations;
//! - faults: freeze the disk after the N-th storage step (a crash point: every later operation
//!   fails, as if the process died there), fail the N-th `sync_data` with EIO (its pages are
//!   then "marked clean": some random part of the writes reached the disk, the cache still
//!   shows all of them, and a later sync will not write them again), ENOSPC on every
//!   allocating write (one that extends a file) from the N-th on.
//!
//! Every random choice comes from a seeded `SimRng`, so a failing run replays from its seed.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::io::{mix64, Io, IoFile, Mapping};

/// Sector size of the power-loss model: a sector is written whole or not at all.
pub const SECTOR_BYTES: u64 = 512;

/// A small deterministic random generator (SplitMix64) for simulations and tests.
#[derive(Clone, Debug)]
pub struct SimRng(u64);

impl SimRng {
    pub fn new(seed: u64) -> SimRng {
        SimRng(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix64(self.0)
    }
    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
    /// True with probability `1 / n`.
    pub fn one_in(&mut self, n: u64) -> bool {
        self.below(n) == 0
    }
    pub fn fill(&mut self, bytes: &mut [u8]) {
        for b in bytes {
            *b = self.next_u64() as u8;
        }
    }
}

/// The seed for a randomized test: `PURE_TEST_SEED` if set (to replay a failure), else
/// `default`. Printed so that every run can be replayed.
pub fn test_seed(test: &str, default: u64) -> u64 {
    let seed = std::env::var("PURE_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default);
    eprintln!("{test}: seed {seed} (replay with PURE_TEST_SEED={seed})");
    seed
}

/// Fault injection settings; counters start at the last `set_faults` or `power_loss`.
#[derive(Clone, Copy, Debug, Default)]
pub struct Faults {
    /// Freeze after this many storage steps (writes, syncs, creates, renames, removes,
    /// directory syncs) have completed.
    pub crash_after_steps: Option<u64>,
    /// The `sync_data` call with this number (1-based) fails with EIO.
    pub fail_sync_at: Option<u64>,
    /// Allocating writes from this number on (1-based) fail with ENOSPC.
    pub enospc_from_alloc_write: Option<u64>,
}

type InodeId = u64;

#[derive(Clone, Debug, Default)]
struct Inode {
    durable: Vec<u8>,
    cache: Vec<u8>,
    pending: Vec<(u64, Vec<u8>)>,
}

#[derive(Clone, Debug)]
enum DirOp {
    Link(PathBuf, InodeId),
    Unlink(PathBuf),
    Rename(PathBuf, PathBuf, InodeId),
}

impl DirOp {
    fn dir(&self) -> Option<&Path> {
        match self {
            DirOp::Link(p, _) | DirOp::Unlink(p) | DirOp::Rename(_, p, _) => p.parent(),
        }
    }
    fn apply(&self, names: &mut BTreeMap<PathBuf, InodeId>) {
        match self {
            DirOp::Link(p, ino) => {
                names.insert(p.clone(), *ino);
            }
            DirOp::Unlink(p) => {
                names.remove(p);
            }
            DirOp::Rename(from, to, ino) => {
                names.remove(from);
                names.insert(to.clone(), *ino);
            }
        }
    }
}

#[derive(Clone, Debug)]
struct SimState {
    inodes: BTreeMap<InodeId, Inode>,
    names: BTreeMap<PathBuf, InodeId>,
    durable_names: BTreeMap<PathBuf, InodeId>,
    dir_ops: Vec<DirOp>,
    next_inode: InodeId,
    faults: Faults,
    steps: u64,
    syncs: u64,
    alloc_writes: u64,
    frozen: bool,
    rng: SimRng,
    salt: u64,
}

/// The simulated disk. Share it as `Arc<SimDisk>`; pass a clone as `Arc<dyn Io>`.
pub struct SimDisk {
    state: Arc<Mutex<SimState>>,
}

fn frozen_error() -> io::Error {
    io::Error::other("simulated crash: the disk is frozen")
}

impl SimDisk {
    pub fn new(seed: u64) -> Arc<SimDisk> {
        let state = SimState {
            inodes: BTreeMap::new(),
            names: BTreeMap::new(),
            durable_names: BTreeMap::new(),
            dir_ops: Vec::new(),
            next_inode: 1,
            faults: Faults::default(),
            steps: 0,
            syncs: 0,
            alloc_writes: 0,
            frozen: false,
            rng: SimRng::new(seed),
            salt: seed,
        };
        Arc::new(SimDisk {
            state: Arc::new(Mutex::new(state)),
        })
    }

    fn lock(&self) -> MutexGuard<'_, SimState> {
        self.state.lock().expect("a simulation thread panicked")
    }

    /// An independent copy of this disk (current and durable contents, faults cleared).
    pub fn fork(&self) -> Arc<SimDisk> {
        let mut state = self.lock().clone();
        state.faults = Faults::default();
        state.frozen = false;
        Arc::new(SimDisk {
            state: Arc::new(Mutex::new(state)),
        })
    }

    /// Sets the faults and restarts their counters.
    pub fn set_faults(&self, faults: Faults) {
        let mut s = self.lock();
        s.faults = faults;
        s.steps = 0;
        s.syncs = 0;
        s.alloc_writes = 0;
    }

    /// Storage steps completed since the last `set_faults` / `power_loss`.
    pub fn steps(&self) -> u64 {
        self.lock().steps
    }

    /// `sync_data` calls since the last `set_faults` / `power_loss`.
    pub fn syncs(&self) -> u64 {
        self.lock().syncs
    }

    /// Allocating writes (writes that extend a file) since the last `set_faults` /
    /// `power_loss`.
    pub fn alloc_writes(&self) -> u64 {
        self.lock().alloc_writes
    }

    /// Whether a crash point froze the disk.
    pub fn is_frozen(&self) -> bool {
        self.lock().frozen
    }

    /// The process died (kill -9): the page cache survives, so nothing is lost; the disk
    /// accepts operations again.
    pub fn process_crash(&self) {
        let mut s = self.lock();
        s.frozen = false;
        s.faults = Faults::default();
    }

    /// Power loss: resolves unsynced writes and directory operations by the model above.
    pub fn power_loss(&self) {
        let mut s = self.lock();
        let mut rng = s.rng.clone();
        for inode in s.inodes.values_mut() {
            resolve_pending(inode, &mut rng);
            inode.cache = inode.durable.clone();
        }
        let ops = std::mem::take(&mut s.dir_ops);
        let mut names = s.durable_names.clone();
        for op in ops {
            if rng.one_in(2) {
                op.apply(&mut names);
            }
        }
        s.durable_names = names.clone();
        s.names = names;
        let live: Vec<InodeId> = s.names.values().copied().collect();
        s.inodes.retain(|id, _| live.contains(id));
        s.rng = rng;
        s.frozen = false;
        s.faults = Faults::default();
        s.steps = 0;
        s.syncs = 0;
        s.alloc_writes = 0;
    }

    /// The current (page-cache) content of a file.
    pub fn read(&self, path: &Path) -> Option<Vec<u8>> {
        let s = self.lock();
        let id = s.names.get(path)?;
        Some(s.inodes[id].cache.clone())
    }

    /// Overwrites bytes of a file as damage at rest would: durable and cached at once.
    /// Call it on a disk with nothing pending (after `power_loss`).
    pub fn damage(&self, path: &Path, offset: u64, bytes: &[u8]) {
        let mut s = self.lock();
        let id = *s.names.get(path).expect("damage an existing file");
        let inode = s.inodes.get_mut(&id).expect("a named inode exists");
        write_into(&mut inode.durable, offset, bytes);
        write_into(&mut inode.cache, offset, bytes);
    }

    /// The names of the files that exist now.
    pub fn file_names(&self) -> Vec<PathBuf> {
        self.lock().names.keys().cloned().collect()
    }

    fn step(&self, op: impl FnOnce(&mut SimState) -> io::Result<()>) -> io::Result<()> {
        let mut s = self.lock();
        if s.frozen {
            return Err(frozen_error());
        }
        op(&mut s)?;
        s.steps += 1;
        if s.faults.crash_after_steps == Some(s.steps) {
            s.frozen = true;
        }
        Ok(())
    }

    fn read_op<T>(&self, op: impl FnOnce(&SimState) -> io::Result<T>) -> io::Result<T> {
        let s = self.lock();
        if s.frozen {
            return Err(frozen_error());
        }
        op(&s)
    }
}

fn write_into(target: &mut Vec<u8>, offset: u64, bytes: &[u8]) {
    let offset = offset as usize;
    if target.len() < offset + bytes.len() {
        target.resize(offset + bytes.len(), 0);
    }
    target[offset..offset + bytes.len()].copy_from_slice(bytes);
}

/// Applies each pending write whole, not at all, or sector by sector, in random order.
fn resolve_pending(inode: &mut Inode, rng: &mut SimRng) {
    let mut pending = std::mem::take(&mut inode.pending);
    while !pending.is_empty() {
        let (offset, bytes) = pending.swap_remove(rng.below(pending.len() as u64) as usize);
        match rng.below(3) {
            0 => write_into(&mut inode.durable, offset, &bytes),
            1 => {}
            _ => apply_sectors(&mut inode.durable, offset, &bytes, rng),
        }
    }
}

fn apply_sectors(durable: &mut Vec<u8>, offset: u64, bytes: &[u8], rng: &mut SimRng) {
    let end = offset + bytes.len() as u64;
    let mut start = offset;
    while start < end {
        let sector_end = ((start / SECTOR_BYTES) + 1) * SECTOR_BYTES;
        let stop = sector_end.min(end);
        if rng.one_in(2) {
            let from = (start - offset) as usize;
            write_into(durable, start, &bytes[from..from + (stop - start) as usize]);
        }
        start = stop;
    }
}

impl Io for SimDisk {
    fn create_dir_all(&self, _dir: &Path) -> io::Result<()> {
        // Directories are implicit in the simulation: a path's parent is its directory.
        self.read_op(|_| Ok(()))
    }
    fn list_dir(&self, dir: &Path) -> io::Result<Vec<String>> {
        self.read_op(|s| {
            Ok(s.names
                .keys()
                .filter(|p| p.parent() == Some(dir))
                .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
                .collect())
        })
    }
    fn create_file(&self, path: &Path) -> io::Result<Box<dyn IoFile>> {
        let mut id = 0;
        self.step(|s| {
            id = s.next_inode;
            s.next_inode += 1;
            s.inodes.insert(id, Inode::default());
            s.names.insert(path.to_path_buf(), id);
            s.dir_ops.push(DirOp::Link(path.to_path_buf(), id));
            Ok(())
        })?;
        Ok(Box::new(SimFile {
            state: self.state.clone(),
            id,
        }))
    }
    fn open_file(&self, path: &Path) -> io::Result<Box<dyn IoFile>> {
        let id = self.read_op(|s| {
            s.names
                .get(path)
                .copied()
                .ok_or_else(|| io::ErrorKind::NotFound.into())
        })?;
        Ok(Box::new(SimFile {
            state: self.state.clone(),
            id,
        }))
    }
    fn map_file(&self, path: &Path) -> io::Result<Mapping> {
        self.read_op(|s| {
            let id = s
                .names
                .get(path)
                .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
            Ok(Box::new(s.inodes[id].cache.clone()) as Mapping)
        })
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.step(|s| {
            let id = s
                .names
                .remove(from)
                .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
            s.names.insert(to.to_path_buf(), id);
            s.dir_ops
                .push(DirOp::Rename(from.to_path_buf(), to.to_path_buf(), id));
            Ok(())
        })
    }
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.step(|s| {
            s.names
                .remove(path)
                .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
            s.dir_ops.push(DirOp::Unlink(path.to_path_buf()));
            Ok(())
        })
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.step(|s| {
            let (mine, rest): (Vec<DirOp>, Vec<DirOp>) = std::mem::take(&mut s.dir_ops)
                .into_iter()
                .partition(|op| op.dir() == Some(dir));
            for op in &mine {
                op.apply(&mut s.durable_names);
            }
            s.dir_ops = rest;
            Ok(())
        })
    }
    fn session_salt(&self) -> u64 {
        let mut s = self.lock();
        s.salt = mix64(s.salt.wrapping_add(1));
        s.salt
    }
}

/// An open file of the simulated disk.
struct SimFile {
    state: Arc<Mutex<SimState>>,
    id: InodeId,
}

impl SimFile {
    fn disk(&self) -> SimDisk {
        SimDisk {
            state: self.state.clone(),
        }
    }
}

impl IoFile for SimFile {
    fn write_at(&self, bytes: &[u8], offset: u64) -> io::Result<()> {
        self.disk().step(|s| {
            let len = s.inodes.get(&self.id).map_or(0, |i| i.cache.len() as u64);
            if offset + bytes.len() as u64 > len {
                s.alloc_writes += 1;
                if s.faults
                    .enospc_from_alloc_write
                    .is_some_and(|n| s.alloc_writes >= n)
                {
                    return Err(io::Error::from_raw_os_error(libc::ENOSPC));
                }
            }
            let inode = s
                .inodes
                .get_mut(&self.id)
                .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
            write_into(&mut inode.cache, offset, bytes);
            inode.pending.push((offset, bytes.to_vec()));
            Ok(())
        })
    }
    fn read_at(&self, bytes: &mut [u8], offset: u64) -> io::Result<()> {
        self.disk().read_op(|s| {
            let inode = s
                .inodes
                .get(&self.id)
                .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
            let range = offset as usize..offset as usize + bytes.len();
            let source = inode
                .cache
                .get(range)
                .ok_or_else(|| io::Error::from(io::ErrorKind::UnexpectedEof))?;
            bytes.copy_from_slice(source);
            Ok(())
        })
    }
    fn sync_data(&self) -> io::Result<()> {
        self.disk().step(|s| {
            s.syncs += 1;
            let fail = s.faults.fail_sync_at == Some(s.syncs);
            let mut rng = s.rng.clone();
            let inode = s
                .inodes
                .get_mut(&self.id)
                .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
            if fail {
                // Part of the writes may have reached the disk before the error; the rest are
                // marked clean: dropped from the sync queue, still visible in the cache.
                resolve_pending(inode, &mut rng);
                s.rng = rng;
                return Err(io::Error::from_raw_os_error(libc::EIO));
            }
            for (offset, bytes) in std::mem::take(&mut inode.pending) {
                write_into(&mut inode.durable, offset, &bytes);
            }
            Ok(())
        })
    }
    fn size_bytes(&self) -> io::Result<u64> {
        self.disk()
            .read_op(|s| Ok(s.inodes.get(&self.id).map_or(0, |i| i.cache.len() as u64)))
    }
    /// A storage step that changes the length seen and the durable one alike (the store cuts
    /// a file only back to a length it synced, where nothing it needs lies).
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.disk().step(|s| {
            let inode = s
                .inodes
                .get_mut(&self.id)
                .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
            inode.cache.resize(len as usize, 0);
            inode.durable.resize(len as usize, 0);
            inode.pending.retain(|(offset, _)| *offset < len);
            Ok(())
        })
    }
}
