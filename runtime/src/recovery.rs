//! Rebuilding the state at open: the checkpoint image, then every record after it, in order.
//! No script runs: the log holds effects, so a redeployed app starts on the same state.

use pure_lang::{App, Schema, Tables};
use pure_store::{CheckpointImage, Lsn, Record, Recovered};

use crate::checkpoint::read_image;
use crate::record::{apply_record, Mapping};
use crate::runtime::OpenError;

pub(crate) struct State {
    pub tables: Tables,
    /// The app's schema, extended with tables and fields only the data has.
    pub schema: Schema,
    pub lsn: Lsn,
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
    let (mut tables, mut mapping) = match image {
        Some(image) => match read_image(image.bytes(), &mut schema) {
            Ok(read) => {
                lsn = image.lsn();
                read
            }
            Err(reason) => {
                let tables = Tables::new(schema.tables.len());
                let state = State {
                    tables,
                    schema,
                    lsn,
                };
                let lsn = image.lsn().0;
                return (state, Some(Undecodable::Image { lsn, reason }));
            }
        },
        None => (Tables::new(schema.tables.len()), Mapping::identity(&schema)),
    };
    let mut failure = None;
    for record in records {
        tables.ensure_tables(schema.tables.len());
        // O(tables): a record that fails halfway leaves nothing of it behind.
        let before = tables.clone();
        match apply_record(&record.bytes, &mapping, &mut tables) {
            Ok(Some(logged)) => mapping = Mapping::new(&logged, &mut schema),
            Ok(None) => {}
            Err(reason) => {
                tables = before;
                let lsn = record.lsn.0;
                failure = Some(Undecodable::Record { lsn, reason });
                break;
            }
        }
        lsn = record.lsn;
    }
    tables.ensure_tables(schema.tables.len());
    (
        State {
            tables,
            schema,
            lsn,
        },
        failure,
    )
}
