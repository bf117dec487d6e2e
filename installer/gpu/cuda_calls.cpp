// The few declarations below mirror cuda.h (CUDA Driver API reference);
// they are part of its stable C ABI, and the _v2 names are the symbols the
// header maps the plain names to since CUDA 3.2 (64-bit CUdeviceptr).
#include "gpu/cuda_calls.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <initializer_list>
#include <string>
#include <vector>

#include "gpu/shared_library.hpp"

namespace gpunode::cuda_calls {
namespace {

using CUresult = int;  // a C enum, passed and returned as an int
using CUdevice = int;
struct CUctxOpaque;
using CUcontext = CUctxOpaque*;
using CUdeviceptr = unsigned long long;

// cuDeviceGetName's buffer; device names are far shorter.
constexpr int kNameBuffer = 256;

// Every entry point the probe uses, resolved before the first call so that a
// library lacking some is reported with all of them named.
struct Api {
  CUresult (*get_error_name)(CUresult, const char**) = nullptr;
  CUresult (*get_error_string)(CUresult, const char**) = nullptr;
  CUresult (*driver_get_version)(int*) = nullptr;
  CUresult (*init)(unsigned) = nullptr;
  CUresult (*device_get_count)(int*) = nullptr;
  CUresult (*device_get)(CUdevice*, int) = nullptr;
  CUresult (*device_get_name)(char*, int, CUdevice) = nullptr;
  CUresult (*primary_ctx_retain)(CUcontext*, CUdevice) = nullptr;
  CUresult (*ctx_set_current)(CUcontext) = nullptr;
  CUresult (*primary_ctx_release)(CUdevice) = nullptr;
  CUresult (*mem_alloc)(CUdeviceptr*, std::size_t) = nullptr;
  CUresult (*mem_free)(CUdeviceptr) = nullptr;
  CUresult (*memcpy_htod)(CUdeviceptr, const void*, std::size_t) = nullptr;
  CUresult (*memcpy_dtoh)(void*, CUdeviceptr, std::size_t) = nullptr;
};

class Reporter {
 public:
  explicit Reporter(int fd) : fd_(fd) {}

  void line(std::initializer_list<std::string_view> fields) const {
    std::string text;
    for (std::string_view f : fields) {
      if (!text.empty()) text += '\t';
      text += escape_field(f);
    }
    text += '\n';
    std::string_view left = text;
    while (!left.empty()) {
      const ssize_t n = ::write(fd_, left.data(), left.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) ::_exit(1);  // the parent is gone: nobody to tell
      left.remove_prefix(static_cast<std::size_t>(n));
    }
  }

 private:
  int fd_;
};

template <typename Fn>
void resolve(const SharedLibrary& lib, const char* name, Fn& fn,
             std::string& missing) {
  fn = lib.symbol<Fn>(name);
  if (fn == nullptr)
    missing += (missing.empty() ? "" : ", ") + std::string(name);
}

std::string call_name(const char* call, int gpu) {
  return std::string(call) + " (GPU " + std::to_string(gpu) + ")";
}

class Prober {
 public:
  Prober(const Api& api, const Reporter& out) : api_(api), out_(out) {}

  // Says which call is next, makes it and, when it fails, reports the
  // CUresult with cuGetErrorName's and cuGetErrorString's words and stops:
  // the first failure is the finding, and exit hands every context and
  // allocation back (the kernel driver reclaims a process's on exit).
  template <typename Call>
  void step(const std::string& where, Call call) const {
    out_.line({kAt, where});
    const CUresult rc = call();
    if (rc == 0) return;
    const char* name = nullptr;
    const char* text = nullptr;
    // Both leave the answer NULL for a code they do not know.
    if (api_.get_error_name(rc, &name) != 0) name = nullptr;
    if (api_.get_error_string(rc, &text) != 0) text = nullptr;
    out_.line({kFailed, where, std::to_string(rc), name ? name : "",
               text ? text : ""});
    ::_exit(0);
  }

  void run() const {
    // cuDriverGetVersion needs no cuInit (Driver API reference, "Version
    // Management"), so the version is known even when cuInit fails.
    int version = 0;
    step("cuDriverGetVersion",
         [&] { return api_.driver_get_version(&version); });
    out_.line({kVersion, std::to_string(version)});
    step("cuInit", [&] { return api_.init(0); });
    int count = 0;
    step("cuDeviceGetCount", [&] { return api_.device_get_count(&count); });
    out_.line({kCount, std::to_string(count)});
    for (int i = 0; i < count; ++i) device(i);
    out_.line({kDone});
    // Named, so that a teardown that hangs (a wedged GPU) is not blamed on
    // the last call.
    out_.line({kAt, "process exit (context teardown)"});
  }

 private:
  void device(int i) const {
    CUdevice dev = 0;
    step(call_name("cuDeviceGet", i), [&] { return api_.device_get(&dev, i); });
    char name[kNameBuffer] = {};
    step(call_name("cuDeviceGetName", i),
         [&] { return api_.device_get_name(name, kNameBuffer, dev); });
    name[kNameBuffer - 1] = '\0';
    out_.line({kDevice, std::to_string(i), name});
    // The primary context, not cuCtxCreate: it is the one the CUDA runtime
    // (every CUDA program in the pods) uses, and its entry points kept their
    // ABI, while cuda.h 13.0 turned cuCtxCreate into cuCtxCreate_v4 with a
    // CUctxCreateParams argument.
    CUcontext ctx = nullptr;
    step(call_name("cuDevicePrimaryCtxRetain", i),
         [&] { return api_.primary_ctx_retain(&ctx, dev); });
    step(call_name("cuCtxSetCurrent", i),
         [&] { return api_.ctx_set_current(ctx); });
    CUdeviceptr mem = 0;
    step(call_name("cuMemAlloc", i),
         [&] { return api_.mem_alloc(&mem, kCopyBytes); });
    // A pattern that differs per byte and per GPU, read back into a buffer
    // holding its complement, so a copy that moved nothing cannot pass.
    std::vector<unsigned char> sent(kCopyBytes);
    std::vector<unsigned char> back(kCopyBytes);
    for (std::size_t k = 0; k < kCopyBytes; ++k) {
      sent[k] =
          static_cast<unsigned char>((k * 131 + (k >> 8) + i * 17) & 0xff);
      back[k] = static_cast<unsigned char>(~sent[k]);
    }
    step(call_name("cuMemcpyHtoD", i),
         [&] { return api_.memcpy_htod(mem, sent.data(), kCopyBytes); });
    step(call_name("cuMemcpyDtoH", i),
         [&] { return api_.memcpy_dtoh(back.data(), mem, kCopyBytes); });
    if (back != sent) {
      out_.line({kMismatch, call_name("cuMemcpyDtoH", i)});
      ::_exit(0);
    }
    step(call_name("cuMemFree", i), [&] { return api_.mem_free(mem); });
    step(call_name("cuDevicePrimaryCtxRelease", i),
         [&] { return api_.primary_ctx_release(dev); });
    out_.line({kDeviceOk, std::to_string(i)});
  }

  const Api& api_;
  const Reporter& out_;
};

}  // namespace

void run_and_exit(const std::string& library, int fd) {
  // A crash inside libcuda must end this copy plainly, with its signal for
  // the parent to report, not run the handlers gpunode's parent (or a test
  // framework) installed for itself on a copy of its state.
  for (int sig : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT}) {
    ::signal(sig, SIG_DFL);
  }
  // In a process group of its own (cuda_probe.cpp) it is a background job
  // of gpunode's terminal: a library writing there (stderr, under stty
  // tostop) must not be stopped by SIGTTOU, nor a read hang on SIGTTIN.
  ::signal(SIGTTOU, SIG_IGN);
  ::signal(SIGTTIN, SIG_IGN);
  // gpunode's stdout is the --json stream (or the operator's terminal):
  // nothing libcuda prints, from its constructors on, may land there. The
  // pipe is moved off fd 1 first, in case gpunode was started with stdout
  // closed and the pipe got that number.
  if (fd <= STDERR_FILENO) fd = ::fcntl(fd, F_DUPFD_CLOEXEC, STDERR_FILENO + 1);
  const int null_fd = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (fd < 0 || null_fd < 0 || ::dup2(null_fd, STDOUT_FILENO) < 0) ::_exit(1);
  if (null_fd != STDOUT_FILENO) ::close(null_fd);
  const Reporter out(fd);
  out.line({kAt, "dlopen"});
  const SharedLibrary lib(library);
  if (!lib.loaded()) {
    out.line({kLoadFailed, lib.error()});
    ::_exit(0);
  }
  Api api;
  std::string missing;
  resolve(lib, "cuGetErrorName", api.get_error_name, missing);
  resolve(lib, "cuGetErrorString", api.get_error_string, missing);
  resolve(lib, "cuDriverGetVersion", api.driver_get_version, missing);
  resolve(lib, "cuInit", api.init, missing);
  resolve(lib, "cuDeviceGetCount", api.device_get_count, missing);
  resolve(lib, "cuDeviceGet", api.device_get, missing);
  resolve(lib, "cuDeviceGetName", api.device_get_name, missing);
  resolve(lib, "cuDevicePrimaryCtxRetain", api.primary_ctx_retain, missing);
  resolve(lib, "cuCtxSetCurrent", api.ctx_set_current, missing);
  // _v2 since CUDA 11.0 (cuda.h maps cuDevicePrimaryCtxRelease to it).
  resolve(lib, "cuDevicePrimaryCtxRelease_v2", api.primary_ctx_release,
          missing);
  resolve(lib, "cuMemAlloc_v2", api.mem_alloc, missing);
  resolve(lib, "cuMemFree_v2", api.mem_free, missing);
  resolve(lib, "cuMemcpyHtoD_v2", api.memcpy_htod, missing);
  resolve(lib, "cuMemcpyDtoH_v2", api.memcpy_dtoh, missing);
  if (!missing.empty()) {
    out.line({kMissing, missing});
    ::_exit(0);
  }
  Prober(api, out).run();
  ::_exit(0);
}

std::string escape_field(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string unescape_field(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\\' || i + 1 == text.size()) {
      out += text[i];
      continue;
    }
    const char c = text[++i];
    out += c == 't' ? '\t' : c == 'n' ? '\n' : c;
  }
  return out;
}

std::vector<std::string> split_line(std::string_view line) {
  std::vector<std::string> fields;
  std::size_t start = 0;
  for (;;) {
    const std::size_t tab = line.find('\t', start);
    fields.push_back(unescape_field(line.substr(start, tab - start)));
    if (tab == std::string_view::npos) break;
    start = tab + 1;
  }
  return fields;
}

}  // namespace gpunode::cuda_calls
