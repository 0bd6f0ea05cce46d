//! The state: one persistent ordered map per table, and the transactional operations on it.
//!
//! A write handler changes the owner's maps in place (so it sees its own writes) and records two
//! things per change: an undo entry (the old row, to roll back on throw or limit: RHAI.md point 5,
//! cheaper than keeping the old root alive) and a [`Change`] (the redo, which the runtime encodes
//! as the transaction's record). A snapshot is a clone of [`Tables`]: O(1) per table.

use std::ops::Bound;

use imbl::OrdMap;

pub use crate::fields::Fields;
use crate::key::Key;
use crate::schema::TableId;

/// The state of every table.
#[derive(Clone, Default)]
pub struct Tables {
    maps: Vec<OrdMap<Key, Fields>>,
}

/// One effect of a write handler, in the order it happened.
#[derive(Clone, Debug)]
pub enum Change {
    /// The whole row was inserted or replaced.
    Put {
        table: TableId,
        key: Key,
        fields: Fields,
    },
    /// Only the fields in `mask` changed; `fields` is the whole new row (the encoder takes the
    /// masked slots).
    Patch {
        table: TableId,
        key: Key,
        mask: u64,
        fields: Fields,
    },
    Delete {
        table: TableId,
        key: Key,
    },
}

struct Undo {
    table: TableId,
    key: Key,
    old: Option<Fields>,
}

/// The changes and undo entries of the running (or just finished) write handler.
#[derive(Default)]
pub struct WriteSet {
    changes: Vec<Change>,
    undo: Vec<Undo>,
}

impl WriteSet {
    pub fn changes(&self) -> &[Change] {
        &self.changes
    }

    pub fn is_empty(&self) -> bool {
        self.changes.is_empty()
    }

    /// Forgets the changes (after they were encoded); keeps the allocations.
    pub fn clear(&mut self) {
        self.changes.clear();
        self.undo.clear();
    }
}

impl Tables {
    pub fn new(table_count: usize) -> Tables {
        Tables {
            maps: vec![OrdMap::new(); table_count],
        }
    }

    pub fn table_count(&self) -> usize {
        self.maps.len()
    }

    /// Grows to `table_count` tables (a redeploy that declares new ones).
    pub fn ensure_tables(&mut self, table_count: usize) {
        if self.maps.len() < table_count {
            self.maps.resize(table_count, OrdMap::new());
        }
    }

    /// Replaces a whole table (recovery from a checkpoint image).
    pub fn set_map(&mut self, table: TableId, map: OrdMap<Key, Fields>) {
        self.maps[table as usize] = map;
    }

    pub fn map(&self, table: TableId) -> &OrdMap<Key, Fields> {
        &self.maps[table as usize]
    }

    pub fn get(&self, table: TableId, key: &Key) -> Option<&Fields> {
        self.maps[table as usize].get(key)
    }

    pub fn len(&self, table: TableId) -> usize {
        self.maps[table as usize].len()
    }

    pub fn row_count(&self) -> usize {
        self.maps.iter().map(OrdMap::len).sum()
    }

    /// Up to `limit` rows with `low <= key < high`, ascending, or descending when `reverse`.
    pub fn scan(
        &self,
        table: TableId,
        low: Bound<Key>,
        high: Bound<Key>,
        reverse: bool,
        limit: usize,
    ) -> Vec<(Key, Fields)> {
        let range = self.maps[table as usize].range((low, high));
        let pair = |(k, v): (&Key, &Fields)| (k.clone(), v.clone());
        if reverse {
            range.rev().take(limit).map(pair).collect()
        } else {
            range.take(limit).map(pair).collect()
        }
    }

    /// Inserts or replaces a whole row. With `must_be_new`, an existing row is an error and
    /// nothing changes.
    pub fn put(
        &mut self,
        writes: &mut WriteSet,
        table: TableId,
        key: Key,
        fields: Fields,
        must_be_new: bool,
    ) -> Result<(), String> {
        let map = &mut self.maps[table as usize];
        // Insert first and undo on conflict: the conflict is the rare case, and this costs one
        // tree walk instead of two.
        let old = map.insert(key.clone(), fields.clone());
        if must_be_new {
            if let Some(old) = old {
                map.insert(key, old);
                return Err("insert: a row with this key exists (use put to replace it)".into());
            }
        }
        writes.undo.push(Undo {
            table,
            key: key.clone(),
            old,
        });
        writes.changes.push(Change::Put { table, key, fields });
        Ok(())
    }

    /// Writes the fields in `mask` of `fields` into the stored row. `base` is the row the script
    /// read before changing it: when the stored row is still that one, `fields` is the new row as
    /// it is; otherwise (the handler replaced the row meanwhile) the masked fields are merged
    /// into the stored row, so that the live state equals the replay of the logged patch.
    pub fn patch(
        &mut self,
        writes: &mut WriteSet,
        table: TableId,
        key: &Key,
        mask: u64,
        fields: &Fields,
        base: Option<&Fields>,
    ) -> Result<Fields, String> {
        let map = &mut self.maps[table as usize];
        let Some(slot) = map.get_mut(key) else {
            return Err("update: the row no longer exists".into());
        };
        let new = match base {
            Some(base) if base.ptr_eq(slot) => fields.clone(),
            _ => slot.merge(fields, mask),
        };
        let old = std::mem::replace(slot, new.clone());
        writes.undo.push(Undo {
            table,
            key: key.clone(),
            old: Some(old),
        });
        writes.changes.push(Change::Patch {
            table,
            key: key.clone(),
            mask,
            fields: new.clone(),
        });
        Ok(new)
    }

    pub fn delete(&mut self, writes: &mut WriteSet, table: TableId, key: Key) -> bool {
        let Some(old) = self.maps[table as usize].remove(&key) else {
            return false;
        };
        writes.undo.push(Undo {
            table,
            key: key.clone(),
            old: Some(old),
        });
        writes.changes.push(Change::Delete { table, key });
        true
    }

    /// Puts back every row the write set changed, newest first: the state is exactly as before.
    pub fn roll_back(&mut self, writes: &mut WriteSet) {
        for undo in writes.undo.drain(..).rev() {
            let map = &mut self.maps[undo.table as usize];
            match undo.old {
                Some(old) => {
                    map.insert(undo.key, old);
                }
                None => {
                    map.remove(&undo.key);
                }
            }
        }
        writes.changes.clear();
    }

    /// Applies a change from the log during recovery (no undo, no write set).
    pub fn apply(&mut self, change: Change) {
        match change {
            Change::Put { table, key, fields } => {
                self.maps[table as usize].insert(key, fields);
            }
            Change::Patch {
                table,
                key,
                mask,
                fields,
            } => {
                let map = &mut self.maps[table as usize];
                let merged = match map.get(&key) {
                    Some(stored) => stored.merge(&fields, mask),
                    None => fields,
                };
                map.insert(key, merged);
            }
            Change::Delete { table, key } => {
                self.maps[table as usize].remove(&key);
            }
        }
    }
}
