"""The QuotaPolicy rules the API server checks at admission: a ValidatingAdmissionPolicy shipped with the CRD.

A CRD's CEL rule is priced by the API server for the largest object its schema allows, once per item of
every list above it: at MAX_TEAMS teams (model.py), "a namespace belongs to at most one team" would be priced
at teams x teams x namespaces x namespaces, and "lendingLimit <= nominal" at teams x flavors x resources, and
the API server refuses such a CRD. A ValidatingAdmissionPolicy's CEL is charged for the object actually
sent, at most 1,000,000 per expression or variable and 10,000,000 per policy (k8s.io/apiserver
pkg/apis/cel/config.go, PerCallLimit and RuntimeCELCostBudget), so these rules live here, written to cost
what the policy holds: names are looked up in maps (`in` a map costs 1, `in` a list costs its size).

Each rule is a variable holding the list of its violations, each "FIELD: MESSAGE" with the field path and the
value, the same as `qm policy check` says (fairshare/policy/semantics.py checks every rule here too, and the
parity tests hold the two verdicts equal); the validation denies when the list is not empty and names the
first. The API server runs the CRD's schema and rules first, so the names these rules key on (teams, flavors,
priority classes) are already unique.

Generated into manifests/crd/quotapolicies.yaml with the CRD (`python -m fairshare.policy.crd`).
"""

from __future__ import annotations

from dataclasses import dataclass

from .model import API_GROUP, API_VERSION, KIND, PLURAL
from .render import Manifest

ADMISSION_API_VERSION = "admissionregistration.k8s.io/v1"
NAME = f"{PLURAL}.{API_GROUP}"

# Up to this many namespaces in all teams, a shared namespace is found by sorting them (CEL charges a sort
# 2.1 x n^2: 756,000 at 600, within the 1,000,000 of one variable) and the denial names the field, the
# namespace and both teams. Above it, a map from namespace to team is built instead (linear); inserting a
# namespace twice fails the evaluation, and the denial names the namespace in Kubernetes' words ("insert
# failed: key NAME already exists").
NAMESPACE_SORT_LIMIT = 600


@dataclass(frozen=True, slots=True)
class Rule:
    """One policy-wide rule: `errors` is CEL for the list of its violations ("FIELD: MESSAGE" strings);
    `python` names the check of fairshare/policy/semantics.py that says the same."""

    name: str
    errors: str
    python: str


def _at(*parts: str) -> str:
    """CEL for a field path with list indexes: _at("spec.teams[", "i", "].quotas[", "j", "]")."""
    out = []
    for k, part in enumerate(parts):
        out.append(f"'{part}'" if k % 2 == 0 else f"string({part})")
    return " + ".join(out)


_TEAMS = "variables.teams"
# A team's effective floor: its own transition.floor replaces the defaults' as a whole
# (semantics.floor_source, merge_transition).
_OWN_FLOOR = "has(t.transition) && has(t.transition.floor)"

VARIABLES: tuple[tuple[str, str], ...] = (
    ("teams", "object.spec.teams"),
    ("teamNames", f"{_TEAMS}.transformMapEntry(i, t, {{t.name: true}})"),
    ("flavors", "object.spec.flavors.transformMapEntry(i, f, {f.name: true})"),
    ("classes", "has(object.spec.priorityClasses) ? "
                "object.spec.priorityClasses.transformMapEntry(i, p, {p.name: true}) : {}"),
    ("defaultFloor", "has(object.spec.transitions) && has(object.spec.transitions.defaults) && "
                     "has(object.spec.transitions.defaults.floor) ? "
                     "object.spec.transitions.defaults.floor : {}"),
    ("namespaces", f"{_TEAMS}.map(t, t.namespaces).flatten()"),
    ("sortedNamespaces", f"size(variables.namespaces) <= {NAMESPACE_SORT_LIMIT} ? "
                         "variables.namespaces.sort() : []"),
    ("sharedNamespaces", "size(variables.sortedNamespaces) < 2 ? [] : "
                         "lists.range(size(variables.sortedNamespaces) - 1).filter(i, "
                         "variables.sortedNamespaces[i] == variables.sortedNamespaces[i + 1])"
                         ".map(i, variables.sortedNamespaces[i])"),
    # Teams (in document order) listing the first shared namespace.
    ("sharingTeams", "size(variables.sharedNamespaces) == 0 ? [] : "
                     f"{_TEAMS}.transformList(i, t, variables.sharedNamespaces[0] in t.namespaces, i)"),
    ("oneTeamPerNamespace", f"size(variables.namespaces) <= {NAMESPACE_SORT_LIMIT} ? {{}} : "
                        f"{_TEAMS}.map(t, t.namespaces.map(n, {{n: t.name}})).flatten()"
                        ".transformMapEntry(i, e, e)"),
)

RULES: tuple[Rule, ...] = (
    Rule(
        "namespaceErrors",
        "size(variables.sharingTeams) < 2 ? [] : ["
        + _at("spec.teams[", "variables.sharingTeams[1]", "].namespaces[",
              f"{_TEAMS}[variables.sharingTeams[1]].namespaces.indexOf(variables.sharedNamespaces[0])", "]")
        + " + ': namespace ' + variables.sharedNamespaces[0] + ' already belongs to team ' + "
        f"{_TEAMS}[variables.sharingTeams[0]].name + '; a namespace belongs to at most one team']",
        "_check_namespaces"),
    Rule(
        "flavorErrors",
        f"{_TEAMS}.transformList(i, t, t.quotas.transformList(j, q, !(q.flavor in variables.flavors), "
        + _at("spec.teams[", "i", "].quotas[", "j", "].flavor")
        + " + ': flavor ' + q.flavor + ' is not declared in spec.flavors')).flatten()",
        "_check_quotas"),
    Rule(
        "lendingErrors",
        f"{_TEAMS}.transformList(i, t, t.quotas.transformList(j, q, q.resources.transformList(k, r, "
        "has(r.lendingLimit) && "
        "quantity(string(r.lendingLimit)).compareTo(quantity(string(r.nominal))) > 0, "
        + _at("spec.teams[", "i", "].quotas[", "j", "].resources[", "k", "].lendingLimit")
        + " + ': lendingLimit ' + string(r.lendingLimit) + ' must not exceed nominal (' + "
        "string(r.nominal) + ')')).flatten()).flatten()",
        "_check_quotas"),
    Rule(
        "floorErrors",
        f"{_TEAMS}.transformList(i, t, t.quotas.transformList(j, q, q.resources.transformList(k, r, "
        f"r.name in ({_OWN_FLOOR} ? t.transition.floor : variables.defaultFloor) && "
        f"quantity(string(r.nominal)).compareTo(quantity(string(({_OWN_FLOOR} ? t.transition.floor : "
        "variables.defaultFloor)[r.name]))) < 0, "
        + _at("spec.teams[", "i", "].quotas[", "j", "].resources[", "k", "].nominal")
        + " + ': nominal ' + string(r.nominal) + ' is below the transition floor of ' + r.name + ' (' + "
        f"string(({_OWN_FLOOR} ? t.transition.floor : variables.defaultFloor)[r.name]) + ', ' + "
        f"({_OWN_FLOOR} ? " + _at("spec.teams[", "i", "].transition.floor") + " : "
        "'spec.transitions.defaults.floor') + '): a quota never goes below its floor')).flatten()).flatten()",
        "_check_floors"),
    Rule(
        "cohortErrors",
        f"{_TEAMS}.transformList(i, t, has(t.cohort) && "
        "t.cohort.split('/').exists(c, c in variables.teamNames), "
        + _at("spec.teams[", "i", "].cohort")
        + " + ': cohort ' + t.cohort.split('/').filter(c, c in variables.teamNames)[0] + ' has the name of a "
        "team; cohort and team names must differ (got ' + t.cohort + ')')",
        "_check_cohorts"),
    Rule(
        "classErrors",
        f"{_TEAMS}.transformList(i, t, "
        "(has(t.priorityClasses) ? t.priorityClasses.transformList(j, c, !(c in variables.classes), "
        + _at("spec.teams[", "i", "].priorityClasses[", "j", "]")
        + " + ': priority class ' + c + ' is not declared in spec.priorityClasses') : []) + "
        "(has(t.forbiddenPriorityClasses) ? t.forbiddenPriorityClasses.transformList(j, c, "
        "!(c in variables.classes), "
        + _at("spec.teams[", "i", "].forbiddenPriorityClasses[", "j", "]")
        + " + ': priority class ' + c + ' is not declared in spec.priorityClasses') : [])).flatten()",
        "_check_tenancy"),
)


def validating_admission_policy() -> Manifest:
    """The ValidatingAdmissionPolicy of the policy-wide rules."""
    validations: list[Manifest] = [
        {"expression": f"size(variables.{rule.name}) == 0",
         "messageExpression": f"variables.{rule.name}[0]", "reason": "Invalid"}
        for rule in RULES
    ]
    # Above NAMESPACE_SORT_LIMIT namespaces: building the map fails on a namespace listed twice.
    validations.append({"expression": "size(variables.oneTeamPerNamespace) >= 0",
                        "message": "a namespace belongs to at most one team", "reason": "Invalid"})
    variables = [{"name": n, "expression": e} for n, e in VARIABLES]
    variables += [{"name": rule.name, "expression": rule.errors} for rule in RULES]
    return {
        "apiVersion": ADMISSION_API_VERSION,
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": NAME, "labels": _LABELS},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{
                "apiGroups": [API_GROUP], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE"],
                "resources": [PLURAL]}]},
            # Judge a spec when it is written: a metadata-only update (the operator's finalizer, an
            # annotation) of a policy stored before this was installed must pass, or it could never go.
            "matchConditions": [{"name": "spec-written",
                                 "expression": "oldObject == null || object.spec != oldObject.spec"}],
            "variables": variables,
            "validations": validations,
        },
    }


def validating_admission_policy_binding() -> Manifest:
    """Its binding: every QuotaPolicy, denying."""
    return {
        "apiVersion": ADMISSION_API_VERSION,
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": NAME, "labels": _LABELS},
        "spec": {"policyName": NAME, "validationActions": ["Deny"]},
    }


_LABELS = {"app.kubernetes.io/name": "queue-manager", "app.kubernetes.io/component": "crd"}


def admission_manifests() -> list[Manifest]:
    """The ValidatingAdmissionPolicy and its binding, in apply order."""
    return [validating_admission_policy(), validating_admission_policy_binding()]


# A policy that only the admission policy refuses (two teams list namespace `probe`; the CRD's own rules
# pass it): a fresh ValidatingAdmissionPolicy is loaded by the API server a moment after it is created, so
# whoever installs the CRD sends this with dry-run until it is denied (docs/policy.md, "Install").
PROBE_DENIAL = "namespace probe already belongs to team probe-a"


def probe_policy() -> Manifest:
    """The known-bad QuotaPolicy whose denial proves the admission policy in force."""
    quotas = [{"flavor": "probe", "resources": [{"name": "cpu", "nominal": 1}]}]
    return {
        "apiVersion": API_VERSION, "kind": KIND,
        "metadata": {"name": "admission-probe"},
        "spec": {"flavors": [{"name": "probe"}],
                 "teams": [{"name": f"probe-{x}", "namespaces": ["probe"], "quotas": quotas} for x in "ab"]},
    }


def main() -> int:
    """`python -m fairshare.policy.admission probe`: print the probe policy (YAML) for kubectl."""
    import sys

    import yaml

    if sys.argv[1:] != ["probe"]:
        print("usage: python -m fairshare.policy.admission probe", file=sys.stderr)
        return 2
    sys.stdout.write(yaml.safe_dump(probe_policy(), sort_keys=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
