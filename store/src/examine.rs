//! A way forward from damaged data: examining a store directory without changing it, and
//! seeding a new one with a state saved from it.
//!
//! `Store::open` refuses damage inside acknowledged data, as it must. `examine` reads what open
//! would read and reports all of it instead of stopping at the first problem: every checkpoint
//! and whether it is valid, the log's header and frames, how the log ends (clean, a torn tail
//! open would cut, or damage with its file and byte), and the longest valid prefix of the
//! state: the newest valid checkpoint and every record after it up to the first damage. It
//! writes nothing, removes nothing and syncs nothing, so it also works on a directory that must
//! not change (or is mounted read-only); it takes the directory's lock like every opener.
//!
//! `seed` creates a new store whose state is an image the caller writes, covering a given LSN:
//! a fresh log whose first frame will hold the next LSN, and one checkpoint. That is how a
//! salvaged prefix becomes a directory that opens cleanly, with the LSNs it had.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::checkpoint::{self, CheckpointHeader, CheckpointImage, CheckpointWriter};
use crate::error::{io_error, Error};
use crate::io::{DirLock, Io};
use crate::open::{self, LOG_FILE_NAME};
use crate::recovery::{self, ChainState, Replay};
use crate::ring::{self, LogHeader};
use crate::ring_reader::RingReader;
use crate::{Lsn, Record, StoreOptions, TailCut};

/// What a store directory holds, and what of it can be saved. Holds the directory's lock.
pub struct Examination {
    pub dir: PathBuf,
    _lock: DirLock,
    /// The log file: its header, or why it cannot be used.
    pub log: LogFinding,
    /// Every checkpoint file, newest first.
    pub checkpoints: Vec<CheckpointFinding>,
    /// Temporary files of interrupted checkpoints or log creations (open removes them).
    pub leftovers: Vec<String>,
    /// The newest valid checkpoint of this log: where the saved prefix starts.
    pub base: Option<CheckpointImage>,
    /// The records after the base, in order, up to the first damage: with the base, the
    /// longest valid prefix of the state.
    pub records: Vec<Record>,
    /// Frames of the log read after the base (the records above come from these).
    pub frames: u64,
    pub ending: Ending,
}

#[derive(Debug)]
pub enum LogFinding {
    /// No log file: a new directory if there is no checkpoint either.
    Missing,
    /// The header (or the file's size) is damaged: nothing in the log can be read.
    Damaged(Error),
    Valid {
        capacity: u64,
        log_id: u64,
    },
}

#[derive(Debug)]
pub struct CheckpointFinding {
    pub lsn: Lsn,
    pub path: PathBuf,
    pub bytes: u64,
    /// Why it cannot be used: damaged (with its byte), or written for another log.
    pub problem: Option<String>,
}

/// How the log ends after the base.
#[derive(Debug)]
pub enum Ending {
    /// At zero-filled space or an older lap: nothing is lost.
    Clean { position: u64 },
    /// A frame that was never acknowledged, torn by a crash: open cuts it and goes on.
    TornTail(TailCut),
    /// Damage inside acknowledged data: `path` at byte `offset` (stream `position`). Records
    /// from `first_lost_lsn` on cannot be read; intact frames after the damage show that the
    /// log had acknowledged up to `acknowledged_lsn` and held records up to `highest_lsn`.
    Damage {
        path: PathBuf,
        offset: u64,
        position: u64,
        reason: String,
        first_lost_lsn: u64,
        acknowledged_lsn: u64,
        highest_lsn: u64,
    },
    /// The log ends before the LSN its newest checkpoint covers: records are missing.
    Short { covered: u64, last_lsn: u64 },
    /// The log cannot be read (missing, damaged header, or another log than the checkpoint's).
    Unreadable,
}

impl Examination {
    /// The LSN of the last record of the saved prefix.
    pub fn prefix_lsn(&self) -> Lsn {
        self.records
            .last()
            .map(|r| r.lsn)
            .or_else(|| self.base.as_ref().map(|b| b.lsn()))
            .unwrap_or(Lsn(0))
    }

    /// The capacity of a log that can hold this directory's state again.
    pub fn log_capacity_bytes(&self) -> Option<u64> {
        match self.log {
            LogFinding::Valid { capacity, .. } => Some(capacity),
            _ => None,
        }
    }

    /// What `Store::open` would do: `None` if it opens (cutting a torn tail at most), else the
    /// error it would refuse with.
    pub fn open_refusal(&self) -> Option<String> {
        if let Some(newest) = self.checkpoints.first() {
            if let Some(problem) = &newest.problem {
                return Some(format!(
                    "the newest checkpoint {} is unusable: {problem}",
                    newest.path.display()
                ));
            }
        }
        match (&self.log, self.checkpoints.is_empty()) {
            (LogFinding::Missing, true) => return None,
            (LogFinding::Missing, false) => {
                return Some("the log file is missing while checkpoints exist".into())
            }
            (LogFinding::Damaged(e), _) => return Some(e.to_string()),
            (LogFinding::Valid { .. }, _) => {}
        }
        match &self.ending {
            Ending::Clean { .. } | Ending::TornTail(_) => None,
            Ending::Damage {
                path,
                offset,
                position,
                reason,
                ..
            } => Some(format!(
                "corrupt data in {} at byte {offset}: stream position {position}: {reason}",
                path.display()
            )),
            Ending::Short { covered, last_lsn } => Some(format!(
                "the log ends at LSN {last_lsn}, before LSN {covered}, which the newest \
                 checkpoint covers"
            )),
            Ending::Unreadable => Some("the log cannot be read".into()),
        }
    }
}

/// Examines the existing store directory `dir` (see the module doc).
pub fn examine(io: Arc<dyn Io>, dir: &Path) -> Result<Examination, Error> {
    let lock = open::lock(&*io, dir)?;
    let names = io
        .list_dir(dir)
        .map_err(|e| io_error("list directory", dir, e))?;
    let leftovers = names
        .iter()
        .filter(|n| checkpoint::is_tmp_name(n) || *n == open::LOG_TMP_NAME)
        .cloned()
        .collect();
    let log_path = dir.join(LOG_FILE_NAME);
    let (log, log_header) = read_log_header(&*io, &names, &log_path);
    let (checkpoints, base) = examine_checkpoints(&*io, dir, &names, log_header.as_ref());
    let mut examination = Examination {
        dir: dir.to_path_buf(),
        _lock: lock,
        log,
        checkpoints,
        leftovers,
        base: None,
        records: Vec::new(),
        frames: 0,
        ending: Ending::Unreadable,
    };
    let Some(header) = log_header else {
        examination.base = base.map(|(image, _)| image);
        return Ok(examination);
    };
    let (start, covered) = match &base {
        Some((image, header)) => (header.replay, image.lsn().0),
        None => (open::genesis(&header), 0),
    };
    let file = io
        .open_file_read_only(&log_path)
        .map_err(|e| io_error("open", &log_path, e))?;
    let ring = RingReader::new(&*file, header);
    let replay =
        recovery::replay(&ring, start, covered).map_err(|e| io_error("read", &log_path, e))?;
    examination.ending = ending(&replay, &log_path, &header, covered);
    examination.frames = replay.marks.len() as u64;
    examination.records = replay.records;
    examination.base = base.map(|(image, _)| image);
    Ok(examination)
}

fn read_log_header(io: &dyn Io, names: &[String], path: &Path) -> (LogFinding, Option<LogHeader>) {
    if !names.iter().any(|n| n == LOG_FILE_NAME) {
        return (LogFinding::Missing, None);
    }
    let header = io
        .open_file_read_only(path)
        .map_err(|e| io_error("open", path, e))
        .and_then(|file| ring::read_header(&*file, path));
    match header {
        Ok(header) => (
            LogFinding::Valid {
                capacity: header.capacity,
                log_id: header.log_id,
            },
            Some(header),
        ),
        Err(e) => (LogFinding::Damaged(e), None),
    }
}

type Base = (CheckpointImage, CheckpointHeader);

/// Every checkpoint, newest first, with the newest usable one: valid, and of this log when the
/// log can be read.
fn examine_checkpoints(
    io: &dyn Io,
    dir: &Path,
    names: &[String],
    log: Option<&LogHeader>,
) -> (Vec<CheckpointFinding>, Option<Base>) {
    let mut lsns: Vec<Lsn> = names
        .iter()
        .filter_map(|n| checkpoint::parse_name(n))
        .collect();
    lsns.sort_unstable_by(|a, b| b.cmp(a));
    let mut findings = Vec::new();
    let mut base = None;
    for lsn in lsns {
        let path = dir.join(checkpoint::file_name(lsn));
        let bytes = io.map_file(&path).map_or(0, |m| m.len() as u64);
        let problem = match checkpoint::load(io, &path) {
            Err(e) => Some(e.to_string()),
            Ok((_, header)) if log.is_some_and(|log| log.log_id != header.log_id) => {
                Some("it belongs to another log".to_string())
            }
            Ok((_, header)) if header.replay.next_lsn > header.covered_lsn + 1 => {
                Some("its replay starts after the LSN it covers".to_string())
            }
            Ok(loaded) => {
                if base.is_none() {
                    base = Some(loaded);
                }
                None
            }
        };
        findings.push(CheckpointFinding {
            lsn,
            path,
            bytes,
            problem,
        });
    }
    (findings, base)
}

fn ending(replay: &Replay, log_path: &Path, header: &LogHeader, covered: u64) -> Ending {
    if let Some(damage) = &replay.damage {
        return Ending::Damage {
            path: log_path.to_path_buf(),
            offset: header.file_offset(damage.position),
            position: damage.position,
            reason: damage.reason.clone(),
            first_lost_lsn: replay.end.next_lsn,
            acknowledged_lsn: damage.highest_acknowledged_lsn,
            highest_lsn: damage.highest_lsn,
        };
    }
    if replay.end.next_lsn <= covered {
        return Ending::Short {
            covered,
            last_lsn: replay.end.next_lsn - 1,
        };
    }
    match &replay.cut {
        Some(cut) => Ending::TornTail(cut.clone()),
        None => Ending::Clean {
            position: replay.end.position,
        },
    }
}

/// Creates a new store in `dir` (created if missing; it must hold no store yet) whose state
/// is the image `write_image` streams, covering every LSN up to `covered`: a fresh log, and
/// for `covered` > 0 one checkpoint, durable when this returns. Opening it recovers that
/// state, and its next record is `covered + 1`.
pub fn seed(
    io: Arc<dyn Io>,
    dir: &Path,
    options: StoreOptions,
    covered: Lsn,
    write_image: impl FnOnce(&mut CheckpointWriter) -> std::io::Result<()>,
) -> Result<(), Error> {
    io.create_dir_all(dir)
        .map_err(|e| io_error("create directory", dir, e))?;
    let _lock = open::lock(&*io, dir)?;
    let names = io
        .list_dir(dir)
        .map_err(|e| io_error("list directory", dir, e))?;
    let taken = names
        .iter()
        .any(|n| n == LOG_FILE_NAME || checkpoint::parse_name(n).is_some());
    if taken {
        return Err(Error::Exists {
            dir: dir.to_path_buf(),
        });
    }
    let header = LogHeader::new(open::first_capacity(&options), io.session_salt());
    ring::create(&*io, dir, &dir.join(LOG_FILE_NAME), header)?;
    if covered.0 == 0 {
        return Ok(());
    }
    let replay = ChainState {
        next_lsn: covered.0 + 1,
        ..open::genesis(&header)
    };
    let checkpoint = CheckpointHeader {
        covered_lsn: covered.0,
        replay,
        log_id: header.log_id,
    };
    let mut writer = CheckpointWriter::create(io, dir, checkpoint)?;
    let written = write_image(&mut writer);
    // `finish` also after a failed write: it removes the temporary file.
    let finished = writer.finish();
    written.map_err(|e| io_error("write", dir, e))?;
    finished.map(|_| ())
}
