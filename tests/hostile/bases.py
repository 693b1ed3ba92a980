"""The valid files every hostile case starts from (one edit each: a case never tests a valid file)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

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

CASE = (
    """\
apiVersion: conformance.queuemanager.dev/v1
kind: CycleCase
metadata: {name: the job is admitted}
spec:
  now: "2026-01-01T00:01:00Z"
  expect:
    admitted: {team-a/job: null}
---
"""
    + KUEUE
)

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

# A kubeconfig of the right shape; its server does not exist (no case ever lets `qm run` get that far).
KUBECONFIG = """\
apiVersion: v1
kind: Config
current-context: dev
clusters:
- name: dev
  cluster:
    server: https://127.0.0.1:1
    insecure-skip-tls-verify: true
contexts:
- name: dev
  context:
    cluster: dev
    user: dev
users:
- name: dev
  user:
    token: not-a-real-token
"""

# A copy of the bundled frontier-shrink scenario as it was when these cases were written: the bundled one
# changes with the simulator (its edits would no longer apply); this one changes only with the schema.
SCENARIO = (ROOT / "tests" / "hostile" / "scenario.yaml").read_text()
