//! The ordered map under every table and index: concread's copy-on-write B+tree (research notes
//! 013 and 022), owned, so that the owner can keep changing it while snapshots of it travel to
//! other threads.
//!
//! A [`Tree`] is live (the owner's, changed in place) or frozen (a snapshot, read-only). A live
//! tree holds one write transaction open across calls: every node it has copied since the last
//! snapshot is its own and is changed in place, so a row changed twice between snapshots copies
//! its path once. [`Tree::snapshot`] commits that transaction, opens a read transaction on the
//! state committed (the snapshot) and a new write transaction: from then on the owner copies a
//! node before changing it, the first time only. A snapshot costs a commit, not a reference
//! count per child, and a node the owner replaced is retired with the generation that could
//! still see it. Generations are freed in the order they were made: a node is freed once the
//! snapshot that could reach it and every older one are dropped, on the thread that drops the
//! last of them (the syncer, or an HTTP thread that read from it). Never in a write: a live tree
//! keeps the snapshot it made last until it makes the next one, which the runtime's syncer does.
//! So one snapshot held long (the checkpoint's, while it writes the image; a slow read) keeps
//! every node retired after it, including those that only later snapshots could reach: imbl
//! kept only what the old snapshot could reach.
//!
//! Only this file knows which tree it is. It must not know rows, keys or indexes: it is a map.
//!
//! # Why there is `unsafe` here
//!
//! concread's transactions borrow the map they belong to (`BptreeMapWriteTxn<'a>`), because the
//! map must outlive them: dropping it frees the nodes they read. Here each transaction is kept
//! beside the map it borrows, in an [`Arc`] (so its address never changes, whoever moves the
//! tree), with the borrow's lifetime erased, and declared before it so that it is dropped first.
//! Nothing hands the erased lifetime out: every method reborrows for `&self` or `&mut self`.
//! The write transaction is concread's `asynch` one, whose lock guard (tokio's) may be sent to
//! another thread: the owner changes the tables and the syncer commits them, each holding the
//! runtime's lock.

use std::fmt::Debug;
use std::ops::Bound;
use std::sync::Arc;

use concread::bptree::asynch::{BptreeMap, BptreeMapReadTxn, BptreeMapWriteTxn};
use concread::internals::bptree::iter::{Iter, RangeIter};

/// What a tree's keys and values must be for concread's map.
pub(crate) trait Item: Clone + Send + Sync + 'static {}
impl<T: Clone + Send + Sync + 'static> Item for T {}

/// A key and its value, as a tree gives them out.
pub(crate) type Pair<'a, K, V> = (&'a K, &'a V);

/// An ordered map, live or frozen (see the module doc).
///
/// Invariants: a live tree's write transaction is always open (`Some`) outside `snapshot`; a
/// frozen tree is never changed.
pub(crate) struct Tree<K: Item + Ord + Debug, V: Item> {
    state: State<K, V>,
}

enum State<K: Item + Ord + Debug, V: Item> {
    Live(Live<K, V>),
    Frozen(Arc<Frozen<K, V>>),
}

/// The owner's side. Field order matters: the transaction borrows `map` and is dropped first.
struct Live<K: Item + Ord + Debug, V: Item> {
    txn: Option<BptreeMapWriteTxn<'static, K, V>>,
    /// The last snapshot made: while nothing has changed since (`changed`), taking another is
    /// free. Replaced only by the next snapshot, never dropped by a write: the owner's thread
    /// never lets go of a generation, so it never frees the nodes one retired.
    last: Option<Arc<Frozen<K, V>>>,
    /// Changed since the last snapshot.
    changed: bool,
    map: Arc<BptreeMap<K, V>>,
}

/// A snapshot. Field order matters: the transaction borrows `map` and is dropped first.
struct Frozen<K: Item + Ord + Debug, V: Item> {
    txn: BptreeMapReadTxn<'static, K, V>,
    /// Never read: kept for `txn`, which borrows it.
    _map: Arc<BptreeMap<K, V>>,
}

/// Opens the write transaction of `map`, its borrow erased.
///
/// # Safety
/// The caller keeps a clone of `map` alive, unchanged, until the transaction is dropped.
unsafe fn open_write<K: Item + Ord + Debug, V: Item>(
    map: &Arc<BptreeMap<K, V>>,
) -> BptreeMapWriteTxn<'static, K, V> {
    let txn = map
        .try_write()
        .expect("a live tree is its map's only writer: no other transaction can be open");
    // SAFETY: the same type but for the lifetime, which the caller upholds.
    unsafe {
        std::mem::transmute::<BptreeMapWriteTxn<'_, K, V>, BptreeMapWriteTxn<'static, K, V>>(txn)
    }
}

/// Opens a read transaction of `map` on its last commit, its borrow erased.
///
/// # Safety
/// As [`open_write`].
unsafe fn open_read<K: Item + Ord + Debug, V: Item>(
    map: &Arc<BptreeMap<K, V>>,
) -> BptreeMapReadTxn<'static, K, V> {
    let txn = map.read();
    // SAFETY: the same type but for the lifetime, which the caller upholds.
    unsafe {
        std::mem::transmute::<BptreeMapReadTxn<'_, K, V>, BptreeMapReadTxn<'static, K, V>>(txn)
    }
}

impl<K: Item + Ord + Debug, V: Item> Live<K, V> {
    fn new(map: BptreeMap<K, V>) -> Live<K, V> {
        let map = Arc::new(map);
        // SAFETY: `map` is kept beside the transaction and dropped after it.
        let txn = Some(unsafe { open_write(&map) });
        Live {
            txn,
            last: None,
            changed: false,
            map,
        }
    }

    fn txn(&self) -> &BptreeMapWriteTxn<'_, K, V> {
        self.txn
            .as_ref()
            .expect("a live tree's transaction is open")
    }

    fn txn_mut(&mut self) -> &mut BptreeMapWriteTxn<'static, K, V> {
        // Changed: the next snapshot must commit.
        self.changed = true;
        self.txn
            .as_mut()
            .expect("a live tree's transaction is open")
    }
}

impl<K: Item + Ord + Debug, V: Item> Default for Tree<K, V> {
    fn default() -> Self {
        Tree::new()
    }
}

impl<K: Item + Ord + Debug, V: Item> Tree<K, V> {
    /// An empty live tree.
    pub(crate) fn new() -> Tree<K, V> {
        Tree {
            state: State::Live(Live::new(BptreeMap::new())),
        }
    }

    /// A live tree of `pairs`, which come in key order (a checkpoint image, a snapshot's rows).
    pub(crate) fn from_sorted(pairs: impl IntoIterator<Item = (K, V)>) -> Tree<K, V> {
        Tree {
            state: State::Live(Live::new(pairs.into_iter().collect())),
        }
    }

    pub(crate) fn is_frozen(&self) -> bool {
        matches!(self.state, State::Frozen(_))
    }

    pub(crate) fn get(&self, key: &K) -> Option<&V> {
        match &self.state {
            State::Live(live) => live.txn().get(key),
            State::Frozen(frozen) => frozen.txn.get(key),
        }
    }

    pub(crate) fn len(&self) -> usize {
        match &self.state {
            State::Live(live) => live.txn().len(),
            State::Frozen(frozen) => frozen.txn.len(),
        }
    }

    /// Every pair in key order (`.rev()`: descending; `.len()`: how many).
    pub(crate) fn iter(&self) -> Pairs<'_, K, V> {
        let (iter, left) = match &self.state {
            State::Live(live) => (live.txn().iter(), live.txn().len()),
            State::Frozen(frozen) => (frozen.txn.iter(), frozen.txn.len()),
        };
        Pairs { iter, left }
    }

    /// The pairs with keys within `bounds`, ascending (`.rev()`: descending).
    pub(crate) fn range(&self, bounds: (Bound<K>, Bound<K>)) -> Range<'_, K, V> {
        let kept = bounds.clone();
        let iter = match &self.state {
            State::Live(live) => live.txn().range(bounds),
            State::Frozen(frozen) => frozen.txn.range(bounds),
        };
        Range {
            iter,
            bounds: kept,
            front: None,
            back: None,
            done: false,
        }
    }

    /// The least key and its value, and the greatest: two descents, where an iterator's set-up
    /// costs more.
    pub(crate) fn ends(&self) -> Option<(Pair<'_, K, V>, Pair<'_, K, V>)> {
        match &self.state {
            State::Live(live) => {
                Some((live.txn().first_key_value()?, live.txn().last_key_value()?))
            }
            State::Frozen(frozen) => {
                Some((frozen.txn.first_key_value()?, frozen.txn.last_key_value()?))
            }
        }
    }

    fn live(&mut self) -> &mut BptreeMapWriteTxn<'static, K, V> {
        match &mut self.state {
            State::Live(live) => live.txn_mut(),
            State::Frozen(_) => {
                panic!("a snapshot is read-only: only the owner's live tree changes")
            }
        }
    }

    /// Adds or replaces, returning the value replaced.
    pub(crate) fn insert(&mut self, key: K, value: V) -> Option<V> {
        self.live().insert(key, value)
    }

    pub(crate) fn remove(&mut self, key: &K) -> Option<V> {
        self.live().remove(key)
    }

    /// The value of `key`, to change in place (its node is copied first if a snapshot shares
    /// it): one search for a read-then-write.
    pub(crate) fn get_mut(&mut self, key: &K) -> Option<&mut V> {
        self.live().get_mut(key)
    }

    /// A frozen tree of the state now. A live tree commits what changed since its last
    /// snapshot (nothing to commit: the last snapshot again); a frozen one is shared.
    pub(crate) fn snapshot(&mut self) -> Tree<K, V> {
        let frozen = match &mut self.state {
            State::Frozen(frozen) => frozen.clone(),
            State::Live(live) => match &live.last {
                Some(last) if !live.changed => last.clone(),
                _ => {
                    live.txn
                        .take()
                        .expect("a live tree's transaction is open")
                        .commit();
                    // SAFETY: each transaction is kept beside its own clone of the map.
                    let frozen = Arc::new(Frozen {
                        txn: unsafe { open_read(&live.map) },
                        _map: live.map.clone(),
                    });
                    live.txn = Some(unsafe { open_write(&live.map) });
                    live.last = Some(frozen.clone());
                    live.changed = false;
                    frozen
                }
            },
        };
        Tree {
            state: State::Frozen(frozen),
        }
    }

    /// A live tree holding what this one holds, which stays as it is: a copy of every pair
    /// (what a roll-back to a snapshot costs; it happens only when the log refuses a group).
    pub(crate) fn thawed(&self) -> Tree<K, V> {
        Tree::from_sorted(self.iter().map(|(k, v)| (k.clone(), v.clone())))
    }
}

/// The pairs of a tree within bounds, in key order from either end.
///
/// concread's own range iterator can run past its lower bound when walked backwards (with
/// `Excluded(k)` it went on to the first key of the tree: `lang/tests/tree_model.rs` found it),
/// and walked from both ends it can pass the point where they meet and give pairs twice (its
/// front can start past the end of a leaf, where the back never finds it). So every pair is held
/// to the bounds here, and each end to the last key the other gave: a pair short of the end
/// walked towards is skipped, one past it ends the walk.
pub(crate) struct Range<'a, K: Item + Ord + Debug, V: Item> {
    iter: RangeIter<'a, K, V>,
    bounds: (Bound<K>, Bound<K>),
    /// The last keys given from the front and from the back.
    front: Option<&'a K>,
    back: Option<&'a K>,
    done: bool,
}

fn above<K: Ord>(key: &K, low: &Bound<K>) -> bool {
    match low {
        Bound::Included(low) => key >= low,
        Bound::Excluded(low) => key > low,
        Bound::Unbounded => true,
    }
}

fn below<K: Ord>(key: &K, high: &Bound<K>) -> bool {
    match high {
        Bound::Included(high) => key <= high,
        Bound::Excluded(high) => key < high,
        Bound::Unbounded => true,
    }
}

impl<'a, K: Item + Ord + Debug, V: Item> Iterator for Range<'a, K, V> {
    type Item = (&'a K, &'a V);

    fn next(&mut self) -> Option<Self::Item> {
        while !self.done {
            let Some((key, value)) = self.iter.next() else {
                break;
            };
            if !below(key, &self.bounds.1) || self.back.is_some_and(|back| key >= back) {
                break;
            }
            if above(key, &self.bounds.0) {
                self.front = Some(key);
                return Some((key, value));
            }
        }
        self.done = true;
        None
    }
}

impl<K: Item + Ord + Debug, V: Item> DoubleEndedIterator for Range<'_, K, V> {
    fn next_back(&mut self) -> Option<Self::Item> {
        while !self.done {
            let Some((key, value)) = self.iter.next_back() else {
                break;
            };
            if !above(key, &self.bounds.0) || self.front.is_some_and(|front| key <= front) {
                break;
            }
            if below(key, &self.bounds.1) {
                self.back = Some(key);
                return Some((key, value));
            }
        }
        self.done = true;
        None
    }
}

/// Every pair of a tree, in key order from either end, counted (the count also ends a walk
/// from both ends where they meet).
pub(crate) struct Pairs<'a, K: Item + Ord + Debug, V: Item> {
    iter: Iter<'a, K, V>,
    left: usize,
}

impl<'a, K: Item + Ord + Debug, V: Item> Iterator for Pairs<'a, K, V> {
    type Item = (&'a K, &'a V);

    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        let pair = self.iter.next();
        if pair.is_some() {
            self.left -= 1;
        }
        pair
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl<K: Item + Ord + Debug, V: Item> DoubleEndedIterator for Pairs<'_, K, V> {
    fn next_back(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        let pair = self.iter.next_back();
        if pair.is_some() {
            self.left -= 1;
        }
        pair
    }
}

impl<K: Item + Ord + Debug, V: Item> ExactSizeIterator for Pairs<'_, K, V> {}

/// Trees move between the owner and the syncer (under the runtime's lock) and snapshots to
/// the HTTP threads: fail the build, not a run, if a concread upgrade changes that.
#[allow(dead_code)]
fn trees_cross_threads() {
    fn send_and_sync<T: Send + Sync>() {}
    send_and_sync::<Tree<u64, u64>>();
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;
    use std::thread::ThreadId;

    /// A value that records on which thread each copy of it is dropped.
    #[derive(Clone)]
    struct Probe(Arc<Mutex<Vec<ThreadId>>>);

    impl Drop for Probe {
        fn drop(&mut self) {
            self.0.lock().unwrap().push(std::thread::current().id());
        }
    }

    /// A range walked from both ends, turn by turn in every proportion, gives each pair within
    /// its bounds once, live or frozen: concread's own iterator gave pairs twice where its
    /// front started past the end of a leaf (`Included(61)..` over keys 0, 10, .., 150).
    #[test]
    fn a_range_walked_from_both_ends_gives_each_pair_once() {
        let mut tree = Tree::<u32, ()>::new();
        for key in 0..16 {
            tree.insert(key * 10, ());
        }
        let frozen = tree.snapshot();
        let points = [0, 1, 9, 10, 11, 59, 60, 61, 67, 70, 99, 100, 149, 150, 151];
        let bounds = |k: u32| [Bound::Included(k), Bound::Excluded(k)];
        let mut lows: Vec<Bound<u32>> = points.iter().flat_map(|&k| bounds(k)).collect();
        lows.push(Bound::Unbounded);
        let highs = lows.clone();
        for tree in [&tree, &frozen] {
            for low in &lows {
                for high in &highs {
                    let expected: Vec<u32> = (0..16)
                        .map(|k| k * 10)
                        .filter(|k| above(k, low) && below(k, high))
                        .collect();
                    for from_back in 0..=expected.len() + 1 {
                        let mut range = tree.range((*low, *high));
                        let mut back: Vec<u32> = (&mut range)
                            .rev()
                            .take(from_back)
                            .map(|(k, _)| *k)
                            .collect();
                        let mut got: Vec<u32> = range.map(|(k, _)| *k).collect();
                        back.reverse();
                        got.extend(back);
                        assert_eq!(
                            got, expected,
                            "{low:?}..{high:?}, {from_back} from the back first"
                        );
                    }
                }
            }
        }
    }

    /// What a generation retired is freed by the thread that lets go of the last snapshot that
    /// could reach it, not by the owner's writes: the owner drops only the values its own
    /// writes replaced (which it is handed), the copies in the nodes it replaced stay for the
    /// snapshot.
    #[test]
    fn the_nodes_a_write_retires_are_freed_by_whoever_drops_the_last_snapshot() {
        const ROWS: u64 = 500;
        let drops = Arc::new(Mutex::new(Vec::new()));
        let tree = Mutex::new(Tree::<u64, Probe>::new());
        for key in 0..ROWS {
            tree.lock().unwrap().insert(key, Probe(drops.clone()));
        }
        // The syncer's part: snapshots are made on a thread of their own.
        let syncer = |tree: &Mutex<Tree<u64, Probe>>| {
            std::thread::scope(|s| s.spawn(|| tree.lock().unwrap().snapshot()).join().unwrap())
        };
        let first = syncer(&tree);
        let owner = std::thread::current().id();
        for key in 0..ROWS {
            let old = tree.lock().unwrap().insert(key, Probe(drops.clone()));
            drop(old.expect("replaced"));
        }
        let second = syncer(&tree);
        let on = |thread: ThreadId| {
            drops
                .lock()
                .unwrap()
                .iter()
                .filter(|t| **t == thread)
                .count()
        };
        assert_eq!(
            on(owner),
            ROWS as usize,
            "the owner dropped only what its writes replaced"
        );
        let reader = std::thread::spawn(move || {
            drop(first);
            std::thread::current().id()
        })
        .join()
        .unwrap();
        assert_eq!(
            on(reader),
            ROWS as usize,
            "the reader that held the last snapshot of the old rows freed their nodes"
        );
        assert_eq!(on(owner), ROWS as usize, "and the owner none of them");
        drop(second);
        drop(tree);
        assert_eq!(
            drops.lock().unwrap().len(),
            3 * ROWS as usize,
            "every copy dropped once"
        );
    }
}
