# The frames of a log: how many, their records, their bytes (padding included), how many are
# compressed, and the sizes of the records of the frames that are not (quantiles).
# Usage: logstat.py DATA_DIR/log
import struct, sys
f = open(sys.argv[1], 'rb').read()
magic = struct.pack('<I', 0x31465250)

def varint(b, p):
    r = 0; s = 0
    while True:
        c = b[p]; p += 1; r |= (c & 0x7f) << s; s += 7
        if c < 0x80: return r, p

frames = records = total = compressed = raw_of_compressed = z_of_compressed = 0
sizes = []
pos = 4096
while True:
    j = f.find(magic, pos)
    if j < 0: break
    flags, = struct.unpack_from('<H', f, j + 6)
    flen, rc = struct.unpack_from('<II', f, j + 8)
    if flen < 56 or flen > 10**7: pos = j + 4; continue
    frames += 1; records += rc; total += flen
    p = j + 56
    if flags & 2:
        raw, p = varint(f, p); z, p = varint(f, p)
        compressed += 1; raw_of_compressed += raw; z_of_compressed += z
    else:
        for _ in range(rc):
            n, p = varint(f, p); sizes.append(n); p += n
    pos = j + flen
print("frames", frames, "records", records, "frame bytes", total,
      "per record %.1f" % (total / records), "records per frame %.2f" % (records / frames))
if compressed:
    print("compressed frames", compressed, "records' bytes %d -> %d (%.3f)" %
          (raw_of_compressed, z_of_compressed, z_of_compressed / raw_of_compressed))
if sizes:
    sizes.sort()
    print("records of uncompressed frames, quantiles:",
          {q: sizes[int(q * len(sizes))] for q in (0.1, 0.3, 0.5, 0.7, 0.9, 0.99)})
