#include "gpu/shared_library.hpp"

#include <dlfcn.h>

namespace gpunode {

SharedLibrary::SharedLibrary(const std::string& name)
    : handle_(::dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL)) {
  if (handle_ == nullptr) {
    const char* why = ::dlerror();
    error_ = why != nullptr ? why : "dlopen failed";
  }
  // The portable build runs under its own glibc loader, whose built-in
  // directories are Debian's; where the host's ld.so.cache does not list
  // the driver's library (RHEL puts it in /usr/lib64, run-file installs
  // in /usr/lib), look in the usual places by path.
  if (handle_ == nullptr && name.find('/') == std::string::npos) {
    for (const char* dir : {"/usr/lib64/", "/usr/lib/x86_64-linux-gnu/",
                            "/usr/lib/aarch64-linux-gnu/", "/usr/lib/"}) {
      handle_ = ::dlopen((dir + name).c_str(), RTLD_NOW | RTLD_LOCAL);
      if (handle_ != nullptr) break;
    }
  }
}

SharedLibrary::~SharedLibrary() {
  if (handle_ != nullptr) ::dlclose(handle_);
}

void* SharedLibrary::raw_symbol(const char* name) const {
  return ::dlsym(handle_, name);
}

}  // namespace gpunode
