/* A stand-in libnvidia-ml.so.1 for the tests, built by test/CMakeLists.txt
 * into build/test/stub-driver. Its answers are chosen at each call by
 * environment variables, so one process can try every case. With none set
 * it answers as the real H200 of test/fixtures/gpu/h200-580.159.04 did: one
 * GPU at bus 00000000:00:06.0, minor 0, persistence mode on, fabric
 * NOT_SUPPORTED (no NVSwitch), no ECC error, no page retirement
 * (NOT_SUPPORTED), no row remap pending or failed.
 *
 *   GPUNODE_STUB_NVML_INIT=<rc>     nvmlInit_v2 answers this nvmlReturn_t
 *                                   (9 driver not loaded, 18 library and
 *                                   kernel module versions differ)
 *   GPUNODE_STUB_NVML_GPUS=<n>      n GPUs (8 for an HGX board), each with
 *                                   its own bus id (00000000:XX:00.0 with
 *                                   XX = 0x18 + 0x10 * i, as in the derived
 *                                   readings of test/fixtures/gpu/derived),
 *                                   UUID and minor number i
 *   GPUNODE_STUB_NVML_FABRIC=not-supported | not-started | in-progress
 *                           | completed | call-not-supported
 *                                   nvmlDeviceGetGpuFabricInfo's state;
 *                                   not-supported (the default) answers
 *                                   success with NVML_GPU_FABRIC_STATE_
 *                                   NOT_SUPPORTED, as the real H200 PCIe
 *                                   does (h200-580.159.04/nvml-health.txt);
 *                                   call-not-supported answers
 *                                   NVML_ERROR_NOT_SUPPORTED, as a GPU
 *                                   older than Hopper does
 *   GPUNODE_STUB_NVML_FABRIC_STATUS=<rc>
 *                                   the fabric's status once completed
 *                                   (default 0, Success)
 *   GPUNODE_STUB_NVML_ECC=<gpu>:<count> | <gpu>:rc=<rc>
 *                                   volatile uncorrectable ECC errors of GPU
 *                                   <gpu> (the others 0), or the call's
 *                                   nvmlReturn_t for that GPU
 *   GPUNODE_STUB_NVML_ECC_AGGREGATE=<gpu>:<count> | <gpu>:rc=<rc>
 *                                   the same for the aggregate counter
 *   GPUNODE_STUB_NVML_ECC_MODE=<gpu>:off
 *                                   ECC disabled on GPU <gpu> (on elsewhere,
 *                                   as on the real H200)
 *   GPUNODE_STUB_NVML_REMAP=<gpu>:pending | <gpu>:failed
 *                                   nvmlDeviceGetRemappedRows of GPU <gpu>
 *   GPUNODE_STUB_NVML_RETIRED=<gpu> page retirement answers, as on a
 *                                   pre-Ampere GPU: GPU <gpu> has retired
 *                                   pages pending, the others none; unset,
 *                                   it answers NOT_SUPPORTED, as Hopper
 *                                   (row remapping instead) does
 *   GPUNODE_STUB_NVML_PERSISTENCE=off
 *                                   persistence mode disabled on every GPU
 *   GPUNODE_STUB_NVML_OLD=1         the health and fabric calls answer
 *                                   NVML_ERROR_FUNCTION_NOT_FOUND (13), as
 *                                   a driver older than them does
 *
 * Return codes are nvml.h's nvmlReturn_t values; the error strings are the
 * real driver's (h200-580.159.04/nvml-health.txt). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int nvmlReturn_t;
typedef struct {
  unsigned long long total, free, used;
} nvmlMemory_t;
typedef struct {
  char busIdLegacy[16];
  unsigned domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
} nvmlPciInfo_t;
typedef struct {
  unsigned char clusterUuid[16];
  nvmlReturn_t status;
  unsigned cliqueId;
  unsigned char state;
} nvmlGpuFabricInfo_t;

enum {
  kSuccess = 0,
  kInvalidArgument = 2,
  kNotSupported = 3,
  kFunctionNotFound = 13,
  kMaxGpus = 16
};
static int devices[kMaxGpus];

static const char* env(const char* name) {
  const char* v = getenv(name);
  return v != NULL && *v != '\0' ? v : NULL;
}
static unsigned gpu_count(void) {
  const char* v = env("GPUNODE_STUB_NVML_GPUS");
  int n = v != NULL ? atoi(v) : 1;
  return n < 0 ? 0 : n > kMaxGpus ? kMaxGpus : (unsigned)n;
}
static int index_of(void* d) { return (int)((int*)d - devices); }
static int old_driver(void) { return env("GPUNODE_STUB_NVML_OLD") != NULL; }
/* "<gpu>:<value>" naming this GPU: the value after the colon, else NULL. */
static const char* for_gpu(const char* name, void* d) {
  const char* v = env(name);
  if (v == NULL) return NULL;
  char* rest = NULL;
  long gpu = strtol(v, &rest, 10);
  if (rest == v || gpu != index_of(d)) return NULL;
  return *rest == ':' ? rest + 1 : rest;
}

nvmlReturn_t nvmlInit_v2(void) {
  const char* v = env("GPUNODE_STUB_NVML_INIT");
  return v != NULL ? atoi(v) : kSuccess;
}
nvmlReturn_t nvmlShutdown(void) { return kSuccess; }
const char* nvmlErrorString(nvmlReturn_t r) {
  switch (r) {
    case 0:
      return "Success";
    case 3:
      return "Not Supported";
    case 9:
      return "Driver Not Loaded";
    case 13:
      return "Function Not Found";
    case 18:
      return "Driver/library version mismatch";
    default:
      return "Unknown Error";
  }
}
nvmlReturn_t nvmlSystemGetDriverVersion(char* v, unsigned n) {
  snprintf(v, n, "%s", "580.159.04");
  return kSuccess;
}
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned* c) {
  *c = gpu_count();
  return kSuccess;
}
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned i, void** d) {
  if (i >= gpu_count()) return kInvalidArgument;
  *d = &devices[i];
  return kSuccess;
}
nvmlReturn_t nvmlDeviceGetName(void* d, char* s, unsigned n) {
  (void)d;
  snprintf(s, n, "%s", "NVIDIA H200 (fake NVML)");
  return kSuccess;
}
nvmlReturn_t nvmlDeviceGetUUID(void* d, char* s, unsigned n) {
  snprintf(s, n, "GPU-6f9abcd6-2781-31d5-1032-cc2f7821fb%02x",
           0xb8 + index_of(d));
  return kSuccess;
}
nvmlReturn_t nvmlDeviceGetMemoryInfo(void* d, nvmlMemory_t* m) {
  (void)d;
  memset(m, 0, sizeof *m);
  m->total = 143771ULL << 20;
  m->free = m->total;
  return kSuccess;
}
nvmlReturn_t nvmlDeviceGetMigMode(void* d, unsigned* cur, unsigned* pend) {
  (void)d;
  *cur = *pend = 0;
  return kSuccess;
}

/* The health and fabric calls. */
nvmlReturn_t nvmlDeviceGetPciInfo_v3(void* d, nvmlPciInfo_t* p) {
  if (old_driver()) return kFunctionNotFound;
  memset(p, 0, sizeof *p);
  int i = index_of(d);
  /* One GPU: the real reading's bus 0x00, device 0x06. */
  p->bus = gpu_count() == 1 ? 0x00 : 0x18 + 0x10 * (unsigned)i;
  p->device = gpu_count() == 1 ? 0x06 : 0x00;
  snprintf(p->busId, sizeof p->busId, "%08X:%02X:%02X.0", p->domain, p->bus,
           p->device);
  snprintf(p->busIdLegacy, sizeof p->busIdLegacy, "%04X:%02X:%02X.0", p->domain,
           p->bus, p->device);
  return kSuccess;
}
nvmlReturn_t nvmlDeviceGetMinorNumber(void* d, unsigned* minor) {
  if (old_driver()) return kFunctionNotFound;
  *minor = (unsigned)index_of(d);
  return kSuccess;
}
nvmlReturn_t nvmlDeviceGetPersistenceMode(void* d, unsigned* mode) {
  (void)d;
  if (old_driver()) return kFunctionNotFound;
  const char* v = env("GPUNODE_STUB_NVML_PERSISTENCE");
  *mode = v != NULL && strcmp(v, "off") == 0 ? 0 : 1;
  return kSuccess;
}
nvmlReturn_t nvmlDeviceGetGpuFabricInfo(void* d, nvmlGpuFabricInfo_t* f) {
  (void)d;
  if (old_driver()) return kFunctionNotFound;
  const char* v = env("GPUNODE_STUB_NVML_FABRIC");
  if (v != NULL && strcmp(v, "call-not-supported") == 0) return kNotSupported;
  memset(f, 0, sizeof *f);
  if (v == NULL || strcmp(v, "not-supported") == 0)
    f->state = 0;
  else if (strcmp(v, "not-started") == 0)
    f->state = 1;
  else if (strcmp(v, "in-progress") == 0)
    f->state = 2;
  else if (strcmp(v, "completed") == 0)
    f->state = 3;
  else
    f->state = 200; /* a state this stub's caller cannot know */
  if (f->state == 3) {
    const char* status = env("GPUNODE_STUB_NVML_FABRIC_STATUS");
    f->status = status != NULL ? atoi(status) : kSuccess;
    f->cliqueId = 1;
  }
  return kSuccess;
}
nvmlReturn_t nvmlDeviceGetEccMode(void* d, unsigned* current,
                                  unsigned* pending) {
  if (old_driver()) return kFunctionNotFound;
  const char* v = for_gpu("GPUNODE_STUB_NVML_ECC_MODE", d);
  *current = *pending = v != NULL && strcmp(v, "off") == 0 ? 0 : 1;
  return kSuccess;
}
nvmlReturn_t nvmlDeviceGetTotalEccErrors(void* d, int type, int counter,
                                         unsigned long long* count) {
  if (old_driver()) return kFunctionNotFound;
  if (type != 1 || (counter != 0 && counter != 1))
    return kInvalidArgument; /* asked wrong */
  const char* v = for_gpu(counter == 0 ? "GPUNODE_STUB_NVML_ECC"
                                       : "GPUNODE_STUB_NVML_ECC_AGGREGATE",
                          d);
  if (v != NULL && strncmp(v, "rc=", 3) == 0) return atoi(v + 3);
  *count = v != NULL ? strtoull(v, NULL, 10) : 0;
  return kSuccess;
}
nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(void* d,
                                                    unsigned* pending) {
  if (old_driver()) return kFunctionNotFound;
  if (env("GPUNODE_STUB_NVML_RETIRED") == NULL) return kNotSupported;
  *pending = for_gpu("GPUNODE_STUB_NVML_RETIRED", d) != NULL ? 1 : 0;
  return kSuccess;
}
nvmlReturn_t nvmlDeviceGetRemappedRows(void* d, unsigned* corrected,
                                       unsigned* uncorrected, unsigned* pending,
                                       unsigned* failed) {
  if (old_driver()) return kFunctionNotFound;
  const char* v = for_gpu("GPUNODE_STUB_NVML_REMAP", d);
  *corrected = 0;
  *uncorrected = v != NULL ? 1 : 0;
  *pending = v != NULL && strcmp(v, "pending") == 0;
  *failed = v != NULL && strcmp(v, "failed") == 0;
  return kSuccess;
}

/* What the real device plugin v0.19.3 asks besides (test/real): its device
 * discovery (go-nvlib's pkg/nvlib/device, the plugin's internal/rm) and its
 * health check (internal/rm/health.go, which marks a GPU unhealthy when any
 * of these fails). Answers as the H200 reading does: compute capability
 * 9.0 (Hopper), CUDA 13.0 (driver 580), the three event types a datacenter
 * GPU supports, and an event wait that times out (no Xid). */
nvmlReturn_t nvmlSystemGetCudaDriverVersion(int* v) {
  *v = 13000;
  return kSuccess;
}
nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int* v) {
  return nvmlSystemGetCudaDriverVersion(v);
}
nvmlReturn_t nvmlDeviceGetCudaComputeCapability(void* d, int* major,
                                                int* minor) {
  (void)d;
  *major = 9;
  *minor = 0;
  return kSuccess;
}
nvmlReturn_t nvmlDeviceGetHandleByUUID(const char* uuid, void** d) {
  for (unsigned i = 0; i < gpu_count(); ++i) {
    char s[96];
    nvmlDeviceGetUUID(&devices[i], s, sizeof s);
    if (strcmp(s, uuid) == 0) {
      *d = &devices[i];
      return kSuccess;
    }
  }
  return 6; /* NVML_ERROR_NOT_FOUND */
}
nvmlReturn_t nvmlDeviceIsMigDeviceHandle(void* d, unsigned* is_mig) {
  (void)d;
  *is_mig = 0;
  return kSuccess;
}
nvmlReturn_t nvmlDeviceGetIndex(void* d, unsigned* index) {
  *index = (unsigned)index_of(d);
  return kSuccess;
}
static int event_set;
nvmlReturn_t nvmlEventSetCreate(void** set) {
  *set = &event_set;
  return kSuccess;
}
nvmlReturn_t nvmlEventSetFree(void* set) {
  (void)set;
  return kSuccess;
}
nvmlReturn_t nvmlDeviceGetSupportedEventTypes(void* d,
                                              unsigned long long* types) {
  (void)d;
  /* nvml.h: SingleBitEccError 0x1, DoubleBitEccError 0x2, XidCriticalError
   * 0x8 */
  *types = 0x1 | 0x2 | 0x8;
  return kSuccess;
}
nvmlReturn_t nvmlDeviceRegisterEvents(void* d, unsigned long long types,
                                      void* set) {
  (void)d;
  (void)types;
  (void)set;
  return kSuccess;
}
nvmlReturn_t nvmlEventSetWait_v2(void* set, void* data, unsigned timeout_ms) {
  (void)set;
  (void)data;
  struct timespec ts = {timeout_ms / 1000,
                        (long)(timeout_ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
  return 10; /* NVML_ERROR_TIMEOUT */
}
nvmlReturn_t nvmlEventSetWait(void* set, void* data, unsigned timeout_ms) {
  return nvmlEventSetWait_v2(set, data, timeout_ms);
}

/* The device plugin's GetPreferredAllocation (go-gpuallocator v0.6.0,
 * internal/links/device.go) reads how GPUs are linked: the H200 PCIe card
 * has no NVLink (NOT_SUPPORTED, as NVML answers for a GPU without links),
 * and two cards share a NUMA node (NVML_TOPOLOGY_NODE, 40). */
nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(void* a, void* b, int* level) {
  *level = a == b ? 0 /* NVML_TOPOLOGY_INTERNAL */ : 40;
  return kSuccess;
}
nvmlReturn_t nvmlDeviceGetNvLinkState(void* d, unsigned link, int* active) {
  (void)d;
  (void)link;
  (void)active;
  return kNotSupported;
}
nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(void* d, unsigned link,
                                                 nvmlPciInfo_t* pci) {
  (void)d;
  (void)link;
  (void)pci;
  return kNotSupported;
}
nvmlReturn_t nvmlDeviceGetP2PStatus(void* a, void* b, int index, int* status) {
  (void)a;
  (void)b;
  (void)index;
  *status = 4; /* NVML_P2P_STATUS_NOT_SUPPORTED */
  return kSuccess;
}
