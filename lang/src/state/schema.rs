//! The tables an app declares in its manifest, and the field slots of their rows.
//!
//! Fields are declared (`"tables": {"players": ["best", "posts"]}`) so that a row is a short
//! vector of values indexed by slot, field names are interned once (in the schema, and in the log
//! as one schema record), and a dirty-field mask fits one `u64`.

/// Index of a table in the schema (and in the state's vector of maps).
pub type TableId = u32;

/// Most fields a table may declare: the dirty-field mask is a `u64`.
pub const FIELDS_MAX: usize = 64;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableSchema {
    pub name: String,
    /// Field names in slot order.
    pub fields: Vec<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Schema {
    pub tables: Vec<TableSchema>,
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

fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}
