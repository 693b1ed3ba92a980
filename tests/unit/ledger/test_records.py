"""Prices, label keys, the facts of an observation and the audit idempotency key."""

from __future__ import annotations

from decimal import Decimal

import pytest

from fairshare.errors import InputError
from fairshare.models import FlavorResource
from ledger.facts import facts_of
from ledger.records import AuditEntry, LabelKeys, PriceTable, parse_price

from .kueue_docs import T0, Doc


@pytest.mark.parametrize(("text", "price"), [
    ("2.5", Decimal("2.5")), ("250m", Decimal("0.250")), ("3e-3", Decimal("0.003")), ("4n", Decimal("4E-9")),
    ("1k", Decimal("1000")), ("1Ki", Decimal("1024")), ("0", Decimal("0")), (".5", Decimal("0.5")),
], ids=lambda v: str(v))
def test_a_price_is_read_exactly_in_the_kubernetes_quantity_grammar(text: str, price: Decimal) -> None:
    assert parse_price(text) == price


@pytest.mark.parametrize("text", ["-1", "abc", "1.5.2", "2 dollars", "", "1e999"])
def test_a_bad_price_is_one_line_naming_the_field_and_the_value(text: str) -> None:
    with pytest.raises(InputError) as err:
        PriceTable.of({"a100": {"nvidia.com/gpu": text}})
    assert err.value.one_line().startswith("field flavors[a100].pricePerUnitHour.nvidia.com/gpu: ")
    assert repr(text) in err.value.one_line()


def test_a_price_table_answers_per_flavor_and_resource() -> None:
    table = PriceTable.of({"a100": {"nvidia.com/gpu": "2.5"}, "cpu-pool": {"cpu": "30m"}})
    assert dict(table.prices) == {FlavorResource("a100", "nvidia.com/gpu"): Decimal("2.5"),
                                  FlavorResource("cpu-pool", "cpu"): Decimal("0.030")}
    assert table.price("a100", "cpu") is None


def test_the_facts_keep_only_the_configured_labels_and_name_owner_user_and_team() -> None:
    doc = Doc(labels={"project": "llm", "team": "nlp", "cost-center": "cc-7", "dataset": "v3", "noise": "x"})
    obs = doc.reserved(T0, cluster_queue="frontier").seen(T0 + 1, user="alice")
    facts = facts_of(obs, PriceTable(), LabelKeys(extra=("dataset",)))
    ident = facts.identity
    assert (ident.team, ident.project, ident.team_label, ident.cost_center, ident.owner_kind,
            ident.owner_name, ident.user, ident.labels) == (
        "frontier", "llm", "nlp", "cc-7", "Job", "train", "alice",
        (("cost-center", "cc-7"), ("dataset", "v3"), ("project", "llm"), ("team", "nlp")))


@pytest.mark.parametrize(("labels", "observer", "user"), [
    ({"queuemanager.dev/user": "bob"}, None, "bob"),
    ({"queuemanager.dev/user": "bob"}, "alice", "alice"),
    ({"owner": "carol"}, None, None),
], ids=["from the user label", "the observer's knowledge first", "unknown"])
def test_the_user_comes_from_the_observer_else_from_the_user_label(
        labels: dict[str, str], observer: str | None, user: str | None) -> None:
    obs = Doc(labels=labels).reserved(T0, cluster_queue="frontier").seen(T0 + 1, user=observer)
    assert facts_of(obs, PriceTable(), LabelKeys()).identity.user == user
    other = LabelKeys(user="owner")
    assert facts_of(Doc(labels={"owner": "carol"}).seen(T0), PriceTable(), other).identity.user == "carol"


def test_an_audit_record_s_key_depends_on_every_field_and_nothing_else() -> None:
    a = AuditEntry(at=T0, action="preempt", target_kind="Workload", target_name="w", what="evict w",
                   why="budget", policy="p", target_namespace="ns", policy_generation=3)
    same = AuditEntry(at=T0, action="preempt", target_kind="Workload", target_name="w", what="evict w",
                      why="budget", policy="p", target_namespace="ns", policy_generation=3)
    later = AuditEntry(at=T0 + 1, action="preempt", target_kind="Workload", target_name="w", what="evict w",
                       why="budget", policy="p", target_namespace="ns", policy_generation=3)
    assert a.key == same.key and a.key != later.key and len(a.key) == 32
