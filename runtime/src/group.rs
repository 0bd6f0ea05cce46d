//! A group of writes: the unit that one commit makes durable. The owner fills it (through
//! `Building`), the syncer commits it, publishes its snapshot and sends its answers.
//!
//! It must not know who fills or commits it: no locks, no threads, no store.

use std::sync::Arc;

use pure_lang::{Answer, HandlerError, Tables};

use crate::job::Reply;
use crate::publication::TableSet;

/// A group of writes on its way to the syncer.
///
/// Invariants:
/// - `ends` rises strictly, and its last entry is `bytes.len()`: the records lie back to back,
///   none is empty, and no byte belongs to no record.
/// - Each write adds one reply and at most one record, and a run's schema one record more; a
///   job of due schedule entries adds one reply and a record per entry it ran, the records
///   after its first counted in `extra_records`: `ends.len() <= replies.len() + 1 +
///   extra_records`.
/// - `snapshot` is the state after every record of the group (set when the syncer takes it).
#[derive(Default)]
pub(crate) struct Group {
    /// The group's records back to back; `ends[i]` is where record `i` ends.
    pub bytes: Vec<u8>,
    pub ends: Vec<usize>,
    pub replies: Vec<(Reply, Result<Answer, HandlerError>)>,
    /// The state after the group, to publish once it is durable.
    pub snapshot: Arc<Tables>,
    /// The tables the group's writes changed, for those who watch the state (`publication.rs`).
    pub written: TableSet,
    /// Records beyond one per reply: the second and later entries of a job of due entries.
    pub extra_records: usize,
}

impl Group {
    /// Ends the record written into `bytes` since the last one ended.
    pub fn end_record(&mut self) {
        let end = self.bytes.len();
        let start = self.ends.last().copied().unwrap_or(0);
        assert!(
            end > start,
            "a record is never empty: each holds a tag byte at least"
        );
        self.ends.push(end);
    }

    pub fn records(&self) -> impl Iterator<Item = &[u8]> {
        assert_eq!(
            self.ends.last().copied().unwrap_or(0),
            self.bytes.len(),
            "every byte of a group belongs to a record that `end_record` ended"
        );
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts
            .zip(self.ends.iter().copied())
            .map(|(s, e)| &self.bytes[s..e])
    }
}
