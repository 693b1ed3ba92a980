"""Units a finance team reads: a price is per GPU-hour, core-hour or GiB-hour (fairshare/resource_units.py),
in the policy's currency; a memory price that can only be per byte-hour is refused in one line; usage and
money of the shipped sample are what its prices say (ten minutes of the sample Jobs cost cents to dollars).
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from fairshare.errors import InputError
from fairshare.models import Admission, Condition, FlavorResource, PodSet, PodSetAssignment, Workload
from fairshare.policy import load_policy_file, parse_policy
from fairshare.resource_units import GIB, ResourceUnit, unit_of
from fairshare.yamlfile import load_yaml_one
from ledger.accounting import advance
from ledger.codec import decode, encode
from ledger.facts import Held, facts_of
from ledger.life import LifeState
from ledger.records import AuditEntry, LabelKeys, PriceTable, WorkloadObservation
from queue_manager.ledger_feed import ledger_config

ROOT = Path(__file__).resolve().parents[3]
SAMPLE = ROOT / "manifests" / "samples" / "quotapolicy.yaml"
T0 = 1_800_000_000.0
MEMORY_32GI = 32 * GIB * 1000  # milli-bytes


@pytest.mark.parametrize(("resource", "unit"), [
    ("nvidia.com/gpu", ResourceUnit("GPU")), ("amd.com/gpu", ResourceUnit("GPU")),
    ("google.com/tpu", ResourceUnit("TPU")), ("cpu", ResourceUnit("core")),
    ("memory", ResourceUnit("GiB", GIB)), ("ephemeral-storage", ResourceUnit("GiB", GIB)),
    ("hugepages-2Mi", ResourceUnit("GiB", GIB)), ("example.com/fpga", ResourceUnit("fpga")),
], ids=lambda v: str(v))
def test_each_resource_is_read_in_the_unit_a_person_reads_it_in(resource: str, unit: ResourceUnit) -> None:
    assert unit_of(resource) == unit
    assert unit_of(resource).hours in ("GPU-h", "TPU-h", "core-h", "GiB-h", "fpga-h")


@pytest.mark.parametrize(("price", "per_gib"), [("3.7e-12", "0.0039728447488"), ("5n", "5.36870912"),
                                                ("0.0000009", "966.3676416")])
def test_a_memory_price_meant_per_byte_hour_is_refused_in_one_line_with_its_price_per_gib_hour(
        price: str, per_gib: str) -> None:
    with pytest.raises(InputError) as err:
        PriceTable.of({"a100": {"memory": price}})
    line = err.value.one_line()
    assert line.startswith("field flavors[a100].pricePerUnitHour.memory: memory is priced per GiB-hour; ")
    assert f"(per GiB-hour that is {per_gib})" in line and f"(got '{price}')" in line and "\n" not in line


def test_the_policy_check_refuses_a_per_byte_memory_price_naming_the_field() -> None:
    doc = load_yaml_one(str(SAMPLE), what="a QuotaPolicy")
    doc["spec"]["flavors"][0]["pricePerUnitHour"]["memory"] = "3.7e-12"
    with pytest.raises(InputError) as err:
        parse_policy(doc, file="policy.yaml")
    line = err.value.one_line()
    assert line.startswith("policy.yaml: ")
    assert "field spec.flavors[0].pricePerUnitHour['memory']: memory is priced per GiB-hour; " in line
    assert line.endswith("(got '3.7e-12')")


@pytest.mark.parametrize("price", ["0", "0.000001", "0.004", "2"])
def test_a_memory_price_per_gib_hour_and_zero_are_accepted(price: str) -> None:
    assert PriceTable.of({"a100": {"memory": price}}).price("a100", "memory") == Decimal(price)


def _sample_job(name: str, gpus: int, cpus: int, memory: int, start: float, end: float | None) -> Workload:
    usage = (("cpu", cpus * 1000), ("memory", memory), ("nvidia.com/gpu", gpus * 1000))
    conds: tuple[Condition, ...] = (Condition("QuotaReserved", True, "QuotaReserved", "", start),)
    if end is not None:
        conds += (Condition("Finished", True, "Succeeded", "", end),)
    return Workload(namespace="ai-frontier-research", name=name, queue_name="ai-frontier-research",
                    pod_sets=(PodSet("main", 1, usage),), creation_timestamp=start, uid=f"uid-{name}",
                    labels=(("queuemanager.dev/project", "scaling-laws"),),
                    admission=Admission("ai-frontier-research", (PodSetAssignment(
                        "main", tuple((r, "gpu-a100") for r, _ in usage), usage, 1),)),
                    conditions=conds)


def _played(wl_start: Workload, wl_end: Workload, prices: PriceTable, labels: LabelKeys) -> LifeState:
    state = None
    for wl, at in ((wl_start, T0 + 1), (wl_end, T0 + 601)):
        step = advance(state, facts_of(WorkloadObservation(wl, at), prices, labels), cutoff_ms=0)
        assert step is not None
        state = step.state
    assert state is not None
    return state


def test_ten_minutes_of_the_sample_experiment_cost_what_its_prices_say_per_gpu_core_and_gib_hour() -> None:
    config = ledger_config([load_policy_file(str(SAMPLE))])
    start = _sample_job("experiment", 2, 4, MEMORY_32GI, T0, None)
    done = _sample_job("experiment", 2, 4, MEMORY_32GI, T0, T0 + 600)
    state = _played(start, done, config.prices, config.labels)
    costs = {fr.resource: t.cost_useful for fr, t in state.totals}
    # 2 GPUs x 1/6 h x 2.5, 4 cores x 1/6 h x 0.03, 32 GiB x 1/6 h x 0.004 (the sample's prices, USD).
    assert costs == {"nvidia.com/gpu": Decimal("0.833333333"), "cpu": Decimal("0.020000000"),
                     "memory": Decimal("0.021333333")}
    assert state.identity.project == "scaling-laws"  # the sample's projectLabel is the ledger's project key
    assert state.parts == ()
    assert config.prices.currency("gpu-a100") == "USD"


def test_the_policy_s_currency_goes_with_every_price_it_sets() -> None:
    doc = load_yaml_one(str(SAMPLE), what="a QuotaPolicy")
    doc["spec"]["ledger"] = {"currency": "EUR"}
    config = ledger_config([parse_policy(doc)])
    facts = facts_of(WorkloadObservation(_sample_job("e", 2, 4, MEMORY_32GI, T0, None), T0 + 1),
                     config.prices, config.labels)
    assert {h.currency for h in facts.held} == {"EUR"}


@pytest.mark.parametrize("currency", ["usd", "EURO", "", "€", "US1"])
def test_a_currency_that_is_not_an_iso_4217_code_is_refused_naming_the_field(currency: str) -> None:
    doc = load_yaml_one(str(SAMPLE), what="a QuotaPolicy")
    doc["spec"]["ledger"] = {"currency": currency}
    with pytest.raises(InputError) as err:
        parse_policy(doc)
    assert "spec.ledger.currency" in err.value.one_line()


def _held_line(held: list[list[object]], version: int) -> dict[str, object]:
    raw = encode(facts_of(WorkloadObservation(_sample_job("e", 2, 4, MEMORY_32GI, T0, None), T0 + 1),
                          PriceTable(), LabelKeys()))
    return {**raw, "v": version, "held": held, "reserved": held}


@pytest.mark.parametrize(("item", "held"), [
    (["a100", "memory", 1, "0.004", "USD"], Held("a100", "memory", 1, Decimal("0.004"), "USD")),
], ids=["format 2 as written"])
def test_a_spool_line_of_this_version_keeps_its_price_and_currency(item: list[object], held: Held) -> None:
    facts = decode(_held_line([item], 2))
    assert facts.held == (held,)  # type: ignore[union-attr]


@pytest.mark.parametrize(("item", "held"), [
    (["a100", "memory", 1, "0.004"], Held("a100", "memory", 1, Decimal("0.004"), "USD")),
    (["a100", "memory", 1, "5E-9"], Held("a100", "memory", 1, Decimal("5E-9") * GIB, "USD")),
    (["a100", "cpu", 1, "3E-9"], Held("a100", "cpu", 1, Decimal("3E-9"), "USD")),
    (["", "memory", 1, None], Held("", "memory", 1, None, "")),
], ids=["a GiB-hour price is read as written", "a per-byte-hour price is converted at the same cost",
        "a cpu price is never converted", "the unknown flavor has no currency"])
def test_a_spool_line_written_before_units_is_read_by_the_migration_s_rule(item: list[object],
                                                                          held: Held) -> None:
    facts = decode(_held_line([item], 1))
    assert facts.held == (held,)  # type: ignore[union-attr]


def test_an_audit_record_spooled_before_the_workload_fields_keeps_its_key() -> None:
    old = AuditEntry(at=T0, action="preempt", target_kind="Workload", target_name="w", what="evict w",
                     why="budget", policy="p", target_namespace="ns", policy_generation=3, team="research")
    # The key the previous version computed for this record (a hash of its fields).
    assert old.key == "7bfe82a0859b175c274e9e07bc7e8040"
    assert decode(encode(old)) == old
    owned = AuditEntry(at=T0, action="preempt", target_kind="Workload", target_name="w", what="evict w",
                       why="budget", policy="p", target_namespace="ns", policy_generation=3, team="research",
                       local_queue="research", project="llm", user="alice")
    assert owned.key != old.key and decode(encode(owned)) == owned


def test_the_price_table_is_per_flavor_resource_in_its_unit() -> None:
    table = PriceTable.of({"a100": {"memory": "0.004", "nvidia.com/gpu": "2.5"}}, {"a100": "EUR"})
    assert (table.price("a100", "memory"), table.currency("a100"), table.currency("l4")) == (
        Decimal("0.004"), "EUR", "USD")
    assert FlavorResource("a100", "memory") in table.prices
