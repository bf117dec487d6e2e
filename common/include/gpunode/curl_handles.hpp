// Owning handles for libcurl's easy handle and header list (c_handle.hpp).
#pragma once

#include <curl/curl.h>

#include "gpunode/c_handle.hpp"

namespace gpunode {

using CurlPtr = CHandle<CURL, curl_easy_cleanup>;
using CurlSlistPtr = CHandle<curl_slist, curl_slist_free_all>;

}  // namespace gpunode
