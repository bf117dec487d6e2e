/* A stand-in libcuda.so.1 for the tests, built by test/CMakeLists.txt into
 * build/test/stub-driver. Its answers are chosen at each call by environment
 * variables, so one process can try every case:
 *
 *   GPUNODE_STUB_CUDA_VERSION=N   cuDriverGetVersion's answer (13000)
 *   GPUNODE_STUB_CUDA_INIT=RC     cuInit's CUresult (802, 803, 804, 100, 999)
 *   GPUNODE_STUB_CUDA_DEVICES=N   cuDeviceGetCount's answer (2)
 *   GPUNODE_STUB_CUDA_NAME=TEXT   cuDeviceGetName's answer
 *                                 ("NVIDIA H200 (fake CUDA)")
 *   GPUNODE_STUB_CUDA_FAIL=CALL:GPU:RC or CALL:RC
 *                                 the call (its exported name, e.g.
 *                                 cuMemcpyDtoH_v2) returns RC on that GPU, or
 *                                 on every GPU (and for the calls before any)
 *   GPUNODE_STUB_CUDA_HANG=CALL   the call sleeps (the probe must kill it)
 *   GPUNODE_STUB_CUDA_CRASH=CALL  the call raises SIGSEGV
 *   GPUNODE_STUB_CUDA_CORRUPT=1   cuMemcpyDtoH_v2 returns other bytes
 *   GPUNODE_STUB_CUDA_HOLDER=FILE cuInit forks a process that inherits every
 *                                 descriptor (the probe's pipe too) and
 *                                 sleeps on, as a driver helper left behind
 *                                 would; its pid is written to FILE
 *   GPUNODE_STUB_CUDA_STDOUT=TEXT the library prints TEXT to stdout when it
 *                                 is loaded and again in cuInit, as a noisy
 *                                 libcuda may
 *
 * Built a second time with -DSTUB_CUDA_WITHOUT_DTOH into
 * build/test/stub-driver-missing/libcuda.so.1, which lacks cuMemcpyDtoH_v2
 * (dlsym cannot be told to miss a symbol).
 *
 * The error names and strings are cuGetErrorName's and cuGetErrorString's
 * (CUDA Driver API reference, "Error Handling"; cuda.h's CUresult). For a
 * code they do not know both return CUDA_ERROR_INVALID_VALUE and leave the
 * answer NULL, as the real ones do. */
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int CUresult;
typedef int CUdevice;
typedef struct CUctx_st* CUcontext;
typedef unsigned long long CUdeviceptr;

/* The GPU the current context belongs to, -1 before any. */
static int current_gpu = -1;

static int env_int(const char* name, int fallback) {
  const char* v = getenv(name);
  return v != NULL && *v != '\0' ? atoi(v) : fallback;
}

static int env_is(const char* name, const char* call) {
  const char* v = getenv(name);
  return v != NULL && strcmp(v, call) == 0;
}

/* GPUNODE_STUB_CUDA_FAIL's CUresult for `call` on `gpu`, else 0. */
static CUresult planned_failure(const char* call, int gpu) {
  const char* v = getenv("GPUNODE_STUB_CUDA_FAIL");
  size_t n = strlen(call);
  if (v == NULL || strncmp(v, call, n) != 0 || v[n] != ':') return 0;
  const char* rest = v + n + 1;
  const char* second = strchr(rest, ':');
  if (second == NULL) return atoi(rest);
  return atoi(rest) == gpu ? atoi(second + 1) : 0;
}

/* Every call starts here: hang, crash or fail when told to. */
static CUresult enter(const char* call, int gpu) {
  if (env_is("GPUNODE_STUB_CUDA_HANG", call)) {
    for (;;) pause();
  }
  if (env_is("GPUNODE_STUB_CUDA_CRASH", call)) raise(SIGSEGV);
  return planned_failure(call, gpu);
}

/* GPUNODE_STUB_CUDA_HOLDER: a child that outlives the call, holding what
 * the caller's process holds open. It sleeps (not pause: a leak must end on
 * its own within a minute even when the probe fails to end it). */
static void leave_holder(void) {
  const char* file = getenv("GPUNODE_STUB_CUDA_HOLDER");
  if (file == NULL || *file == '\0') return;
  const pid_t pid = fork();
  if (pid == 0) {
    sleep(60);
    _exit(0);
  }
  if (pid < 0) return;
  char text[32];
  const int n = snprintf(text, sizeof text, "%d\n", (int)pid);
  const int fd = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd >= 0) {
    if (write(fd, text, (size_t)n) != n) {
      /* the test finds no pid and fails */
    }
    close(fd);
  }
}

/* GPUNODE_STUB_CUDA_STDOUT: a library that talks on stdout, through stdio
 * (flushed) and straight to fd 1. */
static void print_to_stdout(void) {
  const char* text = getenv("GPUNODE_STUB_CUDA_STDOUT");
  if (text == NULL || *text == '\0') return;
  printf("%s\n", text);
  fflush(stdout);
  if (write(1, text, strlen(text)) < 0 || write(1, "\n", 1) < 0) {
    /* nowhere to say it */
  }
}

__attribute__((constructor)) static void on_load(void) { print_to_stdout(); }

/* cuGetErrorName's and cuGetErrorString's answers, one row per CUresult. */
static const struct {
  CUresult code;
  const char* name;
  const char* text;
} kErrors[] = {
    {0, "CUDA_SUCCESS", "no error"},
    {1, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {3, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {46, "CUDA_ERROR_DEVICES_UNAVAILABLE",
     "CUDA-capable device(s) is/are busy or unavailable"},
    {100, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {214, "CUDA_ERROR_ECC_UNCORRECTABLE",
     "uncorrectable ECC error encountered"},
    {802, "CUDA_ERROR_SYSTEM_NOT_READY", "system not yet initialized"},
    {803, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
     "system has unsupported display driver / cuda driver combination"},
    {804, "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
     "forward compatibility was attempted on non supported HW"},
    {999, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

static int error_row(CUresult rc) {
  for (unsigned i = 0; i < sizeof kErrors / sizeof kErrors[0]; ++i)
    if (kErrors[i].code == rc) return (int)i;
  return -1;
}

CUresult cuGetErrorName(CUresult rc, const char** name) {
  const int row = error_row(rc);
  *name = row < 0 ? NULL : kErrors[row].name;
  return row < 0 ? 1 : 0;
}

CUresult cuGetErrorString(CUresult rc, const char** text) {
  const int row = error_row(rc);
  *text = row < 0 ? NULL : kErrors[row].text;
  return row < 0 ? 1 : 0;
}

CUresult cuDriverGetVersion(int* version) {
  CUresult rc = enter("cuDriverGetVersion", -1);
  if (rc == 0) *version = env_int("GPUNODE_STUB_CUDA_VERSION", 13000);
  return rc;
}

CUresult cuInit(unsigned flags) {
  (void)flags;
  CUresult rc = enter("cuInit", -1);
  print_to_stdout();
  leave_holder();
  return rc != 0 ? rc : env_int("GPUNODE_STUB_CUDA_INIT", 0);
}

CUresult cuDeviceGetCount(int* count) {
  CUresult rc = enter("cuDeviceGetCount", -1);
  if (rc == 0) *count = env_int("GPUNODE_STUB_CUDA_DEVICES", 2);
  return rc;
}

CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  CUresult rc = enter("cuDeviceGet", ordinal);
  if (rc == 0) *device = ordinal;
  return rc;
}

CUresult cuDeviceGetName(char* name, int len, CUdevice device) {
  CUresult rc = enter("cuDeviceGetName", device);
  if (rc == 0) {
    const char* v = getenv("GPUNODE_STUB_CUDA_NAME");
    strncpy(name, v != NULL ? v : "NVIDIA H200 (fake CUDA)", (size_t)len);
    name[len - 1] = '\0';
  }
  return rc;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext* ctx, CUdevice device) {
  CUresult rc = enter("cuDevicePrimaryCtxRetain", device);
  if (rc == 0) *ctx = (CUcontext)(intptr_t)(device + 1);
  return rc;
}

CUresult cuCtxSetCurrent(CUcontext ctx) {
  int gpu = (int)(intptr_t)ctx - 1;
  CUresult rc = enter("cuCtxSetCurrent", gpu);
  if (rc == 0) current_gpu = gpu;
  return rc;
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice device) {
  return enter("cuDevicePrimaryCtxRelease_v2", device);
}

CUresult cuMemAlloc_v2(CUdeviceptr* ptr, size_t size) {
  CUresult rc = enter("cuMemAlloc_v2", current_gpu);
  if (rc != 0) return rc;
  void* p = malloc(size);
  if (p == NULL) return 2;
  *ptr = (CUdeviceptr)(uintptr_t)p;
  return 0;
}

CUresult cuMemFree_v2(CUdeviceptr ptr) {
  CUresult rc = enter("cuMemFree_v2", current_gpu);
  if (rc == 0) free((void*)(uintptr_t)ptr);
  return rc;
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void* src, size_t n) {
  CUresult rc = enter("cuMemcpyHtoD_v2", current_gpu);
  if (rc == 0) memcpy((void*)(uintptr_t)dst, src, n);
  return rc;
}

#ifndef STUB_CUDA_WITHOUT_DTOH
CUresult cuMemcpyDtoH_v2(void* dst, CUdeviceptr src, size_t n) {
  CUresult rc = enter("cuMemcpyDtoH_v2", current_gpu);
  if (rc != 0) return rc;
  memcpy(dst, (const void*)(uintptr_t)src, n);
  /* One flipped byte in the middle: the probe must compare all of them. */
  if (env_int("GPUNODE_STUB_CUDA_CORRUPT", 0) != 0 && n > 0) {
    ((unsigned char*)dst)[n / 2] ^= 0x10;
  }
  return 0;
}
#endif
