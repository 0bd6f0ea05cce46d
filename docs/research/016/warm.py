#!/usr/bin/env python3
"""Touches SIZE MiB of anonymous memory (asking for huge pages, as mimalloc does), then frees it.

On this VM the guest hands free 2 MiB blocks back to the host (virtio-balloon free page
reporting, after a delay of seconds), and the next process to touch them waits while the host
backs them again. A run right after a process that freed much memory finds them still backed;
a run after one that used little (SQLite) does not. Running this just before every run puts
each engine on the same footing.
    warm.py [SIZE_MIB]
"""
import mmap
import sys

size = int(sys.argv[1] if len(sys.argv) > 1 else 1024) << 20
m = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
if hasattr(mmap, "MADV_HUGEPAGE"):
    m.madvise(mmap.MADV_HUGEPAGE)
for at in range(0, size, 4096):
    m[at] = 1
m.close()
