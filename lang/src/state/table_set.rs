//! A set of table ids: the tables a read handler read (a live query's read set) and those a
//! group wrote, as one word per 64 tables.

use crate::state::schema::TableId;

/// A set of table ids.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TableSet {
    words: Vec<u64>,
}

impl TableSet {
    pub fn insert(&mut self, table: TableId) {
        let (word, bit) = (table as usize / 64, table % 64);
        if self.words.len() <= word {
            self.words.resize(word + 1, 0);
        }
        self.words[word] |= 1 << bit;
    }

    pub fn contains(&self, table: TableId) -> bool {
        let (word, bit) = (table as usize / 64, table % 64);
        self.words.get(word).is_some_and(|w| w & (1 << bit) != 0)
    }

    pub fn is_empty(&self) -> bool {
        self.words.iter().all(|w| *w == 0)
    }

    pub fn clear(&mut self) {
        self.words.clear();
    }

    /// The tables of the set, in id order.
    pub fn iter(&self) -> impl Iterator<Item = TableId> + '_ {
        self.words.iter().enumerate().flat_map(|(i, word)| {
            (0..64)
                .filter(move |bit| word & (1 << bit) != 0)
                .map(move |bit| (i * 64 + bit) as TableId)
        })
    }
}

impl FromIterator<TableId> for TableSet {
    fn from_iter<I: IntoIterator<Item = TableId>>(tables: I) -> TableSet {
        let mut set = TableSet::default();
        for table in tables {
            set.insert(table);
        }
        set
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(tables: &[TableId]) -> TableSet {
        tables.iter().copied().collect()
    }

    #[test]
    fn a_table_set_holds_any_table_id() {
        let tables = set(&[0, 3, 63, 64, 200]);
        assert_eq!(tables.iter().collect::<Vec<_>>(), vec![0, 3, 63, 64, 200]);
        assert!(tables.contains(64) && !tables.contains(65) && !tables.contains(5000));
        assert!(TableSet::default().is_empty() && !tables.is_empty());
    }
}
