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
    /// Opens the existing log for reading and writing. Its writes of whole sectors at sector
    /// offsets may bypass the page cache (the real file system's `O_DIRECT`, where the file
    /// system allows it): a write then costs its own sectors on the device, where through the
    /// page cache it costs every page it touches, the partly written last one again at the
    /// next commit. Everything else behaves as `open_file`.
    fn open_log(&self, path: &Path) -> io::Result<Box<dyn IoFile>> {
        self.open_file(path)
    }
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
    /// Cuts or extends the file to `len` bytes (`ftruncate`).
    fn set_len(&self, len: u64) -> io::Result<()>;
    /// Whether writes of whole sectors bypass the page cache (see `Io::open_log`).
    fn writes_direct(&self) -> bool {
        false
    }
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
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.0.set_len(len)
    }
}

/// The device sector that direct writes are aligned to: the smallest logical block of the
/// devices in use (a device of 4 KiB logical blocks refuses them, and the log falls back to
/// the page cache).
const DIRECT_ALIGN: usize = 512;

/// The log on the real file system: reads, and writes that are not whole sectors, through the
/// page cache; writes of whole sectors at sector offsets through a second descriptor opened
/// `O_DIRECT`, where the file system takes one.
///
/// The two paths stay coherent as Linux keeps them: a direct write first writes back and then
/// drops the cached pages of its range. Either way `fdatasync` (on the cached descriptor: it
/// syncs the file, whatever wrote it) is what makes a write durable: a direct write may still
/// sit in the device's volatile cache, which the sync flushes.
struct RealLog {
    cached: File,
    /// `None` where the file system refused `O_DIRECT` at open (tmpfs), or once it refused a
    /// write (a device whose sectors are larger than `DIRECT_ALIGN`).
    direct: std::sync::Mutex<Option<File>>,
}

impl RealLog {
    /// Writes `bytes` through the direct descriptor from a buffer aligned as `O_DIRECT` needs.
    /// `Ok(false)`: the file system refused this write (nothing was written).
    fn write_direct(direct: &File, bytes: &[u8], offset: u64) -> io::Result<bool> {
        let mut buffer = vec![0u8; bytes.len() + DIRECT_ALIGN];
        let start = buffer.as_ptr().align_offset(DIRECT_ALIGN);
        let aligned = &mut buffer[start..start + bytes.len()];
        aligned.copy_from_slice(bytes);
        match direct.write_all_at(aligned, offset) {
            Ok(()) => Ok(true),
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => Ok(false),
            Err(e) => Err(e),
        }
    }
}

impl IoFile for RealLog {
    fn write_at(&self, bytes: &[u8], offset: u64) -> io::Result<()> {
        let whole_sectors = bytes.len() % DIRECT_ALIGN == 0 && offset % DIRECT_ALIGN as u64 == 0;
        if whole_sectors && !bytes.is_empty() {
            let mut direct = self.direct.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(file) = direct.as_ref() {
                if Self::write_direct(file, bytes, offset)? {
                    return Ok(());
                }
                *direct = None;
            }
        }
        self.cached.write_all_at(bytes, offset)
    }
    fn read_at(&self, bytes: &mut [u8], offset: u64) -> io::Result<()> {
        self.cached.read_exact_at(bytes, offset)
    }
    fn sync_data(&self) -> io::Result<()> {
        self.cached.sync_data()
    }
    fn size_bytes(&self) -> io::Result<u64> {
        Ok(self.cached.metadata()?.len())
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.cached.set_len(len)
    }
    fn writes_direct(&self) -> bool {
        self.direct
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
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
    fn open_log(&self, path: &Path) -> io::Result<Box<dyn IoFile>> {
        use std::os::unix::fs::OpenOptionsExt;
        let cached = OpenOptions::new().read(true).write(true).open(path)?;
        let direct = OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_DIRECT)
            .open(path)
            .ok();
        Ok(Box::new(RealLog {
            cached,
            direct: std::sync::Mutex::new(direct),
        }))
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
