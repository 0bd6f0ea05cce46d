//! The state: one persistent ordered map per table, and the transactional operations on it.
//!
//! A write handler changes the owner's maps in place (so it sees its own writes) and records two
//! things per change: an undo entry (the old row, to roll back on throw or limit: cheaper than
//! keeping the old root alive, which would make every later change copy its path again) and a
//! [`Change`] (the redo, which the runtime encodes as the transaction's record). A snapshot
//! ([`Tables::snapshot`]) commits each changed table's tree and shares it read-only: the owner
//! copies a node a snapshot shares the first time it changes it (`tree`).
//!
//! Declared indexes live beside the tables: one persistent map per index from the indexed
//! fields' values (then the row's key, unless the index is unique) to the row's key. Every row
//! change keeps them exact, rollback included, but they are never in a [`Change`]: the log and
//! the checkpoint images hold rows only, and [`Tables::set_indexes`] builds indexes from the
//! rows at start.

use std::ops::Bound;

use std::sync::Arc;

pub use crate::state::fields::Fields;
use rhai::{Dynamic, ImmutableString};

use crate::state::key::{key_part, Key, KeyBuilder, KeyPart, PartRef};
use crate::state::schema::TableId;
use crate::state::tree::{Builder, Tree};

/// The rows of one table built apart from the tables, then given to them whole
/// ([`Tables::set_rows`]): recovery reads a checkpoint image's rows in key order, import parses
/// each file on a thread of its own.
///
/// Rows pushed in key order (`push_sorted`) are built into a tree bottom-up, with no search;
/// a row inserted in any order (`insert`) moves them into a tree that takes inserts.
#[derive(Default)]
pub struct RowSet {
    sorted: Builder<Key, Fields>,
    /// Empty while every row came in order.
    map: Tree<Key, Fields>,
}

impl RowSet {
    pub fn new() -> RowSet {
        RowSet::default()
    }

    /// Adds a row, returning the one it replaced (a duplicate key).
    pub fn insert(&mut self, key: Key, fields: Fields) -> Option<Fields> {
        if self.sorted.len() > 0 {
            let sorted = std::mem::take(&mut self.sorted);
            debug_assert_eq!(self.map.len(), 0, "rows came in order until now");
            self.map = sorted.finish();
        }
        self.map.insert(key, fields)
    }

    /// Adds a row after every row so far: an error, changing nothing, for a key not greater
    /// than the last (rows read from a file that is not what it claims to be).
    pub fn push_sorted(&mut self, key: Key, fields: Fields) -> Result<(), String> {
        if self.map.len() > 0 {
            let last = self.map.ends().map(|(_, (last, _))| last.clone());
            if let Some(last) = last.filter(|last| *last >= key) {
                return Err(format!(
                    "row {key:?} after row {last:?}: rows out of key order"
                ));
            }
            self.map.insert(key, fields);
            return Ok(());
        }
        if let Some(last) = self.sorted.last_key() {
            if *last >= key {
                return Err(format!(
                    "row {key:?} after row {last:?}: rows out of key order"
                ));
            }
        }
        self.sorted.push(key, fields);
        Ok(())
    }

    pub fn len(&self) -> usize {
        self.sorted.len() + self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn into_tree(mut self) -> Tree<Key, Fields> {
        match self.sorted.len() {
            0 => std::mem::take(&mut self.map),
            _ => std::mem::take(&mut self.sorted).finish(),
        }
    }
}

impl FromIterator<(Key, Fields)> for RowSet {
    fn from_iter<I: IntoIterator<Item = (Key, Fields)>>(rows: I) -> RowSet {
        let mut set = RowSet::new();
        for (key, fields) in rows {
            set.insert(key, fields);
        }
        set
    }
}

/// A stored row as the tables give it out: its key and fields.
pub type RowRef<'a> = (&'a Key, &'a Fields);

/// The state of every table, and of the declared indexes on them: the owner's, which it
/// changes, or a snapshot of it ([`Tables::snapshot`]), which nothing changes.
#[derive(Default)]
pub struct Tables {
    maps: Vec<Tree<Key, Fields>>,
    /// In the order of the app's declarations (an index's id is its position).
    indexes: Vec<Index>,
    /// Per table, a bit for each field slot an index reads, and the top bit where an index
    /// reads only key parts: no bit of a change's mask here, no index to look at (most
    /// updates). A filter: a bit here sends a change to the indexes' own check.
    watched: Arc<[u64]>,
}

/// A secondary index, as the manifest declares it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexDef {
    pub name: String,
    pub table: TableId,
    /// Where each indexed value comes from, in order.
    pub sources: Vec<IndexSource>,
    /// Their names as declared (without a leading `-`), for messages.
    pub fields: Vec<String>,
    /// Per field: ordered from the largest value down (declared `"-best"`). Only integers can
    /// be: the entry holds `!value` (bitwise not, `-1 - value`), which reverses the order of
    /// every i64 without overflow and is still an integer part.
    pub descending: Vec<bool>,
    /// At most one row per combination of values.
    pub unique: bool,
}

/// Where an indexed value comes from: a row's field (its slot), or a part of the row's key
/// (declared `key[i]`, so that an index can start with a composite key's leading parts and
/// keep, say, a district's customers together).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IndexSource {
    Field(usize),
    KeyPart(usize),
}

/// An index's entries. Invariant: exactly one entry per row of `def.table` whose indexed
/// fields are all set (none `()`), keyed by [`IndexDef::entry_key`], that leads to the row's key.
struct Index {
    def: Arc<IndexDef>,
    entries: Entries,
}

/// The entries of a unique index hold the row's key; those of another index end with it (so
/// that rows with equal values have entries of their own), and hold nothing more: a third less
/// memory per entry.
enum Entries {
    Unique(Tree<Key, Key>),
    Multi(Tree<Key, ()>),
}

impl Entries {
    fn new(unique: bool) -> Entries {
        match unique {
            true => Entries::Unique(Tree::new()),
            false => Entries::Multi(Tree::new()),
        }
    }

    fn snapshot(&mut self) -> Entries {
        match self {
            Entries::Unique(tree) => Entries::Unique(tree.snapshot()),
            Entries::Multi(tree) => Entries::Multi(tree.snapshot()),
        }
    }

    fn thawed(&self) -> Entries {
        match self {
            Entries::Unique(tree) => Entries::Unique(tree.thawed()),
            Entries::Multi(tree) => Entries::Multi(tree.thawed()),
        }
    }

    fn check(&self) {
        match self {
            Entries::Unique(tree) => tree.check(),
            Entries::Multi(tree) => tree.check(),
        }
    }

    fn len(&self) -> usize {
        match self {
            Entries::Unique(tree) => tree.len(),
            Entries::Multi(tree) => tree.len(),
        }
    }

    /// Whether `entry` is there and leads to the row `key`.
    fn leads_to(&self, entry: &Key, key: &Key) -> bool {
        match self {
            Entries::Unique(tree) => tree.get(entry) == Some(key),
            // The entry ends with the row's key.
            Entries::Multi(tree) => tree.get(entry).is_some(),
        }
    }

    /// The row key of a unique index's entry.
    fn unique_get(&self, entry: &Key) -> Option<&Key> {
        match self {
            Entries::Unique(tree) => tree.get(entry),
            Entries::Multi(_) => None,
        }
    }

    /// Adds an entry for row `key`: the row key of the entry it replaced, if any (a duplicate
    /// in a unique index).
    fn insert(&mut self, entry: Key, key: &Key) -> Option<Key> {
        match self {
            Entries::Unique(tree) => tree.insert(entry, key.clone()),
            Entries::Multi(tree) => tree.insert(entry, ()).map(|()| key.clone()),
        }
    }

    /// Removes an entry: whether it was there.
    fn remove(&mut self, entry: &Key, key: &Key) -> bool {
        match self {
            Entries::Unique(tree) => {
                let removed = tree.remove(entry);
                assert!(
                    removed.as_ref().is_none_or(|row| row == key),
                    "a unique entry leads to its own row"
                );
                removed.is_some()
            }
            Entries::Multi(tree) => tree.remove(entry).is_some(),
        }
    }
}

/// The entries of an index within bounds, in its order from either end: entry key and row key.
pub struct IndexRange<'a> {
    walk: Walk<'a>,
    /// Parts of a (non-unique) entry before its row key.
    values: usize,
}

enum Walk<'a> {
    Unique(crate::state::tree::Range<'a, Key, Key>),
    Multi(crate::state::tree::Range<'a, Key, ()>),
}

impl IndexRange<'_> {
    fn row_key(&self, entry: &Key) -> Key {
        entry.without_parts(self.values)
    }
}

impl<'a> Iterator for IndexRange<'a> {
    type Item = (&'a Key, Key);

    fn next(&mut self) -> Option<Self::Item> {
        match &mut self.walk {
            Walk::Unique(range) => range.next().map(|(entry, key)| (entry, key.clone())),
            Walk::Multi(range) => {
                let (entry, ()) = range.next()?;
                Some((entry, self.row_key(entry)))
            }
        }
    }
}

impl DoubleEndedIterator for IndexRange<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        match &mut self.walk {
            Walk::Unique(range) => range.next_back().map(|(entry, key)| (entry, key.clone())),
            Walk::Multi(range) => {
                let (entry, ()) = range.next_back()?;
                Some((entry, self.row_key(entry)))
            }
        }
    }
}

impl IndexDef {
    /// The values of the indexed fields of a row, as the leading parts of its entry's key;
    /// `None` when one of them is `()` (the row is not in the index, as SQL leaves NULLs out of
    /// unique constraints).
    pub fn values(&self, key: &Key, fields: &Fields) -> Result<Option<Vec<KeyPart>>, String> {
        let mut parts = Vec::with_capacity(self.sources.len() + 1);
        let mut unset = false;
        for (at, (source, name)) in self.sources.iter().zip(&self.fields).enumerate() {
            let value = match *source {
                IndexSource::Field(slot) => fields.value(slot),
                // A key with fewer parts has no such part: the row is not in the index.
                IndexSource::KeyPart(i) => {
                    key.part_refs().nth(i).map_or(Dynamic::UNIT, |p| match p {
                        PartRef::Int(i) => Dynamic::from_int(i),
                        PartRef::Str(s) => Dynamic::from(ImmutableString::from(s.as_ref())),
                    })
                }
            };
            // Every field is checked, set or not: whether a value may be stored must not
            // depend on its neighbours.
            if value.is_unit() {
                unset = true;
                continue;
            }
            if self.descending[at] {
                let Ok(value) = value.as_int() else {
                    return Err(format!(
                        "the index {} orders rows by {name} descending, which must be an \
                         integer or (), not {}",
                        self.name,
                        value.type_name()
                    ));
                };
                parts.push(KeyPart::Int(!value));
                continue;
            }
            let part = key_part(&value).map_err(|_| {
                format!(
                    "the index {} orders rows by {name}, which must be an integer, a string or \
                     (), not {}",
                    self.name,
                    value.type_name()
                )
            })?;
            parts.push(part);
        }
        Ok((!unset).then_some(parts))
    }

    /// The key that `values` (a value, or an array of them, as a script gives them to `find`,
    /// `get` or a scan's bound) stand for in the index's order: the parts in descending
    /// fields are turned as the entries' are; parts past the indexed fields (a row key's, in a
    /// bound) are taken as they are.
    pub fn lookup_key(&self, values: &rhai::Dynamic) -> Result<Key, String> {
        let mut parts = match values.read_lock::<rhai::Array>() {
            Some(array) if array.is_empty() => {
                return Err(format!("{}: give at least one value", self.name))
            }
            Some(array) => array.iter().map(key_part).collect::<Result<Vec<_>, _>>()?,
            None => vec![key_part(values)?],
        };
        for (part, (descending, name)) in parts
            .iter_mut()
            .zip(self.descending.iter().zip(&self.fields))
        {
            if !*descending {
                continue;
            }
            let KeyPart::Int(value) = part else {
                return Err(format!(
                    "the index {} orders {name} descending: give it an integer",
                    self.name
                ));
            };
            *part = KeyPart::Int(!*value);
        }
        Ok(Key::from_parts(parts))
    }

    /// The key of a row's entry: its indexed values, then (unless unique) its own key's parts,
    /// so that rows with equal values are distinct entries in key order.
    pub fn entry_key(&self, key: &Key, fields: &Fields) -> Result<Option<Key>, String> {
        if let Some(entry) = self.entry_key_in_place(key, fields) {
            return Ok(entry);
        }
        self.entry_key_of_values(key, fields)
    }

    /// [`IndexDef::entry_key`] read from where the values lie, with no value made: `None`
    /// where an indexed field holds anything but an integer, a string or `()`, or where a key
    /// part is descending (the general way decides, with its message). A key's part is
    /// copied as it is encoded.
    fn entry_key_in_place(&self, key: &Key, fields: &Fields) -> Option<Option<Key>> {
        let mut entry = KeyBuilder::new();
        let mut unset = false;
        for (&source, &descending) in self.sources.iter().zip(&self.descending) {
            match source {
                IndexSource::Field(slot) if fields.is_unit(slot) => unset = true,
                IndexSource::Field(slot) => match (fields.int(slot), descending) {
                    (Some(value), true) => entry.int(!value),
                    (Some(value), false) => entry.int(value),
                    (None, false) => entry.str(fields.str(slot)?),
                    (None, true) => return None,
                },
                // A descending key part is turned (and must be an integer): the general way.
                IndexSource::KeyPart(_) if descending => return None,
                IndexSource::KeyPart(i) => unset |= !entry.part_of(key, i),
            }
        }
        if unset {
            return Some(None);
        }
        if self.sources.is_empty() {
            return None;
        }
        Some(Some(if self.unique {
            entry.finish()
        } else {
            entry.finish_then(key)
        }))
    }

    /// [`IndexDef::entry_key`] of the values as [`IndexDef::values`] makes them.
    fn entry_key_of_values(&self, key: &Key, fields: &Fields) -> Result<Option<Key>, String> {
        let Some(parts) = self.values(key, fields)? else {
            return Ok(None);
        };
        Ok(Some(if self.unique {
            Key::from_parts(parts)
        } else {
            Key::from_parts_then(&parts, key)
        }))
    }
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

impl Change {
    /// The table the change is to.
    pub fn table(&self) -> TableId {
        match self {
            Change::Put { table, .. }
            | Change::Patch { table, .. }
            | Change::Delete { table, .. } => *table,
        }
    }
}

struct Undo {
    table: TableId,
    key: Key,
    old: Option<Fields>,
}

/// The changes and undo entries of the running (or just finished) write handler. Every change
/// pushes one change and one undo entry, so the two lists always have the same length.
#[derive(Default)]
pub struct WriteSet {
    changes: Vec<Change>,
    undo: Vec<Undo>,
}

impl WriteSet {
    pub fn changes(&self) -> &[Change] {
        &self.changes
    }

    /// No change to log and nothing to undo (the two have the same length: see the type's doc).
    pub fn is_empty(&self) -> bool {
        assert_eq!(
            self.changes.is_empty(),
            self.undo.is_empty(),
            "a write set is empty of changes exactly when it is empty of undo entries"
        );
        self.changes.is_empty()
    }

    /// How far the write set has come: [`Tables::roll_back_to`] undoes what came after.
    pub fn mark(&self) -> usize {
        assert_eq!(
            self.changes.len(),
            self.undo.len(),
            "one undo entry per change"
        );
        self.undo.len()
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
            maps: (0..table_count).map(|_| Tree::new()).collect(),
            indexes: Vec::new(),
            watched: Arc::new([]),
        }
    }

    /// The state now, read-only, for readers on other threads: each table and index that
    /// changed since the last snapshot commits its tree (`tree`), the others give the last
    /// snapshot's again. What the owner changes next copies the nodes it shares with this.
    pub fn snapshot(&mut self) -> Tables {
        Tables {
            maps: self.maps.iter_mut().map(Tree::snapshot).collect(),
            indexes: self
                .indexes
                .iter_mut()
                .map(|index| Index {
                    def: index.def.clone(),
                    entries: index.entries.snapshot(),
                })
                .collect(),
            watched: self.watched.clone(),
        }
    }

    /// Tables the owner can change, holding what these hold, which stay as they are: a copy of
    /// every row and index entry. What going back to a snapshot costs (the log refused a group:
    /// the owner's tables return to the last durable state).
    pub fn thawed(&self) -> Tables {
        Tables {
            maps: self.maps.iter().map(Tree::thawed).collect(),
            indexes: self
                .indexes
                .iter()
                .map(|index| Index {
                    def: index.def.clone(),
                    entries: index.entries.thawed(),
                })
                .collect(),
            watched: self.watched.clone(),
        }
    }

    /// A snapshot, which nothing can change (not the owner's tables).
    pub fn is_snapshot(&self) -> bool {
        self.maps.iter().any(Tree::is_frozen)
    }

    /// Replaces the indexes with `defs`, each built from the rows: at start, once the rows are
    /// recovered (an index dropped from the manifest is simply not given again). An error
    /// names the first row an index cannot hold (a value it cannot order, a duplicate in a
    /// unique index); the tables are then left without indexes.
    pub fn set_indexes(&mut self, defs: Vec<IndexDef>) -> Result<(), String> {
        // An index of a table these tables do not have yet (tables made for fewer than the
        // schema's, the schedule's among them) comes with it, empty.
        let needed = defs.iter().map(|d| d.table as usize + 1).max().unwrap_or(0);
        self.ensure_tables(needed);
        self.indexes.clear();
        self.watched = Arc::new([]);
        let mut built = Vec::with_capacity(defs.len());
        for def in defs {
            let mut entries = Entries::new(def.unique);
            for (key, fields) in self.maps[def.table as usize].iter() {
                let Some(entry) = def
                    .entry_key(key, fields)
                    .map_err(|e| format!("row {}: {e}", key.to_json()))?
                else {
                    continue;
                };
                if let Some(other) = entries.insert(entry, key) {
                    return Err(duplicate(&def, &other, key));
                }
            }
            built.push(Index {
                def: Arc::new(def),
                entries,
            });
        }
        let mut watched = vec![0u64; self.maps.len()];
        for index in &built {
            let bits = &mut watched[index.def.table as usize];
            for source in &index.def.sources {
                *bits |= match *source {
                    IndexSource::Field(slot) => 1 << slot,
                    IndexSource::KeyPart(_) => 1 << 63,
                };
            }
        }
        self.watched = watched.into();
        self.indexes = built;
        debug_assert!(
            self.indexes_hold_their_rows(usize::MAX),
            "built from the rows"
        );
        Ok(())
    }

    /// Whether the rows `writes` changed hold their indexes' invariant ([`Index`]): each row's
    /// entry (if its fields make one) leads to it, and the entry its old version made, where
    /// that differs, no longer does. The cost of the call's own changes: debug builds check it
    /// after every write call (a walk of whole tables there made a write on a table of 10,000
    /// rows cost milliseconds).
    pub fn indexes_hold_rows_of(&self, writes: &WriteSet) -> bool {
        writes.undo.iter().all(|undo| {
            let now = self.get(undo.table, &undo.key);
            self.indexes
                .iter()
                .filter(|index| index.def.table == undo.table)
                .all(|index| {
                    let entry = |fields: Option<&Fields>| {
                        fields.and_then(|f| index.def.entry_key(&undo.key, f).ok().flatten())
                    };
                    let (before, after) = (entry(undo.old.as_ref()), entry(now));
                    let holds = after
                        .as_ref()
                        .is_none_or(|e| index.entries.leads_to(e, &undo.key));
                    let released = match (&before, &after) {
                        (Some(b), after) if after.as_ref() != Some(b) => {
                            !index.entries.leads_to(b, &undo.key)
                        }
                        _ => true,
                    };
                    holds && released
                })
        })
    }

    /// Whether every index holds exactly one entry per row that its fields make one, and
    /// nothing else ([`Index`]'s invariant): a walk of every indexed table of up to `rows_max`
    /// rows, for debug builds where a whole table is built (`set_indexes`).
    pub fn indexes_hold_their_rows(&self, rows_max: usize) -> bool {
        self.indexes.iter().all(|index| {
            let rows = &self.maps[index.def.table as usize];
            if rows.len() > rows_max {
                return true;
            }
            let mut made = 0;
            let all_there =
                rows.iter()
                    .all(|(key, fields)| match index.def.entry_key(key, fields) {
                        Ok(Some(entry)) => {
                            made += 1;
                            index.entries.leads_to(&entry, key)
                        }
                        Ok(None) | Err(_) => true,
                    });
            all_there && made == index.entries.len()
        })
    }

    pub fn index_count(&self) -> usize {
        self.indexes.len()
    }

    /// The id of the index called `name`.
    pub fn index_id(&self, name: &str) -> Option<usize> {
        self.indexes.iter().position(|index| index.def.name == name)
    }

    pub fn index_def(&self, index: usize) -> &IndexDef {
        &self.indexes[index].def
    }

    /// The entries of an index with `low <= entry < high`, ascending (`.rev()`: descending):
    /// entry key and row key.
    pub fn index_range(&self, index: usize, low: Bound<Key>, high: Bound<Key>) -> IndexRange<'_> {
        let index = &self.indexes[index];
        IndexRange {
            walk: match &index.entries {
                Entries::Unique(tree) => Walk::Unique(tree.range((low, high))),
                Entries::Multi(tree) => Walk::Multi(tree.range((low, high))),
            },
            values: index.def.sources.len(),
        }
    }

    /// The row key a unique index's entry leads to (`None` for another index).
    pub fn index_get(&self, index: usize, entry: &Key) -> Option<&Key> {
        self.indexes[index].entries.unique_get(entry)
    }

    /// The entries of an index: one per row whose indexed fields are all set.
    pub fn index_len(&self, index: usize) -> usize {
        self.indexes[index].entries.len()
    }

    /// Moves the entries of row `key` of `table` from what `old` makes them to what `new` does.
    /// `changed` has a bit per slot that may differ between them (all, for a whole row), so
    /// that an update of other fields costs the indexes nothing. With `check`, refuses
    /// (changing nothing) a value an index cannot order or a duplicate in a unique index;
    /// without, the caller knows the values were indexed before.
    fn reindex(
        &mut self,
        table: TableId,
        key: &Key,
        (old, new): (Option<&Fields>, Option<&Fields>),
        changed: u64,
        check: bool,
    ) -> Result<(), String> {
        if self
            .watched
            .get(table as usize)
            .is_none_or(|w| w & changed == 0)
        {
            return Ok(());
        }
        let mut moves = Vec::new();
        for (at, index) in self.indexes.iter().enumerate() {
            // A row's key never changes, so key parts matter only when the whole row does.
            let touched = index.def.sources.iter().any(|source| match *source {
                IndexSource::Field(slot) => changed & (1 << slot) != 0,
                IndexSource::KeyPart(_) => changed == u64::MAX,
            });
            if index.def.table != table || !touched {
                continue;
            }
            let entry = |fields: Option<&Fields>| match fields {
                Some(fields) => index.def.entry_key(key, fields),
                None => Ok(None),
            };
            let before = entry(old).unwrap_or(None);
            let after = match entry(new) {
                Ok(after) => after,
                Err(error) if check => return Err(error),
                Err(_) => None,
            };
            if before == after {
                continue;
            }
            if let (true, Some(after)) = (check && index.def.unique, &after) {
                if let Some(other) = index
                    .entries
                    .unique_get(after)
                    .filter(|other| *other != key)
                {
                    return Err(duplicate(&index.def, other, key));
                }
            }
            moves.push((at, before, after));
        }
        for (at, before, after) in moves {
            let entries = &mut self.indexes[at].entries;
            // One entry per indexed row (`Index`): the old row's entry is there to move, and
            // the new one is free (a unique index's conflict was refused above; another
            // index's entry ends with the row's own key; a roll-back restores, newest first,
            // entries that the change it undoes had removed).
            if let Some(before) = before {
                let removed = entries.remove(&before, key);
                assert!(removed, "the old row's entry was in the index");
            }
            if let Some(after) = after {
                let replaced = entries.insert(after, key);
                assert!(replaced.is_none(), "an entry never replaces another row's");
            }
        }
        Ok(())
    }

    pub fn table_count(&self) -> usize {
        self.maps.len()
    }

    /// Grows to `table_count` tables (a redeploy that declares new ones).
    pub fn ensure_tables(&mut self, table_count: usize) {
        if self.maps.len() < table_count {
            self.maps.resize_with(table_count, Tree::new);
        }
    }

    /// Replaces a whole table with rows built apart (a checkpoint image read, an import file
    /// parsed on a thread of its own). Indexes are built after ([`Tables::set_indexes`]).
    pub fn set_rows(&mut self, table: TableId, rows: RowSet) {
        assert!(
            self.indexes.is_empty(),
            "a table is replaced before its indexes are built: they would not hold its rows"
        );
        self.maps[table as usize] = rows.into_tree();
    }

    /// Every row of `table` in key order (`.rev()`: descending; `.len()`: how many).
    pub fn rows(
        &self,
        table: TableId,
    ) -> impl DoubleEndedIterator<Item = (&Key, &Fields)> + ExactSizeIterator {
        self.maps[table as usize].iter()
    }

    /// The first row of `table` and its last (the same row in a table of one; `None` when
    /// empty), without setting up a walk.
    pub fn first_and_last(&self, table: TableId) -> Option<(RowRef<'_>, RowRef<'_>)> {
        self.maps[table as usize].ends()
    }

    pub fn get(&self, table: TableId, key: &Key) -> Option<&Fields> {
        self.maps[table as usize].get(key)
    }

    /// [`Tables::get`] for a row the caller may change: a [`Tables::patch`] of it that follows
    /// (with no other change to the table between) does not search for it again.
    pub fn get_for_update(&mut self, table: TableId, key: &Key) -> Option<&Fields> {
        self.maps[table as usize].get_remembered(key)
    }

    pub fn len(&self, table: TableId) -> usize {
        self.maps[table as usize].len()
    }

    /// Panics unless every table's and index's tree keeps its invariants (for tests: the
    /// order of keys across nodes, the counts, the generations).
    #[doc(hidden)]
    pub fn check_trees(&self) {
        self.maps.iter().for_each(Tree::check);
        self.indexes.iter().for_each(|index| index.entries.check());
    }

    pub fn row_count(&self) -> usize {
        self.maps.iter().map(Tree::len).sum()
    }

    /// Up to `limit` rows with `low <= key < high`, ascending, or descending when `reverse`.
    pub fn scan<T>(
        &self,
        table: TableId,
        (low, high): (Bound<Key>, Bound<Key>),
        reverse: bool,
        limit: usize,
        row: impl FnMut((&Key, &Fields)) -> T,
    ) -> Vec<T> {
        let map = &self.maps[table as usize];
        if reverse {
            return map.range((low, high)).rev().take(limit).map(row).collect();
        }
        // Forward, the end is found by comparing each row's key with the high bound rather
        // than by a second search of the tree: a scan reads a few rows (Delivery's `first`
        // reads one), and a search costs as much as reading tens of them.
        let below = |key: &Key| match &high {
            Bound::Included(high) => key <= high,
            Bound::Excluded(high) => key < high,
            Bound::Unbounded => true,
        };
        map.range((low, Bound::Unbounded))
            .take_while(|(key, _)| below(key))
            .take(limit)
            .map(row)
            .collect()
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
        if let Err(error) = self.reindex(table, &key, (old.as_ref(), Some(&fields)), u64::MAX, true)
        {
            let map = &mut self.maps[table as usize];
            match old {
                Some(old) => map.insert(key, old),
                None => map.remove(&key),
            };
            return Err(error);
        }
        writes.undo.push(Undo {
            table,
            key: key.clone(),
            old,
        });
        writes.changes.push(Change::Put { table, key, fields });
        assert_eq!(
            writes.changes.len(),
            writes.undo.len(),
            "one undo entry per change"
        );
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
        let Some((old, new)) = map.update(key, |stored| match base {
            Some(base) if base.ptr_eq(stored) => fields.clone(),
            _ => stored.merge(fields, mask),
        }) else {
            return Err("update: the row no longer exists".into());
        };
        let new = new.clone();
        if let Err(error) = self.reindex(table, key, (Some(&old), Some(&new)), mask, true) {
            self.maps[table as usize].insert(key.clone(), old);
            return Err(error);
        }
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
        assert_eq!(
            writes.changes.len(),
            writes.undo.len(),
            "one undo entry per change"
        );
        Ok(new)
    }

    pub fn delete(&mut self, writes: &mut WriteSet, table: TableId, key: Key) -> bool {
        let Some(old) = self.maps[table as usize].remove(&key) else {
            return false;
        };
        self.reindex(table, &key, (Some(&old), None), u64::MAX, false)
            .expect("removing entries cannot fail");
        writes.undo.push(Undo {
            table,
            key: key.clone(),
            old: Some(old),
        });
        writes.changes.push(Change::Delete { table, key });
        assert_eq!(
            writes.changes.len(),
            writes.undo.len(),
            "one undo entry per change"
        );
        true
    }

    /// Puts back every row the write set changed, newest first: the state is exactly as before.
    pub fn roll_back(&mut self, writes: &mut WriteSet) {
        self.roll_back_to(writes, 0);
        assert!(
            writes.changes.is_empty() && writes.undo.is_empty(),
            "a rolled-back write set holds nothing to log and nothing to undo"
        );
    }

    /// Puts back the rows changed since `mark` ([`WriteSet::mark`]), newest first, and forgets
    /// those changes: one call that fails partway (a bulk put) changes nothing.
    pub fn roll_back_to(&mut self, writes: &mut WriteSet, mark: usize) {
        assert!(mark <= writes.undo.len(), "a mark of this write set");
        assert_eq!(
            writes.changes.len(),
            writes.undo.len(),
            "one undo entry per change"
        );
        for undo in writes.undo.drain(mark..).rev() {
            let map = &mut self.maps[undo.table as usize];
            let now = match &undo.old {
                Some(old) => map.insert(undo.key.clone(), old.clone()),
                None => map.remove(&undo.key),
            };
            // The entries go back to what the old row made them, which were in the index.
            self.reindex(
                undo.table,
                &undo.key,
                (now.as_ref(), undo.old.as_ref()),
                u64::MAX,
                false,
            )
            .expect("restoring entries cannot fail");
        }
        writes.changes.truncate(mark);
        assert_eq!(writes.undo.len(), mark, "undone back to the mark");
        assert_eq!(
            writes.changes.len(),
            mark,
            "the undone changes are not logged"
        );
    }

    /// Applies a change from the log during recovery (no undo, no write set). Indexes are
    /// not kept: recovery runs before [`Tables::set_indexes`] builds them.
    pub fn apply(&mut self, change: Change) {
        assert!(self.indexes.is_empty(), "indexes are built after recovery");
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

fn duplicate(def: &IndexDef, other: &Key, key: &Key) -> String {
    format!(
        "the unique index {} already holds a row with these {}: {} (this row: {})",
        def.name,
        def.fields.join(", "),
        other.to_json(),
        key.to_json()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An entry's key read in place is the key of the values made, for every kind of value
    /// in every kind of index (unique or not, descending or not, key parts in and past the
    /// key), and where the values are refused or leave the row out, so is it.
    #[test]
    fn entry_keys_read_in_place_are_those_of_the_values() {
        let values = [
            Dynamic::UNIT,
            Dynamic::from_int(0),
            Dynamic::from_int(-7),
            Dynamic::from_int(i64::MIN),
            Dynamic::from_int(i64::MAX),
            Dynamic::from(ImmutableString::from("")),
            Dynamic::from(ImmutableString::from("Smith\0x")),
            Dynamic::from(ImmutableString::from("a longer last name than fits inline")),
            Dynamic::from_float(1.5),
            Dynamic::from_bool(true),
            Dynamic::from_array(vec![Dynamic::from_int(1)]),
        ];
        let keys = [
            Key::int(3),
            Key::ints(&[1, 2, 3]),
            Key::from_parts(vec![KeyPart::Str("w\0".into()), KeyPart::Int(-4)]),
        ];
        let sources = [
            vec![IndexSource::Field(0)],
            vec![
                IndexSource::KeyPart(0),
                IndexSource::KeyPart(1),
                IndexSource::Field(0),
            ],
            vec![IndexSource::Field(1), IndexSource::Field(0)],
            vec![IndexSource::KeyPart(2), IndexSource::Field(5)],
        ];
        let (mut compared, mut refused) = (0, 0);
        for sources in &sources {
            for (unique, descending) in [(false, false), (true, false), (false, true)] {
                let def = IndexDef {
                    name: "by".into(),
                    table: 0,
                    fields: sources.iter().map(|s| format!("{s:?}")).collect(),
                    descending: sources
                        .iter()
                        .map(|s| {
                            descending
                                && matches!(s, IndexSource::Field(0) | IndexSource::KeyPart(1))
                        })
                        .collect(),
                    sources: sources.clone(),
                    unique,
                };
                for first in &values {
                    for second in &values {
                        let fields = Fields::from_values(&[first.clone(), second.clone()]);
                        for key in &keys {
                            let general = def.entry_key_of_values(key, &fields);
                            refused += usize::from(general.is_err());
                            let in_place = def.entry_key_in_place(key, &fields);
                            if let Some(in_place) = &in_place {
                                compared += 1;
                                assert_eq!(
                                    Ok(in_place.clone()),
                                    general.clone(),
                                    "{sources:?} of {first:?}, {second:?}, key {key:?}"
                                );
                            }
                            assert_eq!(def.entry_key(key, &fields), general);
                        }
                    }
                }
            }
        }
        assert!(compared > 1000 && refused > 100, "{compared} {refused}");
    }

    fn row(value: i64) -> Fields {
        Fields::from_values(&[Dynamic::from_int(value)])
    }

    fn rows(set: RowSet) -> Vec<(i64, i64)> {
        let mut tables = Tables::new(1);
        tables.set_rows(0, set);
        tables
            .rows(0)
            .map(|(k, f)| (k.to_json().as_i64().unwrap(), f.int(0).unwrap()))
            .collect()
    }

    /// Rows pushed in order, then inserted out of order, then pushed again, end as one table;
    /// a row pushed out of order is refused and changes nothing, before and after the switch.
    #[test]
    fn a_row_set_takes_rows_in_order_then_in_any_order() {
        let mut set = RowSet::new();
        for k in 0..40 {
            set.push_sorted(Key::int(k * 2), row(k)).unwrap();
        }
        assert!(set.push_sorted(Key::int(78), row(0)).is_err());
        assert!(set.push_sorted(Key::int(10), row(0)).is_err());
        assert_eq!(set.len(), 40);
        assert!(set.insert(Key::int(5), row(-5)).is_none());
        assert_eq!(
            set.insert(Key::int(4), row(-4)).map(|f| f.int(0)),
            Some(Some(2))
        );
        assert!(set.push_sorted(Key::int(78), row(0)).is_err());
        set.push_sorted(Key::int(100), row(100)).unwrap();
        let mut expected: Vec<(i64, i64)> = (0..40).map(|k| (k * 2, k)).collect();
        expected[2].1 = -4;
        expected.insert(3, (5, -5));
        expected.push((100, 100));
        assert_eq!(set.len(), expected.len());
        assert_eq!(rows(set), expected);

        let mut sorted = RowSet::new();
        for k in 0..1_000 {
            sorted.push_sorted(Key::int(k), row(k)).unwrap();
        }
        assert_eq!(rows(sorted), (0..1_000).map(|k| (k, k)).collect::<Vec<_>>());
    }
}
