//! The checkpoint image: the schema and every row, streamed from a snapshot.
//!
//! ```text
//! image := "PURESTA1" schema (rows:varint (key n:varint value^n)^rows)^tables
//! ```
//! The store wraps the image in its own header and trailer (checksum, covered LSN) and makes it
//! durable; this module only knows the state's side. Writing runs on a background thread from an
//! immutable snapshot, so the owner never waits for it.

use std::io::Write;

use pure_lang::codec::{put_varint, Reader};
use pure_lang::{FieldsBuilder, RowSet, Schema, Tables};

use crate::record::{put_key, put_schema, read_key, read_schema, Mapping};

const MAGIC: &[u8; 8] = b"PURESTA1";

/// Bytes buffered before a write to the checkpoint file.
const CHUNK_BYTES: usize = 1 << 20;

/// Streams the image of `tables` (with the names of `schema`) into `out`; returns its size.
pub fn write_image(out: &mut impl Write, schema: &Schema, tables: &Tables) -> std::io::Result<u64> {
    let mut buffer = Vec::with_capacity(CHUNK_BYTES + 4096);
    let mut written = 0u64;
    buffer.extend_from_slice(MAGIC);
    put_schema(&mut buffer, schema);
    for table in 0..schema.tables.len() {
        let rows = tables.rows(table as u32);
        put_varint(&mut buffer, rows.len() as u64);
        for (key, fields) in rows {
            put_key(&mut buffer, key);
            let used = fields.used();
            put_varint(&mut buffer, used as u64);
            (0..used).for_each(|slot| fields.put_slot(&mut buffer, slot));
            if buffer.len() >= CHUNK_BYTES {
                out.write_all(&buffer)?;
                written += buffer.len() as u64;
                buffer.clear();
            }
        }
    }
    out.write_all(&buffer)?;
    written += buffer.len() as u64;
    Ok(written)
}

/// Reads an image into tables of the `state` schema (extended with names only the image has).
/// Also returns the mapping of the image's schema, which records after it use until the next
/// schema record.
pub fn read_image(bytes: &[u8], state: &mut Schema) -> Result<(Tables, Mapping), String> {
    let mut r = Reader::new(bytes);
    if r.take(MAGIC.len())? != MAGIC {
        return Err("not a Pure state image (bad magic)".into());
    }
    let logged = read_schema(&mut r)?;
    let mapping = Mapping::new(&logged, state);
    let mut tables = Tables::new(state.tables.len());
    let ids: Vec<u32> = logged
        .tables
        .iter()
        .map(|t| state.table_id(&t.name).expect("mapped"))
        .collect();
    let mut fields = FieldsBuilder::new(0);
    for (index, id) in ids.into_iter().enumerate() {
        let rows = r.count()?;
        let mut read = RowSet::new();
        for _ in 0..rows {
            let key = read_key(&mut r)?;
            let n = r.count()?;
            if n > pure_lang::SLOTS_MAX {
                return Err(format!(
                    "a row of {n} fields (at most {})",
                    pure_lang::SLOTS_MAX
                ));
            }
            fields.reset(n);
            for slot in 0..n {
                mapping.place(index, slot, &mut r, &mut fields)?;
            }
            read.push_sorted(key, fields.build())?;
        }
        tables.set_rows(id, read);
    }
    if !r.is_empty() {
        return Err(format!(
            "{} bytes after the last table",
            bytes.len() - r.position()
        ));
    }
    Ok((tables, mapping))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pure_lang::{Key, TableSchema};

    /// A damaged field count is an error, not a panic (found by review: it reached an assert).
    #[test]
    fn a_row_wider_than_a_packed_row_is_damage() {
        let schema = Schema {
            tables: vec![TableSchema {
                name: "t".into(),
                fields: vec!["a".into()],
            }],
        };
        let mut image = Vec::new();
        image.extend_from_slice(MAGIC);
        put_schema(&mut image, &schema);
        put_varint(&mut image, 1);
        put_key(&mut image, &Key::int(1));
        put_varint(&mut image, 70_000);
        image.extend(std::iter::repeat_n(0u8, 70_000));
        let error = read_image(&image, &mut schema.clone())
            .err()
            .expect("refused");
        assert!(error.contains("70000 fields"), "{error}");
    }
}
