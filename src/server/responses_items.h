// The input items of a stored /v1/responses response, as GET /v1/responses/{id}/input_items lists
// them: every item that made the response's prompt (the earlier inputs and outputs of its
// previous_response_id chain, then its own input; instructions are not items), each with an id,
// in the order the model read them, listed a page at a time (OpenAI's list object: data,
// first_id, last_id, has_more; query limit, order, after, before).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "server/api_error.h"

namespace syv::server {

// Appends `input` (a request's "input": a string, or an array of items that
// parse_responses_request accepted) to `items` as item resources: a string becomes a user message;
// an item without "type" is a message; a message's string content becomes one text part
// (input_text, or output_text with no annotations for the assistant); "status" is "completed"
// when absent; every item keeps its "id" when it is a non-empty string not used earlier in
// `items`, else gets a fresh one (msg_, fc_, fco_, rs_ by type). Other keys are kept as sent.
void append_input_items(const nlohmann::ordered_json& input, nlohmann::ordered_json& items);

// One page of `items` for the query of GET /v1/responses/{id}/input_items: `limit` 1..100
// (default 20), `order` "asc" (default: the order the model read them) or "desc", `after` /
// `before` an item id of the list (the page starts after / ends before it, in that order; with
// `before` alone, the page is the `limit` items closest to it). `has_more`: items remain past the
// page's far end (away from the cursor). A parameter given twice, another name, a bad value or an
// id not in the list is a 400 naming it; `include` is refused (syv's items carry no images or files
// to include).
ApiResult<nlohmann::ordered_json> input_items_page(
    const nlohmann::ordered_json& items,
    const std::vector<std::pair<std::string, std::string>>& query);

}  // namespace syv::server
