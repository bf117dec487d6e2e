#include "evidence/evidence_record.hpp"

#include "gpunode/base64.hpp"
#include "gpunode/bundle.hpp"

namespace gpunode {

namespace {

using nlohmann::json;

Error refused(const std::string& why) {
  return Error{ExitCode::kIntegrity, "evidence",
               "the evidence record does not verify: " + why,
               "take the record again from the node (gpunode evidence), or "
               "ask who changed it"};
}

}  // namespace

Result<std::string> signed_evidence(json record, const std::string& private_pem,
                                    const std::string& public_pem) {
  record["schema"] = kEvidenceSchema;
  const std::string text = record.dump();
  auto signature = bundle::sign(private_pem, text);
  if (!signature) return signature.error();
  const json file = {{"record", record},
                     {"signature",
                      {{"algorithm", "ed25519"},
                       {"public_key", public_pem},
                       {"key_fingerprint", bundle::key_fingerprint(public_pem)},
                       {"value", encode_base64(*signature)}}}};
  return file.dump() + "\n";
}

Result<VerifiedEvidence> verify_evidence(const std::string& text) {
  const json file = json::parse(text, nullptr, false);
  if (file.is_discarded() || !file.is_object())
    return refused("it is not JSON");
  if (file.dump() + "\n" != text)
    return refused("it is not in the canonical form it was signed in");
  if (!file.contains("record") || !file["record"].is_object() ||
      !file.contains("signature") || !file["signature"].is_object())
    return refused("it lacks its record or its signature");
  if (file.size() != 2 || file["signature"].size() != 4)
    return refused("it holds fields that no signature covers");
  const json& record = file["record"];
  const json& sig = file["signature"];
  if (record.value("schema", "") != kEvidenceSchema)
    return refused("its schema is not " + std::string(kEvidenceSchema));
  if (sig.value("algorithm", "") != "ed25519" || !sig.contains("public_key") ||
      !sig["public_key"].is_string() || !sig.contains("value") ||
      !sig["value"].is_string())
    return refused("its signature is not an Ed25519 one");
  const std::string pem = sig["public_key"].get<std::string>();
  auto raw = decode_base64(sig["value"].get<std::string>());
  if (!raw) return refused("its signature is not base64");
  auto valid = bundle::signature_valid(pem, record.dump(), *raw);
  if (!valid) return refused(valid.error().message);
  if (!*valid) return refused("the signature does not match the record");
  if (sig.value("key_fingerprint", "") != bundle::key_fingerprint(pem))
    return refused("the key fingerprint it names is not its key's");
  return VerifiedEvidence{record, pem, bundle::key_fingerprint(pem)};
}

}  // namespace gpunode
