#include "semantics/Rbac.hpp"

namespace l7fast::policy {

RbacDecision evaluate(const Rbac& rbac, const RequestView& request, const Claims* claims)
{
    using Action = RbacRule::Action;
    const int n = static_cast<int>(rbac.rules.size());
    if (rbac.mode == Rbac::Mode::FirstMatch) {
        for (int i = 0; i < n; i++)
            if (conditions_hold(rbac.rules[i].when, request, claims))
                return {rbac.rules[i].action == Action::Allow, i};
    } else {
        int first_allow = -1;
        for (int i = 0; i < n; i++) {
            const RbacRule& rule = rbac.rules[i];
            // an allow rule after one that already holds cannot change anything
            if (rule.action == Action::Allow && first_allow >= 0)
                continue;
            if (!conditions_hold(rule.when, request, claims))
                continue;
            if (rule.action == Action::Deny)
                return {false, i};
            first_allow = i;
        }
        if (first_allow >= 0)
            return {true, first_allow};
    }
    return {rbac.default_action == Action::Allow, -1};
}

}  // namespace l7fast::policy
