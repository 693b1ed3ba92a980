"""Bad input to `qm explain`, `qm conformance` and `qm policy check`: one line naming the file, the
document, the field and the value; exit 2 (1 for a conformance case that cannot be read, as FORMAT.md
says); never a traceback.

Each case is a valid file with ONE edit (the edit must apply, so a case cannot silently test a valid file)
and the exact line the user reads, compared whole. `{f}` stands for the file's path.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from qm.cli import main

KUEUE = """\
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: default}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: team-a}
spec:
  cohortName: org
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: "4"}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {namespace: team-a, name: main}
spec: {clusterQueue: team-a}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata: {namespace: team-a, name: job, creationTimestamp: "2026-01-01T00:00:00Z"}
spec:
  queueName: main
  priority: 0
  podSets:
  - name: main
    count: 1
    template: {spec: {containers: [{name: c, resources: {requests: {cpu: "1"}}}]}}
"""

CASE = """\
apiVersion: conformance.queuemanager.dev/v1
kind: CycleCase
metadata: {name: the job is admitted}
spec:
  now: "2026-01-01T00:01:00Z"
  expect:
    admitted: {team-a/job: null}
---
""" + KUEUE

POLICY = """\
apiVersion: queuemanager.dev/v1alpha1
kind: QuotaPolicy
metadata: {name: gpus}
spec:
  flavors:
  - name: a100
  teams:
  - name: research
    namespaces: [research]
    cohort: org
    quotas:
    - flavor: a100
      resources:
      - {name: nvidia.com/gpu, nominal: 4}
  fairShare: {halfLife: 168h}
  preemption:
    budget: {maxVictims: 2, window: 1h}
"""

CQ = "document 2 (ClusterQueue team-a)"
WL = "document 4 (Workload job)"
NOMINAL = "field spec.resourceGroups[0].flavors[0].resources[0].nominalQuota"
HEADER = "document 1 (CycleCase the job is admitted)"
POL = "document 1 (QuotaPolicy gpus)"
GPU = "field spec.teams[0].quotas[0].resources[0].nominal"
KINDS = "ResourceFlavor, Cohort, ClusterQueue, LocalQueue, WorkloadPriorityClass, Workload"


@dataclass(frozen=True)
class Bad:
    """A bad input: the base text with `old` replaced by `new` (or raw bytes), and the expected line."""

    base: str
    old: str
    new: str
    line: str
    raw: bytes | None = None

    def write(self, path: Path) -> None:
        if self.raw is not None:
            path.write_bytes(self.raw)
            return
        if self.old not in self.base:
            raise ValueError(f"the edit {self.old!r} does not apply: the case would test a valid file")
        path.write_text(self.base.replace(self.old, self.new, 1))


def whole(base: str, text: str, line: str) -> Bad:
    """A file that is only `text` (the base is named for readability of the table)."""
    return Bad(base, base, text, line)


EXPLAIN: dict[str, Bad] = {
    "an empty file has nothing to explain": whole(
        KUEUE, "", "qm explain: error: {f}: no documents: expected Kueue objects or a CycleCase"),
    "a file with only comments has nothing to explain": whole(
        KUEUE, "# nothing\n---\n",
        "qm explain: error: {f}: no documents: expected Kueue objects or a CycleCase"),
    "manifests without any timestamp need --now": whole(
        KUEUE, KUEUE.split("---")[0], "qm explain: error: {f}: no time to explain at: pass --now"),
    "text that is not YAML names the line and column": whole(
        KUEUE, "a: [b\n",
        "qm explain: error: {f}: invalid YAML at line 2, column 1: expected ',' or ']', "
        "but got '<stream end>'"),
    "a YAML scalar at the top is not an object": whole(
        KUEUE, "hello\n",
        "qm explain: error: {f}: document 1: a document must be a mapping (an object) (got 'str')"),
    "a YAML list of numbers at the top is not a list of objects": whole(
        KUEUE, "- 1\n- 2\n",
        "qm explain: error: {f}: document 1: a document must be a mapping (an object) (got 'int')"),
    "a v1beta1 apiVersion is refused": Bad(
        KUEUE, "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor",
        "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor",
        "qm explain: error: {f}: document 1 (ResourceFlavor default): field apiVersion: "
        "unsupported apiVersion (expected kueue.x-k8s.io/v1beta2) (got 'kueue.x-k8s.io/v1beta1')"),
    "an unknown kind lists the kinds that are understood": Bad(
        KUEUE, "kind: ResourceFlavor", "kind: Flavour",
        "qm explain: error: {f}: document 1 (Flavour default): field kind: unknown kind (expected one of "
        f"{KINDS}) (got 'Flavour')"),
    "a list where the kind should be is an unknown kind": Bad(
        KUEUE, "kind: ResourceFlavor", "kind: [ResourceFlavor]",
        f"qm explain: error: {{f}}: document 1: field kind: unknown kind (expected one of {KINDS}) "
        "(got ['ResourceFlavor'])"),
    "an object without a name": Bad(
        KUEUE, "metadata: {name: team-a}", "metadata: {}",
        "qm explain: error: {f}: document 2 (ClusterQueue): field metadata.name: required field is missing"),
    "a negative quota": Bad(
        KUEUE, 'nominalQuota: "4"', 'nominalQuota: "-4"',
        f"qm explain: error: {{f}}: {CQ}: {NOMINAL}: must not be negative (got '-4')"),
    "a quota that is not a quantity": Bad(
        KUEUE, 'nominalQuota: "4"', "nominalQuota: four",
        f"qm explain: error: {{f}}: {CQ}: {NOMINAL}: not a quantity: no digits (got 'four')"),
    "a quota with an unknown suffix": Bad(
        KUEUE, 'nominalQuota: "4"', "nominalQuota: 4GB",
        f"qm explain: error: {{f}}: {CQ}: {NOMINAL}: not a quantity: unknown suffix 'GB' (got '4GB')"),
    "a quota larger than Kueue can count": Bad(
        KUEUE, 'nominalQuota: "4"', "nominalQuota: 8Ei",
        f"qm explain: error: {{f}}: {CQ}: {NOMINAL}: quantity too large (Kueue counts at most 2^63-1 units) "
        "(got '8Ei')"),
    "a quota with a huge exponent": Bad(
        KUEUE, 'nominalQuota: "4"', "nominalQuota: 1e999999",
        f"qm explain: error: {{f}}: {CQ}: {NOMINAL}: quantity exponent out of range (got '1e999999')"),
    "a YAML integer of thousands of digits": Bad(
        KUEUE, 'nominalQuota: "4"', f"nominalQuota: {'9' * 5000}",
        "qm explain: error: {f}: invalid YAML: a value cannot be read: an integer has too many digits"),
    "a YAML timestamp with month 13": Bad(
        KUEUE, 'creationTimestamp: "2026-01-01T00:00:00Z"', "creationTimestamp: 2026-13-01T00:00:00Z",
        "qm explain: error: {f}: invalid YAML: a value cannot be read: month must be in 1..12"),
    "YAML nested thousands deep": Bad(
        KUEUE, 'nominalQuota: "4"', f"nominalQuota: {'[' * 5000}{']' * 5000}",
        "qm explain: error: {f}: invalid YAML at line 16, column 1030: nested more than 100 levels deep"),
    "a quota with thousands of digits": Bad(
        KUEUE, 'nominalQuota: "4"', f"nominalQuota: '{'9' * 5000}'",
        f"qm explain: error: {{f}}: {CQ}: {NOMINAL}: not a quantity: more than 64 digits "
        f"(got '{'9' * 99}... (5002 characters))"),
    "a list where a quota should be": Bad(
        KUEUE, 'nominalQuota: "4"', "nominalQuota: [4]",
        f"qm explain: error: {{f}}: {CQ}: {NOMINAL}: not a quantity (got [4])"),
    "a string where a list of resources should be": Bad(
        KUEUE, "coveredResources: [cpu]", "coveredResources: cpu",
        f"qm explain: error: {{f}}: {CQ}: field spec.resourceGroups[0].coveredResources: must be a list "
        "(got 'cpu')"),
    "a string where the containers should be": Bad(
        KUEUE, 'containers: [{name: c, resources: {requests: {cpu: "1"}}}]', "containers: c",
        f"qm explain: error: {{f}}: {WL}: field spec.podSets[0].template.spec.containers: must be a list "
        "(got 'c')"),
    "a ClusterQueue naming a flavor that does not exist": Bad(
        KUEUE, "    - name: default", "    - name: h100",
        f"qm explain: error: {{f}}: {CQ}: field spec.resourceGroups[0].flavors[0].name: ResourceFlavor "
        "'h100' does not exist"),
    "a LocalQueue naming a ClusterQueue that does not exist": Bad(
        KUEUE, "spec: {clusterQueue: team-a}", "spec: {clusterQueue: team-b}",
        "qm explain: error: {f}: document 3 (LocalQueue team-a/main): field spec.clusterQueue: ClusterQueue "
        "'team-b' does not exist"),
    "a Workload naming a LocalQueue that does not exist": Bad(
        KUEUE, "queueName: main", "queueName: other",
        "qm explain: error: {f}: document 4 (Workload team-a/job): field spec.queueName: LocalQueue "
        "'team-a/other' does not exist"),
    "the same object twice": Bad(
        KUEUE, "---\napiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue",
        "---\napiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {name: default}\n"
        "---\napiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue",
        "qm explain: error: {f}: document 2 (ResourceFlavor default): duplicate ResourceFlavor 'default' "
        "(first defined in {f}: document 1 (ResourceFlavor default))"),
    "cohorts whose parents form a cycle": Bad(
        KUEUE, "---\napiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue",
        "---\napiVersion: kueue.x-k8s.io/v1beta2\nkind: Cohort\nmetadata: {name: org}\nspec: {parentName: "
        "lab}\n---\napiVersion: kueue.x-k8s.io/v1beta2\nkind: Cohort\nmetadata: {name: lab}\nspec: "
        "{parentName: org}\n---\napiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue",
        "qm explain: error: {f}: document 4 (Cohort lab): field spec.parentName: "
        "cohort parents form a cycle: lab -> org -> lab (got 'org')"),
    "a priority beyond a 32-bit integer": Bad(
        KUEUE, "priority: 0", "priority: 99999999999",
        f"qm explain: error: {{f}}: {WL}: field spec.priority: must be a 32-bit integer (-2147483648 to "
        "2147483647) (got 99999999999)"),
    "a priority that is a word": Bad(
        KUEUE, "priority: 0", "priority: high",
        f"qm explain: error: {{f}}: {WL}: field spec.priority: must be an integer (got 'high')"),
    "a negative pod count": Bad(
        KUEUE, "count: 1", "count: -1",
        f"qm explain: error: {{f}}: {WL}: field spec.podSets[0].count: must be a non-negative integer "
        "(got -1)"),
    "a creation time that is not a time": Bad(
        KUEUE, 'creationTimestamp: "2026-01-01T00:00:00Z"', "creationTimestamp: yesterday",
        f"qm explain: error: {{f}}: {WL}: field metadata.creationTimestamp: not an RFC 3339 time "
        "(got 'yesterday')"),
    "a creation date without a time of day": Bad(
        KUEUE, 'creationTimestamp: "2026-01-01T00:00:00Z"', "creationTimestamp: 2026-01-01",
        f"qm explain: error: {{f}}: {WL}: field metadata.creationTimestamp: not an RFC 3339 time (a date "
        "without a time of day) (got '2026-01-01')"),
    "bytes that are not UTF-8": Bad(
        KUEUE, "", "", "qm explain: error: {f}: not UTF-8 text (byte 0xff at line 1, column 5)",
        raw=b"kind\xff: x\n"),
    "a case header with a misspelt expectation key": Bad(
        CASE, "  expect:\n    admitted:", "  expect:\n    admited:",
        f"qm explain: error: {{f}}: {HEADER}: field spec.expect.admited: unknown field (expected one of "
        "admitted, preempted)"),
    "a case header expecting a workload the file does not define": Bad(
        CASE, "admitted: {team-a/job: null}", "admitted: {team-a/jbo: null}",
        f"qm explain: error: {{f}}: {HEADER}: field spec.expect: expected workload 'team-a/jbo' "
        "is not defined in the file (got 'team-a/jbo')"),
    "a case header with an unknown preemption reason": Bad(
        CASE, "admitted: {team-a/job: null}", "preempted: {team-a/job: Because}",
        f"qm explain: error: {{f}}: {HEADER}: field spec.expect.preempted.team-a/job: reason must be one of "
        "InClusterQueue, InCohortFairSharing, InCohortReclaimWhileBorrowing, InCohortReclamation "
        "(got 'Because')"),
    "a case header with a list for a preemption reason": Bad(
        CASE, "admitted: {team-a/job: null}", "preempted: {team-a/job: [InClusterQueue]}",
        f"qm explain: error: {{f}}: {HEADER}: field spec.expect.preempted.team-a/job: reason must be one of "
        "InClusterQueue, InCohortFairSharing, InCohortReclaimWhileBorrowing, InCohortReclamation "
        "(got ['InClusterQueue'])"),
    "a case header whose now is a number": Bad(
        CASE, 'now: "2026-01-01T00:01:00Z"', "now: 12",
        f"qm explain: error: {{f}}: {HEADER}: field spec.now: not an RFC 3339 time (got 12)"),
    "a case header with a misspelt fair sharing option": Bad(
        CASE, "  expect:", "  config: {fairSharing: {preemptionStrategy: []}}\n  expect:",
        f"qm explain: error: {{f}}: {HEADER}: field spec.config.fairSharing.preemptionStrategy: "
        "unknown field (expected one of preemptionStrategies)"),
    "an infinite admission fair sharing weight": Bad(
        CASE, "  expect:", "  config: {admissionFairSharing: {resourceWeights: {cpu: .inf}}}\n  expect:",
        f"qm explain: error: {{f}}: {HEADER}: field spec.config.admissionFairSharing.resourceWeights.cpu: "
        "must be a finite non-negative number (got inf)"),
    "a half-life too long to be a number": Bad(
        CASE, "  expect:",
        f"  config: {{admissionFairSharing: {{usageHalfLifeTime: {'9' * 400}s}}}}\n  expect:",
        f"qm explain: error: {{f}}: {HEADER}: field spec.config.admissionFairSharing.usageHalfLifeTime: "
        f"must be a duration of at most 32 characters (got '{'9' * 99}... (403 characters))"),
}


@pytest.mark.parametrize("bad", EXPLAIN.values(), ids=EXPLAIN.keys())
def test_explain_reports_bad_input_in_one_exact_line(
    bad: Bad, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "in.yaml"
    bad.write(path)
    assert main(["explain", str(path)]) == 2
    out, err = capsys.readouterr()
    assert (out, err) == ("", bad.line.format(f=path) + "\n")


def test_every_explain_base_file_is_valid(tmp_path: Path) -> None:
    """The cases above edit these files: they must be valid, or an error could come from elsewhere."""
    for name, text in (("kueue.yaml", KUEUE), ("case.yaml", CASE)):
        path = tmp_path / name
        path.write_text(text)
        assert main(["explain", "--now", "2026-01-01T00:01:00Z", str(path)]) == 0, name


CONFORMANCE: dict[str, Bad] = {
    "a case file that is not YAML is a failed case": whole(
        CASE, "a: [b\n",
        "FAIL {f}: {f}: invalid YAML at line 2, column 1: expected ',' or ']', but got '<stream end>'"),
    "a case file without a header is a failed case": whole(
        CASE, KUEUE, "FAIL {f}: {f}: a case file needs exactly one CycleCase document (found 0)"),
    "a case file naming a queue that does not exist is a failed case": Bad(
        CASE, "spec: {clusterQueue: team-a}", "spec: {clusterQueue: team-b}",
        "FAIL {f}: {f}: document 4 (LocalQueue team-a/main): field spec.clusterQueue: ClusterQueue 'team-b' "
        "does not exist"),
    "a case file with a cohort cycle is a failed case naming the cohort": Bad(
        CASE, "---\napiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue",
        "---\napiVersion: kueue.x-k8s.io/v1beta2\nkind: Cohort\nmetadata: {name: org}\nspec: {parentName: "
        "org}\n---\napiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue",
        "FAIL {f}: {f}: document 4 (Cohort org): field spec.parentName: cohort parents form a cycle: "
        "org -> org (got 'org')"),
    "a case file with a misspelt header field is a failed case": Bad(
        CASE, "  expect:", "  expext:",
        f"FAIL {{f}}: {{f}}: {HEADER}: field spec.expext: unknown field "
        "(expected one of source, now, config, expect, cycles, parked, timing, expectedFailure)"),
    "a case file in bytes that are not UTF-8 is a failed case": Bad(
        CASE, "", "", "FAIL {f}: {f}: not UTF-8 text (byte 0xfe at line 1, column 1)", raw=b"\xfe\xff"),
}


@pytest.mark.parametrize("bad", CONFORMANCE.values(), ids=CONFORMANCE.keys())
def test_conformance_reports_an_unreadable_case_as_one_failed_line(
    bad: Bad, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "case.yaml"
    bad.write(path)
    assert main(["conformance", str(path)]) == 1
    out, err = capsys.readouterr()
    assert (out, err) == (bad.line.format(f=path) + "\n0 passed, 1 failed\n", "")


def test_the_conformance_base_case_passes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "case.yaml"
    path.write_text(CASE)
    assert main(["conformance", str(path)]) == 0
    assert capsys.readouterr().out == "PASS the job is admitted\n1 passed, 0 failed\n"


POLICY_CHECK: dict[str, Bad] = {
    "an empty policy file": whole(
        POLICY, "",
        "qm policy: error: {f}: expected exactly one QuotaPolicy (apiVersion queuemanager.dev/v1alpha1); "
        "the file has no documents"),
    "a policy file that is not YAML": whole(
        POLICY, "a: [b\n",
        "qm policy: error: {f}: invalid YAML at line 2, column 1: expected ',' or ']', "
        "but got '<stream end>'"),
    "a YAML scalar instead of a policy": whole(
        POLICY, "hello\n", "qm policy: error: {f}: document 1: a QuotaPolicy must be a mapping (got 'str')"),
    "a YAML list instead of a policy": whole(
        POLICY, "- 1\n", "qm policy: error: {f}: document 1: a QuotaPolicy must be a mapping (got 'list')"),
    "a misspelt kind leaves no policy and says what was found": Bad(
        POLICY, "kind: QuotaPolicy", "kind: QuotaPolicies",
        "qm policy: error: {f}: expected exactly one QuotaPolicy (apiVersion queuemanager.dev/v1alpha1); "
        "found only kind QuotaPolicies"),
    "a wrong apiVersion": Bad(
        POLICY, "queuemanager.dev/v1alpha1", "queuemanager.dev/v1",
        f"qm policy: error: {{f}}: {POL}: field apiVersion/kind: "
        "expected apiVersion queuemanager.dev/v1alpha1 and kind QuotaPolicy "
        "(got 'queuemanager.dev/v1/QuotaPolicy')"),
    "a policy without a name": Bad(
        POLICY, "metadata: {name: gpus}", "metadata: {}",
        "qm policy: error: {f}: document 1 (QuotaPolicy): field metadata.name: required field is missing"),
    "a negative quota in a policy": Bad(
        POLICY, "nominal: 4", "nominal: -4",
        f"qm policy: error: {{f}}: {POL}: {GPU}: must be a non-negative Kubernetes quantity such as 4, 500m, "
        "16Gi (got -4)"),
    "a quota in a policy larger than Kueue can count": Bad(
        POLICY, "nominal: 4", "nominal: 1e99999",
        f"qm policy: error: {{f}}: {POL}: {GPU}: quantity exponent out of range (got '1e99999')"),
    "a quota in a policy longer than the schema allows": Bad(
        POLICY, "nominal: 4", f"nominal: '{'9' * 41}'",
        f"qm policy: error: {{f}}: {POL}: {GPU}: must be at most 40 characters (got '{'9' * 41}')"),
    "a team quota on a flavor the policy does not declare": Bad(
        POLICY, "- flavor: a100", "- flavor: h100",
        f"qm policy: error: {{f}}: {POL}: field spec.teams[0].quotas[0].flavor: flavor is not declared in "
        "spec.flavors (got 'h100')"),
    "a string where the namespaces list should be": Bad(
        POLICY, "namespaces: [research]", "namespaces: research",
        f"qm policy: error: {{f}}: {POL}: field spec.teams[0].namespaces: must be a list (got 'research')"),
    "a number where the spec should be": Bad(
        POLICY, "spec:\n  flavors:", "spec: 5\nx:\n  flavors:",
        f"qm policy: error: {{f}}: {POL}: field spec: must be a mapping (got 5)"),
    "a misspelt field in a policy": Bad(
        POLICY, "fairShare: {halfLife: 168h}", "fairShare: {halflife: 168h}",
        f"qm policy: error: {{f}}: {POL}: field spec.fairShare.halflife: "
        "unknown field (check its spelling and camelCase)"),
    "a team name with capitals and an underscore": Bad(
        POLICY, "- name: research", "- name: AI_Research",
        f"qm policy: error: {{f}}: {POL}: field spec.teams[0].name: must be a DNS label: lowercase letters, "
        "digits and '-', starting and ending with a letter or digit (got 'AI_Research')"),
    "a cohort that is not a path of names": Bad(
        POLICY, "cohort: org", "cohort: org//lab",
        f"qm policy: error: {{f}}: {POL}: field spec.teams[0].cohort: must be a cohort path: "
        "DNS labels joined by '/', root first (e.g. org/gpu) (got 'org//lab')"),
    "a cohort path that loops back on itself": Bad(
        POLICY, "cohort: org", "cohort: org/lab/org",
        f"qm policy: error: {{f}}: {POL}: field spec.teams[0].cohort: a cohort path must not repeat a name "
        "(that would be a cycle) (got 'org/lab/org')"),
    "a half-life of zero": Bad(
        POLICY, "halfLife: 168h", "halfLife: 0s",
        f"qm policy: error: {{f}}: {POL}: field spec.fairShare.halfLife: halfLife must be at least 1ms "
        "(got '0s')"),
    "a preemption budget window of zero": Bad(
        POLICY, "window: 1h", "window: 0s",
        f"qm policy: error: {{f}}: {POL}: field spec.preemption.budget.window: window must be positive "
        "(got '0s')"),
    "a transition of more steps than the planner makes": Bad(
        POLICY, "  preemption:",
        "  transitions: {defaults: {duration: 336h, stepInterval: 1s}}\n  preemption:",
        f"qm policy: error: {{f}}: {POL}: field spec.transitions.defaults.stepInterval: stepInterval makes "
        "more than 10000 steps over duration (336h) (got '1s')"),
    "a budget that is not a number": Bad(
        POLICY, "maxVictims: 2", "maxVictims: two",
        f"qm policy: error: {{f}}: {POL}: field spec.preemption.budget.maxVictims: must be an integer "
        "(got 'two')"),
    "a policy in bytes that are not UTF-8": Bad(
        POLICY, "", "", "qm policy: error: {f}: not UTF-8 text (byte 0xff at line 1, column 1)", raw=b"\xff"),
}


@pytest.mark.parametrize("bad", POLICY_CHECK.values(), ids=POLICY_CHECK.keys())
def test_policy_check_reports_bad_input_in_one_exact_line(
    bad: Bad, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "policy.yaml"
    bad.write(path)
    assert main(["policy", "check", str(path)]) == 2
    out, err = capsys.readouterr()
    assert (out, err) == ("", bad.line.format(f=path) + "\n")


def test_the_policy_base_file_is_valid(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(POLICY)
    assert main(["policy", "check", str(path)]) == 0
    assert capsys.readouterr().out == f"{path}: QuotaPolicy gpus is valid (1 teams)\n"


PATHS = {
    "explain of a missing file": (["explain"], "missing.yaml",
                                  "qm explain: error: {f}: cannot read file: No such file or directory"),
    "explain of a directory": (["explain"], ".", "qm explain: error: {f}: cannot read file: Is a directory"),
    "policy check of a missing file": (["policy", "check"], "missing.yaml",
                                       "qm policy: error: {f}: cannot read file: No such file or directory"),
    "policy check of a directory": (["policy", "check"], ".",
                                    "qm policy: error: {f}: cannot read file: Is a directory"),
    "conformance of an empty directory": (["conformance"], ".",
                                          "qm conformance: error: {f}: no case files (*.yaml, *.yml) in this "
                                          "directory"),
}


@pytest.mark.parametrize(("command", "name", "line"), PATHS.values(), ids=PATHS.keys())
def test_a_path_that_is_not_a_readable_file_is_one_line(
    command: list[str], name: str, line: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / name
    assert main([*command, str(path)]) == 2
    out, err = capsys.readouterr()
    assert (out, err) == ("", line.format(f=path) + "\n")


def test_conformance_of_a_missing_path_is_a_failed_case(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "missing.yaml"
    assert main(["conformance", str(path)]) == 1
    assert capsys.readouterr().out == (
        f"FAIL {path}: {path}: cannot read file: No such file or directory\n0 passed, 1 failed\n"
    )


def test_explain_with_a_now_that_is_not_a_time(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "in.yaml"
    path.write_text(KUEUE)
    assert main(["explain", "--now", "noon", str(path)]) == 2
    assert capsys.readouterr() == ("", "qm explain: error: --now: not an RFC 3339 time: 'noon'\n")


FLAGS = {
    "an unknown flag of explain": (["explain", "--bogus", "x.yaml"],
                                   "qm: error: unrecognized arguments: --bogus"),
    "explain without a file": (["explain"], "qm explain: error: give a FILE, - (stdin), or --kubeconfig PATH "
                               "for the live cluster"),
    "conformance without a path": (["conformance"],
                                   "qm conformance: error: the following arguments are required: PATH"),
    "an unknown policy action": (["policy", "lint", "x.yaml"],
                                 "qm policy: error: argument ACTION: invalid choice: 'lint' (choose from "
                                 "'check', 'render')"),
}


@pytest.mark.parametrize(("argv", "last_line"), FLAGS.values(), ids=FLAGS.keys())
def test_bad_flags_exit_2_with_one_error_line_after_any_usage(
    argv: list[str], last_line: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # argparse prints its usage before the error line (qm/cli.py decides that, not the commands).
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    out, err = capsys.readouterr()
    assert (exit_.value.code, out, err.splitlines()[-1]) == (2, "", last_line)
