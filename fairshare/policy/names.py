"""Kubernetes' name rules for what a policy names or renders, as pydantic types with their CRD rules: object
names, resource names, label keys and label values (k8s.io/apimachinery/pkg/util/validation: IsDNS1123Label,
IsDNS1123Subdomain, IsQualifiedName, IsValidLabelValue). Kueue's webhooks apply them to the objects the
operator renders (pkg/webhooks/resourceflavor_webhook.go: nodeLabels, taint keys and values, toleration keys;
common.go: resource names), so a policy that breaks one is refused when it is read, not when an object is
applied (issue 33).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, Field

DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
# A resource name as in a Pod's resources (cpu, memory, nvidia.com/gpu, example.com/foo-bar): a qualified
# name (Kueue validateResourceName: IsLabelKey); at most 63 characters in all here, so both parts fit.
RESOURCE_NAME = (r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                 r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
# A label key (IsQualifiedName): an optional DNS-subdomain prefix of at most 253 characters and "/", then a
# name of at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit.
LABEL_KEY = (r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
             r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
# A label value (IsValidLabelValue): empty, or at most 63 of the name part's characters.
LABEL_VALUE = r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$"

MAX_PREFIX = 253  # IsDNS1123Subdomain: DNS1123SubdomainMaxLength
MAX_LABEL_KEY = MAX_PREFIX + 1 + 63
PREFIX_MESSAGE = f"the prefix of a label key (before '/') must be at most {MAX_PREFIX} characters"
# The same bound in CEL (the pattern cannot count the prefix); indexOf is O(size) and the key is bounded.
PREFIX_RULE = f"!self.contains('/') || self.indexOf('/') <= {MAX_PREFIX}"
KEYS_PREFIX_RULE = f"self.all(k, !k.contains('/') || k.indexOf('/') <= {MAX_PREFIX})"


def _prefix_bounded(key: str) -> str:
    prefix, slash, _ = key.rpartition("/")
    if slash and len(prefix) > MAX_PREFIX:
        raise ValueError(f"{PREFIX_MESSAGE} (got {key!r})")
    return key


LabelKey = Annotated[str, Field(pattern=LABEL_KEY, min_length=1, max_length=MAX_LABEL_KEY,
                                json_schema_extra={"x-kubernetes-validations": [
                                    {"rule": PREFIX_RULE, "message": PREFIX_MESSAGE}]}),
                     AfterValidator(_prefix_bounded)]
"""A label key (example.com/zone, cost-center)."""

LabelValue = Annotated[str, Field(pattern=LABEL_VALUE, min_length=1, max_length=63)]
"""A label value that must be given (a budget's project)."""

OptionalLabelValue = Annotated[str, Field(pattern=LABEL_VALUE, max_length=63)]
"""A label value, which may be empty (a node label `gpu: ""`, a taint's value)."""

