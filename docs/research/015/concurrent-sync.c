#define _GNU_SOURCE
#include <pthread.h>
#include <fcntl.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <string.h>
static int fd; static volatile long off=0; static pthread_mutex_t m=PTHREAD_MUTEX_INITIALIZER;
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec/1e9;}
static int N=3000; static long count=0;
void* run(void*a){ char buf[5000]; memset(buf,'x',sizeof buf);
  for(;;){ pthread_mutex_lock(&m); if(count>=N){pthread_mutex_unlock(&m);break;} count++; long o=off; off+=5000; pthread_mutex_unlock(&m);
    pwrite(fd,buf,5000,o); fdatasync(fd);} return 0;}
int main(int c,char**v){ int th=atoi(v[1]); fd=open("/work/kvdisk/synctest",O_RDWR|O_CREAT,0644);
  char*z=calloc(1,1<<20); for(int i=0;i<64;i++) pwrite(fd,z,1<<20,(long)i<<20); fsync(fd);
  pthread_t t[16]; double s=now(); for(int i=0;i<th;i++)pthread_create(&t[i],0,run,0); for(int i=0;i<th;i++)pthread_join(t[i],0);
  double d=now()-s; printf("threads %d: %.1f us per sync (%d syncs)\n",th,d/N*1e6,N); }
