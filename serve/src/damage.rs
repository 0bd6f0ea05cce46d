//! `pure-serve check` and `pure-serve salvage`: reports on a data directory that may be
//! damaged, in words a user can act on. The examining and the writing are the runtime's
//! (`pure_runtime::inspect`, `pure_runtime::salvage`); this module only prints.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Context as _;
use pure_runtime::{Ending, Inspection, LogFinding, Undecodable};

use crate::exit;

/// Runs `check`: prints the report; exit 0 if the directory would open cleanly, else 4.
pub fn check(data: &Path) -> Result<u8, exit::Failure> {
    let inspection = pure_runtime::inspect(data)
        .with_context(|| format!("examining {}", data.display()))
        .map_err(|error| exit::Failure::new(exit::DATA, error))?;
    print!("{}", report(&inspection));
    match inspection.open_refusal() {
        None => {
            println!("result: {} opens cleanly", data.display());
            Ok(exit::OK)
        }
        Some(refusal) => {
            println!("result: {} does NOT open: {refusal}", data.display());
            let saves = match inspection.decoded_lsn {
                0 => "nothing but an empty state".to_string(),
                lsn => format!("LSNs 1..={lsn}"),
            };
            println!(
                "        `pure-serve salvage --data {} --into NEW` saves {saves} into NEW",
                data.display()
            );
            Ok(exit::DATA)
        }
    }
}

/// Runs `salvage`: writes the valid prefix of `data` into `into`, prints what was saved and
/// what was not.
pub fn salvage(data: &Path, into: &Path) -> Result<u8, exit::Failure> {
    let salvaged = pure_runtime::salvage(data, into)
        .with_context(|| format!("salvaging {} into {}", data.display(), into.display()))
        .map_err(|error| exit::Failure::new(exit::DATA, error))?;
    let from = &salvaged.from;
    print!("{}", report(from));
    let saved = salvaged.saved_lsn;
    // The checkpoint the saved state starts from, unless it did not decode.
    let base = match &from.undecodable {
        Some(Undecodable::Image { .. }) => 0,
        _ => from.store.base.as_ref().map_or(0, |b| b.lsn().0),
    };
    if saved == 0 {
        println!(
            "saved:     nothing (an empty state) into {}",
            into.display()
        );
    } else {
        println!(
            "saved:     LSNs 1..={saved} ({}; {} records after it) into {}",
            match base {
                0 => "no checkpoint".to_string(),
                lsn => format!("the checkpoint at LSN {lsn}"),
            },
            saved.saturating_sub(base),
            into.display()
        );
    }
    println!("not saved: {}", not_saved(from));
    println!(
        "{} opens cleanly at LSN {saved}; {} was not changed. Keep it until you are sure of the \
         new directory, then serve that one with --data {}.",
        into.display(),
        data.display(),
        into.display()
    );
    Ok(exit::OK)
}

/// What a salvage leaves behind, in one sentence.
fn not_saved(inspection: &Inspection) -> String {
    let next = inspection.decoded_lsn + 1;
    match &inspection.undecodable {
        Some(Undecodable::Image { lsn, reason }) => {
            return format!(
                "LSN 1 onward: the checkpoint at LSN {lsn}, which holds LSNs 1..={lsn} and which \
                 every record after it needs, passes its checksum but does not decode ({reason})"
            )
        }
        Some(Undecodable::Record { lsn, reason }) => {
            return format!(
                "LSN {lsn} onward: the record at LSN {lsn} passes its checksum but does not \
                 decode ({reason})"
            )
        }
        None => {}
    }
    match &inspection.store.ending {
        Ending::Clean { .. } => "nothing: the log ends cleanly".to_string(),
        Ending::TornTail(cut) => format!(
            "a torn tail of {} bytes at stream position {}, never acknowledged (the server \
             would cut it too)",
            cut.bytes, cut.position
        ),
        Ending::Damage {
            path,
            offset,
            acknowledged_lsn,
            highest_lsn,
            ..
        } => format!(
            "LSN {next} onward (intact frames after the damage hold LSNs up to {highest_lsn}): \
             damaged at {} byte {offset}; the log had acknowledged up to LSN \
             {acknowledged_lsn}, so at least {} acknowledged writes are lost",
            path.display(),
            (acknowledged_lsn + 1).saturating_sub(next)
        ),
        Ending::Short { covered, .. } => format!(
            "LSN {next} onward: the log ends before LSN {covered}, which the newest checkpoint \
             covers"
        ),
        Ending::Unreadable => format!(
            "LSN {next} onward, if the log held any: the log cannot be read ({})",
            log_line(&inspection.store.log)
        ),
    }
}

fn log_line(log: &LogFinding) -> String {
    match log {
        LogFinding::Missing => "no log file".to_string(),
        LogFinding::Damaged(error) => format!("damaged: {error}"),
        LogFinding::Valid { capacity, log_id } => {
            format!("{capacity} bytes of ring, log id {log_id:#018x}")
        }
    }
}

/// The directory as examined, a line per finding.
fn report(inspection: &Inspection) -> String {
    let store = &inspection.store;
    let mut out = String::new();
    let _ = writeln!(out, "data directory {}", store.dir.display());
    let _ = writeln!(out, "  log          {}", log_line(&store.log));
    let base = store.base.as_ref().map(|b| b.lsn());
    for checkpoint in &store.checkpoints {
        let name = checkpoint
            .path
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        let verdict = match &checkpoint.problem {
            Some(problem) => format!("UNUSABLE: {problem}"),
            None if Some(checkpoint.lsn) == base => "valid (replay starts here)".to_string(),
            None => "valid".to_string(),
        };
        let _ = writeln!(
            out,
            "  checkpoint   {name}: LSN {}, {} bytes, {verdict}",
            checkpoint.lsn.0, checkpoint.bytes
        );
    }
    if store.checkpoints.is_empty() {
        let _ = writeln!(out, "  checkpoint   none");
    }
    for leftover in &store.leftovers {
        let _ = writeln!(
            out,
            "  leftover     {leftover} (the server removes it at start)"
        );
    }
    let first = base.map_or(1, |lsn| lsn.0 + 1);
    let _ = match (store.records.first(), store.records.last()) {
        (Some(a), Some(b)) => writeln!(
            out,
            "  frames       {} after the checkpoint, records LSN {}..={} ({})",
            store.frames,
            a.lsn.0,
            b.lsn.0,
            store.records.len()
        ),
        _ => writeln!(
            out,
            "  frames       {} after the checkpoint, no records from LSN {first}",
            store.frames
        ),
    };
    let _ = writeln!(out, "  end          {}", ending_line(&store.ending));
    let _ = match &inspection.undecodable {
        Some(Undecodable::Image { lsn, reason }) => writeln!(
            out,
            "  UNDECODABLE  the checkpoint at LSN {lsn} passes its checksum but does not \
             decode: {reason}"
        ),
        Some(Undecodable::Record { lsn, reason }) => writeln!(
            out,
            "  UNDECODABLE  the record at LSN {lsn} passes its checksum but does not decode: \
             {reason}"
        ),
        None => Ok(()),
    };
    let rows: Vec<String> = inspection
        .tables
        .iter()
        .map(|(name, rows)| format!("{name} {rows} rows"))
        .collect();
    let _ = writeln!(
        out,
        "  state        LSN {}: {}",
        inspection.decoded_lsn,
        if rows.is_empty() {
            "empty".to_string()
        } else {
            rows.join(", ")
        }
    );
    if inspection.open_refusal().is_none() {
        let _ = writeln!(out, "  durable LSN  {}", inspection.decoded_lsn);
    }
    out
}

fn ending_line(ending: &Ending) -> String {
    match ending {
        Ending::Clean { position } => format!("clean, at stream position {position}"),
        Ending::TornTail(cut) => format!(
            "a torn tail at stream position {} ({} bytes: {}), never acknowledged: the server \
             cuts it at start",
            cut.position, cut.bytes, cut.reason
        ),
        Ending::Damage {
            path,
            offset,
            position,
            reason,
            first_lost_lsn,
            acknowledged_lsn,
            highest_lsn,
        } => format!(
            "DAMAGE inside acknowledged data: {} at byte {offset} (stream position {position}): \
             {reason}; records from LSN {first_lost_lsn} on cannot be read (intact frames \
             after it hold LSNs up to {highest_lsn}, acknowledged up to {acknowledged_lsn})",
            path.display()
        ),
        Ending::Short { covered, last_lsn } => format!(
            "DAMAGE: the log ends at LSN {last_lsn}, before LSN {covered}, which the newest \
             checkpoint covers"
        ),
        Ending::Unreadable => "the log cannot be read".to_string(),
    }
}
