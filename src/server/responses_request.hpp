// OpenAI Responses requests (/v1/responses, /v1/responses/input_tokens) translated onto the chat
// template's OpenAI-shaped messages. Pure functions of the body, no HTTP or model (fuzzed with
// request.cpp's parsers).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "server/request.hpp"

namespace rocky::server::responses {

using json = nlohmann::ordered_json;

struct ResponsesRequest {
  std::string model;
  std::optional<std::string> instructions;  // a system message before the conversation (not stored)
  json input = json::array();               // this turn's items as OpenAI-shaped chat messages
  json tools;                               // null or OpenAI chat tools
  json tools_echo = json::array();          // `tools` as sent (the response object repeats them)
  // "auto" | "none" | "required" | "function" (a named one: tool_choice_name), as chat completions.
  std::string tool_choice = "auto";
  std::string tool_choice_name;
  json tool_choice_echo = "auto";         // as sent (the response object repeats it)
  json text_format = {{"type", "text"}};  // text.format as sent (repeated); json_* set sampling.grammar
  bool parallel_tool_calls = true;
  std::optional<std::string> previous_response_id;
  bool store = true;  // OpenAI's default
  bool stream = false;
  std::optional<int64_t> max_output_tokens;
  json metadata = json::object();
  SamplingFields sampling;
};

// `input_tokens`: the /v1/responses/input_tokens body (stream, store and sampling unchecked).
// Throws ApiError naming the field (`input[3].type`, `tools[0].type`, `text.format`).
ResponsesRequest parse_responses(const json& body, bool input_tokens);

}  // namespace rocky::server::responses
