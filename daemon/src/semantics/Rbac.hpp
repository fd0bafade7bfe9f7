// The reference semantics of a route's RBAC (docs/policy.md, "[route.rbac]"):
// what the slow path enforces and the kernel must agree with.
#pragma once

#include "config/Policy.hpp"
#include "semantics/Router.hpp"

namespace l7fast::policy {

struct RbacDecision {
    bool allowed = true;
    int rule = -1;  // index into Rbac::rules of the deciding rule; -1: the default decided
    friend bool operator==(const RbacDecision&, const RbacDecision&) = default;
};

// A rule holds when all its conditions hold (conditions_hold(); claim
// conditions need `claims`, the route's verified token).
//  - FirstMatch: the first rule that holds decides.
//  - DenyOverrides: the first deny rule that holds denies; otherwise the
//    first allow rule that holds allows.
// When no rule decides, default_action does (rule -1).
RbacDecision evaluate(const Rbac& rbac, const RequestView& request, const Claims* claims);

}  // namespace l7fast::policy
