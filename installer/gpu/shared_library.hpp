// One dlopen'ed library of the NVIDIA driver's user-space part (NVML,
// libcuda). Opened at run time, never linked: gpunode must start on a host
// whose driver is missing or broken, since saying so is its job.
#pragma once

#include <string>

namespace gpunode {

// Owns the dlopen handle, so every early return closes the library.
class SharedLibrary {
 public:
  // `name` is a soname (searched as dlopen does, then in the directories
  // driver packages use) or a path.
  explicit SharedLibrary(const std::string& name);
  ~SharedLibrary();
  SharedLibrary(const SharedLibrary&) = delete;
  SharedLibrary& operator=(const SharedLibrary&) = delete;

  bool loaded() const { return handle_ != nullptr; }
  const std::string& error() const { return error_; }

  // The symbol as a function pointer, or nullptr when the library has none.
  template <typename Fn>
  Fn symbol(const char* name) const {
    // POSIX guarantees that a dlsym result converts to a function pointer.
    return reinterpret_cast<Fn>(raw_symbol(name));
  }

 private:
  void* raw_symbol(const char* name) const;
  void* handle_;
  std::string error_;
};

}  // namespace gpunode
