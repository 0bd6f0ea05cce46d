# What a sync of a frame costs the device: frames of about L bytes (uniform in L/2..3L/2),
# each written after the last and synced, through the page cache or as whole 512-byte sectors
# with O_DIRECT. Usage: sectors.py buffered|direct SYNCS L FILE (FILE on the device to measure).
import os, mmap, sys, random, time
def device_of(path):
    st=os.stat(os.path.dirname(os.path.abspath(path)))
    return os.major(st.st_dev), os.minor(st.st_dev)
def dev_bytes(dev):
    for l in open('/proc/diskstats'):
        p=l.split()
        if (int(p[0]),int(p[1]))==dev: return int(p[9])*512
path=sys.argv[4]
dev=device_of(path)
size=64<<20
if not os.path.exists(path) or os.path.getsize(path)!=size:
    with open(path,'wb') as f:
        f.write(b'\0'*size); f.flush(); os.fsync(f.fileno())
mode=sys.argv[1]; n=int(sys.argv[2]); L=int(sys.argv[3])
fd=os.open(path, os.O_RDWR|(os.O_DIRECT if mode=='direct' else 0))
buf=mmap.mmap(-1, 1<<20)
pos=0
b0=dev_bytes(dev); t=time.time()
for i in range(n):
    l=L+random.randint(-L//2,L//2)
    if mode=='direct':
        padded=(l+511)//512*512
        buf[:padded]=os.urandom(l)+b'\0'*(padded-l)
        os.pwritev(fd,[memoryview(buf)[:padded]],pos); pos+=padded
    else:
        os.pwrite(fd, os.urandom(l), pos); pos+=l
    os.fdatasync(fd)
b1=dev_bytes(dev)
print(mode, "syncs",n,"avg frame",L,"device bytes per sync",(b1-b0)/n, "log bytes/sync", pos/n, "s",time.time()-t)
