//! The I/O layer under the store: the few file-system operations it needs, as a trait, so that
//! tests can run the store on a simulated disk (`crate::sim`) that crashes, tears writes and
//! fails syncs. `RealIo` is the real file system.
//!
//! The operations are deliberately coarse (positional writes, `fdatasync`, rename, directory
//! sync): they are exactly the steps whose ordering the crash-safety argument in
//! `docs/store-format.md` depends on, and nothing else.

use std::fs::{File, OpenOptions};
use std::io;
use std::ops::Deref;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// Read-only bytes of a whole file: a memory map on the real file system.
pub type Mapping = Box<dyn Deref<Target = [u8]> + Send + Sync>;

/// The exclusive lock of a store directory: held while this value lives.
pub type DirLock = Box<dyn Send + Sync>;

/// Why `Io::lock_dir` did not lock.
#[derive(Debug)]
pub enum LockError {
    /// Another open holds the lock: another process, or another open in this one. `pid` is
    /// the holder's process id where the system says (Linux's `/proc/locks`).
    Held {
        pid: Option<u32>,
    },
    Io(io::Error),
}

/// File-system operations the store uses. Every method is one storage step.
pub trait Io: Send + Sync {
    /// Creates `dir` and its parents if missing.
    fn create_dir_all(&self, dir: &Path) -> io::Result<()>;
    /// The names of the entries of `dir`.
    fn list_dir(&self, dir: &Path) -> io::Result<Vec<String>>;
    /// Creates `path` empty (truncating an existing file), open for reading and writing.
    fn create_file(&self, path: &Path) -> io::Result<Box<dyn IoFile>>;
    /// Opens an existing file for reading and writing (`NotFound` if absent).
    fn open_file(&self, path: &Path) -> io::Result<Box<dyn IoFile>>;
    /// Opens an existing file for reading only: for examining a directory that must not
    /// change, perhaps on a read-only mount. Its writes fail.
    fn open_file_read_only(&self, path: &Path) -> io::Result<Box<dyn IoFile>> {
        self.open_file(path)
    }
    /// The whole content of an existing file, read-only.
    fn map_file(&self, path: &Path) -> io::Result<Mapping>;
    /// Atomically replaces `to` by `from` (durable only after `sync_dir`).
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Removes a file (durable only after `sync_dir`).
    fn remove_file(&self, path: &Path) -> io::Result<()>;
    /// Makes the entries of `dir` (creates, renames, removes) durable.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    /// A value that differs between any two opens of a store (see "session" in the format doc).
    fn session_salt(&self) -> u64;
    /// Takes the exclusive lock of the existing directory `dir` without waiting. The
    /// simulated disk has one process, so by default this locks nothing.
    fn lock_dir(&self, _dir: &Path) -> Result<DirLock, LockError> {
        Ok(Box::new(()))
    }
}

/// An open file.
pub trait IoFile: Send + Sync {
    /// Writes all of `bytes` at `offset` (one `pwrite` on the real file system).
    fn write_at(&self, bytes: &[u8], offset: u64) -> io::Result<()>;
    /// Fills `bytes` from `offset`; an error if the file is shorter.
    fn read_at(&self, bytes: &mut [u8], offset: u64) -> io::Result<()>;
    /// `fdatasync`: the written data (and the size) are on stable storage when it returns Ok.
    fn sync_data(&self) -> io::Result<()>;
    /// The file's length in bytes.
    fn size_bytes(&self) -> io::Result<u64>;
}

/// The real file system.
pub struct RealIo;

struct RealFile(File);

impl IoFile for RealFile {
    fn write_at(&self, bytes: &[u8], offset: u64) -> io::Result<()> {
        self.0.write_all_at(bytes, offset)
    }
    fn read_at(&self, bytes: &mut [u8], offset: u64) -> io::Result<()> {
        self.0.read_exact_at(bytes, offset)
    }
    fn sync_data(&self) -> io::Result<()> {
        self.0.sync_data()
    }
    fn size_bytes(&self) -> io::Result<u64> {
        Ok(self.0.metadata()?.len())
    }
}

impl Io for RealIo {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        std::fs::create_dir_all(dir)
    }
    fn list_dir(&self, dir: &Path) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in std::fs::read_dir(dir)? {
            names.push(entry?.file_name().to_string_lossy().into_owned());
        }
        Ok(names)
    }
    fn create_file(&self, path: &Path) -> io::Result<Box<dyn IoFile>> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)?;
        Ok(Box::new(RealFile(file)))
    }
    fn open_file(&self, path: &Path) -> io::Result<Box<dyn IoFile>> {
        let file = OpenOptions::new().read(true).write(true).open(path)?;
        Ok(Box::new(RealFile(file)))
    }
    fn open_file_read_only(&self, path: &Path) -> io::Result<Box<dyn IoFile>> {
        Ok(Box::new(RealFile(File::open(path)?)))
    }
    fn map_file(&self, path: &Path) -> io::Result<Mapping> {
        let file = File::open(path)?;
        // SAFETY: checkpoint files are written once through a temporary name and never modified
        // after the rename that makes them visible; the store only maps renamed checkpoints, so
        // the mapped bytes do not change under the reader (unless another process tampers with
        // the store's directory, which is outside the contract).
        let map = unsafe { memmap2::Mmap::map(&file)? };
        Ok(Box::new(map))
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        File::open(dir)?.sync_all()
    }
    fn lock_dir(&self, dir: &Path) -> Result<DirLock, LockError> {
        lock_directory(dir)
    }
    fn session_salt(&self) -> u64 {
        static OPENS: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        let opens = OPENS.fetch_add(1, Ordering::Relaxed);
        mix64(nanos ^ (u64::from(std::process::id()) << 32) ^ opens.rotate_left(17))
    }
}

/// `flock(LOCK_EX | LOCK_NB)` on the directory itself, not on a file in it: nothing is created,
/// so `check` and `salvage` can lock a directory they must not change (or that is mounted
/// read-only), and the kernel drops the lock when the process dies, so a restart after kill -9
/// needs no cleanup. flock locks belong to the open file description: a second open in the
/// same process conflicts too, and closing some other descriptor of the directory (as
/// `sync_dir` does) does not release it, as it would a POSIX record lock.
fn lock_directory(dir: &Path) -> Result<DirLock, LockError> {
    use std::os::fd::AsRawFd;
    let handle = File::open(dir).map_err(LockError::Io)?;
    // SAFETY: flock(2) on a descriptor this function owns; it touches no memory.
    let locked = unsafe { libc::flock(handle.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if locked == 0 {
        return Ok(Box::new(handle));
    }
    let error = io::Error::last_os_error();
    if error.raw_os_error() == Some(libc::EWOULDBLOCK) {
        return Err(LockError::Held {
            pid: lock_holder(&handle),
        });
    }
    Err(LockError::Io(error))
}

/// The process holding a flock on `file`, from `/proc/locks` (lines such as
/// `1: FLOCK  ADVISORY  WRITE 4242 fd:00:1234 0 EOF`: the pid, then device major:minor in hex
/// and the inode number). `None` where that file is missing or names no holder.
fn lock_holder(file: &File) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    let metadata = file.metadata().ok()?;
    let device = metadata.dev();
    let wanted = format!(
        "{:02x}:{:02x}:{}",
        libc::major(device),
        libc::minor(device),
        metadata.ino()
    );
    let locks = std::fs::read_to_string("/proc/locks").ok()?;
    locks.lines().find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let is_flock = fields.get(1) == Some(&"FLOCK") && fields.get(5) == Some(&wanted.as_str());
        is_flock.then(|| fields[4].parse().ok()).flatten()
    })
}

/// SplitMix64's finalizer: spreads every input bit over the output.
pub(crate) fn mix64(mut x: u64) -> u64 {
    x ^= x >> 30;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}
