// The evidence record: signed and verified with the bundle's Ed25519
// tooling, and refused on any changed byte. Its fields are held to
// docs/evidence.md by the e2e test (evidence e2e), on a real record.
#include "evidence/evidence_record.hpp"

#include <catch2/catch.hpp>

#include "gpunode/bundle.hpp"

namespace gpunode {
namespace {

using nlohmann::json;

bundle::KeyPair keys() {
  auto k = bundle::generate_keypair();
  REQUIRE(k);
  return *k;
}

json sample_record() {
  return {{"node", "gpu-a"},
          {"time", "2026-12-07T23:40:00Z"},
          {"proof", {{"state", "recorded"}, {"gpus", json::array()}}}};
}

TEST_CASE("evidence record: signed, it verifies, and its key is named",
          "[evidence]") {
  const auto k = keys();
  auto text = signed_evidence(sample_record(), k.private_pem, k.public_pem);
  REQUIRE(text);
  auto v = verify_evidence(*text);
  REQUIRE(v);
  CHECK(v->record["node"] == "gpu-a");
  CHECK(v->record["schema"] == "gpunode.evidence/v1");
  CHECK(v->public_pem == k.public_pem);
  CHECK(v->fingerprint == bundle::key_fingerprint(k.public_pem));
}

TEST_CASE("evidence record: every changed byte is refused, exit 4",
          "[evidence]") {
  const auto k = keys();
  auto text = signed_evidence(sample_record(), k.private_pem, k.public_pem);
  REQUIRE(text);
  int refused = 0;
  for (std::size_t i = 0; i < text->size(); ++i) {
    std::string bad = *text;
    bad[i] = static_cast<char>(bad[i] ^ 0x01);
    auto v = verify_evidence(bad);
    if (!v) {
      CHECK(v.error().exit == ExitCode::kIntegrity);
      ++refused;
    }
  }
  CHECK(refused == static_cast<int>(text->size()));
  // Pretty-printed (the same JSON), cut short, a byte added: refused too.
  CHECK_FALSE(verify_evidence(json::parse(*text).dump(2) + "\n"));
  CHECK_FALSE(verify_evidence(text->substr(0, text->size() / 2)));
  CHECK_FALSE(verify_evidence(*text + "x"));
  CHECK_FALSE(verify_evidence(""));
}

TEST_CASE("evidence record: another key swapped in is refused", "[evidence]") {
  const auto k = keys(), other = keys();
  auto text = signed_evidence(sample_record(), k.private_pem, k.public_pem);
  REQUIRE(text);
  json file = json::parse(*text);
  file["signature"]["public_key"] = other.public_pem;
  file["signature"]["key_fingerprint"] =
      bundle::key_fingerprint(other.public_pem);
  auto v = verify_evidence(file.dump() + "\n");
  REQUIRE_FALSE(v);
  CHECK(v.error().exit == ExitCode::kIntegrity);
  CHECK_THAT(v.error().message,
             Catch::Contains("the signature does not match the record"));
}

// Regression (independent try of issue 27): fields no signature covers,
// beside the record or inside the signature, were accepted.
TEST_CASE("evidence record: a field the signature does not cover is refused",
          "[evidence]") {
  const auto k = keys();
  auto text = signed_evidence(sample_record(), k.private_pem, k.public_pem);
  REQUIRE(text);
  json beside = json::parse(*text);
  beside["zz"] = "x";
  CHECK_FALSE(verify_evidence(beside.dump() + "\n"));
  json inside = json::parse(*text);
  inside["signature"]["note"] = "x";
  auto v = verify_evidence(inside.dump() + "\n");
  REQUIRE_FALSE(v);
  CHECK(v.error().exit == ExitCode::kIntegrity);
}

}  // namespace
}  // namespace gpunode
