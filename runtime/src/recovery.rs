//! Rebuilding the state at open: the checkpoint image, then every record after it, in order.
//! No script runs: the log holds effects, so a redeployed app starts on the same state.

use pure_lang::{App, Schema, Tables};
use pure_store::{Lsn, Recovered};

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
    let mut schema = (**app.schema()).clone();
    let mut lsn = Lsn(0);
    let (mut tables, mut mapping) = match &recovered.checkpoint {
        Some(image) => {
            lsn = image.lsn();
            read_image(image.bytes(), &mut schema)
                .map_err(|reason| OpenError::Image { lsn: lsn.0, reason })?
        }
        None => (Tables::new(schema.tables.len()), Mapping::identity(&schema)),
    };
    for record in &recovered.records {
        tables.ensure_tables(schema.tables.len());
        let logged = apply_record(&record.bytes, &mapping, &mut tables).map_err(|reason| {
            OpenError::Record {
                lsn: record.lsn.0,
                reason,
            }
        })?;
        if let Some(logged) = logged {
            mapping = Mapping::new(&logged, &mut schema);
        }
        lsn = record.lsn;
    }
    tables.ensure_tables(schema.tables.len());
    Ok(State {
        tables,
        schema,
        lsn,
    })
}
