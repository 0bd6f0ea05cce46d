//! A copy-on-write B+tree without reference counts: each node records the generation that
//! made it; the owner changes nodes of its own generation in place and copies older ones
//! (which a snapshot may share), retiring the original; a snapshot is the roots and a new
//! generation. Retired nodes are freed once no snapshot can reach them (the caller says when).
//! Keys and values are `Copy`: copying a node is a `memcpy`.

use std::alloc::{alloc, dealloc, Layout};
use std::ptr;

pub const B: usize = 16;

#[repr(C)]
struct Header {
    gen: u64,
    /// Keys of a leaf, children of a branch.
    len: u32,
    leaf: bool,
}

#[repr(C)]
struct Leaf<K, V> {
    h: Header,
    keys: [K; B],
    vals: [V; B],
}

#[repr(C)]
struct Branch<K> {
    h: Header,
    /// `keys[i]` is the least key under `kids[i + 1]`.
    keys: [K; B - 1],
    kids: [*mut Header; B],
}

pub struct GenTree<K, V> {
    root: *mut Header,
    len: usize,
    /// Round 3: a full node that an insert would enter at its right end is split there (the
    /// left keeps everything), so keys appended in order fill their nodes.
    pub append_split: bool,
    _marker: std::marker::PhantomData<(K, V)>,
}

/// Nodes no longer in the owner's trees, with their layouts.
#[derive(Default)]
pub struct RetiredNodes {
    nodes: Vec<(*mut u8, Layout)>,
}

impl RetiredNodes {
    /// # Safety
    /// No snapshot that could reach these nodes is alive.
    pub unsafe fn free(&mut self) {
        for (p, layout) in self.nodes.drain(..) {
            dealloc(p, layout);
        }
    }
}

unsafe impl<K: Send, V: Send> Send for GenTree<K, V> {}

impl<K: Copy + Ord + Default, V: Copy + Default> GenTree<K, V> {
    pub fn new(gen: u64) -> Self {
        GenTree {
            root: Self::new_leaf(gen),
            len: 0,
            append_split: false,
            _marker: std::marker::PhantomData,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    fn new_leaf(gen: u64) -> *mut Header {
        unsafe {
            let p = alloc(Layout::new::<Leaf<K, V>>()) as *mut Leaf<K, V>;
            ptr::write(
                p,
                Leaf {
                    h: Header {
                        gen,
                        len: 0,
                        leaf: true,
                    },
                    keys: [K::default(); B],
                    vals: [V::default(); B],
                },
            );
            p as *mut Header
        }
    }

    fn new_branch(gen: u64) -> *mut Header {
        unsafe {
            let p = alloc(Layout::new::<Branch<K>>()) as *mut Branch<K>;
            ptr::write(
                p,
                Branch {
                    h: Header {
                        gen,
                        len: 0,
                        leaf: false,
                    },
                    keys: [K::default(); B - 1],
                    kids: [ptr::null_mut(); B],
                },
            );
            p as *mut Header
        }
    }

    fn layout(node: *mut Header) -> Layout {
        if unsafe { (*node).leaf } {
            Layout::new::<Leaf<K, V>>()
        } else {
            Layout::new::<Branch<K>>()
        }
    }

    /// `node`, or a copy of it in generation `gen` (the original retired).
    fn writable(node: *mut Header, gen: u64, retired: &mut RetiredNodes) -> *mut Header {
        unsafe {
            if (*node).gen == gen {
                return node;
            }
            let layout = Self::layout(node);
            let copy = alloc(layout);
            ptr::copy_nonoverlapping(node as *const u8, copy, layout.size());
            let copy = copy as *mut Header;
            (*copy).gen = gen;
            retired.nodes.push((node as *mut u8, layout));
            copy
        }
    }

    fn upper_bound(keys: &[K], k: &K) -> usize {
        // Keys are few: a linear scan beats a binary search's branches.
        keys.iter().take_while(|x| *x <= k).count()
    }

    pub fn get(&self, k: &K) -> Option<&V> {
        unsafe {
            let mut node = self.root;
            while !(*node).leaf {
                let b = &*(node as *const Branch<K>);
                let n = b.h.len as usize;
                node = b.kids[Self::upper_bound(&b.keys[..n - 1], k)];
            }
            let l = &*(node as *const Leaf<K, V>);
            let n = l.h.len as usize;
            match l.keys[..n].binary_search(k) {
                Ok(i) => Some(&l.vals[i]),
                Err(_) => None,
            }
        }
    }

    /// Splits the full child `i` of the writable branch `parent`.
    unsafe fn split_child(parent: *mut Header, i: usize, gen: u64, k: &K, append_split: bool) {
        let p = &mut *(parent as *mut Branch<K>);
        let child = p.kids[i];
        let (sep, right) = if (*child).leaf {
            let l = &mut *(child as *mut Leaf<K, V>);
            let right = Self::new_leaf(gen);
            let r = &mut *(right as *mut Leaf<K, V>);
            if append_split && l.keys[B - 1] < *k {
                // Appending: the left stays full, the new key starts the right.
                (*k, right)
            } else {
            let half = B / 2;
            r.keys[..B - half].copy_from_slice(&l.keys[half..]);
            r.vals[..B - half].copy_from_slice(&l.vals[half..]);
            r.h.len = (B - half) as u32;
            l.h.len = half as u32;
            (r.keys[0], right)
            }
        } else {
            let l = &mut *(child as *mut Branch<K>);
            let right = Self::new_branch(gen);
            let r = &mut *(right as *mut Branch<K>);
            let half = if append_split && l.keys[B - 2] <= *k {
                B - 1
            } else {
                B / 2
            }; // children kept on the left
            let sep = l.keys[half - 1];
            r.kids[..B - half].copy_from_slice(&l.kids[half..]);
            r.keys[..B - half - 1].copy_from_slice(&l.keys[half..B - 1]);
            r.h.len = (B - half) as u32;
            l.h.len = half as u32;
            (sep, right)
        };
        let n = p.h.len as usize;
        p.kids.copy_within(i + 1..n, i + 2);
        p.kids[i + 1] = right;
        p.keys.copy_within(i..n - 1, i + 1);
        p.keys[i] = sep;
        p.h.len += 1;
    }

    fn full(node: *mut Header) -> bool {
        unsafe { (*node).len as usize == B }
    }

    /// Inserts or replaces; the replaced value is returned.
    pub fn insert(&mut self, k: K, v: V, gen: u64, retired: &mut RetiredNodes) -> Option<V> {
        unsafe {
            self.root = Self::writable(self.root, gen, retired);
            if Self::full(self.root) {
                let root = Self::new_branch(gen);
                let b = &mut *(root as *mut Branch<K>);
                b.kids[0] = self.root;
                b.h.len = 1;
                Self::split_child(root, 0, gen, &k, self.append_split);
                self.root = root;
            }
            let mut node = self.root;
            loop {
                if (*node).leaf {
                    let l = &mut *(node as *mut Leaf<K, V>);
                    let n = l.h.len as usize;
                    return match l.keys[..n].binary_search(&k) {
                        Ok(i) => Some(std::mem::replace(&mut l.vals[i], v)),
                        Err(i) => {
                            l.keys.copy_within(i..n, i + 1);
                            l.vals.copy_within(i..n, i + 1);
                            l.keys[i] = k;
                            l.vals[i] = v;
                            l.h.len += 1;
                            self.len += 1;
                            None
                        }
                    };
                }
                let b = &mut *(node as *mut Branch<K>);
                let n = b.h.len as usize;
                let mut i = Self::upper_bound(&b.keys[..n - 1], &k);
                b.kids[i] = Self::writable(b.kids[i], gen, retired);
                if Self::full(b.kids[i]) {
                    Self::split_child(node, i, gen, &k, self.append_split);
                    if k >= b.keys[i] {
                        i += 1;
                    }
                }
                node = b.kids[i];
            }
        }
    }
}
