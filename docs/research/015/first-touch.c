#include <sys/mman.h>
#include <stdio.h>
#include <time.h>
#include <string.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec/1e9;}
int main(int argc,char**argv){
  size_t n=256ul<<20;
  for(int huge=0;huge<2;huge++) for(int r=0;r<3;r++){
    char*p=mmap(0,n,PROT_READ|PROT_WRITE,MAP_PRIVATE|MAP_ANONYMOUS,-1,0);
    if(huge) madvise(p,n,MADV_HUGEPAGE);
    double t=now(); for(size_t i=0;i<n;i+=4096)p[i]=1; double d=now()-t;
    printf("huge=%d round %d: %.1f ms for 256 MiB = %.2f GB/s\n",huge,r,d*1e3,n/d/1e9);
    munmap(p,n);
  }
}
