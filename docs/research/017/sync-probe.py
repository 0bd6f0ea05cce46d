"""What one durable append costs on this device without load: pwrite + fdatasync of 1 and 5 KB
into a preallocated, zero-filled file, a flush alone, and direct writes with and without a sync.
Means of 2,000 calls, µs.

    python3 docs/research/017/sync-probe.py DIR_ON_THE_DISK
"""
import mmap
import os
import sys
import time

path = os.path.join(sys.argv[1] if len(sys.argv) > 1 else ".", "sync-probe.bin")
fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
os.ftruncate(fd, 0)
for i in range(0, 64 << 20, 1 << 20):
    os.pwrite(fd, b"\0" * (1 << 20), i)
os.fsync(fd)
buf = b"x" * 4096


def mean(f, n=2000):
    start = time.perf_counter()
    for i in range(n):
        f(i)
    return (time.perf_counter() - start) / n * 1e6


print("pwrite 1 KB + fdatasync       %6.1f" % mean(lambda i: (os.pwrite(fd, buf[:1024], (i * 1024) % (60 << 20)), os.fdatasync(fd))))
print("pwrite 5 KB + fdatasync       %6.1f" % mean(lambda i: (os.pwrite(fd, buf + buf[:1024], (i * 5120) % (60 << 20)), os.fdatasync(fd))))
print("fdatasync, nothing dirty      %6.1f" % mean(lambda i: os.fdatasync(fd)))
aligned = mmap.mmap(-1, 8192)
aligned.write(b"y" * 8192)
page = memoryview(aligned)[:4096]
direct = os.open(path, os.O_RDWR | os.O_DIRECT)
print("O_DIRECT 4 KB pwrite          %6.1f" % mean(lambda i: os.pwritev(direct, [page], (i * 4096) % (60 << 20))))
print("O_DIRECT 4 KB pwrite + sync   %6.1f" % mean(lambda i: (os.pwritev(direct, [page], (i * 4096) % (60 << 20)), os.fdatasync(direct))))
dsync = os.open(path, os.O_RDWR | os.O_DIRECT | os.O_DSYNC)
print("O_DIRECT|O_DSYNC 4 KB pwrite  %6.1f" % mean(lambda i: os.pwritev(dsync, [page], (i * 4096) % (60 << 20))))
os.unlink(path)
