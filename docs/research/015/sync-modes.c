#define _GNU_SOURCE
#include <fcntl.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <string.h>
#include <sys/uio.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec/1e9;}
int main(int c,char**v){ int mode=atoi(v[1]); int N=2000; size_t len=8192;
  int fd=open("/work/kvdisk/synctest",O_RDWR|O_CREAT,0644);
  char*z=calloc(1,1<<20); for(int i=0;i<64;i++) pwrite(fd,z,1<<20,(long)i<<20); fsync(fd); close(fd);
  int flags=O_RDWR; if(mode==2) flags|=O_DIRECT; if(mode==3) flags|=O_DIRECT|O_DSYNC;
  fd=open("/work/kvdisk/synctest",flags);
  char*buf; posix_memalign((void**)&buf,4096,len); memset(buf,'x',len);
  double s=now();
  for(int i=0;i<N;i++){ long off=(long)i*len;
    if(mode==0){pwrite(fd,buf,len,off); fdatasync(fd);}
    else if(mode==1){struct iovec io={buf,len}; if(pwritev2(fd,&io,1,off,RWF_DSYNC)<0){perror("pwritev2");return 1;}}
    else if(mode==2){if(pwrite(fd,buf,len,off)<0){perror("pwrite");return 1;} fdatasync(fd);}
    else {if(pwrite(fd,buf,len,off)<0){perror("pwrite");return 1;}}
  }
  double d=now()-s; printf("mode %d: %.1f us per durable write\n",mode,d/N*1e6); }
