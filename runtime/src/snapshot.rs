//! A published state (`Snapshot`): the tables after a durable group, what read handlers run
//! on, with the LSN they hold and an estimate of their size.
//!
//! Plain data: it must not know who publishes it (`Shared::publish`) nor the store.

use std::sync::Arc;
use std::time::Instant;

use pure_lang::Tables;

/// A published state: durable, immutable, shared by every reader.
///
/// Invariant: `tables` hold exactly the records up to `lsn` (every one of them, none after),
/// and all of them are durable. The syncer asserts it where it publishes one.
pub(crate) struct Snapshot {
    pub tables: Arc<Tables>,
    pub lsn: u64,
    pub made_at: Instant,
    pub state_bytes: u64,
}

impl Snapshot {
    pub fn new(tables: Arc<Tables>, lsn: u64) -> Snapshot {
        let state_bytes = estimate_bytes(&tables);
        Snapshot {
            tables,
            lsn,
            made_at: Instant::now(),
            state_bytes,
        }
    }
}

/// Bytes of one row in the maps: its 32-byte entry (a 24-byte key and an 8-byte row pointer) in
/// nodes about half full, with the branches above them. Calibrated on the trees before the
/// generational one (research 023): its leaves fill up where rows come in key order (about 36
/// bytes an entry) and sit nearer 70% full elsewhere, while index entries are not counted at
/// all; so this overstates a table loaded in order and understates an indexed one. Not yet
/// measured again (research 025).
const ENTRY_BYTES: u64 = 68;

/// What the allocator takes for `n` bytes: its size classes are multiples of 8 up to 64, then
/// four per power of two.
fn allocated(n: u64) -> u64 {
    if n <= 64 {
        return n.div_ceil(8) * 8;
    }
    let step = (1u64 << (63 - (n - 1).leading_zeros())) / 4;
    n.div_ceil(step) * step
}

/// An estimate of the state's resident bytes: each table's rows are measured at its first and
/// last row (exact for tables of rows alike), as the allocator holds them, plus the maps.
fn estimate_bytes(tables: &Tables) -> u64 {
    (0..tables.table_count() as u32)
        .map(|table| {
            let len = tables.len(table) as u64;
            let row = |(key, fields): (&pure_lang::Key, &pure_lang::Fields)| {
                let key_heap = match key.heap_bytes() {
                    0 => 0,
                    bytes => allocated(bytes as u64),
                };
                // Rows of no fields share one allocation.
                let fields = if fields.is_empty() {
                    0
                } else {
                    allocated(fields.memory_bytes() as u64)
                };
                fields + key_heap
            };
            // Per publish, for every table: a walk's set-up was 1.2% of the server's CPU.
            let sample = tables
                .first_and_last(table)
                .map_or(0, |(first, last)| (row(first) + row(last)) / 2);
            len * (ENTRY_BYTES + sample)
        })
        .sum()
}
