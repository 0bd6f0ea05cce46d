//! The bytes of a record: a write set, or the schema that names the ids of the records after it.
//!
//! ```text
//! record  := SCHEMA schema | KEYED change* | WRITES change*      KEYED since research note 034
//! schema  := n:varint (name:str fields:varint (name:str)*)^n     table and field names, in id order
//! change  := head:varint key body                                head = table_id << 2 | op
//!            (in a KEYED record: head:varint len:varint bytes^len body, the key's own
//!             order-preserving encoding, `pure_lang::Key`'s, checked when read)
//!   op 0 PUT    body := n:varint value^n                         the whole row (trailing units cut)
//!   op 1 PATCH  body := mask:varint value^popcount(mask)         only the changed fields
//!   op 2 DELETE body := (nothing)
//! key     := n:varint part^n       part := INT zigzag:varint | STR str
//! value   := UNIT | FALSE | TRUE | INT zigzag:varint | FLOAT f64-le | STR str
//!          | ARRAY n:varint value^n | MAP n:varint (str value)^n
//! str     := len:varint utf-8 bytes
//! ```
//!
//! `value` and `str` are the value codec of `pure_lang::codec`, which packed rows share.
//!
//! Names appear once per run (a schema record before its first write), never per change: a
//! one-field integer update of an integer-keyed row costs about 5 bytes plus the key.
//!
//! It must not know where records go (the store) nor who writes or applies them.

use pure_lang::codec::{put_int, put_str, put_varint, Reader, INT, STR};
use pure_lang::{Change, FieldsBuilder, Key, KeyBuilder, PartBytes, Schema, TableSchema, Tables};

const SCHEMA: u8 = 1;
/// Writes whose keys are their parts, tagged (before research note 034): still read.
const WRITES: u8 = 2;
/// Writes whose keys are the bytes of their in-memory encoding: written by `encode_writes`, as
/// copying a key's bytes costs a tenth of decoding its parts (note 034).
const KEYED: u8 = 3;

const OP_PUT: u64 = 0;
const OP_PATCH: u64 = 1;
const OP_DELETE: u64 = 2;

pub fn put_key(out: &mut Vec<u8>, key: &Key) {
    // Most keys are one string: its bytes are copied as they are, without decoding the key
    // part by part (a fifth of encoding a batch of 1,000 puts; research note 020).
    if let Some(text) = key.lone_str_bytes() {
        out.extend_from_slice(&[1, STR]);
        put_varint(out, text.len() as u64);
        out.extend_from_slice(text);
        return;
    }
    // The others mostly integers (a tenth of TPC-C's Delivery went to decoding them part by
    // part; research note 030).
    if let Some((parts, n)) = key.int_parts() {
        out.push(n as u8);
        for &part in &parts[..n] {
            out.push(INT);
            put_int(out, part);
        }
        return;
    }
    put_key_parts(out, key);
}

/// `put_key` for any key: part by part.
fn put_key_parts(out: &mut Vec<u8>, key: &Key) {
    // One pass over the parts: the count is written before them once known (one byte below 128
    // parts, as every key has in practice; a longer count is spliced in).
    let at = out.len();
    out.push(0);
    let mut count = 0u64;
    // A key's bytes need no check as text: they were encoded from strings.
    for part in key.part_bytes() {
        count += 1;
        match part {
            PartBytes::Int(i) => {
                out.push(INT);
                put_int(out, i);
            }
            PartBytes::Str(bytes) => {
                out.push(STR);
                put_varint(out, bytes.len() as u64);
                out.extend_from_slice(&bytes);
            }
        }
    }
    if count < 0x80 {
        out[at] = count as u8;
    } else {
        let mut varint = Vec::new();
        put_varint(&mut varint, count);
        out.splice(at..at + 1, varint);
    }
}

pub fn encode_schema(out: &mut Vec<u8>, schema: &Schema) {
    out.push(SCHEMA);
    put_schema(out, schema);
}

pub fn put_schema(out: &mut Vec<u8>, schema: &Schema) {
    put_varint(out, schema.tables.len() as u64);
    for table in &schema.tables {
        put_str(out, &table.name);
        put_varint(out, table.fields.len() as u64);
        table.fields.iter().for_each(|f| put_str(out, f));
    }
}

/// A key as a `KEYED` record carries it: its encoding's length, then the encoding.
fn put_key_bytes(out: &mut Vec<u8>, key: &Key) {
    let bytes = key.as_bytes();
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// A key as `put_key_bytes` wrote it, checked.
fn read_key_bytes(r: &mut Reader<'_>) -> Result<Key, String> {
    let n = r.count()?;
    Key::from_checked_encoding(r.take(n)?)
}

/// Encodes a write set as one record into `out` (cleared first).
pub fn encode_writes(out: &mut Vec<u8>, changes: &[Change]) {
    out.clear();
    out.push(KEYED);
    for change in changes {
        match change {
            Change::Put { table, key, fields } => {
                put_varint(out, u64::from(*table) << 2 | OP_PUT);
                put_key_bytes(out, key);
                let used = fields.used();
                put_varint(out, used as u64);
                (0..used).for_each(|slot| fields.put_slot(out, slot));
            }
            Change::Patch {
                table,
                key,
                mask,
                fields,
            } => {
                put_varint(out, u64::from(*table) << 2 | OP_PATCH);
                put_key_bytes(out, key);
                put_varint(out, *mask);
                let mut bits = *mask;
                while bits != 0 {
                    let slot = bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    fields.put_slot(out, slot);
                }
            }
            Change::Delete { table, key } => {
                put_varint(out, u64::from(*table) << 2 | OP_DELETE);
                put_key_bytes(out, key);
            }
        }
    }
}

/// What a record holds.
pub enum Decoded {
    Schema(Schema),
    Writes(Vec<Change>),
}

/// A key in a record or image: its parts, each tagged.
pub fn read_key(r: &mut Reader<'_>) -> Result<Key, String> {
    let n = r.count()?;
    if n == 0 {
        return Err("empty key".into());
    }
    let mut key = KeyBuilder::new();
    for _ in 0..n {
        match r.byte()? {
            INT => key.int(r.int()?),
            STR => key.str(r.str()?),
            tag => return Err(format!("bad key part tag {tag}")),
        }
    }
    Ok(key.finish())
}

pub fn read_schema(r: &mut Reader<'_>) -> Result<Schema, String> {
    let n = r.count()?;
    let mut tables = Vec::with_capacity(n);
    for _ in 0..n {
        let name = r.str()?.to_string();
        let count = r.count()?;
        let fields = (0..count)
            .map(|_| r.str().map(str::to_string))
            .collect::<Result<_, _>>()?;
        tables.push(TableSchema {
            name,
            fields,
            types: Vec::new(),
        });
    }
    Ok(Schema { tables })
}

/// Decodes a record. Table ids and field slots are those of the schema in force where it was
/// written; `Mapping` translates them. A patch of a field whose state slot is past
/// [`pure_lang::FIELDS_MAX`] (only fields an app no longer declares get there) needs the row it
/// changes: use [`apply_record`] for those.
pub fn decode(bytes: &[u8], mapping: &Mapping) -> Result<Decoded, String> {
    let mut r = Reader::new(bytes);
    match r.byte()? {
        SCHEMA => Ok(Decoded::Schema(read_schema(&mut r)?)),
        tag @ (WRITES | KEYED) => {
            let keys = KeyForm::of(tag);
            let mut changes = Vec::new();
            while !r.is_empty() {
                changes.push(decode_change(&mut r, keys, mapping, None)?);
            }
            Ok(Decoded::Writes(changes))
        }
        tag => Err(format!("bad record tag {tag}")),
    }
}

/// Applies a record to `tables` (recovery), whole or not at all: on an error the tables are as
/// they were. A schema record is returned instead. `tables` must already hold every table of
/// the state's schema.
pub fn apply_record(
    bytes: &[u8],
    mapping: &Mapping,
    tables: &mut Tables,
) -> Result<Option<Schema>, String> {
    // Decoded whole before any change is applied, rather than applied on a copy of the tables
    // kept for undoing: while a copy shares the maps' nodes, every change copies the nodes it
    // touches (a New-Order record then cost about 85 µs to replay).
    match decode(bytes, mapping) {
        Ok(Decoded::Schema(schema)) => Ok(Some(schema)),
        Ok(Decoded::Writes(changes)) => {
            for change in changes {
                tables.apply(change);
            }
            Ok(None)
        }
        Err(reason) if reason == NEEDS_STATE => {
            apply_in_order(bytes, mapping, tables).map(|()| None)
        }
        Err(reason) => Err(reason),
    }
}

/// A writes record whose decoding needs the state as its earlier changes left it (see
/// [`NEEDS_STATE`]): applied change by change, on a snapshot kept to undo them on an error.
fn apply_in_order(bytes: &[u8], mapping: &Mapping, tables: &mut Tables) -> Result<(), String> {
    let before = tables.snapshot();
    let mut r = Reader::new(bytes);
    let keys = KeyForm::of(r.byte()?);
    while !r.is_empty() {
        match decode_change(&mut r, keys, mapping, Some(tables)) {
            Ok(change) => tables.apply(change),
            Err(reason) => {
                *tables = before.thawed();
                return Err(reason);
            }
        }
    }
    Ok(())
}

/// Why a change did not decode without the state: a patch of a slot past the mask's reach is
/// merged with the stored row.
const NEEDS_STATE: &str = "a patch of a field past the slot limit needs the state";

/// How a writes record's changes carry their keys (its tag says).
#[derive(Clone, Copy)]
enum KeyForm {
    Parts,
    Bytes,
}

impl KeyForm {
    /// The form of a writes record with `tag` (`WRITES` or `KEYED`).
    fn of(tag: u8) -> KeyForm {
        match tag {
            KEYED => KeyForm::Bytes,
            _ => KeyForm::Parts,
        }
    }

    fn read(self, r: &mut Reader<'_>) -> Result<Key, String> {
        match self {
            KeyForm::Parts => read_key(r),
            KeyForm::Bytes => read_key_bytes(r),
        }
    }
}

fn decode_change(
    r: &mut Reader<'_>,
    keys: KeyForm,
    mapping: &Mapping,
    state: Option<&Tables>,
) -> Result<Change, String> {
    let head = r.varint()?;
    let table = mapping.table(head >> 2)?;
    let key = keys.read(r)?;
    match head & 3 {
        OP_PUT => {
            let n = r.count()?;
            if n > pure_lang::SLOTS_MAX {
                return Err(format!(
                    "a row of {n} fields (at most {})",
                    pure_lang::SLOTS_MAX
                ));
            }
            let mut fields = FieldsBuilder::new(n);
            for slot in 0..n {
                mapping.place(table.0, slot, r, &mut fields)?;
            }
            Ok(Change::Put {
                table: table.1,
                key,
                fields: fields.finish(),
            })
        }
        OP_PATCH => {
            let logged_mask = r.varint()?;
            let (mut fields, mut slots, mut bits) =
                (FieldsBuilder::new(0), Vec::new(), logged_mask);
            while bits != 0 {
                let slot = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                slots.push(mapping.place(table.0, slot, r, &mut fields)?);
            }
            let fields = fields.finish();
            if slots.iter().all(|s| *s < pure_lang::FIELDS_MAX) {
                let mask = slots.iter().fold(0u64, |mask, s| mask | 1 << s);
                return Ok(Change::Patch {
                    table: table.1,
                    key,
                    mask,
                    fields,
                });
            }
            // A slot past the mask's reach: the patched row, merged here, is put whole.
            let state = state.ok_or(NEEDS_STATE)?;
            let stored = state.get(table.1, &key);
            let mut row = FieldsBuilder::new(0);
            if let Some(stored) = stored {
                (0..stored.len())
                    .filter(|s| !slots.contains(s))
                    .for_each(|s| row.copy_slot(s, stored, s));
            }
            for slot in slots {
                row.copy_slot(slot, &fields, slot);
            }
            Ok(Change::Put {
                table: table.1,
                key,
                fields: row.finish(),
            })
        }
        OP_DELETE => Ok(Change::Delete {
            table: table.1,
            key,
        }),
        op => Err(format!("bad change op {op}")),
    }
}

/// Translates the ids of a logged schema into those of the running state's schema (matched by
/// name), so that a redeployed app with tables or fields added, removed or reordered reads the
/// same data. Names the logged schema has and the state's lacks are added to the state's schema
/// (kept, never dropped: a later version may declare them again).
pub struct Mapping {
    /// Per logged table: (its index in the logged schema, the state's table id), and per logged
    /// field slot the state's slot.
    tables: Vec<(usize, u32, Vec<usize>)>,
}

impl Mapping {
    /// The identity for records written with `state` itself.
    pub fn identity(state: &Schema) -> Mapping {
        let tables = state
            .tables
            .iter()
            .enumerate()
            .map(|(i, t)| (i, i as u32, (0..t.fields.len()).collect()))
            .collect();
        Mapping { tables }
    }

    /// Maps `logged` onto `state`, extending `state` with names it lacks.
    pub fn new(logged: &Schema, state: &mut Schema) -> Mapping {
        let mut tables = Vec::with_capacity(logged.tables.len());
        for (i, table) in logged.tables.iter().enumerate() {
            let id = match state.table_id(&table.name) {
                Some(id) => id,
                None => {
                    state.tables.push(TableSchema {
                        name: table.name.clone(),
                        fields: vec![],
                        types: Vec::new(),
                    });
                    (state.tables.len() - 1) as u32
                }
            };
            let target = &mut state.tables[id as usize];
            let slots = table
                .fields
                .iter()
                .map(|f| match target.fields.iter().position(|g| g == f) {
                    Some(slot) => slot,
                    None => {
                        target.fields.push(f.clone());
                        target.fields.len() - 1
                    }
                })
                .collect();
            tables.push((i, id, slots));
        }
        Mapping { tables }
    }

    fn table(&self, logged: u64) -> Result<(usize, u32), String> {
        let entry = self
            .tables
            .get(logged as usize)
            .ok_or_else(|| format!("unknown table id {logged}"))?;
        Ok((entry.0, entry.1))
    }

    /// Reads the value of logged `slot` into its state slot in `fields`; returns the state slot.
    pub fn place(
        &self,
        table: usize,
        slot: usize,
        r: &mut Reader<'_>,
        fields: &mut FieldsBuilder,
    ) -> Result<usize, String> {
        let target = *self.tables[table]
            .2
            .get(slot)
            .ok_or_else(|| format!("unknown field slot {slot}"))?;
        // Slots past FIELDS_MAX are fine in a row: they hold fields of earlier versions of the
        // app (kept, invisible to scripts); only a patch's mask cannot name them.
        if target >= pure_lang::SLOTS_MAX {
            return Err(format!(
                "field slot {target} is past a row's {} slots",
                pure_lang::SLOTS_MAX
            ));
        }
        fields.set_encoded(target, r)?;
        Ok(target)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pure_lang::codec::UNIT;
    use pure_lang::KeyPart;

    /// A key of integers alone is written as part by part writes it, byte for byte: every
    /// length of integer encoding, both signs, one to four parts (and five, which goes the
    /// general way), inline and on the heap.
    #[test]
    fn integer_keys_are_written_as_their_parts_are() {
        let ints = [
            0,
            1,
            -1,
            127,
            -128,
            255,
            256,
            -257,
            65_535,
            1 << 40,
            -(1 << 40),
            i64::MAX,
            i64::MIN,
        ];
        let mut seed = 0x2545_F491_4F6C_DD1Du64;
        for _ in 0..5000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let n = 1 + (seed % 5) as usize;
            let parts: Vec<KeyPart> = (0..n)
                .map(|i| KeyPart::Int(ints[(seed >> (8 * i)) as usize % ints.len()]))
                .collect();
            let key = Key::from_parts(parts.clone());
            let (mut fast, mut general) = (Vec::new(), Vec::new());
            put_key(&mut fast, &key);
            put_key_parts(&mut general, &key);
            assert_eq!(fast, general, "{parts:?}");
            assert_eq!(
                read_key(&mut Reader::new(&fast))
                    .expect("reads back")
                    .parts(),
                parts
            );
        }
    }

    /// Keys of one part and of more than 127 (whose count takes two bytes) read back, with
    /// strings the key's encoding escapes (`00`) or leaves as they are (empty, not ASCII).
    #[test]
    fn keys_of_any_part_count_read_back() {
        for n in [1, 2, 3, 4, 127, 128, 300] {
            let parts: Vec<KeyPart> = (0..n)
                .map(|i| match i % 4 {
                    0 => KeyPart::Int(i as i64 - 100),
                    1 => KeyPart::Str(format!("p{i}").into()),
                    2 => KeyPart::Str(format!("\0z\0{i}\0").into()),
                    _ => KeyPart::Str(
                        if i % 8 == 3 {
                            String::new()
                        } else {
                            format!("é{i}")
                        }
                        .into(),
                    ),
                })
                .collect();
            let key = Key::from_parts(parts.clone());
            let mut out = vec![0xAA];
            put_key(&mut out, &key);
            let mut r = Reader::new(&out[1..]);
            assert_eq!(read_key(&mut r).expect("reads back").parts(), parts);
            assert!(r.is_empty(), "{n} parts: nothing left over");
        }
    }

    /// A key of one string is logged byte for byte as the part-by-part encoding logs it, and
    /// every other key (a `00` in the text, more parts, integers) takes that encoding.
    #[test]
    fn a_key_of_one_string_is_logged_as_its_parts_are() {
        let long = "k".repeat(300);
        let strings = [
            "",
            "a",
            "0000000000001234",
            "twenty-one bytes long",
            "twenty-two bytes long!",
            "é and ü",
            "\0",
            "a\0b",
            "\0\u{ff}",
            "ends with nul\0",
            long.as_str(),
        ];
        let mut keys: Vec<Key> = strings.iter().map(|text| Key::string(text)).collect();
        for parts in [
            vec![KeyPart::Str("a".into()), KeyPart::Str("b".into())],
            vec![KeyPart::Str("a".into()), KeyPart::Int(256)],
            vec![KeyPart::Str("a".into()), KeyPart::Int(0)],
            vec![KeyPart::Int(0x30)],
            vec![KeyPart::Int(-1), KeyPart::Str("x".into())],
        ] {
            keys.push(Key::from_parts(parts));
        }
        for key in &keys {
            let (mut fast, mut parts) = (Vec::new(), Vec::new());
            put_key(&mut fast, key);
            put_key_parts(&mut parts, key);
            assert_eq!(fast, parts, "{:?}", key.parts());
            let read = read_key(&mut Reader::new(&fast)).expect("reads back");
            assert_eq!(read.parts(), key.parts());
        }
        let lone = |text: &str| Key::string(text).lone_str_bytes().map(<[u8]>::to_vec);
        assert_eq!(lone("é and ü"), Some("é and ü".as_bytes().to_vec()));
        assert_eq!(lone(&long), Some(long.as_bytes().to_vec()));
        assert_eq!(lone("a\0b"), None, "an escaped 00 is decoded part by part");
        assert_eq!(keys[strings.len()].lone_str_bytes(), None, "two parts");
    }

    /// A logged slot past what a packed row holds is an error, not a panic (found by review).
    #[test]
    fn a_slot_past_a_packed_row_is_damage() {
        let logged = Schema {
            tables: vec![TableSchema {
                name: "t".into(),
                fields: (0..70_000).map(|i| format!("f{i}")).collect(),
                types: Vec::new(),
            }],
        };
        let mut state = Schema { tables: vec![] };
        let mapping = Mapping::new(&logged, &mut state);
        let mut record = vec![WRITES];
        put_varint(&mut record, OP_PUT);
        put_key(&mut record, &Key::int(1));
        put_varint(&mut record, 66_000);
        record.extend(std::iter::repeat_n(UNIT, 65_999));
        record.push(INT);
        put_int(&mut record, 5);
        let mut tables = Tables::new(state.tables.len());
        let error = apply_record(&record, &mapping, &mut tables).expect_err("refused");
        assert!(error.contains("fields"), "{error}");
    }

    /// A logged table `t` of one field `a`, which the state holds past the slots a patch's mask
    /// can name (an app that declared 66 fields before it).
    fn far_slot_mapping() -> (Mapping, Schema) {
        let logged = Schema {
            tables: vec![TableSchema {
                name: "t".into(),
                fields: vec!["a".into()],
                types: Vec::new(),
            }],
        };
        let mut state = Schema {
            tables: vec![TableSchema {
                name: "t".into(),
                fields: (0..66)
                    .map(|i| format!("g{i}"))
                    .chain(["a".into()])
                    .collect(),
                types: Vec::new(),
            }],
        };
        let mapping = Mapping::new(&logged, &mut state);
        (mapping, state)
    }

    fn int_row(i: i64) -> pure_lang::Fields {
        pure_lang::Fields::from_values(&[pure_lang::Dynamic::from_int(i)])
    }

    /// A change that does not decode, after changes that did: appended to a writes record.
    fn damaged_change(record: &mut Vec<u8>) {
        put_varint(record, 3);
        put_key_bytes(record, &Key::int(3));
    }

    /// A record is applied whole or not at all, also when its first changes decode.
    #[test]
    fn a_record_damaged_halfway_changes_nothing() {
        let (mapping, state) = far_slot_mapping();
        let put = |key: i64| Change::Put {
            table: 0,
            key: Key::int(key),
            fields: int_row(key),
        };
        let mut record = Vec::new();
        encode_writes(&mut record, &[put(1), put(2)]);
        let mut tables = Tables::new(state.tables.len());
        assert_eq!(apply_record(&record, &mapping, &mut tables), Ok(None));
        let mut damaged = Vec::new();
        encode_writes(
            &mut damaged,
            &[
                Change::Delete {
                    table: 0,
                    key: Key::int(1),
                },
                put(4),
            ],
        );
        damaged_change(&mut damaged);
        let error = apply_record(&damaged, &mapping, &mut tables).expect_err("refused");
        assert!(error.contains("bad change op"), "{error}");
        assert!(
            tables.get(0, &Key::int(1)).is_some(),
            "the delete was not applied"
        );
        assert!(
            tables.get(0, &Key::int(4)).is_none(),
            "the put was not applied"
        );
    }

    /// A patch of a slot past the mask's reach merges with the row as the same record's earlier
    /// changes left it, and is undone with them when a later change is damaged.
    #[test]
    fn a_patch_past_the_mask_sees_its_records_earlier_changes() {
        let (mapping, state) = far_slot_mapping();
        let changes = [
            Change::Put {
                table: 0,
                key: Key::int(1),
                fields: int_row(7),
            },
            Change::Patch {
                table: 0,
                key: Key::int(1),
                mask: 1,
                fields: int_row(9),
            },
        ];
        let mut record = Vec::new();
        encode_writes(&mut record, &changes);
        let mut damaged = record.clone();
        damaged_change(&mut damaged);
        let mut tables = Tables::new(state.tables.len());
        apply_record(&damaged, &mapping, &mut tables).expect_err("refused");
        assert!(
            tables.get(0, &Key::int(1)).is_none(),
            "nothing of it applied"
        );
        assert_eq!(apply_record(&record, &mapping, &mut tables), Ok(None));
        let row = tables.get(0, &Key::int(1)).expect("put");
        assert_eq!(
            row.value(66).as_int(),
            Ok(9),
            "the patch lands on the put row"
        );
        assert_eq!(row.len(), 67);
    }

    /// The example of docs/store-format.md, byte for byte: a patch of slot 0 of key (1, 42) in
    /// table 6 to 17, as written now (keys as their bytes) and as written before note 034
    /// (keys as their parts), which reads as the same change.
    #[test]
    fn the_documented_patch_record() {
        let stored = pure_lang::Fields::from_values(&[pure_lang::Dynamic::from_int(9)]);
        let change = Change::Patch {
            table: 6,
            key: Key::ints(&[1, 42]),
            mask: 1,
            fields: stored.with(&[(0, pure_lang::Dynamic::from_int(17))]),
        };
        let mut out = Vec::new();
        encode_writes(&mut out, std::slice::from_ref(&change));
        assert_eq!(
            out,
            [0x03, 0x19, 0x04, 0x19, 0x01, 0x19, 0x2A, 0x01, 0x03, 0x22]
        );
        let before = [0x02, 0x19, 0x02, 0x03, 0x02, 0x03, 0x54, 0x01, 0x03, 0x22];
        let schema = Schema {
            tables: (0..7)
                .map(|t| TableSchema {
                    name: format!("t{t}"),
                    fields: vec!["quantity".into()],
                    types: Vec::new(),
                })
                .collect(),
        };
        let mapping = Mapping::identity(&schema);
        for bytes in [&out[..], &before[..]] {
            let Ok(Decoded::Writes(changes)) = decode(bytes, &mapping) else {
                panic!("{bytes:x?} decodes");
            };
            let [Change::Patch {
                table,
                key,
                mask,
                fields,
            }] = &changes[..]
            else {
                panic!("{bytes:x?}: one patch");
            };
            assert_eq!((*table, key.parts(), *mask), (6, change_key_parts(), 1));
            assert_eq!(fields.value(0).as_int(), Ok(17));
        }
    }

    fn change_key_parts() -> Vec<KeyPart> {
        vec![KeyPart::Int(1), KeyPart::Int(42)]
    }

    /// A key in a record as its bytes reads back as the same key, and bytes that no key
    /// encodes to (cut, unknown codes, a non-UTF-8 string, an integer or escape written
    /// another way) are refused, never made a key that would compare unlike its parts.
    #[test]
    fn keys_as_bytes_read_back_and_damage_is_refused() {
        let keys = [
            Key::int(0),
            Key::int(-1),
            Key::int(i64::MIN),
            Key::int(i64::MAX),
            Key::ints(&[1, 3001, 10, 15]),
            Key::string(""),
            Key::string("a\0b"),
            Key::string(&"k".repeat(300)),
            Key::from_parts(vec![KeyPart::Str("é".into()), KeyPart::Int(-300)]),
        ];
        for key in &keys {
            let mut out = Vec::new();
            put_key_bytes(&mut out, key);
            let read = read_key_bytes(&mut Reader::new(&out)).expect("reads back");
            assert_eq!(read.as_bytes(), key.as_bytes());
            assert_eq!(read.parts(), key.parts());
        }
        let refused: [&[u8]; 10] = [
            &[],
            &[0x19],                   // an integer's byte missing
            &[0x19, 0x00],             // 0 written in a byte: the encoder writes 18
            &[0x17, 0xFF],             // -1 written in a byte: the encoder writes 17
            &[0x30, b'a'],             // a string without its end
            &[0x30, 0xFF, 0x00],       // not UTF-8
            &[0x30, 0x00, 0x01],       // after a string's end, an unknown code
            &[0x05],                   // a record's part tag, not a key's code
            &[0x21, 1, 2, 3, 4, 5, 6], // past the longest integer's code
            &[0x18, 0x00],             // a zero byte where a part should start
        ];
        for bytes in refused {
            assert!(
                Key::from_checked_encoding(bytes).is_err(),
                "{bytes:x?} is no key's encoding"
            );
        }
        // Damage of any shape: refused, or exactly the key of the parts it decodes to.
        let alphabet = [
            0x00, 0x01, 0x0F, 0x17, 0x18, 0x19, 0x1A, 0x20, 0x21, 0x30, 0x80, 0xFF,
        ];
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        for _ in 0..50_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let len = (state % 12) as usize;
            let bytes: Vec<u8> = (0..len)
                .map(|i| alphabet[(state >> (4 + 4 * i)) as usize % alphabet.len()])
                .collect();
            if let Ok(key) = Key::from_checked_encoding(&bytes) {
                assert_eq!(key.as_bytes(), &bytes[..]);
                assert_eq!(Key::from_parts(key.parts()).as_bytes(), &bytes[..]);
            }
        }
    }
}
