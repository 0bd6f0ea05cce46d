//! The checkpoint image: the schema and every row, streamed from a snapshot.
//!
//! ```text
//! image := "PURESTZ1" zstd(body) | "PURESTA1" body      (the second: images before note 031)
//! body  := schema (rows:varint (key n:varint value^n)^rows)^tables
//! ```
//! The body is compressed (zstd at level 1: about 0.56 of TPC-C's body, at about 250 MB/s on the
//! checkpoint's own thread): a checkpoint writes the whole state where the log writes only the
//! changes, and on a large state checkpoints would otherwise write as much as the log does.
//! The store wraps the image in its own header and trailer (checksum, covered LSN) and makes it
//! durable; this module only knows the state's side. Writing runs on a background thread from an
//! immutable snapshot, so the owner never waits for it.

use std::io::Write;
use std::sync::mpsc;

use pure_lang::codec::{put_varint, Reader, INT, STR};
use pure_lang::{Fields, FieldsBuilder, RowSet, Schema, Tables};

use crate::record::{put_key, put_schema, read_key, read_schema, Mapping};

const MAGIC: &[u8; 8] = b"PURESTZ1";
/// The magic of an uncompressed image, which images were before note 031: still read.
const MAGIC_PLAIN: &[u8; 8] = b"PURESTA1";
/// zstd's fastest level but one: level 1 compressed TPC-C's image to 0.56 in about 1 s per
/// 260 MB; higher levels gain little on its random strings for several times the time.
const ZSTD_LEVEL: i32 = 1;

/// Bytes buffered before a write to the checkpoint file.
const CHUNK_BYTES: usize = 1 << 20;

/// Streams the image of `tables` (with the names of `schema`) into `out`; returns the size of
/// its body before compression.
pub fn write_image(out: &mut impl Write, schema: &Schema, tables: &Tables) -> std::io::Result<u64> {
    out.write_all(MAGIC)?;
    let mut compressed = zstd::stream::Encoder::new(out, ZSTD_LEVEL)?;
    let written = write_body(&mut compressed, schema, tables)?;
    compressed.finish()?;
    Ok(written)
}

/// The body of an image, as it is before compression.
fn write_body(out: &mut impl Write, schema: &Schema, tables: &Tables) -> std::io::Result<u64> {
    let mut buffer = Vec::with_capacity(CHUNK_BYTES + 4096);
    let mut written = 0u64;
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

/// Rows decoded before they are handed to the thread that builds the tables' trees.
const BATCH_ROWS: usize = 4096;

/// Rows of the image's table at a position, on their way to the thread that builds its tree:
/// each row's key still encoded (that thread decodes it), its fields decoded.
type Batch<'a> = (usize, Vec<(&'a [u8], Fields)>);

/// Reads an image into tables of the `state` schema (extended with names only the image has).
/// Also returns the mapping of the image's schema, which records after it use until the next
/// schema record.
///
/// Decoding the rows and building the trees run on two threads: this one decodes rows in
/// batches, a second builds each table's tree from its rows in key order (`RowSet::push_sorted`,
/// bottom-up, with no search). (Handing over rows with their fields still encoded, for the
/// second thread to decode, was slower: 344-386 MB/s against 457-467 on the TPC-C W=4 image.)
pub fn read_image(bytes: &[u8], state: &mut Schema) -> Result<(Tables, Mapping), String> {
    match bytes.get(..MAGIC.len()) {
        Some(magic) if magic == MAGIC => {
            let body = zstd::stream::decode_all(&bytes[MAGIC.len()..])
                .map_err(|e| format!("the image does not decompress: {e}"))?;
            read_body(&body, state)
        }
        Some(magic) if magic == MAGIC_PLAIN => read_body(&bytes[MAGIC.len()..], state),
        _ => Err("not a Pure state image (bad magic)".into()),
    }
}

/// `read_image` once the body is uncompressed.
fn read_body(bytes: &[u8], state: &mut Schema) -> Result<(Tables, Mapping), String> {
    let mut r = Reader::new(bytes);
    let logged = read_schema(&mut r)?;
    let mapping = Mapping::new(&logged, state);
    let mut tables = Tables::new(state.tables.len());
    let ids: Vec<u32> = logged
        .tables
        .iter()
        .map(|t| state.table_id(&t.name).expect("mapped"))
        .collect();
    let sets = std::thread::scope(|scope| {
        let (batches, receive) = mpsc::sync_channel::<Batch<'_>>(4);
        let builder = std::thread::Builder::new()
            .name("pure-image".into())
            .spawn_scoped(scope, move || build(receive))
            .map_err(|e| format!("cannot start a thread to build the tables: {e}"))?;
        let decoded = decode_rows(&mut r, &mapping, ids.len(), &batches);
        drop(batches);
        let built = builder
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        // The first damage in the image, as one thread reading it would find it: the builder
        // is given every row before this thread's damage, so its error, if any, comes first.
        let sets = built?;
        decoded?;
        Ok::<_, String>(sets)
    })?;
    assert_eq!(sets.len(), ids.len(), "a set for each table of the image");
    for (index, set) in sets.into_iter().enumerate() {
        tables.set_rows(ids[index], set);
    }
    if !r.is_empty() {
        return Err(format!(
            "{} bytes after the last table",
            bytes.len() - r.position()
        ));
    }
    Ok((tables, mapping))
}

/// Decodes every table's rows and sends them on in batches, with the table's position in the
/// image: each table's rows in the image's order, every table (an empty one too).
fn decode_rows<'a>(
    r: &mut Reader<'a>,
    mapping: &Mapping,
    tables: usize,
    batches: &mpsc::SyncSender<Batch<'a>>,
) -> Result<(), String> {
    let mut fields = FieldsBuilder::new(0);
    for index in 0..tables {
        let mut rows = r.count()?;
        loop {
            let take = rows.min(BATCH_ROWS);
            rows -= take;
            let mut batch = Vec::with_capacity(take);
            let decoded = (0..take).try_for_each(|_| {
                let key = pass_key(r)?;
                let n = r.count()?;
                if n > pure_lang::SLOTS_MAX {
                    return Err(format!(
                        "a row of {n} fields (at most {})",
                        pure_lang::SLOTS_MAX
                    ));
                }
                fields.reset(n);
                for slot in 0..n {
                    mapping.place(index, slot, r, &mut fields)?;
                }
                batch.push((key, fields.build()));
                Ok(())
            });
            if let Err(error) = decoded {
                // The rows before the damage go to the builder all the same: damage among them
                // comes first in the image, and is the error to report (`read_image`).
                let _ = batches.send((index, batch));
                return Err(error);
            }
            if batches.send((index, batch)).is_err() {
                // The builder stopped at rows out of order: its error says which.
                return Ok(());
            }
            if rows == 0 {
                break;
            }
        }
    }
    Ok(())
}

/// The bytes of the key that starts here, found by its tags and lengths alone: the builder
/// decodes it (`read_key`, which checks what this does not: its strings' UTF-8).
fn pass_key<'a>(r: &mut Reader<'a>) -> Result<&'a [u8], String> {
    let start = r.position();
    for _ in 0..r.count()? {
        match r.byte()? {
            INT => {
                r.int()?;
            }
            STR => {
                let n = r.count()?;
                r.take(n)?;
            }
            tag => return Err(format!("bad key part tag {tag}")),
        }
    }
    Ok(r.since(start))
}

/// Builds each table's rows as their batches come, until the decoding thread is done: one set
/// per table, in the image's order.
fn build(batches: mpsc::Receiver<Batch<'_>>) -> Result<Vec<RowSet>, String> {
    let mut sets: Vec<RowSet> = Vec::new();
    for (index, batch) in batches {
        if sets.len() == index {
            sets.push(RowSet::new());
        }
        let set = sets.last_mut().expect("a set per table so far");
        for (key, fields) in batch {
            set.push_sorted(read_key(&mut Reader::new(key))?, fields)?;
        }
    }
    Ok(sets)
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
                types: Vec::new(),
            }],
        };
        let mut image = Vec::new();
        image.extend_from_slice(MAGIC_PLAIN);
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

    fn two_tables() -> Schema {
        Schema {
            tables: ["a", "b"]
                .map(|name| TableSchema {
                    name: name.into(),
                    fields: vec!["x".into(), "s".into()],
                    types: Vec::new(),
                })
                .to_vec(),
        }
    }

    fn row(i: i64) -> pure_lang::Fields {
        pure_lang::Fields::from_values(&[
            pure_lang::Dynamic::from_int(i),
            pure_lang::Dynamic::from(pure_lang::ImmutableString::from(format!("row {i}"))),
        ])
    }

    /// Tables of several batches and an empty one read back as they were written, each row in
    /// its table (the two threads hand rows over in batches).
    #[test]
    fn tables_of_many_batches_read_back_whole() {
        let schema = Schema {
            tables: ["a", "empty", "b"]
                .map(|name| TableSchema {
                    name: name.into(),
                    fields: vec!["x".into(), "s".into()],
                    types: Vec::new(),
                })
                .to_vec(),
        };
        let mut tables = Tables::new(3);
        let big = 2 * BATCH_ROWS as i64 + 17;
        tables.set_rows(0, (0..big).map(|i| (Key::int(i), row(i))).collect());
        tables.set_rows(
            2,
            (0..5)
                .map(|i| (Key::string(&format!("k{i}")), row(-i)))
                .collect(),
        );
        let mut image = Vec::new();
        write_image(&mut image, &schema, &tables).expect("written");
        let (read, _) = read_image(&image, &mut schema.clone()).expect("read");
        for table in 0..3 {
            let rows = |t: &Tables| {
                t.rows(table)
                    .map(|(k, f)| {
                        (
                            k.clone(),
                            f.to_vec().iter().map(|v| v.to_string()).collect(),
                        )
                    })
                    .collect::<Vec<(Key, Vec<String>)>>()
            };
            assert_eq!(rows(&read), rows(&tables), "table {table}");
        }
        assert_eq!(read.len(0), big as usize);
        assert_eq!(read.len(1), 0);

        // Written compressed: the same body as an image of before note 031 (which still reads
        // back), in fewer bytes.
        assert_eq!(&image[..8], MAGIC);
        let mut plain = MAGIC_PLAIN.to_vec();
        write_body(&mut plain, &schema, &tables).expect("written");
        let (from_plain, _) = read_image(&plain, &mut schema.clone()).expect("read");
        assert_eq!(from_plain.len(0), big as usize);
        assert!(
            image.len() < plain.len() / 2,
            "compressed {} against {} bytes",
            image.len(),
            plain.len()
        );
        let mut damaged = image.clone();
        let end = damaged.len() - 1;
        damaged.truncate(end);
        let error = read_image(&damaged, &mut schema.clone())
            .err()
            .expect("refused");
        assert!(error.contains("does not decompress"), "{error}");
    }

    /// Rows out of key order in the second table, or a key part of no known kind, are an error
    /// that says so, whichever of the two threads finds it.
    #[test]
    fn rows_out_of_order_and_bad_keys_are_damage() {
        let schema = two_tables();
        let image = |second: &dyn Fn(&mut Vec<u8>)| {
            let mut image = Vec::new();
            image.extend_from_slice(MAGIC_PLAIN);
            put_schema(&mut image, &schema);
            put_varint(&mut image, 3);
            for i in 0..3 {
                put_key(&mut image, &Key::int(i));
                put_varint(&mut image, 0);
            }
            second(&mut image);
            image
        };
        let out_of_order = image(&|image| {
            put_varint(image, 2);
            for i in [5, 4] {
                put_key(image, &Key::int(i));
                put_varint(image, 0);
            }
        });
        let error = read_image(&out_of_order, &mut schema.clone())
            .err()
            .expect("refused");
        assert!(error.contains("out of key order"), "{error}");
        let bad_key = image(&|image| {
            put_varint(image, 1);
            put_varint(image, 1);
            image.push(0xEE);
        });
        let error = read_image(&bad_key, &mut schema.clone())
            .err()
            .expect("refused");
        assert!(error.contains("bad key part tag"), "{error}");
    }

    /// An image damaged in two places reports the first, however far apart the two are and
    /// whichever thread finds each (the order of two keys is the builder's to check, a key's
    /// tag the reading thread's): as one thread reading it would.
    #[test]
    fn the_first_damage_is_the_one_reported() {
        let schema = two_tables();
        for after in [0, 6_000, BATCH_ROWS * 2 - 2, 20_000] {
            let mut image = Vec::new();
            image.extend_from_slice(MAGIC_PLAIN);
            put_schema(&mut image, &schema);
            put_varint(&mut image, 2 + after as u64);
            for i in [5, 4].into_iter().chain(6..6 + after as i64) {
                put_key(&mut image, &Key::int(i));
                put_varint(&mut image, 0);
            }
            put_varint(&mut image, 1);
            put_varint(&mut image, 1);
            image.push(0xEE);
            for run in 0..10 {
                let error = read_image(&image, &mut schema.clone())
                    .err()
                    .expect("refused");
                assert!(
                    error.contains("out of key order"),
                    "{after} rows between the two, run {run}: {error}"
                );
            }
        }
    }
}
