// Anthropic Messages requests (/v1/messages, /v1/messages/count_tokens) translated onto the chat
// template's input: OpenAI-shaped messages and tools, as chat completions renders them. Pure
// functions of the body, no HTTP or model (fuzzed with request.cpp's parsers).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "server/request.hpp"

namespace rocky::server::anthropic {

using json = nlohmann::ordered_json;

struct MessagesRequest {
  std::string model;
  json messages = json::array();  // OpenAI-shaped chat messages (system first), as the template takes them
  json tools;                     // null or OpenAI function tools
  // As chat completions names them: "auto" | "none" | "required" (Anthropic's any) | "function"
  // (Anthropic's tool, with tool_choice_name).
  std::string tool_choice = "auto";
  std::string tool_choice_name;
  bool parallel_tool_calls = true;             // !tool_choice.disable_parallel_tool_use
  json chat_template_kwargs = json::object();  // enable_thinking from `thinking`
  bool stream = false;
  SamplingFields sampling;
};

// `count_tokens`: the count_tokens body (no max_tokens, stream or sampling fields). Throws ApiError
// naming the field (`messages[1].content[0].type`); images and documents are a 400.
MessagesRequest parse_messages(const json& body, bool count_tokens);

}  // namespace rocky::server::anthropic
