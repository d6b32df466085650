// Review rev-d15's questions for the driver (driver 580, CUDA 13.0).
// Result (fifteenth session, H200): Q1 cuModuleUnload WAITS for the queued kernel (0.5 s, the
// spin) and the kernel writes 111: no unloaded code runs; a Module drop waits for its own
// queued kernels. Q4: the driver sees one parameter for every separator: its `//` comments,
// like the crate's parser's, end only at \n. Q2/Q3: zero or negative occupancy arguments are
// CUDA_ERROR_INVALID_VALUE (with huge dynamic shared memory: success).
// Q1: does cuModuleUnload of a module whose kernel is still queued (behind a 500 ms spin on a
//     non-blocking stream) wait for it, fail, or unload under it? 64 decoy modules are loaded
//     after the unload; the queued kernel should write 111. (Function::launch keeps its module
//     alive only inside a capture: if the unload neither waits nor fails, a queued kernel runs
//     unloaded code; if it waits, a Module drop waits for that work.)
// Q4: does the driver's PTX reader end a `//` comment at a lone \r, \v or \f (the crate's
//     parser ends it only at \n: it would count fewer parameters than the driver)?
// Q2, Q3: the occupancy calls with zero and negative (as u32 -> i32) arguments.
//   nvcc -O2 -arch=sm_90 probes/module_unload_queued.cu -lcuda -o /tmp/muq && /tmp/muq
#include <cuda.h>
#include <stdio.h>
#include <time.h>
#define C(x) {int r_=x;if(r_)printf("%s -> %d\n",#x,r_);}
double now(){timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
const char*H=".version 8.0\n.target sm_90\n.address_size 64\n";
char b[4096];
CUmodule ld(const char*body){CUmodule m=0;snprintf(b,4096,"%s%s",H,body);int r=cuModuleLoadData(&m,b);if(r)printf("load %d\n",r);return m;}
CUmodule W(int v){char t[512];snprintf(t,512,".visible .entry w(.param .u64 p){.reg .b64 %%a;.reg .b32 %%v;ld.param.u64 %%a,[p];cvta.to.global.u64 %%a,%%a;mov.u32 %%v,%d;st.global.u32 [%%a],%%v;ret;}\n",v);return ld(t);}
int main(){CUdevice d;CUcontext c;C(cuInit(0));C(cuDeviceGet(&d,0));C(cuDevicePrimaryCtxRetain(&c,d));C(cuCtxSetCurrent(c));
CUstream s;C(cuStreamCreate(&s,1));CUdeviceptr p;C(cuMemAlloc(&p,4));C(cuMemsetD32(p,0,1));
CUmodule ms=ld(".visible .entry spin(.param .u64 n){.reg .b64 %a,%b,%d;.reg .pred %p;ld.param.u64 %a,[n];mov.u64 %b,%globaltimer;L:mov.u64 %d,%globaltimer;sub.u64 %d,%d,%b;setp.lt.u64 %p,%d,%a;@%p bra L;ret;}\n");
CUfunction fs,fw;C(cuModuleGetFunction(&fs,ms,"spin"));
CUmodule mw=W(111);C(cuModuleGetFunction(&fw,mw,"w"));
unsigned long long ns=500000000ull;void*a1[]={&ns};void*a2[]={&p};
C(cuLaunchKernel(fs,1,1,1,1,1,1,0,s,a1,0));C(cuLaunchKernel(fw,1,1,1,1,1,1,0,s,a2,0));
double t0=now();int ru=cuModuleUnload(mw);double t1=now();printf("Q1 unload rc %d took %.3f s (spin 0.5 s)\n",ru,t1-t0);
for(int i=0;i<64;i++)W(222+i);
int rs=cuStreamSynchronize(s);unsigned v=0;C(cuMemcpyDtoH(&v,p,4));printf("Q1 sync rc %d value %u (111 expected)\n",rs,v);
const char*vs[]={"\r","\x0b","\x0c","\r\r"};
for(int i=0;i<4;i++){char t[256];snprintf(t,256,".visible .entry k(.param .u64 a // x%s, .param .u64 b\n){ret;}\n",vs[i]);CUmodule m=ld(t);if(!m)continue;CUfunction f;C(cuModuleGetFunction(&f,m,"k"));size_t o,z;int r=cuFuncGetParamInfo(f,1,&o,&z);printf("Q4 sep %d: param 1 rc %d (0: driver sees 2 params)\n",i,r);}
size_t sz=7;int n=7;fflush(stdout);
printf("Q2 avail(0,32) rc %d sz %zu\n",cuOccupancyAvailableDynamicSMemPerBlock(&sz,fs,0,32),sz);fflush(stdout);
printf("Q2 avail(1,0) rc %d sz %zu\n",cuOccupancyAvailableDynamicSMemPerBlock(&sz,fs,1,0),sz);fflush(stdout);
printf("Q2 avail(-1,32) rc %d sz %zu\n",cuOccupancyAvailableDynamicSMemPerBlock(&sz,fs,-1,32),sz);fflush(stdout);
printf("Q2 avail(1,-32) rc %d sz %zu\n",cuOccupancyAvailableDynamicSMemPerBlock(&sz,fs,1,-32),sz);fflush(stdout);
printf("Q3 occ(0) rc %d n %d\n",cuOccupancyMaxActiveBlocksPerMultiprocessor(&n,fs,0,0),n);fflush(stdout);
printf("Q3 occ(-64) rc %d n %d\n",cuOccupancyMaxActiveBlocksPerMultiprocessor(&n,fs,-64,0),n);fflush(stdout);
printf("Q3 occ(32,huge smem) rc %d n %d\n",cuOccupancyMaxActiveBlocksPerMultiprocessor(&n,fs,32,(size_t)1<<40),n);fflush(stdout);
printf("done\n");}
