//! Probe for research note 022 (a copy of research 013's, round 3): one New-Order-like
//! transaction on imbl maps, on the hand-written generational tree and on concread's
//! `BptreeMap`, each with the write set's undo and redo entries, timed with and without a
//! snapshot renewed every 64 calls. Variants 0-17 are 013's, unchanged; 18 and 19 are
//! concread's (see `ConcreadMaps`).
//!
//! Run: `cargo run --release -- [batches] [variants]` (from this directory).

use std::alloc::{GlobalAlloc, Layout};
use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicIsize, Ordering as AtomicOrdering};
use std::sync::Arc;
use std::time::Instant;

use imbl::OrdMap;

mod gentree;
use gentree::{GenTree, RetiredNodes};

// ---------- allocation counter (live bytes), over mimalloc as Pure uses ----------

struct Counting;
static LIVE: AtomicIsize = AtomicIsize::new(0);
static MI: mimalloc::MiMalloc = mimalloc::MiMalloc;

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, AtomicOrdering::Relaxed);
        MI.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, AtomicOrdering::Relaxed);
        MI.dealloc(ptr, layout)
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn live() -> isize {
    LIVE.load(AtomicOrdering::Relaxed)
}

// ---------- keys ----------

trait KeyRep: Ord + Clone + 'static {
    const NAME: &'static str;
    fn of(parts: &[i64]) -> Self;
}

/// Today's key: an enum of up to four inline integers or shared parts (40 bytes).
#[derive(Clone)]
#[allow(dead_code)]
enum EnumKey {
    Ints { len: u8, ints: [i64; 4] },
    Parts(Arc<[i64]>),
}

impl KeyRep for EnumKey {
    const NAME: &'static str = "enum key (40 B)";
    fn of(parts: &[i64]) -> Self {
        let mut ints = [i64::MIN; 4];
        ints[..parts.len()].copy_from_slice(parts);
        EnumKey::Ints {
            len: parts.len() as u8,
            ints,
        }
    }
}

impl Ord for EnumKey {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (EnumKey::Ints { len: a, ints: x }, EnumKey::Ints { len: b, ints: y }) => {
                x.cmp(y).then(a.cmp(b))
            }
            (EnumKey::Parts(a), EnumKey::Parts(b)) => a.cmp(b),
            _ => unreachable!("the probe's keys are inline"),
        }
    }
}
impl PartialOrd for EnumKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl PartialEq for EnumKey {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for EnumKey {}

/// An order-preserving byte encoding of the parts, inline in 24 bytes: 23 bytes of encoding,
/// zero-padded, and the length (0xFF would mark a key kept on the heap). Inline keys compare as
/// three big-endian words.
#[derive(Clone, Copy, Default, Debug)]
struct BytesKey {
    bytes: [u8; 24],
}

/// An integer part: a code byte that orders by sign and length, then the minimal big-endian
/// bytes (one's complement for negatives). Returns the bytes written at `out[at..]`.
fn put_int_part_at(out: &mut [u8], at: usize, v: i64) -> usize {
    let (code, bits, n) = if v >= 0 {
        let n = 8 - (v as u64).leading_zeros() as usize / 8;
        (0x18 + n as u8, v as u64, n)
    } else {
        let m = !(v as u64); // -v - 1
        let n = 8 - m.leading_zeros() as usize / 8;
        (0x17 - n as u8, !m, n)
    };
    out[at] = code;
    out[at + 1..at + 1 + n].copy_from_slice(&bits.to_be_bytes()[8 - n..]);
    1 + n
}

fn put_int_part(out: &mut Vec<u8>, v: i64) {
    let mut buf = [0u8; 9];
    let n = put_int_part_at(&mut buf, 0, v);
    out.extend_from_slice(&buf[..n]);
}

impl KeyRep for BytesKey {
    const NAME: &'static str = "byte key (24 B)";
    fn of(parts: &[i64]) -> Self {
        let mut bytes = [0u8; 24 + 9];
        let mut at = 0;
        for &p in parts {
            at += put_int_part_at(&mut bytes, at, p);
        }
        assert!(at <= 23);
        let mut key = [0u8; 24];
        key[..23].copy_from_slice(&bytes[..23]);
        key[23] = at as u8;
        BytesKey { bytes: key }
    }
}

impl BytesKey {
    fn words(&self) -> (u64, u64, u64) {
        let b = &self.bytes;
        (
            u64::from_be_bytes(b[0..8].try_into().unwrap()),
            u64::from_be_bytes(b[8..16].try_into().unwrap()),
            u64::from_be_bytes(b[16..24].try_into().unwrap()),
        )
    }
}

impl Ord for BytesKey {
    fn cmp(&self, other: &Self) -> Ordering {
        if self.bytes[23] == 0xFF || other.bytes[23] == 0xFF {
            unreachable!("the probe's keys are inline");
        }
        self.words().cmp(&other.words())
    }
}
impl PartialOrd for BytesKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl PartialEq for BytesKey {
    fn eq(&self, other: &Self) -> bool {
        self.bytes == other.bytes
    }
}
impl Eq for BytesKey {}

// ---------- rows ----------

/// A field as a row is built from it.
#[derive(Clone, Copy)]
enum Field<'a> {
    Int(i64),
    Str(&'a str),
}

/// Rows retired since the last snapshot, freed when that snapshot is replaced (rows without a
/// reference count only).
#[derive(Default)]
struct Retired {
    rows: Vec<RawRow>,
}

trait RowRep: Clone + 'static {
    const NAME: &'static str;
    fn build(fields: &[Field]) -> Self;
    fn int(&self, slot: usize) -> i64;
    /// This row with the integer slots of `changes` replaced.
    fn with_ints(&self, changes: &[(usize, i64)]) -> Self;
    /// An order line of four integers and the string in `from`'s slot `slot`.
    fn line(ints: [i64; 4], from: &Self, slot: usize) -> Self;
    /// The map no longer holds this row (replaced or removed, and the transaction kept).
    fn retire(self, _retired: &mut Retired) {}
    fn free_retired(_retired: &mut Retired) {}
}

/// Today's row: a shared vector of 16-byte values, strings shared behind their own pointer.
#[derive(Clone)]
#[allow(dead_code)]
enum Value {
    Unit,
    Int(i64),
    Str(Arc<String>),
}

#[derive(Clone)]
struct VecRow(Arc<Vec<Value>>);

impl RowRep for VecRow {
    const NAME: &'static str = "Arc<Vec<16-byte value>>";
    fn build(fields: &[Field]) -> Self {
        VecRow(Arc::new(
            fields
                .iter()
                .map(|f| match f {
                    Field::Int(i) => Value::Int(*i),
                    Field::Str(s) => Value::Str(Arc::new(s.to_string())),
                })
                .collect(),
        ))
    }
    fn int(&self, slot: usize) -> i64 {
        match &self.0[slot] {
            Value::Int(i) => *i,
            _ => panic!("not an int"),
        }
    }
    fn with_ints(&self, changes: &[(usize, i64)]) -> Self {
        let mut v = (*self.0).clone();
        for &(slot, i) in changes {
            v[slot] = Value::Int(i);
        }
        VecRow(Arc::new(v))
    }
    fn line(ints: [i64; 4], from: &Self, slot: usize) -> Self {
        let mut v: Vec<Value> = ints.iter().map(|&i| Value::Int(i)).collect();
        v.push(from.0[slot].clone());
        v.push(Value::Unit);
        VecRow(Arc::new(v))
    }
}

/// A packed row: `n`, a tag per slot, 8 bytes per slot (the integer, or a string's offset and
/// length), then the strings' bytes.
fn pack(fields: &[Field]) -> Vec<u8> {
    let n = fields.len();
    let head = (1 + n).next_multiple_of(8);
    let strings: usize = fields
        .iter()
        .map(|f| match f {
            Field::Str(s) => s.len(),
            _ => 0,
        })
        .sum();
    let mut out = vec![0u8; head + 8 * n + strings];
    out[0] = n as u8;
    let mut at = head + 8 * n;
    for (i, f) in fields.iter().enumerate() {
        let slot = head + 8 * i;
        match f {
            Field::Int(v) => {
                out[1 + i] = 1;
                out[slot..slot + 8].copy_from_slice(&v.to_le_bytes());
            }
            Field::Str(s) => {
                out[1 + i] = 2;
                out[slot..slot + 4].copy_from_slice(&(at as u32).to_le_bytes());
                out[slot + 4..slot + 8].copy_from_slice(&(s.len() as u32).to_le_bytes());
                out[at..at + s.len()].copy_from_slice(s.as_bytes());
                at += s.len();
            }
        }
    }
    out
}

fn packed_int(bytes: &[u8], slot: usize) -> i64 {
    let head = (1 + bytes[0] as usize).next_multiple_of(8);
    assert_eq!(bytes[1 + slot], 1, "an int");
    let at = head + 8 * slot;
    i64::from_le_bytes(bytes[at..at + 8].try_into().unwrap())
}

fn packed_str(bytes: &[u8], slot: usize) -> &str {
    let head = (1 + bytes[0] as usize).next_multiple_of(8);
    assert_eq!(bytes[1 + slot], 2, "a string");
    let at = head + 8 * slot;
    let off = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
    let len = u32::from_le_bytes(bytes[at + 4..at + 8].try_into().unwrap()) as usize;
    std::str::from_utf8(&bytes[off..off + len]).unwrap()
}

fn packed_with_ints(bytes: &[u8], changes: &[(usize, i64)]) -> Vec<u8> {
    let mut out = bytes.to_vec();
    let head = (1 + bytes[0] as usize).next_multiple_of(8);
    for &(slot, v) in changes {
        assert_eq!(out[1 + slot], 1);
        let at = head + 8 * slot;
        out[at..at + 8].copy_from_slice(&v.to_le_bytes());
    }
    out
}

fn packed_line(ints: [i64; 4], from: &[u8], slot: usize) -> Vec<u8> {
    let s = packed_str(from, slot);
    pack(&[
        Field::Int(ints[0]),
        Field::Int(ints[1]),
        Field::Int(ints[2]),
        Field::Int(ints[3]),
        Field::Str(s),
        Field::Int(0),
    ])
}

/// A packed row behind a reference count.
#[derive(Clone)]
struct ArcPacked(Arc<[u8]>);

impl RowRep for ArcPacked {
    const NAME: &'static str = "Arc<[u8]> packed";
    fn build(fields: &[Field]) -> Self {
        ArcPacked(pack(fields).into())
    }
    fn int(&self, slot: usize) -> i64 {
        packed_int(&self.0, slot)
    }
    fn with_ints(&self, changes: &[(usize, i64)]) -> Self {
        ArcPacked(packed_with_ints(&self.0, changes).into())
    }
    fn line(ints: [i64; 4], from: &Self, slot: usize) -> Self {
        ArcPacked(packed_line(ints, &from.0, slot).into())
    }
}

/// A packed row without a reference count: copying a map node copies the pointer alone. Freed
/// when no snapshot can still hold it (here: when the snapshot taken before it was retired is
/// replaced).
#[derive(Clone, Copy)]
struct RawRow(NonNull<[u8]>);

// SAFETY (probe): rows are immutable once built and freed only after every map that held them
// is gone.
unsafe impl Send for RawRow {}
unsafe impl Sync for RawRow {}

impl Default for RawRow {
    fn default() -> Self {
        RawRow(NonNull::slice_from_raw_parts(NonNull::dangling(), 0))
    }
}

impl RawRow {
    fn bytes(&self) -> &[u8] {
        // SAFETY: see the type.
        unsafe { self.0.as_ref() }
    }
    fn from_vec(v: Vec<u8>) -> RawRow {
        RawRow(NonNull::from(Box::leak(v.into_boxed_slice())))
    }
}

impl RowRep for RawRow {
    const NAME: &'static str = "raw packed, freed per snapshot";
    fn build(fields: &[Field]) -> Self {
        RawRow::from_vec(pack(fields))
    }
    fn int(&self, slot: usize) -> i64 {
        packed_int(self.bytes(), slot)
    }
    fn with_ints(&self, changes: &[(usize, i64)]) -> Self {
        RawRow::from_vec(packed_with_ints(self.bytes(), changes))
    }
    fn line(ints: [i64; 4], from: &Self, slot: usize) -> Self {
        RawRow::from_vec(packed_line(ints, from.bytes(), slot))
    }
    fn retire(self, retired: &mut Retired) {
        retired.rows.push(self);
    }
    fn free_retired(retired: &mut Retired) {
        for row in retired.rows.drain(..) {
            // SAFETY: the row left the live maps, and the snapshot that could hold it is gone.
            drop(unsafe { Box::from_raw(row.0.as_ptr()) });
        }
    }
}

// ---------- the population and the transaction ----------

const ITEMS: i64 = 100_000;
const DISTRICTS: i64 = 10;
const CUSTOMERS: i64 = 3_000;
const ORDERS: i64 = 3_000;
const LINES: i64 = 10;

const WAREHOUSE: usize = 0;
const DISTRICT: usize = 1;
const CUSTOMER: usize = 2;
const ITEM: usize = 3;
const STOCK: usize = 4;
const ORDER: usize = 5;
const NEW_ORDER: usize = 6;
const ORDER_LINE: usize = 7;

/// The tables as the owner holds them, with one snapshot renewed by `snapshot`.
trait MapSet<K, R>: 'static {
    const NAME: &'static str;
    fn new(tables: usize) -> Self;
    fn get(&self, t: usize, k: &K) -> Option<&R>;
    fn insert(&mut self, t: usize, k: K, r: R) -> Option<R>;
    /// Replaces the held snapshot with one of the current state.
    fn snapshot(&mut self);
    /// The load is done (concread commits its load transaction here).
    fn loaded(&mut self) {}
    fn len(&self, t: usize) -> usize;
}

struct ImblMaps<K, R> {
    maps: Vec<OrdMap<K, R>>,
    snapshot: Option<Vec<OrdMap<K, R>>>,
}

impl<K: KeyRep, R: RowRep> MapSet<K, R> for ImblMaps<K, R> {
    const NAME: &'static str = "imbl";
    fn new(tables: usize) -> Self {
        ImblMaps {
            maps: vec![OrdMap::new(); tables],
            snapshot: None,
        }
    }
    fn get(&self, t: usize, k: &K) -> Option<&R> {
        self.maps[t].get(k)
    }
    fn insert(&mut self, t: usize, k: K, r: R) -> Option<R> {
        self.maps[t].insert(k, r)
    }
    fn snapshot(&mut self) {
        self.snapshot = Some(self.maps.clone());
    }
    fn len(&self, t: usize) -> usize {
        self.maps[t].len()
    }
}

struct GenMaps<K, R> {
    trees: Vec<GenTree<K, R>>,
    gen: u64,
    /// The held snapshot's roots would be kept here; what matters to the cost is the new
    /// generation, and that the nodes it retires are freed only when it is replaced.
    retired: RetiredNodes,
}

impl<K: KeyRep + Copy + Default, R: RowRep + Copy + Default> MapSet<K, R> for GenMaps<K, R> {
    const NAME: &'static str = "generational B+tree";
    fn new(tables: usize) -> Self {
        GenMaps {
            trees: (0..tables).map(|_| GenTree::new(0)).collect(),
            gen: 0,
            retired: RetiredNodes::default(),
        }
    }
    fn get(&self, t: usize, k: &K) -> Option<&R> {
        self.trees[t].get(k)
    }
    fn insert(&mut self, t: usize, k: K, r: R) -> Option<R> {
        self.trees[t].insert(k, r, self.gen, &mut self.retired)
    }
    fn snapshot(&mut self) {
        // SAFETY: the previous snapshot is gone; nothing else reaches the retired nodes.
        unsafe { self.retired.free() };
        self.gen += 1;
    }
    fn len(&self, t: usize) -> usize {
        self.trees[t].len()
    }
}

/// Round 3: the tree as it would ship, on counted rows. The tree holds one count per entry for
/// all its versions: a copied leaf copies the row pointers bitwise and touches no row; a row
/// replaced in the live tree goes on the retired list (the caller's undo takes a clone of its
/// own), and the retired counts are dropped when the snapshot that could reach them is gone.
struct GenCounted<K, R, const APPEND: bool> {
    trees: Vec<GenTree<K, Slot>>,
    gen: u64,
    retired: RetiredNodes,
    retired_rows: Vec<R>,
}

/// A pointer-sized row, held bitwise by the tree.
#[derive(Clone, Copy, Default, PartialEq, Debug)]
struct Slot(usize);

fn to_slot<R>(r: R) -> Slot {
    assert_eq!(std::mem::size_of::<R>(), std::mem::size_of::<usize>());
    let r = std::mem::ManuallyDrop::new(r);
    // SAFETY (probe): R is one pointer; the slot owns its count until `from_slot`.
    Slot(unsafe { std::mem::transmute_copy::<R, usize>(&r) })
}

fn from_slot<R>(s: Slot) -> R {
    // SAFETY: `s` came from `to_slot::<R>`, and its count is taken over once.
    unsafe { std::mem::transmute_copy::<usize, R>(&s.0) }
}

impl<K: KeyRep + Copy + Default, R: RowRep, const APPEND: bool> MapSet<K, R>
    for GenCounted<K, R, APPEND>
{
    const NAME: &'static str = if APPEND {
        "generational B+tree, rows counted once, append splits"
    } else {
        "generational B+tree, rows counted once"
    };
    fn new(tables: usize) -> Self {
        GenCounted {
            trees: (0..tables)
                .map(|_| {
                    let mut t = GenTree::new(0);
                    t.append_split = APPEND;
                    t
                })
                .collect(),
            gen: 0,
            retired: RetiredNodes::default(),
            retired_rows: Vec::new(),
        }
    }
    fn get(&self, t: usize, k: &K) -> Option<&R> {
        // SAFETY: a slot has the layout of the one pointer R is.
        self.trees[t]
            .get(k)
            .map(|s| unsafe { &*(s as *const Slot as *const R) })
    }
    fn insert(&mut self, t: usize, k: K, r: R) -> Option<R> {
        let old = self.trees[t].insert(k, to_slot(r), self.gen, &mut self.retired)?;
        let old: R = from_slot(old);
        if self.gen > 0 {
            // A snapshot may reach it; without one, the undo's clone is the last count.
            self.retired_rows.push(old.clone());
        }
        Some(old)
    }
    fn snapshot(&mut self) {
        // SAFETY: the previous snapshot is gone; nothing else reaches the retired nodes.
        unsafe { self.retired.free() };
        self.retired_rows.clear();
        self.gen += 1;
    }
    fn len(&self, t: usize) -> usize {
        self.trees[t].len()
    }
}

/// Round 3: the product's row, a packed row behind triomphe's thin counted pointer (8 bytes).
#[derive(Clone)]
struct ThinRow(triomphe::ThinArc<(), u8>);

impl RowRep for ThinRow {
    const NAME: &'static str = "ThinArc packed (as Pure)";
    fn build(fields: &[Field]) -> Self {
        ThinRow(triomphe::ThinArc::from_header_and_slice((), &pack(fields)))
    }
    fn int(&self, slot: usize) -> i64 {
        packed_int(&self.0.slice, slot)
    }
    fn with_ints(&self, changes: &[(usize, i64)]) -> Self {
        ThinRow(triomphe::ThinArc::from_header_and_slice(
            (),
            &packed_with_ints(&self.0.slice, changes),
        ))
    }
    fn line(ints: [i64; 4], from: &Self, slot: usize) -> Self {
        ThinRow(triomphe::ThinArc::from_header_and_slice(
            (),
            &packed_line(ints, &from.0.slice, slot),
        ))
    }
}

/// Research 022: concread's `BptreeMap`, one per table, as the crate is used. A write
/// transaction per table stays open between snapshots: the owner's calls go through it (nodes it
/// already copied change in place; Pure's undo log aborts a single call). A snapshot commits
/// the writes, replaces the held read transactions (dropping the previous ones lets concread
/// free what only they reached) and opens new write transactions. A node copied from an older
/// transaction clones its keys and rows: every row it holds gets a count.
struct ConcreadMaps<K: KeyRep + std::fmt::Debug + Send + Sync, R: RowRep + Send + Sync> {
    maps: Vec<&'static concread::bptree::BptreeMap<K, R>>,
    writes: Vec<concread::bptree::BptreeMapWriteTxn<'static, K, R>>,
    /// The held snapshot: read transactions, alive until the next snapshot replaces them.
    snapshot: Vec<concread::bptree::BptreeMapReadTxn<'static, K, R>>,
}

impl<K: KeyRep + std::fmt::Debug + Send + Sync, R: RowRep + Send + Sync> ConcreadMaps<K, R> {
    fn commit(&mut self) {
        for w in self.writes.drain(..) {
            w.commit();
        }
    }
    fn open(&mut self) {
        self.writes = self.maps.iter().map(|m| m.write()).collect();
    }
}

impl<K: KeyRep + std::fmt::Debug + Send + Sync, R: RowRep + Send + Sync> MapSet<K, R>
    for ConcreadMaps<K, R>
{
    const NAME: &'static str = "concread BptreeMap";
    fn new(tables: usize) -> Self {
        // The maps live as long as the probe: a write transaction borrows its map.
        let maps: Vec<&'static concread::bptree::BptreeMap<K, R>> = (0..tables)
            .map(|_| &*Box::leak(Box::new(concread::bptree::BptreeMap::new())))
            .collect();
        let mut m = ConcreadMaps {
            maps,
            writes: Vec::new(),
            snapshot: Vec::new(),
        };
        m.open();
        m
    }
    fn get(&self, t: usize, k: &K) -> Option<&R> {
        self.writes[t].get(k)
    }
    fn insert(&mut self, t: usize, k: K, r: R) -> Option<R> {
        self.writes[t].insert(k, r)
    }
    fn snapshot(&mut self) {
        self.commit();
        self.snapshot = self.maps.iter().map(|m| m.read()).collect();
        self.open();
    }
    fn loaded(&mut self) {
        // The load is one transaction, committed; nothing holds it.
        self.commit();
        self.open();
    }
    fn len(&self, t: usize) -> usize {
        self.writes[t].len()
    }
}

struct State<K: KeyRep, R: RowRep, M: MapSet<K, R>> {
    maps: M,
    undo: Vec<(usize, K, Option<R>)>,
    redo: Vec<(usize, K, R)>,
    retired: Retired,
    _marker: std::marker::PhantomData<(K, R)>,
}

const DIST: &str = "dist-info-0123456789ab";

impl<K: KeyRep, R: RowRep, M: MapSet<K, R>> State<K, R, M> {
    fn load() -> Self {
        let mut maps = M::new(8);
        let mut put = |t: usize, k: &[i64], f: &[Field]| {
            maps.insert(t, K::of(k), R::build(f));
        };
        use Field::{Int, Str};
        put(WAREHOUSE, &[1], &[Int(1200), Int(0), Str("warehouse-1")]);
        for d in 1..=DISTRICTS {
            put(
                DISTRICT,
                &[1, d],
                &[Int(800), Int(0), Int(ORDERS + 1), Str("district")],
            );
            for c in 1..=CUSTOMERS {
                put(
                    CUSTOMER,
                    &[1, d, c],
                    &[Int(c % 5000), Str("GC"), Str("BARBARBAR"), Int(-10)],
                );
            }
            for o in 1..=ORDERS {
                put(
                    ORDER,
                    &[1, d, o],
                    &[Int(o % 3000 + 1), Int(0), Int(5), Int(LINES), Int(1)],
                );
                for n in 1..=LINES {
                    put(
                        ORDER_LINE,
                        &[1, d, o, n],
                        &[Int(n * 7), Int(1), Int(5), Int(0), Str(DIST), Int(0)],
                    );
                }
            }
        }
        for i in 1..=ITEMS {
            put(
                ITEM,
                &[i],
                &[
                    Int(100 + i % 9900),
                    Str("item-name-0123456789"),
                    Str("item data item data item data"),
                ],
            );
            let mut s = vec![Int(50), Int(0), Int(0), Int(0)];
            s.extend((0..10).map(|_| Str(DIST)));
            s.push(Str("stock data stock data stock data stock"));
            put(STOCK, &[1, i], &s);
        }
        maps.loaded();
        State {
            maps,
            undo: Vec::new(),
            redo: Vec::new(),
            retired: Retired::default(),
            _marker: std::marker::PhantomData,
        }
    }

    fn get(&self, t: usize, k: &[i64]) -> &R {
        self.maps.get(t, &K::of(k)).expect("loaded")
    }

    fn replace(&mut self, t: usize, k: &[i64], row: R) {
        let key = K::of(k);
        let old = self.maps.insert(t, key.clone(), row.clone());
        assert!(old.is_some());
        self.undo.push((t, key.clone(), old));
        self.redo.push((t, key, row));
    }

    fn insert_new(&mut self, t: usize, k: &[i64], row: R) {
        let key = K::of(k);
        let old = self.maps.insert(t, key.clone(), row.clone());
        assert!(old.is_none(), "new");
        self.undo.push((t, key.clone(), None));
        self.redo.push((t, key, row));
    }

    /// The transaction is kept: replaced rows leave the live state.
    fn commit(&mut self) {
        for (_, _, old) in self.undo.drain(..) {
            if let Some(old) = old {
                old.retire(&mut self.retired);
            }
        }
        self.redo.clear();
    }

    fn take_snapshot(&mut self) {
        self.maps.snapshot();
        // The previous snapshot is gone: what was retired while it was the newest is free.
        R::free_retired(&mut self.retired);
    }

    fn new_order(&mut self, o: &Order) -> i64 {
        let w = 1;
        let tax_w = self.get(WAREHOUSE, &[w]).int(0);
        let district = self.get(DISTRICT, &[w, o.d]).clone();
        let next = district.int(2);
        self.replace(DISTRICT, &[w, o.d], district.with_ints(&[(2, next + 1)]));
        let discount = self.get(CUSTOMER, &[w, o.d, o.c]).int(0);
        use Field::Int;
        let row = R::build(&[Int(o.c), Int(12345), Int(0), Int(10), Int(1)]);
        self.insert_new(ORDER, &[w, o.d, next], row);
        self.insert_new(NEW_ORDER, &[w, o.d, next], R::build(&[]));
        let mut total = 0;
        for n in 0..10 {
            let (i, qty) = (o.items[n], o.qtys[n]);
            let price = self.get(ITEM, &[i]).int(0);
            let stock = self.get(STOCK, &[w, i]).clone();
            let q = stock.int(0);
            let q = if q >= qty + 10 { q - qty } else { q - qty + 91 };
            let changed = stock.with_ints(&[
                (0, q),
                (1, stock.int(1) + qty),
                (2, stock.int(2) + 1),
            ]);
            let amount = qty * price;
            total += amount;
            let line = R::line([i, w, qty, amount], &stock, 4);
            self.replace(STOCK, &[w, i], changed);
            self.insert_new(ORDER_LINE, &[w, o.d, next, n as i64 + 1], line);
        }
        self.commit();
        let tax_d = district.int(0);
        total * (10000 - discount) * (10000 + tax_w + tax_d) / 100_000_000
    }
}

// ---------- the floor ----------

struct FloorStock {
    quantity: i64,
    ytd: i64,
    order_cnt: i64,
    dist: [Arc<str>; 10],
}

struct Floor {
    district: BTreeMap<(i64, i64), (i64, i64)>,
    customer: BTreeMap<(i64, i64, i64), i64>,
    item: BTreeMap<i64, i64>,
    stock: BTreeMap<(i64, i64), FloorStock>,
    orders: BTreeMap<(i64, i64, i64), [i64; 5]>,
    new_orders: BTreeMap<(i64, i64, i64), ()>,
    lines: BTreeMap<(i64, i64, i64, i64), ([i64; 4], Arc<str>)>,
}

impl Floor {
    fn load() -> Floor {
        let dist: Arc<str> = Arc::from(DIST);
        let mut f = Floor {
            district: BTreeMap::new(),
            customer: BTreeMap::new(),
            item: BTreeMap::new(),
            stock: BTreeMap::new(),
            orders: BTreeMap::new(),
            new_orders: BTreeMap::new(),
            lines: BTreeMap::new(),
        };
        for d in 1..=DISTRICTS {
            f.district.insert((1, d), (800, ORDERS + 1));
            for c in 1..=CUSTOMERS {
                f.customer.insert((1, d, c), c % 5000);
            }
            for o in 1..=ORDERS {
                f.orders.insert((1, d, o), [o % 3000 + 1, 0, 5, LINES, 1]);
                for n in 1..=LINES {
                    f.lines
                        .insert((1, d, o, n), ([n * 7, 1, 5, 0], Arc::from(DIST)));
                }
            }
        }
        for i in 1..=ITEMS {
            f.item.insert(i, 100 + i % 9900);
            f.stock.insert(
                (1, i),
                FloorStock {
                    quantity: 50,
                    ytd: 0,
                    order_cnt: 0,
                    dist: std::array::from_fn(|_| Arc::from(&*dist)),
                },
            );
        }
        f
    }

    fn new_order(&mut self, o: &Order) -> i64 {
        let w = 1;
        let district = self.district.get_mut(&(w, o.d)).unwrap();
        let next = district.1;
        district.1 += 1;
        let tax_d = district.0;
        let discount = self.customer[&(w, o.d, o.c)];
        assert!(self
            .orders
            .insert((w, o.d, next), [o.c, 12345, 0, 10, 1])
            .is_none());
        assert!(self.new_orders.insert((w, o.d, next), ()).is_none());
        let mut total = 0;
        for n in 0..10 {
            let (i, qty) = (o.items[n], o.qtys[n]);
            let price = self.item[&i];
            let s = self.stock.get_mut(&(w, i)).unwrap();
            let q = s.quantity;
            s.quantity = if q >= qty + 10 { q - qty } else { q - qty + 91 };
            s.ytd += qty;
            s.order_cnt += 1;
            let amount = qty * price;
            total += amount;
            let line = ([i, w, qty, amount], s.dist[0].clone());
            assert!(self
                .lines
                .insert((w, o.d, next, n as i64 + 1), line)
                .is_none());
        }
        total * (10000 - discount) * (10000 + 1200 + tax_d) / 100_000_000
    }
}

// ---------- driver ----------

struct Order {
    d: i64,
    c: i64,
    items: [i64; 10],
    qtys: [i64; 10],
}

/// xorshift: the same orders for every variant.
struct Rng(u64);
impl Rng {
    fn below(&mut self, n: i64) -> i64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as i64
    }
}

fn orders(count: usize) -> Vec<Order> {
    let mut rng = Rng(42);
    (0..count)
        .map(|_| Order {
            d: 1 + rng.below(DISTRICTS),
            c: 1 + rng.below(CUSTOMERS),
            items: std::array::from_fn(|_| 1 + rng.below(ITEMS)),
            qtys: std::array::from_fn(|_| 1 + rng.below(10)),
        })
        .collect()
}

trait Variant {
    fn name(&self) -> String;
    /// µs per call of `orders`, in one batch.
    fn batch(&mut self, orders: &[Order]) -> f64;
    fn checksum(&self) -> i64;
}

struct Imbl<K: KeyRep, R: RowRep, M: MapSet<K, R>> {
    state: State<K, R, M>,
    snapshots: bool,
    calls: usize,
    sum: i64,
}

impl<K: KeyRep, R: RowRep, M: MapSet<K, R>> Variant for Imbl<K, R, M> {
    fn name(&self) -> String {
        format!(
            "{}, {}, {}{}",
            M::NAME,
            K::NAME,
            R::NAME,
            if self.snapshots {
                ", snapshot every 64"
            } else {
                ""
            }
        )
    }
    fn batch(&mut self, orders: &[Order]) -> f64 {
        let started = Instant::now();
        for o in orders {
            if self.snapshots && self.calls.is_multiple_of(64) {
                self.state.take_snapshot();
            }
            self.sum = self.sum.wrapping_add(self.state.new_order(o));
            if !self.snapshots {
                // Without snapshots nothing can hold a retired row.
                R::free_retired(&mut self.state.retired);
            }
            self.calls += 1;
        }
        started.elapsed().as_secs_f64() * 1e6 / orders.len() as f64
    }
    fn checksum(&self) -> i64 {
        self.sum
    }
}

struct FloorVariant {
    floor: Floor,
    sum: i64,
}

impl Variant for FloorVariant {
    fn name(&self) -> String {
        "floor: std BTreeMap, plain rows in place".into()
    }
    fn batch(&mut self, orders: &[Order]) -> f64 {
        let started = Instant::now();
        for o in orders {
            self.sum = self.sum.wrapping_add(self.floor.new_order(o));
        }
        started.elapsed().as_secs_f64() * 1e6 / orders.len() as f64
    }
    fn checksum(&self) -> i64 {
        self.sum
    }
}

fn imbl<K: KeyRep, R: RowRep>(snapshots: bool) -> Box<dyn Variant> {
    variant::<K, R, ImblMaps<K, R>>(snapshots)
}

fn variant<K: KeyRep, R: RowRep, M: MapSet<K, R>>(snapshots: bool) -> Box<dyn Variant> {
    let before = live();
    let state = State::<K, R, M>::load();
    let bytes = live() - before;
    let rows: usize = (0..8).map(|t| state.maps.len(t)).sum();
    let v = Imbl {
        state,
        snapshots,
        calls: 0,
        sum: 0,
    };
    eprintln!(
        "{}: loaded, {} live bytes in all, {} per row",
        v.name(),
        bytes,
        bytes / rows as isize
    );
    Box::new(v)
}

fn stock_bytes<K: KeyRep, R: RowRep>() -> isize {
    let before = live();
    let mut map: OrdMap<K, R> = OrdMap::new();
    let mut s = vec![Field::Int(50), Field::Int(0), Field::Int(0), Field::Int(0)];
    s.extend((0..10).map(|_| Field::Str(DIST)));
    s.push(Field::Str("stock data stock data stock data stock"));
    for i in 1..=ITEMS {
        map.insert(K::of(&[1, i]), R::build(&s));
    }
    let bytes = live() - before;
    drop(map);
    bytes / ITEMS as isize
}

/// Research 022: live bytes per stock row in one map of any kind, loaded in key order.
fn stock_bytes_in<K: KeyRep, R: RowRep, M: MapSet<K, R>>() -> isize {
    let before = live();
    let mut map = M::new(1);
    let mut s = vec![Field::Int(50), Field::Int(0), Field::Int(0), Field::Int(0)];
    s.extend((0..10).map(|_| Field::Str(DIST)));
    s.push(Field::Str("stock data stock data stock data stock"));
    for i in 1..=ITEMS {
        map.insert(0, K::of(&[1, i]), R::build(&s));
    }
    map.loaded();
    assert_eq!(map.len(0), ITEMS as usize);
    // Not dropped: the trees and concread's maps are leaked by the probe anyway.
    std::mem::forget(map);
    (live() - before) / ITEMS as isize
}

/// Research 022: concread's snapshot (a read transaction) keeps its view while the owner writes,
/// and the write transaction's view matches std's map.
fn check_concread() {
    let mut rng = Rng(11);
    let mut maps = ConcreadMaps::<BytesKey, u64>::new(1);
    let mut model = BTreeMap::new();
    let mut held = BTreeMap::new();
    for step in 0..100_000u64 {
        if step % 64 == 0 {
            for (k, v) in &held {
                assert_eq!(maps.snapshot[0].get(&BytesKey::of(&[*k])), Some(v));
            }
            maps.snapshot();
            held = model.clone();
        }
        let k = if step % 2 == 0 { rng.below(20_000) } else { 20_000 + step as i64 };
        assert_eq!(maps.insert(0, BytesKey::of(&[k]), step), model.insert(k, step));
        let q = rng.below(20_000);
        assert_eq!(maps.get(0, &BytesKey::of(&[q])), model.get(&q));
    }
    assert_eq!(maps.len(0), model.len());
}

impl RowRep for u64 {
    const NAME: &'static str = "u64";
    fn build(_: &[Field]) -> Self {
        0
    }
    fn int(&self, _: usize) -> i64 {
        *self as i64
    }
    fn with_ints(&self, _: &[(usize, i64)]) -> Self {
        *self
    }
    fn line(_: [i64; 4], from: &Self, _: usize) -> Self {
        *from
    }
}

fn checks_and_memory() {
    // The byte key orders as the integer tuples do.
    let mut rng = Rng(7);
    let keys: Vec<Vec<i64>> = (0..2000)
        .map(|_| {
            let n = 1 + rng.below(4) as usize;
            (0..n)
                .map(|_| match rng.below(4) {
                    0 => i64::MIN + rng.below(3),
                    1 => i64::MAX - rng.below(3),
                    2 => rng.below(600) - 300,
                    _ => rng.below(1 << 40) - (1 << 39),
                })
                .collect()
        })
        .collect();
    let encode = |parts: &[i64]| {
        let mut out = Vec::new();
        for &p in parts {
            put_int_part(&mut out, p);
        }
        out
    };
    for a in &keys {
        for b in keys.iter().take(200) {
            assert_eq!(encode(a).cmp(&encode(b)), a.cmp(b), "{a:?} {b:?}");
            if encode(a).len() <= 23 && encode(b).len() <= 23 {
                assert_eq!(BytesKey::of(a).cmp(&BytesKey::of(b)), a.cmp(b));
            }
        }
    }

    // The generational tree against std's map, across generations.
    {
      for append_split in [false, true] {
        let mut tree: GenTree<BytesKey, u64> = GenTree::new(0);
        tree.append_split = append_split;
        let mut model = BTreeMap::new();
        let mut retired = RetiredNodes::default();
        let mut gen = 0;
        for step in 0..200_000u64 {
            if step % 97 == 0 {
                unsafe { retired.free() };
                gen += 1;
            }
            // Half the steps append in order, as orders and order lines are.
            let k = if step % 2 == 0 { rng.below(50_000) } else { 50_000 + step as i64 };
            let key = BytesKey::of(&[k]);
            assert_eq!(tree.insert(key, step, gen, &mut retired), model.insert(k, step));
            let q = rng.below(50_000);
            assert_eq!(tree.get(&BytesKey::of(&[q])), model.get(&q));
        }
        assert_eq!(tree.len(), model.len());
        for (k, v) in &model {
            assert_eq!(tree.get(&BytesKey::of(&[*k])), Some(v));
        }
      }
    }

    println!("live bytes per stock row (100,000 rows, key and map included):");
    println!("  enum key, Arc<Vec<value>>: {}", stock_bytes::<EnumKey, VecRow>());
    println!("  byte key, Arc<Vec<value>>: {}", stock_bytes::<BytesKey, VecRow>());
    println!("  byte key, Arc<[u8]> packed: {}", stock_bytes::<BytesKey, ArcPacked>());
    println!("  byte key, raw packed: {}", stock_bytes::<BytesKey, RawRow>());
    check_concread();
    println!("live bytes per stock row, ThinArc packed (as Pure), loaded in key order:");
    type K = BytesKey;
    type R = ThinRow;
    println!("  imbl: {}", stock_bytes_in::<K, R, ImblMaps<K, R>>());
    println!("  tree, rows counted once: {}", stock_bytes_in::<K, R, GenCounted<K, R, false>>());
    println!(
        "  tree, rows counted once, append splits: {}",
        stock_bytes_in::<K, R, GenCounted<K, R, true>>()
    );
    println!("  concread BptreeMap: {}", stock_bytes_in::<K, R, ConcreadMaps<K, R>>());

}

fn main() {
    let batches: usize = std::env::args()
        .nth(1)
        .map(|s| s.parse().expect("batches"))
        .unwrap_or(15);
    let batch = 500;

    // Checks and the memory figures, unless one variant is picked (for profiling).
    if std::env::args().nth(2).is_none() {
        checks_and_memory();
    }
    type Make = fn() -> Box<dyn Variant>;
    let makers: Vec<Make> = vec![
        || {
            Box::new(FloorVariant {
                floor: Floor::load(),
                sum: 0,
            })
        },
        || imbl::<EnumKey, VecRow>(false),
        || imbl::<EnumKey, VecRow>(true),
        || imbl::<BytesKey, VecRow>(false),
        || imbl::<BytesKey, VecRow>(true),
        || imbl::<BytesKey, ArcPacked>(false),
        || imbl::<BytesKey, ArcPacked>(true),
        || imbl::<BytesKey, RawRow>(false),
        || imbl::<BytesKey, RawRow>(true),
        || imbl::<EnumKey, RawRow>(true),
        || variant::<BytesKey, RawRow, GenMaps<BytesKey, RawRow>>(false),
        || variant::<BytesKey, RawRow, GenMaps<BytesKey, RawRow>>(true),
        // Round 3 (12-17): both on the product's row.
        || imbl::<BytesKey, ThinRow>(false),
        || imbl::<BytesKey, ThinRow>(true),
        || variant::<BytesKey, ThinRow, GenCounted<BytesKey, ThinRow, false>>(false),
        || variant::<BytesKey, ThinRow, GenCounted<BytesKey, ThinRow, false>>(true),
        || variant::<BytesKey, ThinRow, GenCounted<BytesKey, ThinRow, true>>(false),
        || variant::<BytesKey, ThinRow, GenCounted<BytesKey, ThinRow, true>>(true),
        // Research 022 (18, 19): concread's BptreeMap on the product's row.
        || variant::<BytesKey, ThinRow, ConcreadMaps<BytesKey, ThinRow>>(false),
        || variant::<BytesKey, ThinRow, ConcreadMaps<BytesKey, ThinRow>>(true),
    ];
    // A second argument picks variants by index (to profile one alone): "1,3".
    let keep: Vec<usize> = match std::env::args().nth(2) {
        Some(only) => only.split(',').map(|i| i.parse().expect("index")).collect(),
        None => (0..makers.len()).collect(),
    };
    let mut variants: Vec<Box<dyn Variant>> = keep.iter().map(|&i| makers[i]()).collect();
    let orders = orders(batch);
    let mut samples = vec![Vec::new(); variants.len()];
    for round in 0..=batches {
        for (v, s) in variants.iter_mut().zip(&mut samples) {
            let us = v.batch(&orders);
            if round > 0 {
                s.push(us);
            }
        }
    }
    let sum = variants[0].checksum();
    let _ = &sum;
    println!("\n| variant | median µs | min | max |\n|---|---:|---:|---:|");
    for (v, s) in variants.iter().zip(&mut samples) {
        assert_eq!(v.checksum(), sum, "{}: the same answers", v.name());
        s.sort_by(f64::total_cmp);
        println!(
            "| {} | {:.1} | {:.1} | {:.1} |",
            v.name(),
            s[s.len() / 2],
            s[0],
            s[s.len() - 1]
        );
    }
}
