// A stand-in libcuda.so.1 for probes/driver_map.sh: everything resolves to the real driver
// (DT_NEEDED libcuda_real.so), except that cuGetProcAddress hands out, for the synchronize calls,
// a stub returning $SHIM_CODE (when SHIM_ARMED is set). SHIM_LOG=1 prints each lookup.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <stdio.h>
typedef int (*gpa_t)(const char *, void **, int, uint64_t, void *);
static int code(void) { const char *s = getenv("SHIM_CODE"); return s ? atoi(s) : 0; }
static int stub(void) { return code(); }
static int hit(const char *sym) {
    return !strcmp(sym, "cuCtxSynchronize") || !strcmp(sym, "cuStreamSynchronize") ||
           !strcmp(sym, "cuStreamSynchronize_ptsz") || !strcmp(sym, "cuCtxSynchronize_v2");
}
static void *real(const char *n) {
    static void *h;
    if (!h) h = dlopen(getenv("REAL_LIBCUDA"), RTLD_NOW);
    void *f = h ? dlsym(h, n) : 0;
    if (!f) { fprintf(stderr, "shim: no %s\n", n); abort(); }
    return f;
}
int cuGetProcAddress(const char *sym, void **p, int ver, uint64_t flags);
int cuGetProcAddress_v2(const char *sym, void **p, int ver, uint64_t flags, void *status) {
    int r = ((gpa_t)real("cuGetProcAddress_v2"))(sym, p, ver, flags, status);
    if (getenv("SHIM_LOG")) fprintf(stderr, "gpa2 %s %d\n", sym, ver);
    if (r == 0 && !strcmp(sym, "cuGetProcAddress")) *p = (ver >= 12000 ? (void *)cuGetProcAddress_v2 : (void *)cuGetProcAddress);
    if (r == 0 && hit(sym) && getenv("SHIM_ARMED")) *p = (void *)stub;
    return r;
}
typedef int (*gpa1_t)(const char *, void **, int, uint64_t);
int cuGetProcAddress(const char *sym, void **p, int ver, uint64_t flags) {
    int r = ((gpa1_t)real("cuGetProcAddress"))(sym, p, ver, flags);
    if (getenv("SHIM_LOG")) fprintf(stderr, "gpa1 %s %d\n", sym, ver);
    if (r == 0 && hit(sym) && getenv("SHIM_ARMED")) *p = (void *)stub;
    return r;
}
