// The one deleter for C library handles: CHandle<T, fn> is a unique_ptr
// that calls fn(p) when it owns a non-null p. Each library's aliases live
// in a header of their own (openssl_handles.hpp, curl_handles.hpp,
// archive_handles.hpp, unique_fd.hpp), so a file includes only the C
// headers of the libraries it uses.
#pragma once

#include <memory>

namespace gpunode {

template <auto Free>
struct CFree {
  template <typename T>
  void operator()(T* p) const {
    Free(p);  // the status some free functions return says nothing useful
  }
};

template <typename T, auto Free>
using CHandle = std::unique_ptr<T, CFree<Free>>;

}  // namespace gpunode
