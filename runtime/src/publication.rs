//! What those who watch the state change are told: after each durable group is published, its
//! LSN and, per table, the LSN of the last published group that wrote it.
//!
//! A watcher (a live query) keeps the LSN its answer was computed at and the tables its handler
//! read; it has to run again only when one of those tables was written after that LSN
//! (`Publication::changed_since`). Per-table LSNs rather than the set a group wrote, because a
//! watcher that is slow sees only the newest publication (`tokio::sync::watch` keeps one): the
//! LSNs still say everything that changed since it last looked.
//!
//! It must not know who watches, or how a group is built: the syncer publishes, anyone reads.

use std::sync::Arc;

pub use pure_lang::TableSet;
use tokio::sync::watch;

/// One published state, as watchers see it.
///
/// Invariant: every entry of `table_lsns` is at most `lsn`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Publication {
    /// The LSN of the published snapshot: reads from now on see the state up to it.
    pub lsn: u64,
    /// Per table id, the LSN of the last published group that wrote the table; the LSN the
    /// runtime opened at for a table no group wrote since (it may have been written before).
    pub table_lsns: Arc<Vec<u64>>,
    /// Publications before this one since the runtime opened: a watcher that looks again sees
    /// how many it passed over.
    pub number: u64,
}

impl Publication {
    /// Whether a table of `tables` was written after `lsn` (a table unknown here counts as
    /// written: a conservative answer never misses a change).
    pub fn changed_since(&self, tables: &TableSet, lsn: u64) -> bool {
        tables
            .iter()
            .any(|t| self.table_lsns.get(t as usize).is_none_or(|&at| at > lsn))
    }
}

/// The syncer's side: the channel and the per-table LSNs it keeps.
pub(crate) struct Publisher {
    sender: watch::Sender<Publication>,
    table_lsns: Arc<Vec<u64>>,
}

impl Publisher {
    /// A publisher whose first publication is the state recovered at `lsn`, of `tables` tables.
    pub fn new(lsn: u64, tables: usize) -> Publisher {
        let table_lsns = Arc::new(vec![lsn; tables]);
        let (sender, _) = watch::channel(Publication {
            lsn,
            table_lsns: table_lsns.clone(),
            number: 0,
        });
        Publisher { sender, table_lsns }
    }

    /// A new watcher, which sees the latest publication and every one after it (or the newest,
    /// if it falls behind).
    pub fn subscribe(&self) -> watch::Receiver<Publication> {
        self.sender.subscribe()
    }

    /// Tells watchers that the group that wrote `written` is published at `lsn`.
    pub fn publish(&mut self, lsn: u64, written: &TableSet) {
        let lsns = Arc::make_mut(&mut self.table_lsns);
        for table in written.iter() {
            let at = table as usize;
            if lsns.len() <= at {
                lsns.resize(at + 1, 0);
            }
            lsns[at] = lsn;
        }
        assert!(
            lsns.iter().all(|&at| at <= lsn),
            "no table was written after the state published"
        );
        let publication = Publication {
            lsn,
            table_lsns: self.table_lsns.clone(),
            number: self.sender.borrow().number + 1,
        };
        // Without watchers the value is kept for the next one.
        self.sender.send_replace(publication);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pure_lang::TableId;

    fn set(tables: &[TableId]) -> TableSet {
        tables.iter().copied().collect()
    }

    #[test]
    fn a_late_watcher_still_sees_every_table_written_since_it_looked() {
        let mut publisher = Publisher::new(10, 3);
        let mut watcher = publisher.subscribe();
        let seen = watcher.borrow_and_update().clone();
        assert_eq!(seen.lsn, 10);
        // Nothing written since 10: no table changed.
        assert!(!seen.changed_since(&set(&[0, 1, 2]), 10));
        publisher.publish(11, &set(&[0]));
        publisher.publish(12, &set(&[2]));
        // The watcher looks only now: it sees 12, and that tables 0 and 2 changed after 10.
        assert!(watcher.has_changed().unwrap());
        let now = watcher.borrow_and_update().clone();
        assert_eq!(now.lsn, 12);
        assert_eq!(
            now.number - seen.number,
            2,
            "two publications since it looked"
        );
        assert!(now.changed_since(&set(&[0]), 10));
        assert!(now.changed_since(&set(&[2]), 11));
        assert!(!now.changed_since(&set(&[0]), 11));
        assert!(!now.changed_since(&set(&[1]), 10));
        // A table the publisher never heard of counts as changed.
        assert!(now.changed_since(&set(&[7]), 12));
    }
}
