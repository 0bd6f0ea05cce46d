//! The byte counter for "how much did this measurement write to the device": the block device's
//! sectors-written counter (`/sys/dev/block/MAJ:MIN/stat`) for the file system that holds the
//! benchmark directory. It counts everything that reached the device, file-system metadata and
//! journal included, and also whatever other processes wrote to that device meanwhile (this
//! machine is shared: compare runs, and repeat them).
//!
//! `/proc/self/io` `write_bytes` is no cross-check here: the kernel accounts a whole page-cache
//! folio (up to 2 MiB on recent kernels) each time one 4 KiB block of it is dirtied, so for writes
//! in place it overstates by orders of magnitude what reaches the device.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The sectors-written counter of the block device holding a directory.
#[derive(Clone, Debug)]
pub struct DeviceCounter {
    stat_path: PathBuf,
    /// "MAJ:MIN", for the report.
    pub device: String,
}

/// The sector size of `/sys/.../stat` counters: always 512 bytes, whatever the device's own.
const STAT_SECTOR_BYTES: u64 = 512;
/// 1-based field 7 of the block stat file is "sectors written".
const SECTORS_WRITTEN_FIELD: usize = 6;

impl DeviceCounter {
    /// Finds the counter for the file system that holds `path`. `None` when the file system has
    /// no block device of its own (tmpfs, overlayfs, btrfs subvolumes report anonymous devices).
    pub fn for_path(path: &Path) -> Option<DeviceCounter> {
        let dev = fs::metadata(path).ok()?.dev();
        let (major, minor) = (libc::major(dev), libc::minor(dev));
        let device = format!("{major}:{minor}");
        let stat_path = PathBuf::from(format!("/sys/dev/block/{device}/stat"));
        let counter = DeviceCounter { stat_path, device };
        counter.bytes_written().map(|_| counter)
    }

    /// Bytes written to the device since boot.
    pub fn bytes_written(&self) -> Option<u64> {
        let text = fs::read_to_string(&self.stat_path).ok()?;
        parse_sectors_written(&text).map(|sectors| sectors * STAT_SECTOR_BYTES)
    }
}

fn parse_sectors_written(stat: &str) -> Option<u64> {
    stat.split_whitespace()
        .nth(SECTORS_WRITTEN_FIELD)?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sectors_written_is_the_seventh_field() {
        let stat = "  4123  17 300000  900  5555  66 777777  8000  0  9000  9900";
        assert_eq!(parse_sectors_written(stat), Some(777_777));
        assert_eq!(parse_sectors_written("1 2 3"), None);
    }
}
