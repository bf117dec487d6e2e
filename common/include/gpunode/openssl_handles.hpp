// Owning handles for the OpenSSL objects gpunode uses (c_handle.hpp).
#pragma once

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <string>

#include "gpunode/c_handle.hpp"

namespace gpunode {

using EvpMdCtxPtr = CHandle<EVP_MD_CTX, EVP_MD_CTX_free>;
using EvpPkeyPtr = CHandle<EVP_PKEY, EVP_PKEY_free>;
using EvpPkeyCtxPtr = CHandle<EVP_PKEY_CTX, EVP_PKEY_CTX_free>;
using BioPtr = CHandle<BIO, BIO_free>;
using X509Ptr = CHandle<X509, X509_free>;
using SslCtxPtr = CHandle<SSL_CTX, SSL_CTX_free>;
using SslPtr = CHandle<SSL, SSL_free>;

// A read-only BIO over `text`, which must outlive it (PEM parsing).
inline BioPtr memory_bio(const std::string& text) {
  return BioPtr(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
}

}  // namespace gpunode
