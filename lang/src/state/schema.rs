//! The tables an app declares in its manifest, and the field slots of their rows.
//!
//! Fields are declared (`"tables": {"players": ["best", "posts"]}`) so that a row is a short
//! vector of values indexed by slot, field names are interned once (in the schema, and in the log
//! as one schema record), and a dirty-field mask fits one `u64`.

/// Index of a table in the schema (and in the state's vector of maps).
pub type TableId = u32;

use rhai::Dynamic;

/// Most fields a table may declare: the dirty-field mask is a `u64`.
pub const FIELDS_MAX: usize = 64;

/// A table: its name and fields, with their types when it declares them.
///
/// Invariant: `types` is empty (a table declared as a list of names: every field of any type)
/// or holds one type for each declared field, in slot order. Fields past it (a state's fields
/// kept from an older version's data, which scripts do not see) have no type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableSchema {
    pub name: String,
    /// Field names in slot order.
    pub fields: Vec<String>,
    /// Each field's declared type, in slot order; none when the table declares none.
    pub types: Vec<FieldType>,
}

/// What a typed field may hold: a value of `kind`, or, unless `required`, nothing (`()`, null).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FieldType {
    pub kind: Kind,
    pub required: bool,
}

/// The kinds of value a field may be declared to hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Any,
    Int,
    Float,
    Bool,
    String,
    Array,
    Map,
}

impl Kind {
    /// The names the manifest gives them.
    pub const NAMES: [(&'static str, Kind); 7] = [
        ("any", Kind::Any),
        ("int", Kind::Int),
        ("float", Kind::Float),
        ("bool", Kind::Bool),
        ("string", Kind::String),
        ("array", Kind::Array),
        ("map", Kind::Map),
    ];

    pub fn name(self) -> &'static str {
        Kind::NAMES
            .iter()
            .find(|(_, kind)| *kind == self)
            .map(|(name, _)| *name)
            .expect("every kind is named")
    }

    pub fn from_name(name: &str) -> Option<Kind> {
        Kind::NAMES
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, kind)| *kind)
    }

    fn holds(self, value: &Dynamic) -> bool {
        match self {
            Kind::Any => true,
            Kind::Int => value.is_int(),
            Kind::Float => value.is_float(),
            Kind::Bool => value.is_bool(),
            Kind::String => value.is_string(),
            Kind::Array => value.is_array(),
            Kind::Map => value.is_map(),
        }
    }
}

impl TableSchema {
    /// Whether `value` may be stored in `slot`: always, for a field of no declared type.
    /// The message names the table, the field and the value.
    #[inline]
    pub fn check(&self, slot: usize, value: &Dynamic) -> Result<(), String> {
        debug_assert!(
            self.types.len() <= self.fields.len(),
            "a type per declared field"
        );
        let Some(declared) = self.types.get(slot) else {
            return Ok(());
        };
        if declared.kind.holds(value) || (value.is_unit() && !declared.required) {
            return Ok(());
        }
        Err(self.refusal(slot, *declared, value))
    }

    /// [`TableSchema::check`] of a string, without the value.
    #[inline]
    pub fn takes_string(&self, slot: usize) -> bool {
        self.types
            .get(slot)
            .is_none_or(|declared| matches!(declared.kind, Kind::Any | Kind::String))
    }

    #[cold]
    fn refusal(&self, slot: usize, declared: FieldType, value: &Dynamic) -> String {
        // What the value is, shown short: a scalar as itself (cut to 40 characters), an array
        // or a map by its size, never walked.
        let what = if value.is_unit() {
            "()".to_string()
        } else if let Ok(array) = value.as_array_ref() {
            format!("an array of {} items", array.len())
        } else if let Ok(map) = value.as_map_ref() {
            format!("a map of {} entries", map.len())
        } else {
            let mut shown = value.to_string();
            if shown.chars().count() > 40 {
                shown = shown.chars().take(40).collect::<String>() + "...";
            }
            match Kind::NAMES
                .iter()
                .find(|(_, kind)| *kind != Kind::Any && kind.holds(value))
            {
                Some((_, Kind::String)) => format!("a string ({shown:?})"),
                Some((name, _)) => format!("{} {name} {shown}", article(name)),
                None => format!("a value of type {}", value.type_name()),
            }
        };
        let kind = match declared.kind {
            Kind::Any => "value",
            kind => kind.name(),
        };
        let article = if declared.required {
            "a required"
        } else {
            article(kind)
        };
        format!(
            "table {}: {} is declared {article} {kind}, not {what}",
            self.name, self.fields[slot]
        )
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Schema {
    pub tables: Vec<TableSchema>,
}

/// The table in which `t.next_id()` keeps each table's next id: a row per table that has given
/// one, keyed by the table's name, with one field, `next`. Every app has it, last of its
/// tables, so that it is stored, checkpointed, exported and imported as any table is; scripts
/// cannot name it, and an app cannot declare a table of that name.
pub const IDS_TABLE: &str = "_ids";

/// The table of pending schedule entries (`schedule`, `schedule_at`, the manifest's
/// `"schedules"`): a row per entry, keyed by its id (from `next_id()`'s counters), with its due
/// time in milliseconds since the epoch, the handler to run, its arguments, its period if it
/// recurs and its name if the manifest declared it. Every app has it, after [`IDS_TABLE`]; the
/// internal index [`DUE_INDEX`] orders it by due time. Written by the writes that schedule and
/// cancel, and by the run of an entry, which deletes (or moves) its row: stored, checkpointed,
/// exported and imported as any table is; scripts cannot name it.
pub const SCHEDULE_TABLE: &str = "_schedule";
/// The index of [`SCHEDULE_TABLE`] by due time (then id): the next entry due is its first.
pub const DUE_INDEX: &str = "_due";
/// The field slots of [`SCHEDULE_TABLE`].
pub const SCHEDULE_DUE: usize = 0;
pub const SCHEDULE_HANDLER: usize = 1;
pub const SCHEDULE_ARGS: usize = 2;
pub const SCHEDULE_EVERY: usize = 3;
pub const SCHEDULE_NAME: usize = 4;

/// Whether a table is one every app has and no script names.
pub fn is_hidden(name: &str) -> bool {
    name == IDS_TABLE || name == SCHEDULE_TABLE
}

impl TableSchema {
    /// The table of [`SCHEDULE_TABLE`].
    pub fn schedule() -> TableSchema {
        let field = |kind, required| FieldType { kind, required };
        TableSchema {
            name: SCHEDULE_TABLE.to_string(),
            fields: ["due", "handler", "args", "every", "name"]
                .map(str::to_string)
                .to_vec(),
            types: vec![
                field(Kind::Int, true),
                field(Kind::String, true),
                field(Kind::Any, false),
                field(Kind::Int, false),
                field(Kind::String, false),
            ],
        }
    }

    /// The table of [`IDS_TABLE`].
    pub fn ids() -> TableSchema {
        TableSchema {
            name: IDS_TABLE.to_string(),
            fields: vec!["next".to_string()],
            types: vec![FieldType {
                kind: Kind::Int,
                required: true,
            }],
        }
    }
}

impl Schema {
    pub fn table_id(&self, name: &str) -> Option<TableId> {
        self.tables
            .iter()
            .position(|t| t.name == name)
            .map(|i| i as TableId)
    }

    pub fn table(&self, id: TableId) -> &TableSchema {
        &self.tables[id as usize]
    }

    pub fn field_slot(&self, table: TableId, field: &str) -> Option<usize> {
        self.tables
            .get(table as usize)?
            .fields
            .iter()
            .position(|f| f == field)
    }

    /// Checks names: identifiers (so that `row.field` parses), no duplicates, at most
    /// [`FIELDS_MAX`] fields, and no field called `key` (rows have a `key` property).
    pub fn check(&self) -> Result<(), String> {
        for (i, table) in self.tables.iter().enumerate() {
            if !is_identifier(&table.name) {
                return Err(format!("table name {:?} is not an identifier", table.name));
            }
            if self.tables[..i].iter().any(|t| t.name == table.name) {
                return Err(format!("table {:?} is declared twice", table.name));
            }
            if !table.types.is_empty() && table.types.len() != table.fields.len() {
                return Err(format!(
                    "table {:?} declares {} types for {} fields",
                    table.name,
                    table.types.len(),
                    table.fields.len()
                ));
            }
            if table.fields.len() > FIELDS_MAX {
                return Err(format!(
                    "table {:?} has more than {FIELDS_MAX} fields",
                    table.name
                ));
            }
            for (j, field) in table.fields.iter().enumerate() {
                if !is_identifier(field) || field == "key" {
                    return Err(format!(
                        "field {field:?} of table {:?}: a field must be an identifier other than \"key\"",
                        table.name
                    ));
                }
                if table.fields[..j].contains(field) {
                    return Err(format!(
                        "field {field:?} of table {:?} is declared twice",
                        table.name
                    ));
                }
            }
        }
        Ok(())
    }
}

/// "a" or "an", as English puts it before `word`.
fn article(word: &str) -> &'static str {
    if word.starts_with(['a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    }
}

fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}
