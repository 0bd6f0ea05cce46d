//! Rebuilding the state at open: the checkpoint image, then every record after it, in order.
//! No script runs: the log holds effects, so a redeployed app starts on the same state.
//!
//! It must not know the threads that run afterwards; it hands back a state and an LSN.

use std::time::Instant;

use pure_lang::{App, Schema, Tables};
use pure_store::{CheckpointImage, Lsn, Record, Recovered};

use crate::checkpoint::read_image;
use crate::error::OpenError;
use crate::record::{apply_record, Mapping};

pub(crate) struct State {
    pub tables: Tables,
    /// The app's schema, extended with tables and fields only the data has.
    pub schema: Schema,
    pub lsn: Lsn,
    pub report: Recovery,
}

/// What rebuilding the state at open read, and how long it took: the checkpoint image decoded
/// into tables, then the records after it applied. The store's own checks (the image's and the
/// log's checksums, read before this) are not included.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Recovery {
    /// The LSN the state stands at.
    pub lsn: u64,
    /// Bytes of the checkpoint image (0 without one).
    pub image_bytes: u64,
    pub image_seconds: f64,
    /// Records applied after the image, and their bytes.
    pub records: u64,
    pub record_bytes: u64,
    pub records_seconds: f64,
}

impl Recovery {
    /// Image bytes decoded per second, in MB (10^6 bytes); None without an image.
    pub fn image_mb_per_s(&self) -> Option<f64> {
        (self.image_bytes > 0 && self.image_seconds > 0.0)
            .then(|| self.image_bytes as f64 / self.image_seconds / 1e6)
    }
}

impl std::fmt::Display for Recovery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the state at LSN {}: ", self.lsn)?;
        match self.image_mb_per_s() {
            Some(rate) => write!(
                f,
                "a checkpoint image of {:.1} MB decoded in {:.2} s ({rate:.0} MB/s)",
                self.image_bytes as f64 / 1e6,
                self.image_seconds
            )?,
            None => write!(f, "no checkpoint image")?,
        }
        write!(
            f,
            ", then {} records ({:.1} MB) applied in {:.2} s",
            self.records,
            self.record_bytes as f64 / 1e6,
            self.records_seconds
        )
    }
}

pub(crate) fn recover(app: &App, recovered: &Recovered) -> Result<State, OpenError> {
    let schema = (**app.schema()).clone();
    let (state, failure) = rebuild(schema, recovered.checkpoint.as_ref(), &recovered.records);
    match failure {
        None => Ok(state),
        Some(Undecodable::Image { lsn, reason }) => Err(OpenError::Image { lsn, reason }),
        Some(Undecodable::Record { lsn, reason }) => Err(OpenError::Record { lsn, reason }),
    }
}

/// What of a valid prefix did not decode: bytes that pass their checksums but are not what
/// Pure writes (damage that kept the CRC, or another program's data).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Undecodable {
    Image { lsn: u64, reason: String },
    Record { lsn: u64, reason: String },
}

/// Rebuilds the state from an image and the records after it, starting from `schema`
/// (extended with the names the data brings): as far as they decode, each record whole or not
/// at all, and what stopped it, if anything did.
pub(crate) fn rebuild(
    mut schema: Schema,
    image: Option<&CheckpointImage>,
    records: &[Record],
) -> (State, Option<Undecodable>) {
    let mut lsn = Lsn(0);
    let mut report = Recovery::default();
    let started = Instant::now();
    let (mut tables, mut mapping) = match image {
        Some(image) => match read_image(image.bytes(), &mut schema) {
            Ok(read) => {
                lsn = image.lsn();
                report.image_bytes = image.bytes().len() as u64;
                report.image_seconds = started.elapsed().as_secs_f64();
                read
            }
            Err(reason) => {
                let tables = Tables::new(schema.tables.len());
                let state = State {
                    tables,
                    schema,
                    lsn,
                    report,
                };
                let lsn = image.lsn().0;
                return (state, Some(Undecodable::Image { lsn, reason }));
            }
        },
        None => (Tables::new(schema.tables.len()), Mapping::identity(&schema)),
    };
    let mut failure = None;
    let started = Instant::now();
    for record in records {
        assert!(
            record.lsn > lsn,
            "the store hands over records in LSN order, after the image"
        );
        tables.ensure_tables(schema.tables.len());
        // A record that fails leaves nothing of it behind (`apply_record`).
        match apply_record(&record.bytes, &mapping, &mut tables) {
            Ok(Some(logged)) => mapping = Mapping::new(&logged, &mut schema),
            Ok(None) => {}
            Err(reason) => {
                let lsn = record.lsn.0;
                failure = Some(Undecodable::Record { lsn, reason });
                break;
            }
        }
        lsn = record.lsn;
        report.records += 1;
        report.record_bytes += record.bytes.len() as u64;
    }
    report.records_seconds = started.elapsed().as_secs_f64();
    report.lsn = lsn.0;
    tables.ensure_tables(schema.tables.len());
    (
        State {
            tables,
            schema,
            lsn,
            report,
        },
        failure,
    )
}
