//! SQLite's settings (pragmas) as values, their two presets, the command line that chooses them,
//! and applying them to a connection: one definition for every benchmark that runs SQLite (the
//! TPC-C twin, kv). Knows pragmas; knows no benchmark's schema or statements.

use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::ValueEnum;
use rusqlite::Connection;
use serde::Serialize;

/// How long a connection waits for a lock before SQLITE_BUSY (SQLite's own sleeping handler;
/// rusqlite's default is 5 s). With the application's write lock it is only ever reached by
/// readers of a rollback-journal database waiting for a commit, or by another process.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// Prepared statements kept per connection (rusqlite's default is 16; the five transactions
/// use about 40, the ten per-district stock reads included).
pub const STATEMENT_CACHE: usize = 128;

/// The WAL the tuned preset lets grow before an automatic checkpoint: about 40 MB of frames.
pub const TUNED_WAL_BYTES: u64 = 40_000_000;

/// `PRAGMA journal_mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum JournalMode {
    Delete,
    Truncate,
    Persist,
    Memory,
    Wal,
    Off,
}

/// `PRAGMA synchronous`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Synchronous {
    Off,
    Normal,
    Full,
    Extra,
}

/// `PRAGMA temp_store`: where statement and savepoint journals and temporary b-trees live.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TempStore {
    /// The compile-time choice (the bundled build: files).
    Default,
    File,
    Memory,
}

/// `PRAGMA locking_mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LockingMode {
    Normal,
    /// The connection keeps its locks (and, in WAL mode, the WAL index in heap memory): only
    /// for one connection per file, i.e. the grouped mode. Nothing else can open the file
    /// meanwhile, a dump or a check included.
    Exclusive,
}

/// The two presets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Preset {
    /// SQLite as the bundled build ships it: rollback journal (DELETE), synchronous=FULL,
    /// 4 KiB pages, no mmap, 2,000 KiB of cache, temp_store from the build (files),
    /// autocheckpoint 1,000 pages.
    Default,
    /// WAL, synchronous=FULL (durable at every commit, like Pure), 4 KiB pages, mmap 1 GiB,
    /// 64 MiB of cache, temp_store=MEMORY, autocheckpoint after about 40 MB of WAL frames.
    Tuned,
}

/// SQLite's settings for one database: `page_size` counts when the file is created (by
/// the benchmark's loader); the others are applied to every connection.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Settings {
    pub journal_mode: JournalMode,
    pub synchronous: Synchronous,
    /// Bytes per page (512..=65536, a power of two); fixed once the file has a table.
    pub page_size: u32,
    /// Bytes of the file read through a memory mapping (0: none).
    pub mmap_size: u64,
    /// The page cache per connection, in KiB (`PRAGMA cache_size = -N`).
    pub cache_size_kib: u64,
    pub temp_store: TempStore,
    /// Pages of WAL after which a commit runs a checkpoint (0: never automatically).
    pub wal_autocheckpoint: u32,
    /// `None`: leave SQLite's (normal).
    pub locking_mode: Option<LockingMode>,
}

impl Settings {
    /// SQLite's defaults as the bundled libsqlite3-sys build ships them.
    #[allow(dead_code)] // API the harness does not call yet (a binary crate flags it)
    pub fn default_preset() -> Settings {
        Settings {
            journal_mode: JournalMode::Delete,
            synchronous: Synchronous::Full,
            page_size: 4096,
            mmap_size: 0,
            cache_size_kib: 2000,
            temp_store: TempStore::Default,
            wal_autocheckpoint: 1000,
            locking_mode: None,
        }
    }

    /// The configuration for a fair, durable comparison with Pure: the sweep that chose it is
    /// in docs/research/012-tpcc-vs-sqlite.md.
    pub fn tuned() -> Settings {
        Settings {
            journal_mode: JournalMode::Wal,
            synchronous: Synchronous::Full,
            page_size: 4096,
            mmap_size: 1 << 30,
            cache_size_kib: 64 * 1024,
            temp_store: TempStore::Memory,
            wal_autocheckpoint: autocheckpoint_pages(TUNED_WAL_BYTES, 4096),
            locking_mode: None,
        }
    }

    pub fn preset(preset: Preset) -> Settings {
        match preset {
            Preset::Default => Settings::default_preset(),
            Preset::Tuned => Settings::tuned(),
        }
    }

    /// One line for a report: `journal_mode=wal synchronous=full page_size=4096 ...`.
    pub fn describe(&self) -> String {
        let mut s = format!(
            "journal_mode={} synchronous={} page_size={} mmap_size={} cache_size={}KiB \
             temp_store={} wal_autocheckpoint={} foreign_keys=off",
            self.journal_mode.pragma(),
            self.synchronous.pragma(),
            self.page_size,
            self.mmap_size,
            self.cache_size_kib,
            self.temp_store.pragma(),
            self.wal_autocheckpoint,
        );
        if let Some(mode) = self.locking_mode {
            s.push_str(&format!(" locking_mode={}", mode.pragma()));
        }
        s
    }

    /// Applies everything but `page_size` to a connection, `journal_mode` checked (a database
    /// that another connection holds in WAL mode cannot leave it).
    pub(crate) fn apply(&self, conn: &Connection) -> Result<()> {
        conn.pragma_update(None, "foreign_keys", "OFF")?;
        conn.busy_timeout(BUSY_TIMEOUT)?;
        conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        if let Some(mode) = self.locking_mode {
            conn.pragma_update(None, "locking_mode", mode.pragma())?;
        }
        let asked = self.journal_mode.pragma();
        let mode: String =
            conn.pragma_update_and_check(None, "journal_mode", asked, |r| r.get(0))?;
        if !mode.eq_ignore_ascii_case(asked) {
            bail!("journal_mode={asked} was asked but the database stays in {mode} mode");
        }
        conn.pragma_update(None, "synchronous", self.synchronous.pragma())?;
        conn.pragma_update(None, "cache_size", -(self.cache_size_kib as i64))?;
        conn.pragma_update(None, "mmap_size", self.mmap_size as i64)?;
        conn.pragma_update(None, "temp_store", self.temp_store.pragma())?;
        conn.pragma_update(None, "wal_autocheckpoint", self.wal_autocheckpoint)?;
        Ok(())
    }
}

/// Pages of WAL that hold `bytes` of frames (a frame is a page plus a 24-byte header).
pub fn autocheckpoint_pages(bytes: u64, page_size: u32) -> u32 {
    (bytes / (u64::from(page_size) + 24)) as u32
}

impl JournalMode {
    pub fn pragma(self) -> &'static str {
        match self {
            JournalMode::Delete => "delete",
            JournalMode::Truncate => "truncate",
            JournalMode::Persist => "persist",
            JournalMode::Memory => "memory",
            JournalMode::Wal => "wal",
            JournalMode::Off => "off",
        }
    }
}

impl Synchronous {
    pub fn pragma(self) -> &'static str {
        match self {
            Synchronous::Off => "off",
            Synchronous::Normal => "normal",
            Synchronous::Full => "full",
            Synchronous::Extra => "extra",
        }
    }
}

impl TempStore {
    pub fn pragma(self) -> &'static str {
        match self {
            TempStore::Default => "default",
            TempStore::File => "file",
            TempStore::Memory => "memory",
        }
    }
}

impl LockingMode {
    pub fn pragma(self) -> &'static str {
        match self {
            LockingMode::Normal => "normal",
            LockingMode::Exclusive => "exclusive",
        }
    }
}

/// SQLite's settings on the command line: a preset, and any setting overridden by its own flag.
#[derive(clap::Args, Clone, Debug)]
pub struct SqliteOptions {
    /// SQLite's settings to start from: `tuned` (WAL, synchronous=FULL, 4 KiB pages, mmap 1 GiB,
    /// 64 MiB cache, temp_store=MEMORY, checkpoint after ~40 MB of WAL) or `default` (the
    /// bundled build's: rollback journal DELETE, synchronous=FULL, 4 KiB pages, no mmap,
    /// 2,000 KiB cache, temp files, checkpoint after 1,000 pages). The flags below override
    /// single settings. Foreign keys are always off, 128 statements are cached per connection,
    /// and the busy timeout is 10 s.
    #[arg(long = "sqlite-preset", value_enum, default_value = "tuned")]
    pub preset: Preset,

    /// PRAGMA journal_mode. WAL is kept in the file by the loader; the others apply per
    /// connection.
    #[arg(long = "sqlite-journal-mode", value_enum)]
    pub journal_mode: Option<JournalMode>,

    /// PRAGMA synchronous. FULL syncs at every commit (in WAL mode: the WAL), which is what
    /// makes an acknowledged transaction durable, as in Pure; NORMAL in WAL mode syncs only at
    /// checkpoints and is not a comparable configuration.
    #[arg(long = "sqlite-synchronous", value_enum)]
    pub synchronous: Option<Synchronous>,

    /// PRAGMA page_size in bytes (a power of two, 512..=65536). Only the load uses it: a file
    /// keeps the page size it was created with. At pages under 4 KiB, CUSTOMER (and under
    /// 2 KiB also STOCK) become rowid tables, since their rows would spill into overflow pages
    /// in a WITHOUT ROWID b-tree.
    #[arg(long = "sqlite-page-size", value_parser = parse_page_size)]
    pub page_size: Option<u32>,

    /// PRAGMA mmap_size in bytes: how much of the file is read through a memory mapping
    /// (0: none; the bundled build caps it at about 2 GiB).
    #[arg(long = "sqlite-mmap-size")]
    pub mmap_size: Option<u64>,

    /// The page cache of each connection in KiB (PRAGMA cache_size = -N).
    #[arg(long = "sqlite-cache-size")]
    pub cache_size_kib: Option<u64>,

    /// PRAGMA temp_store: `memory` keeps savepoint and statement journals in RAM whatever their
    /// size; `file` and `default` (the bundled build's choice: files) spill them to a temp
    /// file past 64 KiB.
    #[arg(long = "sqlite-temp-store", value_enum)]
    pub temp_store: Option<TempStore>,

    /// PRAGMA wal_autocheckpoint in pages (0: no automatic checkpoint). The commit that
    /// crosses it runs the checkpoint. Unset with the tuned preset: about 40 MB of WAL frames
    /// at the chosen page size.
    #[arg(long = "sqlite-wal-autocheckpoint")]
    pub wal_autocheckpoint: Option<u32>,

    /// PRAGMA locking_mode. `exclusive` only suits one connection per file (the grouped mode):
    /// with it, per-transaction sessions after the first cannot get at the file.
    #[arg(long = "sqlite-locking-mode", value_enum)]
    pub locking_mode: Option<LockingMode>,
}

impl Settings {
    /// The command-line flags that give exactly these settings (the tuned preset, every
    /// setting overridden), for a child `pure-bench` that must use them.
    pub fn to_args(&self) -> Vec<String> {
        fn name<T: ValueEnum>(v: T) -> String {
            v.to_possible_value()
                .expect("no skipped values")
                .get_name()
                .to_string()
        }
        let mut args = vec![
            "--sqlite-preset=tuned".to_string(),
            format!("--sqlite-journal-mode={}", name(self.journal_mode)),
            format!("--sqlite-synchronous={}", name(self.synchronous)),
            format!("--sqlite-page-size={}", self.page_size),
            format!("--sqlite-mmap-size={}", self.mmap_size),
            format!("--sqlite-cache-size={}", self.cache_size_kib),
            format!("--sqlite-temp-store={}", name(self.temp_store)),
            format!("--sqlite-wal-autocheckpoint={}", self.wal_autocheckpoint),
        ];
        if let Some(mode) = self.locking_mode {
            args.push(format!("--sqlite-locking-mode={}", name(mode)));
        }
        args
    }
}

fn parse_page_size(text: &str) -> Result<u32> {
    let size: u32 = text.parse().context("a page size is a number of bytes")?;
    if !(512..=65536).contains(&size) || !size.is_power_of_two() {
        bail!("a page size is a power of two from 512 to 65536, not {size}");
    }
    Ok(size)
}

impl SqliteOptions {
    /// The preset with the flags given applied to it.
    pub fn settings(&self) -> Settings {
        let mut s = Settings::preset(self.preset);
        if let Some(v) = self.journal_mode {
            s.journal_mode = v;
        }
        if let Some(v) = self.synchronous {
            s.synchronous = v;
        }
        if let Some(v) = self.page_size {
            s.page_size = v;
            if self.preset == Preset::Tuned {
                s.wal_autocheckpoint = autocheckpoint_pages(TUNED_WAL_BYTES, v);
            }
        }
        if let Some(v) = self.mmap_size {
            s.mmap_size = v;
        }
        if let Some(v) = self.cache_size_kib {
            s.cache_size_kib = v;
        }
        if let Some(v) = self.temp_store {
            s.temp_store = v;
        }
        if let Some(v) = self.wal_autocheckpoint {
            s.wal_autocheckpoint = v;
        }
        if let Some(v) = self.locking_mode {
            s.locking_mode = Some(v);
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        sqlite: SqliteOptions,
    }

    /// A child process given `to_args` uses exactly the parent's settings.
    #[test]
    fn the_flags_of_settings_give_the_same_settings() {
        let mut odd = Settings::default_preset();
        odd.page_size = 1024;
        odd.wal_autocheckpoint = 7;
        odd.locking_mode = Some(LockingMode::Exclusive);
        odd.temp_store = TempStore::Memory;
        for settings in [Settings::tuned(), Settings::default_preset(), odd] {
            let args = std::iter::once("x".to_string()).chain(settings.to_args());
            let parsed = Cli::try_parse_from(args).expect("the flags parse");
            assert_eq!(parsed.sqlite.settings(), settings);
        }
    }
}
