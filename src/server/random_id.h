// Ids of the objects the API hands out ("chatcmpl-...", "resp_...", "msg_...", "call_..."): the
// prefix and 24 random hex digits (96 bits), from a per-thread generator seeded by random_device.
// Not secrets: unguessable enough that one client cannot name another's response by chance.
#pragma once

#include <string>
#include <string_view>

namespace syv::server {

std::string random_id(std::string_view prefix);

}  // namespace syv::server
