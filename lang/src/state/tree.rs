//! The ordered map under every table and index: a copy-on-write B+tree whose nodes carry the
//! generation that made them (research notes 013, 022 and 023), owned, so that the owner can
//! keep changing it while snapshots of it travel to other threads.
//!
//! A [`Tree`] is live (the owner's, changed in place) or frozen (a snapshot, read-only). The
//! live tree has a generation, which [`Tree::snapshot`] ends: the snapshot is the root as it is,
//! and the tree goes on in the next generation. A node of the live generation was made after the
//! last snapshot, so no snapshot can reach it, and the owner changes it in place; a node of an
//! older generation is copied the first time the owner changes it (its path from the root with
//! it), and the original is retired. A snapshot costs nothing per node: a row changed twice
//! between snapshots copies its path once, and a node no write touches is shared by every
//! generation.
//!
//! # Counted once
//!
//! A key or a value in a tree is one object however many nodes hold its bytes: a copied node is
//! a `memcpy` and counts nothing. Each object is owned by exactly one party: the live tree,
//! while it can reach it, or the retired list of the generation in which the owner let go of it
//! (a value replaced, an entry removed, a separator dropped). What the owner hands back (a
//! replaced or removed value) is a clone when a snapshot may still hold the original. A retired
//! node is freed without dropping what it holds; the objects it shared are freed by their owner.
//!
//! # When retired nodes are freed
//!
//! What a generation retired (after snapshot `g`, before `g + 1`) can be reached from snapshot
//! `g` and older ones only. Each snapshot holds its [`Generation`], and each generation holds
//! the next one: so what was retired after `g` is freed once snapshot `g` and every older one
//! are dropped, in generation order, on the thread that drops the last of them (the syncer, or
//! an HTTP thread that read from one). Never in a write: a live tree keeps the snapshot it made
//! last until it makes the next one, which the runtime's syncer does. So one snapshot held long
//! (the checkpoint's, while it writes the image; a slow read) keeps every node retired after it.
//! A live tree that never made a snapshot shares nothing, and frees what it lets go of at once.
//!
//! # Shape
//!
//! Nodes are allocated whole at [`NODE_BYTES`]: a leaf holds as many entries as fit (15 of a row
//! key and a row, 20 of an index entry), a branch as many children (16). A node is searched by a
//! scan from its start. A full leaf first gives the entries after the key (or the key, at its end)
//! to the next leaf under the same parent when that one has room, as in a B*-tree: behind a run
//! that leaves what follows it done (several writers passing over each other's keys, each adding an
//! entry after each of the last one's) leaves then fill up to full, where splits alone left them
//! about half full. Otherwise it splits where the key goes in when that continues a run (the leaf
//! remembers where its last key went in): a run in order at its end keeps the leaf's entries and
//! starts a new leaf with the key, and one in order inside it (several writers each adding keys in
//! order, each at a place of its own) splits at the key; a run in reverse moves the entry before
//! the key into the new leaf with it, so that the run's next keys go there too; a key at the start
//! starts a leaf of its own. So keys inserted in order or in reverse, from one writer or several,
//! leave leaves full. Elsewhere a leaf splits in the middle. A full branch at the tree's right edge
//! keeps its children and a new branch starts with the new child (a table loaded in key order ends
//! with full branches); elsewhere it splits in the middle, which bounds the depth: only the
//! rightmost branch of a level can be less than half full for want of inserts, and branches are at
//! least 16 wide (`Shape::WIDE_ENOUGH`). An emptied leaf or branch leaves its parent, and a root
//! with one child gives way to it; nodes are not merged otherwise.
//!
//! Freed nodes are kept, up to a bound, for the next ones made (`spare`): most are retired on
//! one thread and made on another, and the allocator keeps memory freed across threads out of
//! use for a while.
//!
//! Only this file knows how the map is built. It must not know rows, keys or indexes: it is a
//! map.
//!
//! # Why there is `unsafe` here
//!
//! Nodes are raw allocations laid out for their key and value types (a header, the keys, then
//! the values or the children), shared between generations without counts. The invariants the
//! code keeps, and checks in [`Tree::check`]: a node reachable from a snapshot is never changed
//! or freed while the snapshot lives (the owner changes only nodes of its own generation); every
//! object is dropped once, by its owner; entries `0..len` of a node are initialised.

use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::cmp::min;
use std::fmt::Debug;
use std::marker::PhantomData;
use std::mem::{align_of, size_of};
use std::ops::Bound;
use std::ptr::{self, NonNull};
use std::sync::{Arc, OnceLock};

/// What a tree's keys and values must be: shared with snapshots read on other threads.
pub(crate) trait Item: Clone + Send + Sync + 'static {}
impl<T: Clone + Send + Sync + 'static> Item for T {}

/// A key and its value, as a tree gives them out.
pub(crate) type Pair<'a, K, V> = (&'a K, &'a V);

/// The bytes a node is sized to: one of the allocator's size classes, and a copy of a leaf that
/// stays within a few cache lines.
pub(crate) const NODE_BYTES: usize = 512;

/// The deepest a tree may grow. Branches split in the middle, so a tree this deep would hold
/// more nodes than memory: the root split that would pass it is an error.
const DEPTH_MAX: usize = 16;

#[repr(C)]
struct Header {
    /// The generation that made this node: the live tree's own when equal to its generation.
    generation: u64,
    /// Entries of a leaf, children of a branch.
    len: u32,
    leaf: bool,
    /// In a leaf, where the last entry went in (`NO_HINT`: none yet): a full leaf that meets
    /// the next key of a run (just after that place, or just before it) splits where the run
    /// goes on, not in the middle.
    hint: u8,
}

const NO_HINT: u8 = u8::MAX;

type Node = NonNull<Header>;

const fn max(a: usize, b: usize) -> usize {
    if a > b {
        a
    } else {
        b
    }
}

const fn clamp(n: usize, low: usize, high: usize) -> usize {
    if n < low {
        low
    } else if n > high {
        high
    } else {
        n
    }
}

const fn round_up(n: usize, align: usize) -> usize {
    n.div_ceil(align) * align
}

const fn layout(size: usize, align: usize) -> Layout {
    match Layout::from_size_align(size, align) {
        Ok(layout) => layout,
        Err(_) => panic!("a node's layout"),
    }
}

/// Where things are in the nodes of a tree of `K` to `V`: a leaf is a header, `LEAF_CAP` keys,
/// then as many values; a branch a header, `BRANCH_CAP - 1` separating keys, then as many
/// children as that.
struct Shape<K, V>(PhantomData<(K, V)>);

impl<K, V> Shape<K, V> {
    const ALIGN: usize = max(
        max(align_of::<Header>(), align_of::<Node>()),
        max(align_of::<K>(), align_of::<V>()),
    );
    const HEADER: usize = size_of::<Header>();
    const LEAF_CAP: usize = clamp(
        (NODE_BYTES - Self::HEADER) / max(1, size_of::<K>() + size_of::<V>()),
        4,
        64,
    );
    const LEAF_KEYS: usize = round_up(Self::HEADER, align_of::<K>());
    const LEAF_VALUES: usize = round_up(
        Self::LEAF_KEYS + Self::LEAF_CAP * size_of::<K>(),
        align_of::<V>(),
    );
    const LEAF: Layout = layout(
        Self::LEAF_VALUES + Self::LEAF_CAP * size_of::<V>(),
        Self::ALIGN,
    );
    const BRANCH_CAP: usize = clamp(
        (NODE_BYTES - Self::HEADER + size_of::<K>()) / (size_of::<K>() + size_of::<Node>()),
        4,
        64,
    );
    /// The depth bound (`DEPTH_MAX`) holds for branches that keep at least 8 children after a
    /// split: a key too large for 16 children a branch fails the build of the tree using it.
    const WIDE_ENOUGH: () = assert!(
        Self::BRANCH_CAP >= 16,
        "keys this large make branches too narrow for DEPTH_MAX"
    );
    const BRANCH_KEYS: usize = round_up(Self::HEADER, align_of::<K>());
    const BRANCH_KIDS: usize = round_up(
        Self::BRANCH_KEYS + (Self::BRANCH_CAP - 1) * size_of::<K>(),
        align_of::<Node>(),
    );
    const BRANCH: Layout = layout(
        Self::BRANCH_KIDS + Self::BRANCH_CAP * size_of::<Node>(),
        Self::ALIGN,
    );

    // The accessors below are `unsafe`: `node` must be a live node of this shape, of the kind
    // named, and a slice's entries initialised.

    unsafe fn len(node: Node) -> usize {
        unsafe { (*node.as_ptr()).len as usize }
    }

    unsafe fn set_len(node: Node, len: usize) {
        unsafe { (*node.as_ptr()).len = len as u32 }
    }

    unsafe fn is_leaf(node: Node) -> bool {
        unsafe { (*node.as_ptr()).leaf }
    }

    unsafe fn generation(node: Node) -> u64 {
        unsafe { (*node.as_ptr()).generation }
    }

    unsafe fn at(node: Node, offset: usize) -> *mut u8 {
        unsafe { node.as_ptr().cast::<u8>().add(offset) }
    }

    unsafe fn leaf_keys_ptr(leaf: Node) -> *mut K {
        unsafe { Self::at(leaf, Self::LEAF_KEYS).cast() }
    }

    unsafe fn values_ptr(leaf: Node) -> *mut V {
        unsafe { Self::at(leaf, Self::LEAF_VALUES).cast() }
    }

    unsafe fn branch_keys_ptr(branch: Node) -> *mut K {
        unsafe { Self::at(branch, Self::BRANCH_KEYS).cast() }
    }

    unsafe fn kids_ptr(branch: Node) -> *mut Node {
        unsafe { Self::at(branch, Self::BRANCH_KIDS).cast() }
    }

    unsafe fn leaf_keys<'a>(leaf: Node) -> &'a [K] {
        unsafe { std::slice::from_raw_parts(Self::leaf_keys_ptr(leaf), Self::len(leaf)) }
    }

    /// A branch's separators: `keys[i]` is the least key its child `i + 1` may hold.
    unsafe fn branch_keys<'a>(branch: Node) -> &'a [K] {
        unsafe { std::slice::from_raw_parts(Self::branch_keys_ptr(branch), Self::len(branch) - 1) }
    }

    unsafe fn kids<'a>(branch: Node) -> &'a [Node] {
        unsafe { std::slice::from_raw_parts(Self::kids_ptr(branch), Self::len(branch)) }
    }

    unsafe fn kid(branch: Node, i: usize) -> Node {
        unsafe { *Self::kids_ptr(branch).add(i) }
    }

    /// Whether this shape's nodes fit a spare node (`spare`), as every tree in Pure's does.
    const SPARED: bool = Self::LEAF.size() <= spare::LAYOUT.size()
        && Self::BRANCH.size() <= spare::LAYOUT.size()
        && Self::ALIGN <= spare::LAYOUT.align();

    /// A new empty node of `generation`.
    fn new_node(leaf: bool, generation: u64) -> Node {
        #[allow(clippy::let_unit_value)]
        let () = Self::WIDE_ENOUGH;
        let layout = if Self::SPARED {
            spare::LAYOUT
        } else if leaf {
            Self::LEAF
        } else {
            Self::BRANCH
        };
        let spared = if Self::SPARED { spare::take() } else { None };
        // SAFETY: every layout has a non-zero size (a header at least).
        let raw = spared
            .unwrap_or_else(|| unsafe { alloc(layout) })
            .cast::<Header>();
        let Some(node) = NonNull::new(raw) else {
            handle_alloc_error(layout)
        };
        // SAFETY: a fresh allocation with room for the header.
        unsafe {
            node.as_ptr().write(Header {
                generation,
                len: 0,
                leaf,
                hint: NO_HINT,
            })
        };
        node
    }

    /// Frees a node's memory without dropping what it holds.
    unsafe fn free_node(node: Node) {
        if Self::SPARED {
            // SAFETY: a node no one reaches, allocated with `spare::LAYOUT`.
            unsafe { spare::give([node.cast()]) };
            return;
        }
        let layout = if unsafe { Self::is_leaf(node) } {
            Self::LEAF
        } else {
            Self::BRANCH
        };
        unsafe { dealloc(node.as_ptr().cast(), layout) }
    }

    /// A copy of `node` in `generation`: the same bytes, which the copy now stands for.
    unsafe fn copy_node(node: Node, generation: u64) -> Node {
        unsafe {
            let leaf = Self::is_leaf(node);
            let len = Self::len(node);
            let copy = Self::new_node(leaf, generation);
            Self::set_len(copy, len);
            (*copy.as_ptr()).hint = (*node.as_ptr()).hint;
            if leaf {
                ptr::copy_nonoverlapping(Self::leaf_keys_ptr(node), Self::leaf_keys_ptr(copy), len);
                ptr::copy_nonoverlapping(Self::values_ptr(node), Self::values_ptr(copy), len);
            } else {
                ptr::copy_nonoverlapping(
                    Self::branch_keys_ptr(node),
                    Self::branch_keys_ptr(copy),
                    len - 1,
                );
                ptr::copy_nonoverlapping(Self::kids_ptr(node), Self::kids_ptr(copy), len);
            }
            copy
        }
    }

    /// Drops everything reachable from `node` and frees it: a tree no one can read any more.
    unsafe fn drop_whole(node: Node, census: &Census) {
        unsafe {
            let len = Self::len(node);
            if Self::is_leaf(node) {
                ptr::drop_in_place(ptr::slice_from_raw_parts_mut(
                    Self::leaf_keys_ptr(node),
                    len,
                ));
                ptr::drop_in_place(ptr::slice_from_raw_parts_mut(Self::values_ptr(node), len));
            } else {
                ptr::drop_in_place(ptr::slice_from_raw_parts_mut(
                    Self::branch_keys_ptr(node),
                    len - 1,
                ));
                for &kid in Self::kids(node) {
                    Self::drop_whole(kid, census);
                }
            }
            Self::free_node(node);
            census.freed(1);
        }
    }

    /// The position of `key` in a leaf (`Ok`), or where it would go.
    #[inline]
    unsafe fn leaf_search(leaf: Node, key: &K) -> Result<usize, usize>
    where
        K: Ord + 'static,
    {
        unsafe { linear_search(Self::leaf_keys(leaf), key) }
    }

    /// The child of `branch` whose keys may include `key`.
    #[inline]
    unsafe fn child_for(branch: Node, key: &K) -> usize
    where
        K: Ord + 'static,
    {
        match linear_search(unsafe { Self::branch_keys(branch) }, key) {
            Ok(i) => i + 1,
            Err(i) => i,
        }
    }
}

/// Where `key` is in ascending `keys` (`Ok`), or where it would go: a scan from the start,
/// which measured faster than a binary search on nodes of 15 keys (research note 025): it reads
/// the keys' cache lines in order, and its branches are predictable.
#[inline]
fn linear_search<K: Ord + 'static>(keys: &[K], key: &K) -> Result<usize, usize> {
    if std::any::TypeId::of::<K>() == std::any::TypeId::of::<super::key::Key>() {
        // SAFETY: `K` is `Key` (a comparison of constants, decided when this is compiled).
        let (keys, key) = unsafe {
            (
                &*(keys as *const [K] as *const [super::key::Key]),
                &*(key as *const K as *const super::key::Key),
            )
        };
        if let Some(found) = key.position_in(keys) {
            return found;
        }
    }
    for (i, k) in keys.iter().enumerate() {
        match k.cmp(key) {
            std::cmp::Ordering::Less => {}
            std::cmp::Ordering::Equal => return Ok(i),
            std::cmp::Ordering::Greater => return Err(i),
        }
    }
    Err(keys.len())
}

/// Counts nodes made and freed, in builds with debug assertions, so that tests can see every
/// node freed exactly once. Free in release builds.
#[derive(Clone, Default)]
pub(crate) struct Census {
    #[cfg(debug_assertions)]
    live: Arc<std::sync::atomic::AtomicIsize>,
}

impl Census {
    fn made(&self, _n: isize) {
        #[cfg(debug_assertions)]
        self.live
            .fetch_add(_n, std::sync::atomic::Ordering::Relaxed);
    }

    fn freed(&self, _n: isize) {
        #[cfg(debug_assertions)]
        {
            let before = self
                .live
                .fetch_sub(_n, std::sync::atomic::Ordering::Relaxed);
            assert!(before >= _n, "a node freed twice, or one never counted");
        }
    }

    /// Nodes made and not yet freed (always 0 without debug assertions).
    #[cfg(test)]
    pub(crate) fn live(&self) -> isize {
        #[cfg(debug_assertions)]
        return self.live.load(std::sync::atomic::Ordering::Relaxed);
        #[cfg(not(debug_assertions))]
        0
    }
}

/// What the live tree let go of in one generation, freed when no snapshot can reach it.
struct Retired<K, V> {
    /// Replaced by copies: only their memory is freed (the copies own what they hold).
    nodes: Vec<Node>,
    keys: Vec<K>,
    values: Vec<V>,
    /// A whole tree whose live side was dropped.
    whole: Option<Node>,
    census: Census,
}

impl<K, V> Retired<K, V> {
    fn new(census: Census) -> Retired<K, V> {
        Retired {
            nodes: Vec::new(),
            keys: Vec::new(),
            values: Vec::new(),
            whole: None,
            census,
        }
    }

    fn is_empty(&self) -> bool {
        self.nodes.is_empty()
            && self.keys.is_empty()
            && self.values.is_empty()
            && self.whole.is_none()
    }
}

impl<K, V> Drop for Retired<K, V> {
    fn drop(&mut self) {
        // SAFETY: a retired node is reachable only from snapshots, all dropped by now (see
        // `Generation`), and its contents belong to the copy that replaced it.
        if Shape::<K, V>::SPARED {
            unsafe { spare::give(self.nodes.iter().map(|node| node.cast())) };
        } else {
            for &node in &self.nodes {
                unsafe { Shape::<K, V>::free_node(node) };
            }
        }
        self.census.freed(self.nodes.len() as isize);
        if let Some(whole) = self.whole.take() {
            // SAFETY: the live tree that owned it is gone and so is every snapshot of it.
            unsafe { Shape::<K, V>::drop_whole(whole, &self.census) };
        }
    }
}

// SAFETY: the nodes are reached by no one else once retired (see `Generation`); keys and values
// are `Send + Sync` (`Item`).
unsafe impl<K: Send + Sync, V: Send + Sync> Send for Retired<K, V> {}
unsafe impl<K: Send + Sync, V: Send + Sync> Sync for Retired<K, V> {}

/// One snapshot's generation: once the next snapshot is made, what the live tree retired in
/// between, and the next generation, which this one keeps alive: so generations are freed in
/// the order they were made.
struct Generation<K, V> {
    after: OnceLock<After<K, V>>,
}

/// What follows a generation: what was retired in it, and the next generation (none when the
/// live tree was dropped).
type After<K, V> = (Retired<K, V>, Option<Arc<Generation<K, V>>>);

impl<K, V> Drop for Generation<K, V> {
    fn drop(&mut self) {
        // A loop rather than recursion: a reader that held an old snapshot long may free many
        // generations at once.
        let mut after = self.after.take();
        while let Some((retired, next)) = after {
            drop(retired);
            after = next
                .and_then(Arc::into_inner)
                .and_then(|mut generation| generation.after.take());
        }
    }
}

/// Nodes freed, kept for the next ones made, up to a bound.
///
/// Retired nodes are freed on the thread that drops the last snapshot (the syncer, a reader),
/// and new ones are made on the owner's: given back to the allocator, every node would cross
/// threads twice, and mimalloc keeps a page whose blocks were freed by another thread out of
/// use until an eighth of it is free (research note 026: about 12 bytes a scoreboard player).
/// Kept here, the owner's next node is one of them.
mod spare {
    use std::alloc::{dealloc, Layout};
    use std::cell::RefCell;
    use std::ptr::NonNull;
    use std::sync::Mutex;

    /// Every spared node's allocation: the tree's node size, word-aligned.
    pub(super) const LAYOUT: Layout = super::layout(super::NODE_BYTES, 8);

    /// The most nodes kept (2 MiB): what a few snapshots' worth of writes retires. More are
    /// given back to the allocator.
    const KEPT_MAX: usize = 4096;

    struct Block(NonNull<u8>);

    // SAFETY: a spare block is memory no one reaches; whoever takes it owns it.
    unsafe impl Send for Block {}

    static SPARE: Mutex<Vec<Block>> = Mutex::new(Vec::new());

    /// Taken from `SPARE` at a time: the lock's line moves between the threads that give and
    /// the one that takes, once a batch rather than once a node.
    const BATCH: usize = 64;

    /// A thread's batch, given back when the thread ends.
    struct Near(Vec<Block>);

    impl Drop for Near {
        fn drop(&mut self) {
            // SAFETY: blocks taken from `SPARE`, reached by no one.
            unsafe { give(self.0.drain(..).map(|b| b.0)) }
        }
    }

    thread_local! {
        static NEAR: RefCell<Near> = const { RefCell::new(Near(Vec::new())) };
    }

    /// A spare node's memory, if one is kept (uninitialised, `LAYOUT`).
    pub(super) fn take() -> Option<*mut u8> {
        NEAR.try_with(|near| {
            let near = &mut near.borrow_mut().0;
            if near.is_empty() {
                let mut spare = SPARE.lock().unwrap_or_else(|e| e.into_inner());
                let from = spare.len().saturating_sub(BATCH);
                near.extend(spare.drain(from..));
            }
            near.pop().map(|b| b.0.as_ptr())
        })
        .ok()
        .flatten()
    }

    /// Keeps `blocks` for next nodes, or frees those past the bound.
    ///
    /// # Safety
    /// Each block was allocated with `LAYOUT`, and no one reaches it any more.
    pub(super) unsafe fn give(blocks: impl IntoIterator<Item = NonNull<u8>>) {
        let mut blocks = blocks.into_iter();
        {
            let mut spare = SPARE.lock().unwrap_or_else(|e| e.into_inner());
            if spare.capacity() == 0 {
                spare.reserve_exact(KEPT_MAX);
            }
            let room = KEPT_MAX - spare.len();
            spare.extend(blocks.by_ref().take(room).map(Block));
        }
        for block in blocks {
            // SAFETY: the caller's.
            unsafe { dealloc(block.as_ptr(), LAYOUT) }
        }
    }
}

/// An ordered map, live or frozen (see the module doc).
pub(crate) struct Tree<K: Item + Ord + Debug, V: Item> {
    state: State<K, V>,
}

enum State<K: Item + Ord + Debug, V: Item> {
    Live(Live<K, V>),
    Frozen(Arc<Frozen<K, V>>),
}

/// The owner's side.
///
/// Invariants: every node reachable from `root` has a generation at most `generation`, and
/// those of `generation` are reachable from no snapshot; `len` is the number of entries; with
/// no snapshot made yet (`last` is `None`), `pending` is empty and every node is of
/// `generation`.
struct Live<K, V> {
    root: Option<Node>,
    len: usize,
    generation: u64,
    /// The last snapshot made: while nothing has changed since (`changed`), taking another is
    /// free. Replaced only by the next snapshot, never dropped by a write: the owner's thread
    /// never lets go of a generation, so it never frees what one retired.
    last: Option<Arc<Frozen<K, V>>>,
    changed: bool,
    /// Retired since the last snapshot.
    pending: Retired<K, V>,
    census: Census,
    /// Counts the changes to which nodes the live tree reaches and where their entries are: a
    /// node copied, made or freed, an entry added or removed. A value replaced in place is not
    /// counted. While it stays, a node found at a count is still where it was found.
    shape: u64,
    /// The leaf of the last update or insert (see [`LastLeaf`]).
    last_leaf: Option<LastLeaf<K>>,
    /// The path of the last [`Tree::get_remembered`], at `shape` then: an update of that key
    /// (a row read, then saved) starts there rather than at the root.
    read: Option<(Path, u64)>,
}

/// A snapshot: a root that no one changes, and the generation that keeps its nodes.
struct Frozen<K, V> {
    root: Option<Node>,
    len: usize,
    generation: Arc<Generation<K, V>>,
}

// SAFETY: a live tree's nodes are its own or shared read-only with snapshots (module doc); it
// is moved between threads under the runtime's lock, and read through `&self` only. A frozen
// tree's nodes are never changed while it lives.
unsafe impl<K: Send + Sync, V: Send + Sync> Send for Live<K, V> {}
unsafe impl<K: Send + Sync, V: Send + Sync> Sync for Live<K, V> {}
unsafe impl<K: Send + Sync, V: Send + Sync> Send for Frozen<K, V> {}
unsafe impl<K: Send + Sync, V: Send + Sync> Sync for Frozen<K, V> {}

/// The leaf of the last update or insert, at the live tree's `shape` then, and the least key
/// of what comes after it (none at the tree's end): the next update or insert of a key from the
/// leaf's first key up to that bound (the lines of an order, inserted or saved one after
/// another) starts there rather than at the root. The leaf was made the live generation's on
/// the way there, its path with it.
struct LastLeaf<K> {
    leaf: Node,
    shape: u64,
    bound: Option<K>,
}

/// The way from the root to an entry or the place for one: the node at each level and the
/// child (in a branch) or entry (in the leaf) taken.
#[derive(Clone, Copy)]
struct Path {
    nodes: [*mut Header; DEPTH_MAX],
    at: [u16; DEPTH_MAX],
    depth: usize,
    found: bool,
}

impl Path {
    fn leaf(&self) -> Node {
        NonNull::new(self.nodes[self.depth - 1]).expect("a path ends at a leaf")
    }

    fn pos(&self) -> usize {
        self.at[self.depth - 1] as usize
    }
}

impl<K: Ord + Clone + 'static, V: Clone> Live<K, V> {
    fn new(root: Option<Node>, len: usize, census: Census) -> Live<K, V> {
        Live {
            root,
            len,
            generation: 0,
            last: None,
            changed: false,
            pending: Retired::new(census.clone()),
            census,
            shape: 0,
            last_leaf: None,
            read: None,
        }
    }

    fn search(&self, key: &K) -> Option<Path> {
        let mut node = self.root?;
        let mut path = Path {
            nodes: [ptr::null_mut(); DEPTH_MAX],
            at: [0; DEPTH_MAX],
            depth: 0,
            found: false,
        };
        // SAFETY: nodes reachable from the live root are live nodes of this shape.
        unsafe {
            while !Shape::<K, V>::is_leaf(node) {
                let i = Shape::<K, V>::child_for(node, key);
                path.nodes[path.depth] = node.as_ptr();
                path.at[path.depth] = i as u16;
                path.depth += 1;
                node = Shape::<K, V>::kid(node, i);
            }
            let (found, pos) = match Shape::<K, V>::leaf_search(node, key) {
                Ok(pos) => (true, pos),
                Err(pos) => (false, pos),
            };
            path.nodes[path.depth] = node.as_ptr();
            path.at[path.depth] = pos as u16;
            path.depth += 1;
            path.found = found;
        }
        Some(path)
    }

    /// `node`, or its copy in the live generation if a snapshot may share it (the original
    /// retired).
    #[inline]
    fn own(&mut self, node: Node) -> Node {
        // SAFETY: `node` is reachable from the live root.
        if unsafe { Shape::<K, V>::generation(node) } == self.generation {
            return node;
        }
        self.copy(node)
    }

    /// [`Live::own`] for a node of an older generation.
    #[inline(never)]
    fn copy(&mut self, node: Node) -> Node {
        self.shape += 1;
        // SAFETY: `node` is reachable from the live root.
        let copy = unsafe { Shape::<K, V>::copy_node(node, self.generation) };
        self.census.made(1);
        self.pending.nodes.push(node);
        copy
    }

    /// Makes every node on `path` the live generation's, so that it can be changed in place.
    fn own_path(&mut self, path: &mut Path) {
        self.changed = true;
        let root = self.own(NonNull::new(path.nodes[0]).expect("a path starts at the root"));
        self.root = Some(root);
        path.nodes[0] = root.as_ptr();
        for level in 1..path.depth {
            let parent = NonNull::new(path.nodes[level - 1]).expect("a node on the path");
            let i = path.at[level - 1] as usize;
            // SAFETY: `parent` is owned (made so just before); `i` is one of its children.
            unsafe {
                let slot = Shape::<K, V>::kids_ptr(parent).add(i);
                let owned = self.own(*slot);
                *slot = owned;
                path.nodes[level] = owned.as_ptr();
            }
        }
    }

    /// The last leaf, if `key` belongs in it (from its first key up to its bound, so that no
    /// other leaf can hold it) and it is still there and the live generation's: it can be
    /// changed in place with no search from the root, as nothing on its path needs a copy (a
    /// node is made the live generation's only under a parent that is).
    fn hinted(&self, key: &K) -> Option<Node> {
        let last = self.last_leaf.as_ref()?;
        if last.shape != self.shape {
            return None;
        }
        // SAFETY: the shape is as it was when `leaf` was on the live tree's path to a key, so
        // it still is: not freed, not moved, its entries where they were, its bound the same.
        unsafe {
            if Shape::<K, V>::generation(last.leaf) != self.generation {
                return None;
            }
            let first = Shape::<K, V>::leaf_keys(last.leaf).first()?;
            let below = last.bound.as_ref().is_none_or(|bound| key < bound);
            (first <= key && below).then_some(last.leaf)
        }
    }

    /// Remembers `path`'s leaf (owned) as the last leaf, with its bound.
    fn remember_leaf(&mut self, path: &Path) {
        // The bound: the separator after the child taken at the lowest branch that has one.
        let bound = (0..path.depth - 1).rev().find_map(|level| {
            let branch = NonNull::new(path.nodes[level]).expect("a branch on the path");
            // SAFETY: the path's nodes are on the live tree.
            let keys = unsafe { Shape::<K, V>::branch_keys(branch) };
            keys.get(path.at[level] as usize).cloned()
        });
        self.last_leaf = Some(LastLeaf {
            leaf: path.leaf(),
            shape: self.shape,
            bound,
        });
    }

    /// The path the last remembered read of `key` took, if nothing has moved since.
    fn remembered(&mut self, key: &K) -> Option<Path> {
        let (path, shape) = self.read.take()?;
        if shape != self.shape {
            return None;
        }
        // SAFETY: the shape is as it was when the path was the way to an entry, so it still
        // is: its nodes where they were, the entry at `pos` (whose key may not be `key`).
        let at = unsafe { &*Shape::<K, V>::leaf_keys_ptr(path.leaf()).add(path.pos()) };
        (at == key).then_some(path)
    }

    /// Whether a snapshot may hold what the live tree lets go of now.
    fn shared(&self) -> bool {
        self.last.is_some()
    }

    fn let_go_key(&mut self, key: K) {
        if self.shared() {
            self.pending.keys.push(key);
        }
    }

    /// A value the live tree let go of, for the caller: the value itself, or a clone of it when
    /// a snapshot may hold it.
    fn give_back(&mut self, value: V) -> V {
        if self.shared() {
            let copy = value.clone();
            self.pending.values.push(value);
            copy
        } else {
            value
        }
    }

    /// Frees an owned node whose contents were moved out or let go of.
    fn free_owned(&mut self, node: Node) {
        // SAFETY: a node of the live generation is reachable from no snapshot, and the caller
        // has unlinked it.
        unsafe {
            debug_assert_eq!(Shape::<K, V>::generation(node), self.generation);
            Shape::<K, V>::free_node(node);
        }
        self.census.freed(1);
    }

    /// A node the live tree no longer reaches, contents and all handed on.
    fn let_go_node(&mut self, node: Node) {
        // SAFETY: `node` was reachable from the live root.
        if unsafe { Shape::<K, V>::generation(node) } == self.generation {
            self.free_owned(node);
        } else {
            self.pending.nodes.push(node);
        }
    }

    /// Inserts `(key, value)` at `path`'s position in its (owned) leaf, splitting it if full.
    fn insert_at(&mut self, path: &Path, key: K, value: V) {
        self.shape += 1;
        let cap = Shape::<K, V>::LEAF_CAP;
        let leaf = path.leaf();
        let pos = path.pos();
        // SAFETY: `leaf` is owned; entries `0..len` are initialised and moved bitwise.
        unsafe {
            let len = Shape::<K, V>::len(leaf);
            if len < cap {
                leaf_insert(leaf, pos, key, value);
                return;
            }
            // Full: room in the next leaf first, then a split.
            let Err((key, value)) = self.spill_right(path, key, value) else {
                return;
            };
            // Where the key continues a run (the hint says where the last key went in),
            // the split leaves the leaf behind the run full and the run room ahead of it: at
            // the end after a run in order, a new leaf of the one key; inside the leaf (several
            // writers each adding keys in order, each at a place of its own), a split at the
            // key; for a run in reverse, a new leaf of the key and the entry before it. At the
            // start, a leaf of the one key. Elsewhere, half and half. `mid` entries stay; the
            // key goes left when `left`.
            let hint = (*leaf.as_ptr()).hint as usize;
            let (mid, left) = if pos == len && hint + 1 == len {
                // A run in order at the leaf's end: the leaf stays full. Its hint no longer
                // says where a run goes on: a key that comes to its end again comes from a
                // run in reverse (the run in order goes on in the new leaf).
                (*leaf.as_ptr()).hint = NO_HINT;
                (len, false)
            } else if pos == 0 {
                (0, true)
            } else if pos == hint + 1 {
                (pos, true)
            } else if pos == hint || pos == len {
                // A run in reverse: the entry before the key goes to the new leaf with it, as
                // its least key, so that the run's next keys (between the two) go there too.
                (max(pos - 1, 1), false)
            } else {
                (len / 2, pos <= len / 2)
            };
            let right = Shape::<K, V>::new_node(true, self.generation);
            self.census.made(1);
            let moved = len - mid;
            ptr::copy_nonoverlapping(
                Shape::<K, V>::leaf_keys_ptr(leaf).add(mid),
                Shape::<K, V>::leaf_keys_ptr(right),
                moved,
            );
            ptr::copy_nonoverlapping(
                Shape::<K, V>::values_ptr(leaf).add(mid),
                Shape::<K, V>::values_ptr(right),
                moved,
            );
            Shape::<K, V>::set_len(leaf, mid);
            Shape::<K, V>::set_len(right, moved);
            if left {
                leaf_insert(leaf, pos, key, value);
            } else {
                leaf_insert(right, pos - mid, key, value);
                (*leaf.as_ptr()).hint = mid as u8;
            }
            let separator = Shape::<K, V>::leaf_keys(right)[0].clone();
            self.insert_up(path, path.depth - 1, separator, right);
        }
    }

    /// Makes room in `path`'s full leaf by moving its last entries to the front of the next
    /// leaf under the same parent, if that leaf has room: the entries after the key, or as many
    /// of those as fit (the key itself when it goes at the end). A split that makes no
    /// leaf, as in a B*-tree: so behind a run that leaves the entries after it done (one in
    /// reverse, several writers each at a place of their own, or passing over each other's
    /// keys) the leaves fill up to full instead of each split leaving two part-full ones. Gives
    /// the key and value back when there is no such leaf or it is full.
    fn spill_right(&mut self, path: &Path, key: K, value: V) -> Result<(), (K, V)> {
        let cap = Shape::<K, V>::LEAF_CAP;
        if path.depth < 2 {
            return Err((key, value));
        }
        let leaf = path.leaf();
        let pos = path.pos();
        let parent = NonNull::new(path.nodes[path.depth - 2]).expect("a branch on the path");
        let i = path.at[path.depth - 2] as usize;
        // SAFETY: `leaf` and `parent` are owned (the path was); the sibling is owned before it
        // changes; entries move bitwise, each to one place.
        unsafe {
            let len = Shape::<K, V>::len(leaf);
            debug_assert_eq!(len, cap);
            if i + 1 >= Shape::<K, V>::len(parent) {
                return Err((key, value));
            }
            let sibling = Shape::<K, V>::kid(parent, i + 1);
            let had = Shape::<K, V>::len(sibling);
            if had == cap {
                return Err((key, value));
            }
            let sibling = self.own(sibling);
            *Shape::<K, V>::kids_ptr(parent).add(i + 1) = sibling;
            // The key stays in the leaf, with room made after it, unless it goes at the end:
            // a key that went along would take the place where runs meet with it (a writer in
            // order below one in reverse, inserting at the same place: the leaf behind them
            // was left as it was, and leaves came out 0.43 full; 0.92 so).
            let with_key = pos == len;
            let moved = min(cap - had, len - pos);
            let (keys, values) = (
                Shape::<K, V>::leaf_keys_ptr(sibling),
                Shape::<K, V>::values_ptr(sibling),
            );
            let from = len - moved;
            ptr::copy(keys, keys.add(moved), had);
            ptr::copy(values, values.add(moved), had);
            ptr::copy_nonoverlapping(Shape::<K, V>::leaf_keys_ptr(leaf).add(from), keys, moved);
            ptr::copy_nonoverlapping(Shape::<K, V>::values_ptr(leaf).add(from), values, moved);
            Shape::<K, V>::set_len(leaf, from);
            Shape::<K, V>::set_len(sibling, had + moved);
            // Its hint follows its entries; one past them (a leaf that lost entries since) is
            // dropped.
            let hint = &mut (*sibling.as_ptr()).hint;
            *hint = match (*hint as usize) < had {
                true => *hint + moved as u8,
                false => NO_HINT,
            };
            if with_key {
                leaf_insert(sibling, 0, key, value);
                // The run went on past the leaf's end.
                (*leaf.as_ptr()).hint = from as u8;
            } else {
                leaf_insert(leaf, pos, key, value);
            }
            let separator = Shape::<K, V>::leaf_keys(sibling)[0].clone();
            let old = ptr::replace(Shape::<K, V>::branch_keys_ptr(parent).add(i), separator);
            self.let_go_key(old);
        }
        Ok(())
    }

    /// Adds `right` (its least key `separator`) after the child taken at level `level - 1` of
    /// `path`, splitting branches up to a new root as they fill.
    fn insert_up(&mut self, path: &Path, mut level: usize, mut separator: K, mut right: Node) {
        let cap = Shape::<K, V>::BRANCH_CAP;
        loop {
            if level == 0 {
                debug_assert!(path.depth < DEPTH_MAX, "checked by `Tree::insert`");
                let root = Shape::<K, V>::new_node(false, self.generation);
                self.census.made(1);
                // SAFETY: a new branch with room for two children and one key.
                unsafe {
                    Shape::<K, V>::set_len(root, 2);
                    Shape::<K, V>::branch_keys_ptr(root).write(separator);
                    let kids = Shape::<K, V>::kids_ptr(root);
                    kids.write(NonNull::new(path.nodes[0]).expect("the old root"));
                    kids.add(1).write(right);
                }
                self.root = Some(root);
                return;
            }
            level -= 1;
            let branch = NonNull::new(path.nodes[level]).expect("a branch on the path");
            let i = path.at[level] as usize;
            // SAFETY: `branch` is owned (the path was); children `0..len` and keys
            // `0..len - 1` are initialised and moved bitwise.
            unsafe {
                let len = Shape::<K, V>::len(branch);
                if len < cap {
                    branch_insert::<K, V>(branch, i, separator, right);
                    return;
                }
                // At the right edge of the tree, a new branch of the one child: a table filled
                // in key order ends with full branches, as with full leaves. Elsewhere, half
                // and half, which bounds the depth: only the rightmost branch of a level can be
                // less than half full for lack of inserts.
                let rightmost = i == len - 1
                    && (0..level).all(|l| {
                        let node = NonNull::new(path.nodes[l]).expect("a branch on the path");
                        path.at[l] as usize == Shape::<K, V>::len(node) - 1
                    });
                let new = Shape::<K, V>::new_node(false, self.generation);
                self.census.made(1);
                if rightmost {
                    Shape::<K, V>::set_len(new, 1);
                    Shape::<K, V>::kids_ptr(new).write(right);
                    right = new;
                    continue;
                }
                let mid = cap / 2;
                let keys = Shape::<K, V>::branch_keys_ptr(branch);
                let up = ptr::read(keys.add(mid - 1));
                ptr::copy_nonoverlapping(
                    keys.add(mid),
                    Shape::<K, V>::branch_keys_ptr(new),
                    len - 1 - mid,
                );
                ptr::copy_nonoverlapping(
                    Shape::<K, V>::kids_ptr(branch).add(mid),
                    Shape::<K, V>::kids_ptr(new),
                    len - mid,
                );
                Shape::<K, V>::set_len(branch, mid);
                Shape::<K, V>::set_len(new, len - mid);
                if i < mid {
                    branch_insert::<K, V>(branch, i, separator, right);
                } else {
                    branch_insert::<K, V>(new, i - mid, separator, right);
                }
                separator = up;
                right = new;
            }
        }
    }

    /// Removes the child taken at `level` of `path` (emptied), and whatever that empties.
    fn remove_up(&mut self, path: &Path, mut level: usize) {
        loop {
            let branch = NonNull::new(path.nodes[level]).expect("a branch on the path");
            let i = path.at[level] as usize;
            // SAFETY: `branch` is owned; its child `i` has been freed.
            unsafe {
                let len = Shape::<K, V>::len(branch);
                if len == 1 {
                    // Its only child gone, the branch goes too.
                    self.free_owned(branch);
                    if level == 0 {
                        self.root = None;
                        return;
                    }
                    level -= 1;
                    continue;
                }
                let keys = Shape::<K, V>::branch_keys_ptr(branch);
                let kids = Shape::<K, V>::kids_ptr(branch);
                // The separator before the child goes with it (the first child's: the one after).
                let k = i.saturating_sub(1);
                let key = ptr::read(keys.add(k));
                ptr::copy(keys.add(k + 1), keys.add(k), len - 2 - k);
                ptr::copy(kids.add(i + 1), kids.add(i), len - 1 - i);
                Shape::<K, V>::set_len(branch, len - 1);
                self.let_go_key(key);
            }
            break;
        }
        // A root branch of one child gives way to it.
        while let Some(root) = self.root {
            // SAFETY: the live root.
            unsafe {
                if Shape::<K, V>::is_leaf(root) || Shape::<K, V>::len(root) != 1 {
                    break;
                }
                self.root = Some(Shape::<K, V>::kid(root, 0));
            }
            self.let_go_node(root);
        }
    }
}

/// Puts `(key, value)` at `pos` of a leaf with room, moving the entries after it.
///
/// # Safety
/// `leaf` is owned, has fewer than `LEAF_CAP` entries, and `pos <= len`.
unsafe fn leaf_insert<K, V>(leaf: Node, pos: usize, key: K, value: V) {
    unsafe {
        let len = Shape::<K, V>::len(leaf);
        debug_assert!(len < Shape::<K, V>::LEAF_CAP && pos <= len);
        let keys = Shape::<K, V>::leaf_keys_ptr(leaf);
        let values = Shape::<K, V>::values_ptr(leaf);
        ptr::copy(keys.add(pos), keys.add(pos + 1), len - pos);
        ptr::copy(values.add(pos), values.add(pos + 1), len - pos);
        keys.add(pos).write(key);
        values.add(pos).write(value);
        Shape::<K, V>::set_len(leaf, len + 1);
        (*leaf.as_ptr()).hint = pos as u8;
    }
}

/// Puts `right` after child `i` of a branch with room, `separator` before it.
///
/// # Safety
/// `branch` is owned, has fewer than `BRANCH_CAP` children, and `i < len`.
unsafe fn branch_insert<K, V>(branch: Node, i: usize, separator: K, right: Node) {
    unsafe {
        let len = Shape::<K, V>::len(branch);
        debug_assert!(len < Shape::<K, V>::BRANCH_CAP && i < len);
        let keys = Shape::<K, V>::branch_keys_ptr(branch);
        let kids = Shape::<K, V>::kids_ptr(branch);
        ptr::copy(keys.add(i), keys.add(i + 1), len - 1 - i);
        ptr::copy(kids.add(i + 1), kids.add(i + 2), len - 1 - i);
        keys.add(i).write(separator);
        kids.add(i + 1).write(right);
        Shape::<K, V>::set_len(branch, len + 1);
    }
}

impl<K, V> Drop for Live<K, V> {
    fn drop(&mut self) {
        let whole = self.root.take();
        match self.last.take() {
            None => {
                if let Some(root) = whole {
                    // SAFETY: no snapshot was ever made: the tree is the live side's alone.
                    unsafe { Shape::<K, V>::drop_whole(root, &self.census) };
                }
            }
            Some(last) => {
                // Snapshots may still read it: the whole tree goes with what this generation
                // retired, freed after them.
                let mut retired =
                    std::mem::replace(&mut self.pending, Retired::new(self.census.clone()));
                retired.whole = whole;
                let set = last.generation.after.set((retired, None));
                assert!(
                    set.is_ok(),
                    "the last snapshot's generation has no successor yet"
                );
            }
        }
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
            state: State::Live(Live::new(None, 0, Census::default())),
        }
    }

    /// A live tree of `pairs`, which come in strictly ascending key order (a snapshot's rows):
    /// built bottom-up ([`Builder`]).
    pub(crate) fn from_sorted(pairs: impl IntoIterator<Item = (K, V)>) -> Tree<K, V> {
        let mut builder = Builder::new();
        for (key, value) in pairs {
            if let Some(last) = builder.last_key() {
                assert!(
                    *last < key,
                    "from_sorted: {key:?} after {last:?}, not in ascending order"
                );
            }
            builder.push(key, value);
        }
        builder.finish()
    }

    pub(crate) fn is_frozen(&self) -> bool {
        matches!(self.state, State::Frozen(_))
    }

    fn root_and_len(&self) -> (Option<Node>, usize) {
        match &self.state {
            State::Live(live) => (live.root, live.len),
            State::Frozen(frozen) => (frozen.root, frozen.len),
        }
    }

    pub(crate) fn get(&self, key: &K) -> Option<&V> {
        let mut node = self.root_and_len().0?;
        // SAFETY: the nodes reachable from a root live as long as `self` (module doc).
        unsafe {
            while !Shape::<K, V>::is_leaf(node) {
                node = Shape::<K, V>::kid(node, Shape::<K, V>::child_for(node, key));
            }
            let pos = Shape::<K, V>::leaf_search(node, key).ok()?;
            Some(&*Shape::<K, V>::values_ptr(node).add(pos))
        }
    }

    /// [`Tree::get`] that remembers, on a live tree, the way to the key: an update of the same
    /// key before anything moves (a row read, changed, then saved) does not search again.
    pub(crate) fn get_remembered(&mut self, key: &K) -> Option<&V> {
        let State::Live(live) = &mut self.state else {
            return self.get(key);
        };
        let path = live.search(key)?;
        if !path.found {
            return None;
        }
        live.read = Some((path, live.shape));
        // SAFETY: the path's leaf is on the live tree and holds an entry at `pos`.
        unsafe { Some(&*Shape::<K, V>::values_ptr(path.leaf()).add(path.pos())) }
    }

    pub(crate) fn len(&self) -> usize {
        self.root_and_len().1
    }

    /// Every pair in key order (`.rev()`: descending; `.len()`: how many).
    pub(crate) fn iter(&self) -> Pairs<'_, K, V> {
        Pairs {
            range: self.range((Bound::Unbounded, Bound::Unbounded)),
            left: self.len(),
        }
    }

    /// The pairs with keys within `bounds`, ascending (`.rev()`: descending). Bounds that hold
    /// no key (the low above the high) give none.
    pub(crate) fn range(&self, bounds: (Bound<K>, Bound<K>)) -> Range<'_, K, V> {
        let root = self.root_and_len().0;
        let empty = match (&bounds.0, &bounds.1) {
            (Bound::Included(low), Bound::Included(high)) => low > high,
            (
                Bound::Included(low) | Bound::Excluded(low),
                Bound::Included(high) | Bound::Excluded(high),
            ) => low >= high,
            _ => false,
        };
        let (front, back) = match root {
            Some(root) if !empty => {
                // The first pair at or past the low bound, and the first past the high one.
                let front = Cursor::seek(root, as_low(&bounds.0));
                let back = match &bounds.1 {
                    Bound::Included(high) => Cursor::seek(root, Low::After(high)),
                    Bound::Excluded(high) => Cursor::seek(root, Low::AtOrAfter(high)),
                    Bound::Unbounded => Cursor::end(),
                };
                (front, back)
            }
            _ => (Cursor::end(), Cursor::end()),
        };
        Range {
            root,
            front,
            back,
            _tree: PhantomData,
        }
    }

    /// The least key and its value, and the greatest.
    pub(crate) fn ends(&self) -> Option<(Pair<'_, K, V>, Pair<'_, K, V>)> {
        let root = self.root_and_len().0?;
        let first = Cursor::<K, V>::seek(root, Low::First);
        let mut last = Cursor::<K, V>::end();
        last.retreat(root);
        // SAFETY: both cursors are at entries of a tree that lives as long as `self`.
        unsafe { Some((first.pair(), last.pair())) }
    }

    fn live(&mut self) -> &mut Live<K, V> {
        match &mut self.state {
            State::Live(live) => live,
            State::Frozen(_) => {
                panic!("a snapshot is read-only: only the owner's live tree changes")
            }
        }
    }

    /// Adds or replaces, returning the value replaced.
    pub(crate) fn insert(&mut self, key: K, value: V) -> Option<V> {
        let live = self.live();
        if let Some(leaf) = live.hinted(&key) {
            // SAFETY: a hinted leaf is on the live tree and owned (`Live::hinted`); entries
            // `0..len` are initialised.
            unsafe {
                match Shape::<K, V>::leaf_search(leaf, &key) {
                    Ok(pos) => {
                        live.changed = true;
                        let old = ptr::replace(Shape::<K, V>::values_ptr(leaf).add(pos), value);
                        drop(key);
                        return Some(live.give_back(old));
                    }
                    Err(pos) if Shape::<K, V>::len(leaf) < Shape::<K, V>::LEAF_CAP => {
                        live.changed = true;
                        live.shape += 1;
                        leaf_insert(leaf, pos, key, value);
                        live.len += 1;
                        // Still its leaf, under the same bound: only its entries moved.
                        if let Some(last) = &mut live.last_leaf {
                            last.shape = live.shape;
                        }
                        return None;
                    }
                    // Full: a split needs the path.
                    Err(_) => {}
                }
            }
        }
        let Some(mut path) = live.search(&key) else {
            let leaf = Shape::<K, V>::new_node(true, live.generation);
            live.census.made(1);
            // SAFETY: a new leaf with room.
            unsafe { leaf_insert(leaf, 0, key, value) };
            live.root = Some(leaf);
            live.len = 1;
            live.changed = true;
            live.shape += 1;
            return None;
        };
        // Before anything changes: a split that reached the root would make the tree one level
        // deeper than the path.
        assert!(
            path.depth < DEPTH_MAX,
            "a tree {DEPTH_MAX} levels deep: more nodes than memory could hold"
        );
        live.own_path(&mut path);
        if path.found {
            live.remember_leaf(&path);
            // SAFETY: the path's leaf is owned and holds an entry at `pos`.
            let old = unsafe {
                ptr::replace(
                    Shape::<K, V>::values_ptr(path.leaf()).add(path.pos()),
                    value,
                )
            };
            drop(key);
            return Some(live.give_back(old));
        }
        // SAFETY: the path's leaf is on the live tree.
        let room = unsafe { Shape::<K, V>::len(path.leaf()) } < Shape::<K, V>::LEAF_CAP;
        live.insert_at(&path, key, value);
        live.len += 1;
        if room {
            // No split: the path is still the leaf's.
            live.remember_leaf(&path);
        }
        None
    }

    pub(crate) fn remove(&mut self, key: &K) -> Option<V> {
        let live = self.live();
        let mut path = live.search(key)?;
        if !path.found {
            return None;
        }
        live.own_path(&mut path);
        live.shape += 1;
        let leaf = path.leaf();
        let pos = path.pos();
        // SAFETY: the leaf is owned and holds an entry at `pos`, moved out here.
        let (key, value, emptied) = unsafe {
            let len = Shape::<K, V>::len(leaf);
            let keys = Shape::<K, V>::leaf_keys_ptr(leaf);
            let values = Shape::<K, V>::values_ptr(leaf);
            let key = ptr::read(keys.add(pos));
            let value = ptr::read(values.add(pos));
            ptr::copy(keys.add(pos + 1), keys.add(pos), len - pos - 1);
            ptr::copy(values.add(pos + 1), values.add(pos), len - pos - 1);
            Shape::<K, V>::set_len(leaf, len - 1);
            (key, value, len == 1)
        };
        live.len -= 1;
        live.let_go_key(key);
        let value = live.give_back(value);
        if emptied {
            live.free_owned(leaf);
            if path.depth == 1 {
                live.root = None;
            } else {
                live.remove_up(&path, path.depth - 2);
            }
        }
        Some(value)
    }

    /// Replaces the value of `key` with what `new` makes of it, in one search: the value
    /// replaced and the new one, or `None` (nothing changed) without such a key.
    pub(crate) fn update(&mut self, key: &K, new: impl FnOnce(&V) -> V) -> Option<(V, &V)> {
        let live = self.live();
        let (leaf, pos) = match live.hinted(key) {
            // SAFETY: a hinted leaf is on the live tree and owned (`Live::hinted`).
            Some(leaf) => match unsafe { Shape::<K, V>::leaf_search(leaf, key) } {
                Ok(pos) => {
                    live.changed = true;
                    (leaf, pos)
                }
                Err(_) => return None,
            },
            None => {
                let mut path = match live.remembered(key) {
                    Some(path) => path,
                    None => live.search(key)?,
                };
                if !path.found {
                    return None;
                }
                live.own_path(&mut path);
                live.remember_leaf(&path);
                (path.leaf(), path.pos())
            }
        };
        // SAFETY: the leaf is owned and holds an entry at `pos`.
        let slot = unsafe { &mut *Shape::<K, V>::values_ptr(leaf).add(pos) };
        let value = new(slot);
        let old = std::mem::replace(slot, value);
        let old = live.give_back(old);
        Some((old, slot))
    }

    /// A frozen tree of the state now. A live tree starts its next generation (nothing changed
    /// since its last snapshot: the last snapshot again); a frozen one is shared.
    pub(crate) fn snapshot(&mut self) -> Tree<K, V> {
        let frozen = match &mut self.state {
            State::Frozen(frozen) => frozen.clone(),
            State::Live(live) => match &live.last {
                Some(last) if !live.changed => last.clone(),
                _ => {
                    let generation = Arc::new(Generation {
                        after: OnceLock::new(),
                    });
                    let frozen = Arc::new(Frozen {
                        root: live.root,
                        len: live.len,
                        generation: generation.clone(),
                    });
                    let retired =
                        std::mem::replace(&mut live.pending, Retired::new(live.census.clone()));
                    match live.last.replace(frozen.clone()) {
                        Some(last) => {
                            let set = last.generation.after.set((retired, Some(generation)));
                            assert!(set.is_ok(), "a generation is followed once");
                        }
                        None => assert!(
                            retired.is_empty(),
                            "nothing is retired before the first snapshot"
                        ),
                    }
                    live.generation += 1;
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

    /// Whether an update of `key` would start at the last update's leaf.
    #[cfg(test)]
    fn hints(&self, key: &K) -> bool {
        match &self.state {
            State::Live(live) => live.hinted(key).is_some(),
            State::Frozen(_) => false,
        }
    }

    /// Counts the nodes of a live tree and of every snapshot it made (in builds with debug
    /// assertions).
    #[cfg(test)]
    pub(crate) fn census(&self) -> Census {
        match &self.state {
            State::Live(live) => live.census.clone(),
            State::Frozen(_) => panic!("a census is taken of a live tree"),
        }
    }

    /// Panics unless the tree keeps its invariants: keys strictly ascending across the leaves,
    /// each within its parent's separators; every leaf at the same depth; no empty node; the
    /// count of entries; a live tree's nodes no newer than its generation.
    pub(crate) fn check(&self) {
        let (root, len) = self.root_and_len();
        let generation = match &self.state {
            State::Live(live) => live.generation,
            State::Frozen(_) => u64::MAX,
        };
        let Some(root) = root else {
            assert_eq!(len, 0, "an empty tree counts no entries");
            return;
        };
        let mut leaf_depth = None;
        let mut count = 0;
        let mut last: Option<&K> = None;
        check_node::<K, V>(
            root,
            0,
            (None, None),
            generation,
            &mut leaf_depth,
            &mut count,
            &mut last,
        );
        assert_eq!(count, len, "the tree counts its entries");
    }
}

/// A tree built bottom-up from pairs in strictly ascending key order (a checkpoint image, a
/// snapshot's rows): each pair is written at the end of the last leaf, with no search, and the
/// branches are made once at the end. Every node is full but the last of each level.
pub(crate) struct Builder<K: Item + Ord + Debug, V: Item> {
    leaves: Vec<Node>,
    len: usize,
    census: Census,
    _pairs: PhantomData<(K, V)>,
}

// SAFETY: the leaves are the builder's own until `finish` hands them to a tree.
unsafe impl<K: Item + Ord + Debug, V: Item> Send for Builder<K, V> {}
unsafe impl<K: Item + Ord + Debug, V: Item> Sync for Builder<K, V> {}

impl<K: Item + Ord + Debug, V: Item> Default for Builder<K, V> {
    fn default() -> Self {
        Builder::new()
    }
}

impl<K: Item + Ord + Debug, V: Item> Builder<K, V> {
    pub(crate) fn new() -> Builder<K, V> {
        Builder {
            leaves: Vec::new(),
            len: 0,
            census: Census::default(),
            _pairs: PhantomData,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The greatest key so far.
    pub(crate) fn last_key(&self) -> Option<&K> {
        let leaf = *self.leaves.last()?;
        // SAFETY: a leaf of this builder, never empty.
        unsafe { Shape::<K, V>::leaf_keys(leaf).last() }
    }

    /// Adds a pair after every pair so far: the caller has made sure its key is greater.
    pub(crate) fn push(&mut self, key: K, value: V) {
        let leaf = match self.leaves.last() {
            // SAFETY: the builder's leaves are live.
            Some(&leaf) if unsafe { Shape::<K, V>::len(leaf) } < Shape::<K, V>::LEAF_CAP => leaf,
            _ => {
                let leaf = Shape::<K, V>::new_node(true, 0);
                self.census.made(1);
                self.leaves.push(leaf);
                leaf
            }
        };
        // SAFETY: `leaf` has room; the entry goes after the others.
        unsafe { leaf_insert(leaf, Shape::<K, V>::len(leaf), key, value) };
        self.len += 1;
    }

    /// The tree of the pairs pushed.
    pub(crate) fn finish(mut self) -> Tree<K, V> {
        let mut level = std::mem::take(&mut self.leaves);
        let cap = Shape::<K, V>::BRANCH_CAP;
        while level.len() > 1 {
            let mut above = Vec::with_capacity(level.len().div_ceil(cap));
            for group in level.chunks(cap) {
                let branch = Shape::<K, V>::new_node(false, 0);
                self.census.made(1);
                // SAFETY: a new branch with room for `group`; each child's least key is the
                // first key of its leftmost leaf, cloned as the separator's own.
                unsafe {
                    Shape::<K, V>::set_len(branch, group.len());
                    for (i, &kid) in group.iter().enumerate() {
                        Shape::<K, V>::kids_ptr(branch).add(i).write(kid);
                        if i > 0 {
                            let least = least_key::<K, V>(kid).clone();
                            Shape::<K, V>::branch_keys_ptr(branch)
                                .add(i - 1)
                                .write(least);
                        }
                    }
                }
                above.push(branch);
            }
            level = above;
        }
        Tree {
            state: State::Live(Live::new(level.pop(), self.len, self.census.clone())),
        }
    }
}

impl<K: Item + Ord + Debug, V: Item> Drop for Builder<K, V> {
    fn drop(&mut self) {
        for &leaf in &self.leaves {
            // SAFETY: leaves no tree was given: the builder's alone.
            unsafe { Shape::<K, V>::drop_whole(leaf, &self.census) };
        }
    }
}

fn check_node<'a, K: Ord + Debug, V>(
    node: Node,
    depth: usize,
    (low, high): (Option<&'a K>, Option<&'a K>),
    generation: u64,
    leaf_depth: &mut Option<usize>,
    count: &mut usize,
    last: &mut Option<&'a K>,
) {
    // SAFETY: a node reachable from a tree's root.
    unsafe {
        assert!(
            Shape::<K, V>::generation(node) <= generation,
            "a node newer than its tree"
        );
        let len = Shape::<K, V>::len(node);
        assert!(len > 0, "an empty node");
        if Shape::<K, V>::is_leaf(node) {
            assert!(len <= Shape::<K, V>::LEAF_CAP);
            let hint = (*node.as_ptr()).hint;
            assert!(
                hint == NO_HINT || hint as usize <= Shape::<K, V>::LEAF_CAP,
                "a hint past any position: {hint}"
            );
            assert_eq!(
                *leaf_depth.get_or_insert(depth),
                depth,
                "leaves at one depth"
            );
            for key in Shape::<K, V>::leaf_keys(node) {
                if let Some(last) = last {
                    assert!(*last < key, "keys ascending: {key:?} after {last:?}");
                }
                assert!(
                    low.is_none_or(|low| low <= key),
                    "{key:?} under its separator"
                );
                assert!(
                    high.is_none_or(|high| key < high),
                    "{key:?} past its separator"
                );
                *last = Some(key);
            }
            *count += len;
        } else {
            assert!(len <= Shape::<K, V>::BRANCH_CAP);
            let keys = Shape::<K, V>::branch_keys(node);
            for (i, &kid) in Shape::<K, V>::kids(node).iter().enumerate() {
                let kid_low = if i == 0 { low } else { Some(&keys[i - 1]) };
                let kid_high = if i == len - 1 { high } else { Some(&keys[i]) };
                check_node::<K, V>(
                    kid,
                    depth + 1,
                    (kid_low, kid_high),
                    generation,
                    leaf_depth,
                    count,
                    last,
                );
            }
        }
    }
}

/// The least key under `node`.
///
/// # Safety
/// `node` is a live node with entries.
unsafe fn least_key<'a, K, V>(mut node: Node) -> &'a K {
    unsafe {
        while !Shape::<K, V>::is_leaf(node) {
            node = Shape::<K, V>::kid(node, 0);
        }
        &Shape::<K, V>::leaf_keys(node)[0]
    }
}

/// Where a walk starts: the first entry, or the first at or after a key, or after it.
enum Low<'a, K> {
    First,
    AtOrAfter(&'a K),
    After(&'a K),
}

fn as_low<K>(bound: &Bound<K>) -> Low<'_, K> {
    match bound {
        Bound::Included(key) => Low::AtOrAfter(key),
        Bound::Excluded(key) => Low::After(key),
        Bound::Unbounded => Low::First,
    }
}

/// A place between entries of a tree: at an entry (the path to it), or past the last
/// (`depth == 0`). Each entry has one place, so two cursors of one tree are equal exactly when
/// they are at the same entry.
struct Cursor<K, V> {
    nodes: [*const Header; DEPTH_MAX],
    at: [u16; DEPTH_MAX],
    depth: usize,
    _shape: PhantomData<(K, V)>,
}

impl<K: Ord + 'static, V> Cursor<K, V> {
    fn end() -> Cursor<K, V> {
        Cursor {
            nodes: [ptr::null(); DEPTH_MAX],
            at: [0; DEPTH_MAX],
            depth: 0,
            _shape: PhantomData,
        }
    }

    fn node(&self, level: usize) -> Node {
        NonNull::new(self.nodes[level] as *mut Header).expect("a node on the cursor's path")
    }

    /// Goes down from `node` (at level `depth`) to its first entry, or its last.
    fn descend(&mut self, mut node: Node, last: bool) {
        // SAFETY: `node` is a live node of the tree; leaves and branches are not empty.
        unsafe {
            loop {
                let len = Shape::<K, V>::len(node);
                let i = if last { len - 1 } else { 0 };
                self.nodes[self.depth] = node.as_ptr();
                self.at[self.depth] = i as u16;
                self.depth += 1;
                if Shape::<K, V>::is_leaf(node) {
                    return;
                }
                node = Shape::<K, V>::kid(node, i);
            }
        }
    }

    /// The place of the first entry `low` admits (past the last if none does).
    fn seek(root: Node, low: Low<'_, K>) -> Cursor<K, V> {
        let mut cursor = Cursor::end();
        let key = match low {
            Low::First => {
                cursor.descend(root, false);
                return cursor;
            }
            Low::AtOrAfter(key) | Low::After(key) => key,
        };
        let mut node = root;
        // SAFETY: nodes reachable from `root`.
        unsafe {
            while !Shape::<K, V>::is_leaf(node) {
                let i = Shape::<K, V>::child_for(node, key);
                cursor.nodes[cursor.depth] = node.as_ptr();
                cursor.at[cursor.depth] = i as u16;
                cursor.depth += 1;
                node = Shape::<K, V>::kid(node, i);
            }
            let pos = match (Shape::<K, V>::leaf_search(node, key), low) {
                (Ok(pos), Low::After(_)) => pos + 1,
                (Ok(pos) | Err(pos), _) => pos,
            };
            cursor.nodes[cursor.depth] = node.as_ptr();
            cursor.at[cursor.depth] = pos as u16;
            cursor.depth += 1;
            if pos == Shape::<K, V>::len(node) {
                cursor.at[cursor.depth - 1] -= 1;
                cursor.advance();
            }
        }
        cursor
    }

    /// To the next entry, or past the last.
    fn advance(&mut self) {
        let leaf = self.depth - 1;
        // SAFETY: the cursor's nodes are live nodes of the tree.
        unsafe {
            if (self.at[leaf] as usize) + 1 < Shape::<K, V>::len(self.node(leaf)) {
                self.at[leaf] += 1;
                return;
            }
            for level in (0..leaf).rev() {
                let next = self.at[level] as usize + 1;
                if next < Shape::<K, V>::len(self.node(level)) {
                    self.at[level] = next as u16;
                    self.depth = level + 1;
                    let kid = Shape::<K, V>::kid(self.node(level), next);
                    self.descend(kid, false);
                    return;
                }
            }
        }
        self.depth = 0;
    }

    /// To the entry before, which there must be (past the last: to the last).
    fn retreat(&mut self, root: Node) {
        if self.depth == 0 {
            self.descend(root, true);
            return;
        }
        let leaf = self.depth - 1;
        if self.at[leaf] > 0 {
            self.at[leaf] -= 1;
            return;
        }
        for level in (0..leaf).rev() {
            if self.at[level] > 0 {
                let previous = self.at[level] as usize - 1;
                self.at[level] = previous as u16;
                self.depth = level + 1;
                // SAFETY: a live node of the tree.
                let kid = unsafe { Shape::<K, V>::kid(self.node(level), previous) };
                self.descend(kid, true);
                return;
            }
        }
        unreachable!("a cursor moved back from the first entry");
    }

    fn same_place(&self, other: &Cursor<K, V>) -> bool {
        match (self.depth, other.depth) {
            (0, 0) => true,
            (0, _) | (_, 0) => false,
            (a, b) => self.nodes[a - 1] == other.nodes[b - 1] && self.at[a - 1] == other.at[b - 1],
        }
    }

    /// The entry here.
    ///
    /// # Safety
    /// The cursor is at an entry of a tree that lives for `'a`.
    unsafe fn pair<'a>(&self) -> Pair<'a, K, V> {
        let leaf = self.node(self.depth - 1);
        let i = self.at[self.depth - 1] as usize;
        unsafe {
            (
                &*Shape::<K, V>::leaf_keys_ptr(leaf).add(i),
                &*Shape::<K, V>::values_ptr(leaf).add(i),
            )
        }
    }
}

/// The pairs of a tree within bounds, in key order from either end: from the first place the
/// bounds admit (`front`) to the first past them (`back`), each end stopping where the other is.
pub(crate) struct Range<'a, K: Item + Ord + Debug, V: Item> {
    root: Option<Node>,
    front: Cursor<K, V>,
    back: Cursor<K, V>,
    _tree: PhantomData<&'a Tree<K, V>>,
}

impl<'a, K: Item + Ord + Debug, V: Item> Iterator for Range<'a, K, V> {
    type Item = Pair<'a, K, V>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.front.same_place(&self.back) {
            return None;
        }
        // SAFETY: short of `back`, the front is at an entry of the tree borrowed for 'a.
        let pair = unsafe { self.front.pair() };
        self.front.advance();
        Some(pair)
    }
}

impl<K: Item + Ord + Debug, V: Item> DoubleEndedIterator for Range<'_, K, V> {
    fn next_back(&mut self) -> Option<Self::Item> {
        if self.front.same_place(&self.back) {
            return None;
        }
        self.back
            .retreat(self.root.expect("a range with pairs has a root"));
        // SAFETY: at or past the front, the back is at an entry of the borrowed tree.
        Some(unsafe { self.back.pair() })
    }
}

// SAFETY: a range reads nodes that its borrow of the tree keeps alive and unchanged.
unsafe impl<K: Item + Ord + Debug, V: Item> Send for Range<'_, K, V> {}
unsafe impl<K: Item + Ord + Debug, V: Item> Sync for Range<'_, K, V> {}

/// Every pair of a tree, in key order from either end, counted.
pub(crate) struct Pairs<'a, K: Item + Ord + Debug, V: Item> {
    range: Range<'a, K, V>,
    left: usize,
}

impl<'a, K: Item + Ord + Debug, V: Item> Iterator for Pairs<'a, K, V> {
    type Item = Pair<'a, K, V>;

    fn next(&mut self) -> Option<Self::Item> {
        let pair = self.range.next();
        self.left -= pair.is_some() as usize;
        pair
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl<K: Item + Ord + Debug, V: Item> DoubleEndedIterator for Pairs<'_, K, V> {
    fn next_back(&mut self) -> Option<Self::Item> {
        let pair = self.range.next_back();
        self.left -= pair.is_some() as usize;
        pair
    }
}

impl<K: Item + Ord + Debug, V: Item> ExactSizeIterator for Pairs<'_, K, V> {}

/// Trees move between the owner and the syncer (under the runtime's lock) and snapshots to
/// the HTTP threads.
#[allow(dead_code)]
fn trees_cross_threads() {
    fn send_and_sync<T: Send + Sync>() {}
    send_and_sync::<Tree<u64, u64>>();
}
#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    use std::collections::HashSet;
    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
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

    /// Values alive, by id, for each test that counts them (set `S` of `Counted<S>`): tests
    /// run at once, and each asserts on its own.
    static LIVE: [Mutex<Option<HashSet<u64>>>; 2] = [const { Mutex::new(None) }; 2];
    static NEXT: AtomicU64 = AtomicU64::new(0);

    /// A value each copy of which is known by an id while it lives: a copy dropped twice, or
    /// read after its drop (a snapshot's value the owner let go of too early), fails.
    #[derive(Debug)]
    pub(super) struct Counted<const S: usize> {
        id: u64,
        pub(super) value: u64,
    }

    impl<const S: usize> Counted<S> {
        pub(super) fn new(value: u64) -> Counted<S> {
            let id = NEXT.fetch_add(1, Relaxed);
            LIVE[S].lock().unwrap().get_or_insert_default().insert(id);
            Counted { id, value }
        }

        pub(super) fn get(&self) -> u64 {
            let live = LIVE[S].lock().unwrap_or_else(|p| p.into_inner());
            assert!(
                live.as_ref().is_some_and(|live| live.contains(&self.id)),
                "a value read after it was dropped"
            );
            self.value
        }

        /// Values of set `S` alive now.
        pub(super) fn left() -> usize {
            LIVE[S].lock().unwrap().as_ref().map_or(0, HashSet::len)
        }
    }

    impl<const S: usize> Clone for Counted<S> {
        fn clone(&self) -> Counted<S> {
            Counted::new(self.get())
        }
    }

    impl<const S: usize> Drop for Counted<S> {
        fn drop(&mut self) {
            let mut live = LIVE[S].lock().unwrap_or_else(|p| p.into_inner());
            let removed = live.get_or_insert_default().remove(&self.id);
            assert!(removed, "a value dropped twice");
        }
    }

    /// A live tree and its snapshots against `BTreeMap`s, through enough random inserts,
    /// replacements, updates and removes (in runs of ascending, descending and scattered keys)
    /// to grow the tree four levels deep and empty most of it again: every snapshot keeps the
    /// state it was taken of, the trees keep their invariants, and once everything is dropped
    /// every node made was freed exactly once (the census) and every value dropped once.
    #[test]
    fn a_tree_and_its_snapshots_hold_what_the_model_holds() {
        use std::collections::BTreeMap;
        type Counted = super::tests::Counted<0>;
        let counted = Counted::new;
        // Heap keys (a `String` is 24 bytes): what a key that owns memory does when copied.
        let key = |k: u64| format!("{k:08}");
        let mut rng = StdRng::seed_from_u64(0x9E37_79B9_7F4A_7C15);
        let mut tree = Tree::<String, Counted>::new();
        let census = tree.census();
        let mut model = BTreeMap::new();
        let mut snapshots: Vec<(Tree<String, Counted>, BTreeMap<String, u64>)> = Vec::new();
        for round in 0..400u64 {
            let (start, step, count) = match round % 4 {
                0 => (rng.random_range(0..50_000), 1, 150),
                1 => (rng.random_range(0..50_000) + 1_000, u64::MAX, 150),
                _ => (0, 0, 150),
            };
            for i in 0..count {
                let k = match step {
                    1 => start + i,
                    u64::MAX => start - i,
                    _ => rng.random_range(0..50_000),
                };
                let value = rng.random_range(0..1_000_000);
                match (round / 100, rng.random_range(0..10)) {
                    // Grow in the first half, shrink in the second.
                    (0 | 1, 0..=6) | (2 | 3, 0..=1) => {
                        let old = tree.insert(key(k), counted(value)).map(|c| c.get());
                        assert_eq!(old, model.insert(key(k), value));
                    }
                    (0 | 1, 7) | (2 | 3, 2) => {
                        let got = tree
                            .update(&key(k), |old| counted(old.get() + value))
                            .map(|(old, new)| (old.get(), new.get()));
                        let expected = model.get_mut(&key(k)).map(|stored| {
                            *stored += value;
                            (*stored - value, *stored)
                        });
                        assert_eq!(got, expected);
                    }
                    _ => {
                        let removed = tree.remove(&key(k)).map(|c| c.get());
                        assert_eq!(removed, model.remove(&key(k)));
                    }
                }
            }
            tree.check();
            assert_eq!(tree.len(), model.len());
            if rng.random_range(0..3) == 0 {
                snapshots.push((tree.snapshot(), model.clone()));
            }
            if snapshots.len() > 6 || (rng.random_range(0..4) == 0 && !snapshots.is_empty()) {
                let at = rng.random_range(0..snapshots.len() as u64) as usize;
                let (snapshot, at_model) = snapshots.remove(at);
                snapshot.check();
                let got: Vec<(&String, u64)> = snapshot.iter().map(|(k, v)| (k, v.get())).collect();
                let expected: Vec<(&String, u64)> = at_model.iter().map(|(k, v)| (k, *v)).collect();
                assert_eq!(got, expected, "a snapshot keeps its state");
            }
            let (low, high) = (
                key(rng.random_range(0..50_000)),
                key(rng.random_range(0..50_000)),
            );
            let bounds = (Bound::Included(low.clone()), Bound::Excluded(high.clone()));
            let got: Vec<&String> = tree.range(bounds.clone()).rev().map(|(k, _)| k).collect();
            let expected: Vec<&String> = if low < high {
                model.range(bounds).rev().map(|(k, _)| k).collect()
            } else {
                Vec::new()
            };
            assert_eq!(got, expected, "a range walked backwards");
        }
        let full: Vec<(String, u64)> = model.iter().map(|(k, v)| (k.clone(), *v)).collect();
        let thawed = tree.thawed();
        thawed.check();
        assert_eq!(
            thawed
                .iter()
                .map(|(k, v)| (k.clone(), v.get()))
                .collect::<Vec<_>>(),
            full
        );
        assert!(census.live() > 0 || !cfg!(debug_assertions));
        drop(thawed);
        drop(tree);
        assert!(census.live() > 0 || snapshots.is_empty() || !cfg!(debug_assertions));
        drop(snapshots);
        assert_eq!(census.live(), 0, "every node made was freed once");
        assert_eq!(Counted::left(), 0, "every value dropped once");
    }

    /// Updates of keys one after another in a leaf start at the last update's leaf, and change
    /// only what they would have changed from the root: a snapshot taken between them keeps
    /// its values, an insert or a remove (which move entries) or a snapshot (after which the
    /// leaf is shared) stops the hint until the next update from the root.
    #[test]
    fn updates_in_the_last_updated_leaf_start_there() {
        let mut tree = Tree::<u64, u64>::from_sorted((0..2_000u64).map(|k| (k * 2, 0)));
        let mut model: std::collections::BTreeMap<u64, u64> =
            tree.iter().map(|(k, v)| (*k, *v)).collect();
        let mut hinted = 0;
        let mut snapshots = Vec::new();
        for round in 0..40u64 {
            for k in (round * 50..round * 50 + 40).map(|k| k * 2) {
                hinted += usize::from(tree.hints(&k));
                let got = tree
                    .update(&k, |v| v + round + 1)
                    .map(|(old, new)| (old, *new));
                let stored = model.get_mut(&k).expect("every even key");
                assert_eq!(got, Some((*stored, *stored + round + 1)));
                *stored += round + 1;
                // A key the tree does not hold, inside the hinted leaf: no update.
                assert_eq!(tree.update(&(k + 1), |v| v + 1).map(|(old, _)| old), None);
            }
            match round % 4 {
                0 => snapshots.push((tree.snapshot(), model.clone())),
                1 => {
                    tree.insert(round * 100 + 1, 7);
                    model.insert(round * 100 + 1, 7);
                    // (The leaves of `from_sorted` are full: this insert splits one.)
                    assert!(!tree.hints(&(round * 100 + 2)), "a split moves entries");
                }
                2 => {
                    let k = round * 100 + 4;
                    assert_eq!(tree.remove(&k), model.remove(&k));
                    assert!(!tree.hints(&(k + 2)), "a remove moves entries");
                }
                _ => {}
            }
            tree.check();
        }
        assert!(tree.iter().map(|(k, v)| (*k, *v)).eq(model.into_iter()));
        for (snapshot, at) in snapshots {
            snapshot.check();
            assert!(
                snapshot.iter().map(|(k, v)| (*k, *v)).eq(at.into_iter()),
                "a snapshot keeps its values"
            );
        }
        // Most of each round's 40 updates follow one in the same leaf.
        assert!(hinted > 40 * 30, "{hinted} updates hinted");
    }

    /// Inserts in order go into the last leaf while it has room, and leave what inserts from
    /// the root leave: the same pairs, full leaves behind the run, and snapshots (taken along
    /// the way, after which the leaf is shared) that keep what they held.
    #[test]
    fn inserts_in_order_go_into_the_last_leaf() {
        let mut tree = Tree::<u64, u64>::new();
        let mut hinted = 0;
        let mut snapshots = Vec::new();
        for k in 0..3_000u64 {
            hinted += usize::from(tree.hints(&k));
            assert_eq!(tree.insert(k, k * 3), None);
            if k % 7 == 0 {
                // A replacement through the hint.
                assert_eq!(tree.insert(k, k * 2), Some(k * 3));
            }
            if k % 400 == 0 {
                snapshots.push((tree.snapshot(), k));
            }
        }
        tree.check();
        let value = |k: u64| if k % 7 == 0 { k * 2 } else { k * 3 };
        assert!(tree
            .iter()
            .map(|(k, v)| (*k, *v))
            .eq((0..3_000).map(|k| (k, value(k)))));
        let (leaves, _) = leaf_fill(&tree);
        assert!(
            leaves <= 3_000usize.div_ceil(Shape::<u64, u64>::LEAF_CAP) + 1,
            "{leaves} leaves"
        );
        for (snapshot, last) in snapshots {
            snapshot.check();
            assert!(
                snapshot
                    .iter()
                    .map(|(k, v)| (*k, *v))
                    .eq((0..=last).map(|k| (k, value(k)))),
                "a snapshot keeps what it held"
            );
        }
        // A leaf holds 15: after each split, one insert from the root, then the rest hinted.
        assert!(hinted > 3_000 * 3 / 4, "{hinted} inserts hinted");
    }

    /// An update of the key last read with `get_remembered` starts at the path the read took,
    /// and changes what an update from the root would: whatever came between the read and the
    /// update (an update of another key, an insert that splits, a remove, a snapshot), against
    /// a model, with snapshots that keep their values.
    #[test]
    fn an_update_of_the_row_just_read_starts_where_the_read_found_it() {
        let mut rng = StdRng::seed_from_u64(7);
        let mut tree = Tree::<u64, u64>::from_sorted((0..5_000u64).map(|k| (k * 3, k)));
        let mut model: std::collections::BTreeMap<u64, u64> =
            tree.iter().map(|(k, v)| (*k, *v)).collect();
        let mut snapshots = Vec::new();
        for step in 0..20_000u64 {
            let k = rng.random_range(0..15_000u64);
            let read = tree.get_remembered(&k).copied();
            assert_eq!(read, model.get(&k).copied());
            let other = rng.random_range(0..15_000u64);
            match rng.random_range(0..6) {
                0 => {
                    let got = tree.update(&other, |v| v + 1).map(|(old, _)| old);
                    assert_eq!(
                        got,
                        model.get_mut(&other).map(|v| std::mem::replace(v, *v + 1))
                    );
                }
                1 => assert_eq!(tree.insert(other, step), model.insert(other, step)),
                2 => assert_eq!(tree.remove(&other), model.remove(&other)),
                3 if step % 50 == 0 => snapshots.push((tree.snapshot(), model.clone())),
                _ => {}
            }
            let got = tree.update(&k, |v| v * 2).map(|(old, new)| (old, *new));
            let expected = model.get_mut(&k).map(|v| {
                *v *= 2;
                (*v / 2, *v)
            });
            assert_eq!(got, expected, "key {k} at step {step}");
        }
        tree.check();
        assert!(tree.iter().map(|(k, v)| (*k, *v)).eq(model.into_iter()));
        for (snapshot, at) in snapshots {
            snapshot.check();
            assert!(
                snapshot.iter().map(|(k, v)| (*k, *v)).eq(at.into_iter()),
                "a snapshot keeps its values"
            );
        }
    }

    /// A tree built from sorted pairs is the tree those pairs inserted one by one make, its
    /// leaves full; an insert past the end of a full leaf leaves it full.
    #[test]
    fn sorted_pairs_and_appends_fill_the_leaves() {
        let cap = Shape::<u64, u64>::LEAF_CAP;
        for n in [0, 1, cap - 1, cap, cap + 1, 5_000] {
            let built = Tree::<u64, u64>::from_sorted((0..n as u64).map(|k| (k, k * 2)));
            built.check();
            let mut inserted = Tree::<u64, u64>::new();
            for k in 0..n as u64 {
                inserted.insert(k, k * 2);
            }
            inserted.check();
            assert!(built.iter().eq(inserted.iter()), "{n} pairs");
            for tree in [&built, &inserted] {
                let (leaves, _) = leaf_fill(tree);
                assert_eq!(leaves, n.div_ceil(cap), "{n} pairs in full leaves");
            }
        }
    }

    /// Keys in reverse order fill their leaves as keys in order do, wherever the run starts:
    /// just past the end of a full leaf (rows appended, or built from sorted rows as recovery
    /// builds them), or just before its last entry. Each key made a leaf of its own (or of two)
    /// when a full leaf met a key at its end and always kept its entries (found by review).
    #[test]
    fn a_reverse_run_fills_its_leaves_wherever_it_starts() {
        let cap = Shape::<u64, u64>::LEAF_CAP as u64;
        let n = 10 * cap;
        for built in [false, true] {
            let mut tree = match built {
                true => Tree::from_sorted((0..n).map(|k| (k, k))),
                false => {
                    let mut tree = Tree::new();
                    (0..n).for_each(|k| {
                        tree.insert(k, k);
                    });
                    tree
                }
            };
            let (before, _) = leaf_fill(&tree);
            for k in (n..2 * n).rev() {
                tree.insert(k, k);
            }
            tree.check();
            let (after, entries) = leaf_fill(&tree);
            assert_eq!(entries, 2 * n as usize);
            assert!(
                (after - before) as u64 <= 2 * n.div_ceil(cap),
                "{n} keys in reverse took {} leaves (cap {cap}, built: {built})",
                after - before
            );
        }
        let mut tree = Tree::from_sorted((0..cap).map(|k| (k * 1000, k)));
        let (before, _) = leaf_fill(&tree);
        let top = (cap - 1) * 1000;
        for k in (top - n..top).rev() {
            tree.insert(k, k);
        }
        tree.check();
        let (after, _) = leaf_fill(&tree);
        assert!(
            (after - before) as u64 <= 2 * n.div_ceil(cap),
            "{n} keys in reverse before a leaf's last entry took {} leaves",
            after - before
        );
    }

    /// Groups each filled newest first (a key of a group, then a time descending), one group
    /// after another: the leaves end at least half full.
    #[test]
    fn groups_filled_newest_first_fill_their_leaves() {
        let mut tree = Tree::<(u64, std::cmp::Reverse<u64>), ()>::new();
        for group in 0..8 {
            for time in 0..1_000 {
                tree.insert((group, std::cmp::Reverse(time)), ());
            }
        }
        tree.check();
        let (leaves, entries) = leaf_fill(&tree);
        let cap = Shape::<(u64, std::cmp::Reverse<u64>), ()>::LEAF_CAP;
        assert!(
            leaves <= 2 * entries.div_ceil(cap),
            "{entries} entries in {leaves} leaves (cap {cap})"
        );
    }

    /// Leaves and entries of a tree.
    #[test]
    fn writers_passing_over_each_others_keys_fill_their_leaves() {
        // The scoreboard's index as `scoreboard-memory` fills it: 8 writers each posting
        // players in order, a player's score its number modulo 100,000, entries ordered by
        // score descending then player.
        let (players, writers, scores) = (100_000u64, 8, 20_000);
        let per = players / writers;
        type Entry = (std::cmp::Reverse<u64>, u64, u64);
        let mut tree = Tree::<Entry, ()>::new();
        let mut rows = Tree::<(u64, u64, u64), u64>::new();
        for k in 0..per {
            for w in 0..writers {
                let p = w * per + k;
                tree.insert((std::cmp::Reverse(p % scores), p, 0), ());
                rows.insert((p, 0, 0), p);
            }
        }
        tree.check();
        let (leaves, entries) = leaf_fill(&tree);
        let cap = Shape::<Entry, ()>::LEAF_CAP;
        // Leaves split as runs go on but never given to a sibling: 0.56 full.
        assert!(
            entries * 10 >= leaves * cap * 8,
            "the index: {entries} entries in {leaves} leaves of {cap}"
        );
        let (leaves, entries) = leaf_fill(&rows);
        let cap = Shape::<(u64, u64, u64), u64>::LEAF_CAP;
        assert!(
            entries * 100 >= leaves * cap * 95,
            "the rows: {entries} entries in {leaves} leaves of {cap}"
        );
    }

    /// Leaves, and entries in them.
    pub(super) fn leaf_fill<K: Item + Ord + Debug, V: Item>(tree: &Tree<K, V>) -> (usize, usize) {
        fn walk<K, V>(node: Node, leaves: &mut usize, entries: &mut usize) {
            unsafe {
                if Shape::<K, V>::is_leaf(node) {
                    *leaves += 1;
                    *entries += Shape::<K, V>::len(node);
                } else {
                    for &kid in Shape::<K, V>::kids(node) {
                        walk::<K, V>(kid, leaves, entries);
                    }
                }
            }
        }
        let (mut leaves, mut entries) = (0, 0);
        if let Some(root) = tree.root_and_len().0 {
            walk::<K, V>(root, &mut leaves, &mut entries);
        }
        (leaves, entries)
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

#[cfg(test)]
#[path = "tree_spill_tests.rs"]
mod spill_tests;
