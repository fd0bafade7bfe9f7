// A route's match conditions in one line, for `l7fastctl routes`/`check`
// and ListRoutes: every condition shown, each kind distinguishable, values
// quoted when they hold spaces or quotes, "*" only when nothing is asked.
//   method=GET|HEAD host=api.example.com prefix=/v1 regex=/v2/[a-z]+
//   header:x-a (present)  !header:x-b (absent)  header:x-c=v  header:x-d^=v (prefix)
//   query:debug  query:v=2  source=10.0.0.0/8,::1/128  claim:role  claim:role=admin
#pragma once

#include <string>

#include "config/Policy.hpp"

namespace l7fast::policy {

std::string describe_match(const RouteMatch& m);

// One condition of `m` as describe_match writes it ("header:x-a^=v").
std::string describe_condition(const RouteMatch& m, const ConditionRef& c);

}  // namespace l7fast::policy
