//! The raw device limit: one 4 KiB `pwrite` + one `fdatasync` per step, over a preallocated,
//! already-written file (cycling over it) or at the end of a growing file.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::harness::measure::Subject;
use crate::harness::progress;

/// The raw loops write blocks of this size, the size of a page and of most devices' blocks.
pub const BLOCK: usize = 4096;

/// A 4 KiB block whose first bytes change with every write, so no layer can skip it as unchanged.
fn stamp(block: &mut [u8], n: u64) {
    block[..8].copy_from_slice(&n.to_le_bytes());
}

/// Overwrites blocks of a file that was written with zeros and synced beforehand.
pub struct InPlace {
    path: PathBuf,
    file: File,
    blocks: u64,
    block: Vec<u8>,
    n: u64,
}

impl InPlace {
    /// Creates the file of `mib` MiB in `dir`: zeros written (not fallocated) and synced.
    pub fn create(dir: &Path, mib: u64) -> anyhow::Result<InPlace> {
        let path = dir.join("raw-prealloc");
        let blocks = (mib.max(1) << 20) / BLOCK as u64;
        let file = prealloc_file(&path, blocks)?;
        Ok(InPlace {
            path,
            file,
            blocks,
            block: vec![0xA5; BLOCK],
            n: 0,
        })
    }

    pub fn remove(self) -> anyhow::Result<()> {
        drop(self.file);
        fs::remove_file(&self.path).with_context(|| format!("removing {}", self.path.display()))
    }
}

impl Subject for InPlace {
    fn label(&self) -> String {
        "raw 4K in place".into()
    }
    fn step(&mut self) -> anyhow::Result<u64> {
        stamp(&mut self.block, self.n);
        let offset = (self.n % self.blocks) * BLOCK as u64;
        self.file
            .write_all_at(&self.block, offset)
            .context("raw pwrite")?;
        self.file.sync_data().context("raw fdatasync")?;
        self.n += 1;
        Ok(1)
    }
}

/// Writes `blocks` zero blocks and syncs them, file and directory.
fn prealloc_file(path: &Path, blocks: u64) -> anyhow::Result<File> {
    let spinner = progress::spinner(&format!(
        "zero-filling {} MiB",
        (blocks * BLOCK as u64) >> 20
    ));
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(path)
        .with_context(|| format!("creating {}", path.display()))?;
    let chunk = vec![0u8; 1 << 20];
    let mut left = blocks * BLOCK as u64;
    while left > 0 {
        let n = left.min(chunk.len() as u64) as usize;
        file.write_all(&chunk[..n])
            .with_context(|| format!("writing {}", path.display()))?;
        left -= n as u64;
    }
    file.sync_all()
        .with_context(|| format!("syncing {}", path.display()))?;
    let parent = path.parent().expect("the file lives in the work directory");
    File::open(parent)
        .and_then(|d| d.sync_all())
        .context("syncing the work directory")?;
    spinner.finish_and_clear();
    Ok(file)
}

/// Appends blocks to a file that grows with every step.
pub struct Append {
    path: PathBuf,
    file: File,
    block: Vec<u8>,
    n: u64,
}

impl Append {
    pub fn create(dir: &Path) -> anyhow::Result<Append> {
        let path = dir.join("raw-append");
        let file =
            File::create_new(&path).with_context(|| format!("creating {}", path.display()))?;
        Ok(Append {
            path,
            file,
            block: vec![0xA5; BLOCK],
            n: 0,
        })
    }

    pub fn remove(self) -> anyhow::Result<()> {
        drop(self.file);
        fs::remove_file(&self.path).with_context(|| format!("removing {}", self.path.display()))
    }
}

impl Subject for Append {
    fn label(&self) -> String {
        "raw 4K appending".into()
    }
    fn step(&mut self) -> anyhow::Result<u64> {
        stamp(&mut self.block, self.n);
        let offset = self.n * BLOCK as u64;
        self.file
            .write_all_at(&self.block, offset)
            .context("raw append write")?;
        self.file.sync_data().context("raw append fdatasync")?;
        self.n += 1;
        Ok(1)
    }
}
