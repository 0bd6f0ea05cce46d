//! The allocator for a process that runs the runtime: mimalloc, reached through its plain entry
//! points where they give the alignment asked for.
//!
//! The `mimalloc` crate's global allocator calls mimalloc's aligned entry points for every
//! allocation. Those take a slower path, and when the page of the right size class has no free
//! block they over-allocate by the alignment (`size + align - 1`), which can land a row in the
//! next size class. Every mimalloc block is aligned to at least a machine word (its smallest
//! size class is one word, and every class is a whole number of words), so an alignment of a
//! word or less needs nothing more than `mi_malloc`.
//!
//! mimalloc is built with `no_thp` (the workspace's Cargo.toml): it does not ask the kernel for
//! transparent huge pages, which cost more in fresh zeroed memory than they give back while the
//! state grows (research note 019). `pure-serve` also turns them off for its process.
//!
//! It must not know the runtime: it is a process's allocator, installed by the binaries.

use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_void;

use libmimalloc_sys as mi;

/// Install with `#[global_allocator] static GLOBAL: Allocator = Allocator;`.
pub struct Allocator;

/// The alignment every mimalloc block has.
const WORD: usize = std::mem::size_of::<usize>();

// SAFETY: every pointer returned comes from mimalloc for the layout's size and an alignment at
// least the layout's (plain calls only for alignments of a word or less, see above); mi_free
// and mi_realloc accept pointers from both the plain and the aligned entry points.
unsafe impl GlobalAlloc for Allocator {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: FFI calls with the layout's size and a power-of-two alignment.
        unsafe {
            if layout.align() <= WORD {
                mi::mi_malloc(layout.size()) as *mut u8
            } else {
                mi::mi_malloc_aligned(layout.size(), layout.align()) as *mut u8
            }
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as for `alloc`.
        unsafe {
            if layout.align() <= WORD {
                mi::mi_zalloc(layout.size()) as *mut u8
            } else {
                mi::mi_zalloc_aligned(layout.size(), layout.align()) as *mut u8
            }
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        // SAFETY: `ptr` came from this allocator, hence from mimalloc.
        unsafe { mi::mi_free(ptr as *mut c_void) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr` came from this allocator with `layout`; the new block keeps its
        // alignment as `alloc` would give it.
        unsafe {
            if layout.align() <= WORD {
                mi::mi_realloc(ptr as *mut c_void, new_size) as *mut u8
            } else {
                mi::mi_realloc_aligned(ptr as *mut c_void, new_size, layout.align()) as *mut u8
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every size up to a few pages, at every alignment up to a page: the pointers are aligned,
    /// hold their bytes through a realloc, and free.
    #[test]
    fn blocks_have_the_alignment_asked_for() {
        let a = Allocator;
        for align in [1, 2, 4, 8, 16, 32, 64, 4096] {
            for size in (1..600).chain([1000, 1024, 1500, 4000, 5000, 20_000, 70_000]) {
                let layout = Layout::from_size_align(size, align).expect("valid");
                // SAFETY: a non-zero size; every pointer is freed with its layout.
                unsafe {
                    let p = a.alloc(layout);
                    assert!(!p.is_null());
                    assert_eq!(p as usize % align, 0, "size {size}, align {align}");
                    p.write_bytes(0xA5, size);
                    let q = a.realloc(p, layout, size * 3);
                    assert_eq!(q as usize % align, 0, "realloc: size {size}, align {align}");
                    assert!((0..size).all(|i| *q.add(i) == 0xA5));
                    a.dealloc(q, Layout::from_size_align(size * 3, align).expect("valid"));
                    let z = a.alloc_zeroed(layout);
                    assert_eq!(z as usize % align, 0);
                    assert!((0..size).all(|i| *z.add(i) == 0));
                    a.dealloc(z, layout);
                }
            }
        }
    }
}
