//! The bytes of a record: a write set, or the schema that names the ids of the records after it.
//!
//! ```text
//! record  := SCHEMA schema | WRITES change*
//! schema  := n:varint (name:str fields:varint (name:str)*)^n     table and field names, in id order
//! change  := head:varint key body                                head = table_id << 2 | op
//!   op 0 PUT    body := n:varint value^n                         the whole row (trailing units cut)
//!   op 1 PATCH  body := mask:varint value^popcount(mask)         only the changed fields
//!   op 2 DELETE body := (nothing)
//! key     := n:varint part^n       part := INT zigzag:varint | STR str
//! value   := UNIT | FALSE | TRUE | INT zigzag:varint | FLOAT f64-le | STR str
//!          | ARRAY n:varint value^n | MAP n:varint (str value)^n
//! str     := len:varint utf-8 bytes
//! ```
//!
//! Names appear once per run (a schema record before its first write), never per change: a
//! one-field integer update of an integer-keyed row costs about 5 bytes plus the key.

use std::sync::Arc;

use pure_lang::{
    Array, Change, Dynamic, ImmutableString, Key, KeyPart, Map, PartRef, Schema, TableSchema,
    Tables,
};

const SCHEMA: u8 = 1;
const WRITES: u8 = 2;

const OP_PUT: u64 = 0;
const OP_PATCH: u64 = 1;
const OP_DELETE: u64 = 2;

const UNIT: u8 = 0;
const FALSE: u8 = 1;
const TRUE: u8 = 2;
const INT: u8 = 3;
const FLOAT: u8 = 4;
const STR: u8 = 5;
const ARRAY: u8 = 6;
const MAP: u8 = 7;

/// Nesting of arrays and maps a decoder follows: the engine's own limits keep stored values far
/// shallower; this bounds the decoder's recursion on damaged input.
const NESTING_MAX: usize = 128;

pub fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push(value as u8 | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

fn put_int(out: &mut Vec<u8>, value: i64) {
    put_varint(out, ((value << 1) ^ (value >> 63)) as u64);
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    put_varint(out, s.len() as u64);
    out.extend_from_slice(s.as_bytes());
}

pub fn put_key(out: &mut Vec<u8>, key: &Key) {
    put_varint(out, key.len() as u64);
    for part in key.part_refs() {
        match part {
            PartRef::Int(i) => {
                out.push(INT);
                put_int(out, i);
            }
            PartRef::Str(s) => {
                out.push(STR);
                put_str(out, &s);
            }
        }
    }
}

/// Encodes a stored value. Only storable values reach here (the API checks on every set).
pub fn put_value(out: &mut Vec<u8>, value: &Dynamic) {
    if value.is_unit() {
        out.push(UNIT);
    } else if let Ok(b) = value.as_bool() {
        out.push(if b { TRUE } else { FALSE });
    } else if let Ok(i) = value.as_int() {
        out.push(INT);
        put_int(out, i);
    } else if let Ok(f) = value.as_float() {
        out.push(FLOAT);
        out.extend_from_slice(&f.to_le_bytes());
    } else if let Some(s) = value.read_lock::<ImmutableString>() {
        out.push(STR);
        put_str(out, &s);
    } else if let Some(items) = value.read_lock::<Array>() {
        out.push(ARRAY);
        put_varint(out, items.len() as u64);
        items.iter().for_each(|v| put_value(out, v));
    } else if let Some(map) = value.read_lock::<Map>() {
        out.push(MAP);
        put_varint(out, map.len() as u64);
        for (k, v) in map.iter() {
            put_str(out, k);
            put_value(out, v);
        }
    } else {
        panic!(
            "a value of type {} reached the log: the API admits only storable values",
            value.type_name()
        );
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

/// Encodes a write set as one record into `out` (cleared first).
pub fn encode_writes(out: &mut Vec<u8>, changes: &[Change]) {
    out.clear();
    out.push(WRITES);
    for change in changes {
        match change {
            Change::Put { table, key, fields } => {
                put_varint(out, u64::from(*table) << 2 | OP_PUT);
                put_key(out, key);
                let used = fields
                    .iter()
                    .rposition(|v| !v.is_unit())
                    .map_or(0, |i| i + 1);
                put_varint(out, used as u64);
                fields[..used].iter().for_each(|v| put_value(out, v));
            }
            Change::Patch {
                table,
                key,
                mask,
                fields,
            } => {
                put_varint(out, u64::from(*table) << 2 | OP_PATCH);
                put_key(out, key);
                put_varint(out, *mask);
                let mut bits = *mask;
                while bits != 0 {
                    let slot = bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    put_value(out, fields.get(slot).unwrap_or(&Dynamic::UNIT));
                }
            }
            Change::Delete { table, key } => {
                put_varint(out, u64::from(*table) << 2 | OP_DELETE);
                put_key(out, key);
            }
        }
    }
}

/// What a record holds.
pub enum Decoded {
    Schema(Schema),
    Writes(Vec<Change>),
}

/// A reader over encoded bytes; every method fails on truncated or malformed input.
pub struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    pub fn new(bytes: &'a [u8]) -> Reader<'a> {
        Reader { bytes, at: 0 }
    }

    pub fn is_empty(&self) -> bool {
        self.at >= self.bytes.len()
    }

    pub fn position(&self) -> usize {
        self.at
    }

    pub fn byte(&mut self) -> Result<u8, String> {
        let b = *self.bytes.get(self.at).ok_or("unexpected end")?;
        self.at += 1;
        Ok(b)
    }

    pub fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self
            .at
            .checked_add(n)
            .filter(|e| *e <= self.bytes.len())
            .ok_or("unexpected end")?;
        let slice = &self.bytes[self.at..end];
        self.at = end;
        Ok(slice)
    }

    pub fn varint(&mut self) -> Result<u64, String> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            value |= u64::from(b & 0x7f) << shift;
            if b < 0x80 {
                return Ok(value);
            }
        }
        Err("varint too long".into())
    }

    /// A count of items that each take at least one byte (bounds allocations on damaged input).
    pub fn count(&mut self) -> Result<usize, String> {
        let n = self.varint()?;
        if n > (self.bytes.len() - self.at) as u64 {
            return Err(format!("count {n} exceeds the remaining bytes"));
        }
        Ok(n as usize)
    }

    fn int(&mut self) -> Result<i64, String> {
        let z = self.varint()?;
        Ok((z >> 1) as i64 ^ -((z & 1) as i64))
    }

    fn str(&mut self) -> Result<&'a str, String> {
        let n = self.count()?;
        std::str::from_utf8(self.take(n)?).map_err(|e| e.to_string())
    }

    pub fn key(&mut self) -> Result<Key, String> {
        let n = self.count()?;
        if n == 0 {
            return Err("empty key".into());
        }
        let mut parts = Vec::with_capacity(n);
        for _ in 0..n {
            parts.push(match self.byte()? {
                INT => KeyPart::Int(self.int()?),
                STR => KeyPart::Str(self.str()?.into()),
                tag => return Err(format!("bad key part tag {tag}")),
            });
        }
        Ok(Key::from_parts(parts))
    }

    pub fn value(&mut self, depth: usize) -> Result<Dynamic, String> {
        if depth > NESTING_MAX {
            return Err("values nested too deeply".into());
        }
        Ok(match self.byte()? {
            UNIT => Dynamic::UNIT,
            FALSE => Dynamic::FALSE,
            TRUE => Dynamic::TRUE,
            INT => Dynamic::from_int(self.int()?),
            FLOAT => {
                let bytes: [u8; 8] = self.take(8)?.try_into().expect("took 8 bytes");
                Dynamic::from_float(f64::from_le_bytes(bytes))
            }
            STR => Dynamic::from(ImmutableString::from(self.str()?)),
            ARRAY => {
                let n = self.count()?;
                let items = (0..n)
                    .map(|_| self.value(depth + 1))
                    .collect::<Result<Array, _>>()?;
                Dynamic::from_array(items)
            }
            MAP => {
                let n = self.count()?;
                let mut map = Map::new();
                for _ in 0..n {
                    let k = self.str()?;
                    map.insert(k.into(), self.value(depth + 1)?);
                }
                Dynamic::from_map(map)
            }
            tag => return Err(format!("bad value tag {tag}")),
        })
    }

    pub fn schema(&mut self) -> Result<Schema, String> {
        let n = self.count()?;
        let mut tables = Vec::with_capacity(n);
        for _ in 0..n {
            let name = self.str()?.to_string();
            let count = self.count()?;
            let fields = (0..count)
                .map(|_| self.str().map(str::to_string))
                .collect::<Result<_, _>>()?;
            tables.push(TableSchema { name, fields });
        }
        Ok(Schema { tables })
    }
}

/// Decodes a record. Table ids and field slots are those of the schema in force where it was
/// written; `Mapping` translates them. A patch of a field whose state slot is past
/// [`pure_lang::FIELDS_MAX`] (only fields an app no longer declares get there) needs the row it
/// changes: use [`apply_record`] for those.
pub fn decode(bytes: &[u8], mapping: &Mapping) -> Result<Decoded, String> {
    let mut r = Reader::new(bytes);
    match r.byte()? {
        SCHEMA => Ok(Decoded::Schema(r.schema()?)),
        WRITES => {
            let mut changes = Vec::new();
            while !r.is_empty() {
                changes.push(decode_change(&mut r, mapping, None)?);
            }
            Ok(Decoded::Writes(changes))
        }
        tag => Err(format!("bad record tag {tag}")),
    }
}

/// Applies a record to `tables` change by change (recovery); a schema record is returned
/// instead. `tables` must already hold every table of the state's schema.
pub fn apply_record(
    bytes: &[u8],
    mapping: &Mapping,
    tables: &mut Tables,
) -> Result<Option<Schema>, String> {
    let mut r = Reader::new(bytes);
    match r.byte()? {
        SCHEMA => Ok(Some(r.schema()?)),
        WRITES => {
            while !r.is_empty() {
                let change = decode_change(&mut r, mapping, Some(tables))?;
                tables.apply(change);
            }
            Ok(None)
        }
        tag => Err(format!("bad record tag {tag}")),
    }
}

fn decode_change(
    r: &mut Reader<'_>,
    mapping: &Mapping,
    state: Option<&Tables>,
) -> Result<Change, String> {
    let head = r.varint()?;
    let table = mapping.table(head >> 2)?;
    let key = r.key()?;
    match head & 3 {
        OP_PUT => {
            let n = r.count()?;
            let mut fields = Vec::with_capacity(n);
            for slot in 0..n {
                let value = r.value(0)?;
                mapping.place(table.0, slot, value, &mut fields)?;
            }
            Ok(Change::Put {
                table: table.1,
                key,
                fields: Arc::new(fields),
            })
        }
        OP_PATCH => {
            let logged_mask = r.varint()?;
            let (mut fields, mut slots, mut bits) = (Vec::new(), Vec::new(), logged_mask);
            while bits != 0 {
                let slot = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                let value = r.value(0)?;
                slots.push(mapping.place(table.0, slot, value, &mut fields)?);
            }
            if slots.iter().all(|s| *s < pure_lang::FIELDS_MAX) {
                let mask = slots.iter().fold(0u64, |mask, s| mask | 1 << s);
                return Ok(Change::Patch {
                    table: table.1,
                    key,
                    mask,
                    fields: Arc::new(fields),
                });
            }
            // A slot past the mask's reach: the patched row, merged here, is put whole.
            let state = state.ok_or("a patch of a field past the slot limit needs the state")?;
            let mut row = state
                .get(table.1, &key)
                .map_or_else(Vec::new, |row| row.to_vec());
            for slot in slots {
                if row.len() <= slot {
                    row.resize(slot + 1, Dynamic::UNIT);
                }
                row[slot] = fields[slot].clone();
            }
            Ok(Change::Put {
                table: table.1,
                key,
                fields: Arc::new(row),
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
            .ok_or(format!("unknown table id {logged}"))?;
        Ok((entry.0, entry.1))
    }

    /// Puts `value` of logged `slot` at its state slot in `fields`; returns the state slot.
    pub fn place(
        &self,
        table: usize,
        slot: usize,
        value: Dynamic,
        fields: &mut Vec<Dynamic>,
    ) -> Result<usize, String> {
        let target = *self.tables[table]
            .2
            .get(slot)
            .ok_or(format!("unknown field slot {slot}"))?;
        // Slots past FIELDS_MAX are fine in a row: they hold fields of earlier versions of the
        // app (kept, invisible to scripts); only a patch's mask cannot name them.
        if fields.len() <= target {
            fields.resize(target + 1, Dynamic::UNIT);
        }
        fields[target] = value;
        Ok(target)
    }
}
