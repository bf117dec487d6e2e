// Ed25519 keys and signatures through OpenSSL's EVP interface. Ed25519 is a
// "one-shot" algorithm: EVP_DigestSign/Verify with a NULL digest, over the
// whole message at once (bundle.toml is small, capped at kMaxManifestBytes).
#include <openssl/err.h>
#include <openssl/pem.h>

#include "gpunode/bundle.hpp"
#include "gpunode/digest.hpp"
#include "gpunode/openssl_handles.hpp"

namespace gpunode::bundle {

namespace {

// OpenSSL's error queue is per thread; drain it into the message so that a
// failure says why, and so that a stale error never leaks into a later call.
std::string openssl_errors() {
  std::string out;
  while (unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out.empty() ? "unknown OpenSSL error" : out;
}

Error sign_error(const std::string& what) {
  return Error{
      ExitCode::kIntegrity, "bundle", what + ": " + openssl_errors(), {}};
}

std::string bio_text(BIO* bio) {
  char* data = nullptr;
  const long len = BIO_get_mem_data(bio, &data);
  return std::string(data, static_cast<std::size_t>(len));
}

// Only Ed25519: a key of another type is refused rather than used, so a
// bundle cannot be "signed" with a weaker algorithm the operator never chose.
Result<EvpPkeyPtr> read_private(const std::string& pem) {
  BioPtr bio = memory_bio(pem);
  if (!bio) return sign_error("cannot read the private key");
  EvpPkeyPtr key(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
  if (!key)
    return Error{
        ExitCode::kUsage, "bundle",
        "the signing key is not a PEM private key (" + openssl_errors() + ")",
        "create one with 'gpunode bundle keygen --out PREFIX'"};
  if (EVP_PKEY_id(key.get()) != EVP_PKEY_ED25519)
    return Error{ExitCode::kUsage, "bundle", "the signing key is not Ed25519",
                 "create one with 'gpunode bundle keygen --out PREFIX'"};
  return key;
}

Result<EvpPkeyPtr> read_public(const std::string& pem) {
  BioPtr bio = memory_bio(pem);
  if (!bio) return sign_error("cannot read the public key");
  EvpPkeyPtr key(PEM_read_bio_PUBKEY(bio.get(), nullptr, nullptr, nullptr));
  if (!key)
    return Error{
        ExitCode::kUsage,
        "bundle",
        "a trusted key is not a PEM public key (" + openssl_errors() + ")",
        {}};
  if (EVP_PKEY_id(key.get()) != EVP_PKEY_ED25519)
    return Error{
        ExitCode::kUsage, "bundle", "a trusted key is not Ed25519", {}};
  return key;
}

}  // namespace

Result<KeyPair> generate_keypair() {
  EvpPkeyCtxPtr ctx(EVP_PKEY_CTX_new_id(EVP_PKEY_ED25519, nullptr));
  if (!ctx || EVP_PKEY_keygen_init(ctx.get()) <= 0)
    return sign_error("cannot set up Ed25519 key generation");
  EVP_PKEY* raw = nullptr;
  if (EVP_PKEY_keygen(ctx.get(), &raw) <= 0)
    return sign_error("cannot generate an Ed25519 key");
  EvpPkeyPtr key(raw);

  KeyPair pair;
  BioPtr priv(BIO_new(BIO_s_mem()));
  BioPtr pub(BIO_new(BIO_s_mem()));
  if (!priv || !pub) return sign_error("cannot allocate a memory BIO");
  // PEM_write_bio_PrivateKey writes PKCS#8 ("BEGIN PRIVATE KEY"), unencrypted:
  // the file's 0600 mode protects it, as with ssh-keygen -N "".
  if (PEM_write_bio_PrivateKey(priv.get(), key.get(), nullptr, nullptr, 0,
                               nullptr, nullptr) != 1)
    return sign_error("cannot encode the private key");
  if (PEM_write_bio_PUBKEY(pub.get(), key.get()) != 1)
    return sign_error("cannot encode the public key");
  pair.private_pem = bio_text(priv.get());
  pair.public_pem = bio_text(pub.get());
  return pair;
}

Result<std::string> sign(const std::string& private_pem,
                         const std::string& data) {
  auto key = read_private(private_pem);
  if (!key) return key.error();
  EvpMdCtxPtr ctx(EVP_MD_CTX_new());
  if (!ctx ||
      EVP_DigestSignInit(ctx.get(), nullptr, nullptr, nullptr, key->get()) != 1)
    return sign_error("cannot start signing");
  std::size_t len = 0;
  const auto* msg = reinterpret_cast<const unsigned char*>(data.data());
  if (EVP_DigestSign(ctx.get(), nullptr, &len, msg, data.size()) != 1)
    return sign_error("cannot size the signature");
  std::string sig(len, '\0');
  if (EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(sig.data()),
                     &len, msg, data.size()) != 1)
    return sign_error("cannot sign");
  sig.resize(len);
  return sig;
}

Result<bool> signature_valid(const std::string& public_pem,
                             const std::string& data,
                             const std::string& signature) {
  auto key = read_public(public_pem);
  if (!key) return key.error();
  EvpMdCtxPtr ctx(EVP_MD_CTX_new());
  if (!ctx || EVP_DigestVerifyInit(ctx.get(), nullptr, nullptr, nullptr,
                                   key->get()) != 1)
    return sign_error("cannot start verifying");
  const int rc = EVP_DigestVerify(
      ctx.get(), reinterpret_cast<const unsigned char*>(signature.data()),
      signature.size(), reinterpret_cast<const unsigned char*>(data.data()),
      data.size());
  // 0 is "does not verify" (also a wrong-length signature); <0 an error. Both
  // mean "not signed by this key"; clear the queue so it does not linger.
  ERR_clear_error();
  return rc == 1;
}

std::string key_fingerprint(const std::string& public_pem) {
  auto key = read_public(public_pem);
  if (!key) return "";
  unsigned char* der = nullptr;
  const int len = i2d_PUBKEY(key->get(), &der);
  if (len <= 0) {
    ERR_clear_error();
    return "";
  }
  std::string bytes(reinterpret_cast<const char*>(der),
                    static_cast<std::size_t>(len));
  OPENSSL_free(der);
  return sha256_hex(bytes);
}

}  // namespace gpunode::bundle
