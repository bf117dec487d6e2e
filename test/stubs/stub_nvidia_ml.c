/* A stand-in libnvidia-ml.so.1 for the tests, built by test/CMakeLists.txt
 * into build/test/stub-driver. Its answers are chosen at each call by
 * environment variables (below), so one process can try every case. */
#include <stdio.h>
#include <string.h>

typedef int nvmlReturn_t;
typedef struct {
  unsigned long long total, free, used;
} nvmlMemory_t;
static int device;

nvmlReturn_t nvmlInit_v2(void) { return 0; }
nvmlReturn_t nvmlShutdown(void) { return 0; }
const char* nvmlErrorString(nvmlReturn_t r) {
  return r ? "Unknown Error" : "Success";
}
nvmlReturn_t nvmlSystemGetDriverVersion(char* v, unsigned n) {
  snprintf(v, n, "%s", "580.159.04");
  return 0;
}
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned* c) {
  *c = 1;
  return 0;
}
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned i, void** d) {
  (void)i;
  *d = &device;
  return 0;
}
nvmlReturn_t nvmlDeviceGetName(void* d, char* s, unsigned n) {
  (void)d;
  snprintf(s, n, "%s", "NVIDIA H200 (fake NVML)");
  return 0;
}
nvmlReturn_t nvmlDeviceGetUUID(void* d, char* s, unsigned n) {
  (void)d;
  snprintf(s, n, "%s", "GPU-6f9abcd6-2781-31d5-1032-cc2f7821fbb8");
  return 0;
}
nvmlReturn_t nvmlDeviceGetMemoryInfo(void* d, nvmlMemory_t* m) {
  (void)d;
  memset(m, 0, sizeof *m);
  m->total = 143771ULL << 20;
  m->free = m->total;
  return 0;
}
nvmlReturn_t nvmlDeviceGetMigMode(void* d, unsigned* cur, unsigned* pend) {
  (void)d;
  *cur = *pend = 0;
  return 0;
}
