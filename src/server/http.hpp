// The HTTP side's small helpers: JSON bodies and API errors onto a cpp-httplib response.
#pragma once

#include <httplib.h>

#include <nlohmann/json.hpp>
#include <string>

#include "server/request.hpp"

namespace rocky::server {

// A JSON text for the wire: compact, invalid UTF-8 replaced (never a throw mid-response).
std::string dump(const nlohmann::ordered_json& j);

void send_json(httplib::Response& res, int status, const nlohmann::ordered_json& j);

// The error's status and OpenAI-shaped body; a 503 also says Retry-After: 1.
void send_error(httplib::Response& res, const ApiError& e);

}  // namespace rocky::server
