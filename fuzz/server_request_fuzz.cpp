// The server's request parsers (src/server/request.cpp, and anthropic_request.cpp /
// responses_request.cpp for the agent APIs, retrieval_request.cpp for /infill, embeddings and
// rerank): arbitrary bytes as a request body through
// every endpoint's parser. Each input is either accepted or an ApiError with a 4xx status, a
// message and a JSON error object; anything else (another exception, a crash, a sanitizer report)
// fails the run. Accepted chat (and translated agent API) messages also go through
// normalise_for_template.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "server/anthropic_request.hpp"
#include "server/request.hpp"
#include "server/responses_request.hpp"
#include "server/retrieval_request.hpp"

using namespace rocky::server;

namespace {
template <typename F>
void expect_api_error_or_ok(F&& f) {
  try {
    f();
  } catch (const ApiError& e) {
    if (e.status < 400 || e.status > 499 || e.message.empty()) std::abort();
    (void)e.to_json().dump();
  }
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  nlohmann::ordered_json j;
  try {
    j = parse_body(body);
  } catch (const ApiError& e) {
    if (e.status != 400) std::abort();
    return 0;
  }
  expect_api_error_or_ok([&] {
    ChatRequest r = parse_chat(j);
    (void)normalise_for_template(r.messages).dump();
    if (r.sampling.max_tokens && *r.sampling.max_tokens < -1) std::abort();
  });
  expect_api_error_or_ok([&] { (void)parse_completion(j, false); });
  expect_api_error_or_ok([&] { (void)parse_completion(j, true); });
  expect_api_error_or_ok([&] { (void)parse_tokenize(j); });
  expect_api_error_or_ok([&] { (void)parse_detokenize(j); });
  expect_api_error_or_ok([&] { (void)parse_apply_template(j); });
  expect_api_error_or_ok([&] { (void)parse_infill(j); });
  expect_api_error_or_ok([&] { (void)parse_embeddings(j, true); });
  expect_api_error_or_ok([&] { (void)parse_embeddings(j, false); });
  expect_api_error_or_ok([&] { (void)parse_rerank(j); });
  for (bool count : {false, true}) {
    expect_api_error_or_ok([&] {
      const auto r = anthropic::parse_messages(j, count);
      (void)normalise_for_template(r.messages).dump();
    });
    expect_api_error_or_ok([&] {
      const auto r = responses::parse_responses(j, count);
      (void)normalise_for_template(r.input).dump();
    });
  }
  return 0;
}
