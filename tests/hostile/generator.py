"""A seeded generator of hostile inputs for every `qm` command, each with the exact outcome it must have.

Every case is ONE edit of a valid file (tests/hostile/bases.py) or ONE bad flag, and its expectation is
computed from the edit itself (where the NUL byte went, which key was repeated, how deep the nesting
goes), never by running `qm`: the generator and the program under test share no code but the message
wording. The same seed gives the same cases (`generate(SEED)`), so a failure is reproducible by its id.

Outcomes (docs: one line naming file, row/document, field and value; never a traceback, never a hang):

- every command but `qm conformance`: exit 2, nothing on stdout, exactly one stderr line, compared whole;
- `qm conformance`: a case file that cannot be read is a FAILED CASE (shared/conformance/FORMAT.md): exit 1,
  `FAIL <file>: <message>` and the summary on stdout, nothing on stderr.
"""

from __future__ import annotations

import dataclasses
import random
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from .bases import CASE, KUBECONFIG, KUEUE, POLICY, SCENARIO

SEED = 20261201
MAX_BYTES = 4 * 1024 * 1024  # fairshare.yamlfile.MAX_FILE_BYTES
MAX_DEPTH = 100  # fairshare.yamlfile.MAX_DEPTH
LIBYAML_FLOW_LEVELS = 1000  # libyaml's own limit (yaml_parser_increase_flow_level)
DURATION_EXAMPLES = "90s, 30m, 1h30m, 336h, 14d, 2w"  # fairshare.durations.EXAMPLES


@dataclass(frozen=True)
class Case:
    """One hostile input. `{f}` in argv and in the expected texts is the case file's path."""

    id: str
    command: str
    argv: tuple[str, ...]
    content: bytes | None = None  # the file to write at {f}; None with `path_kind` "missing" or "dir"
    path_kind: str = "file"  # file | dir | missing
    rc: int = 2
    stdout: str = ""
    stderr: str = ""

    def render(self, path: str) -> tuple[tuple[str, ...], str, str]:
        argv = tuple(a.replace("{f}", path) for a in self.argv)
        return argv, self.stdout.replace("{f}", path), self.stderr.replace("{f}", path)


@dataclass(frozen=True)
class Target:
    """A command that reads one file: its argv, the valid file it starts from, how an error is shown."""

    command: str
    argv: tuple[str, ...]
    base: str
    prefix: str  # "qm explain: error: " ...; "" for conformance (stdout)
    empty: str  # the message for a file with no document
    missing: str | None = None  # the whole stderr line when the path is not a file (qm run)

    def case(self, id_: str, content: bytes | None, message: str, *, path_kind: str = "file") -> Case:
        if self.command == "conformance":
            return Case(
                f"{self.command}: {id_}",
                self.command,
                self.argv,
                content,
                path_kind,
                1,
                f"FAIL {{f}}: {{f}}: {message}\n0 passed, 1 failed\n",
                "",
            )
        if self.missing is not None and path_kind != "file":
            return Case(
                f"{self.command}: {id_}",
                self.command,
                self.argv,
                content,
                path_kind,
                2,
                "",
                self.missing + "\n",
            )
        return Case(
            f"{self.command}: {id_}",
            self.command,
            self.argv,
            content,
            path_kind,
            2,
            "",
            f"{self.prefix}{{f}}: {message}\n",
        )


NO_POLICY = (
    "expected exactly one QuotaPolicy (apiVersion queuemanager.dev/v1alpha1); the file has no documents"
)
TARGETS = (
    Target(
        "explain",
        ("explain", "{f}"),
        KUEUE,
        "qm explain: error: ",
        "no documents: expected Kueue objects or a CycleCase",
    ),
    Target(
        "conformance",
        ("conformance", "{f}"),
        CASE,
        "",
        "a case file needs exactly one CycleCase document (found 0)",
    ),
    Target("policy check", ("policy", "check", "{f}"), POLICY, "qm policy: error: ", NO_POLICY),
    Target("policy render", ("policy", "render", "{f}"), POLICY, "qm policy: error: ", NO_POLICY),
    Target(
        "run",
        ("run", "--kubeconfig", "{f}"),
        KUBECONFIG,
        "qm run: error: ",
        "expected one YAML document (a kubeconfig (kind: Config)), found no document",
        missing="qm run: error: --kubeconfig: no such file: {f}",
    ),
    Target(
        "simulate",
        ("simulate", "{f}"),
        SCENARIO,
        "qm simulate: error: ",
        "expected one YAML document (a scenario (a YAML mapping)), found no document",
    ),
)


def _position(data: bytes, offset: int) -> str:
    line = data.count(b"\n", 0, offset) + 1
    column = offset - (data.rfind(b"\n", 0, offset) + 1) + 1
    return f"line {line}, column {column}"


def _lines(text: str) -> int:
    return text.count("\n") + (0 if text.endswith("\n") else 1)


# ------------------------------------------------------------------ file-level families (every file command)
def nul_bytes(t: Target, rng: random.Random, n: int) -> Iterator[Case]:
    data = t.base.encode()
    for i in range(n):
        at = rng.randrange(len(data))
        bad = data[:at] + b"\x00" + data[at:]
        yield t.case(
            f"a NUL byte at offset {at} ({i})",
            bad,
            f"binary data, not text (a NUL byte at {_position(bad, at)})",
        )


def binary_files(t: Target, rng: random.Random, n: int) -> Iterator[Case]:
    for i in range(n):
        blob = bytes(rng.randrange(256) for _ in range(rng.randrange(16, 2048)))
        first_nul = blob.find(b"\x00")
        if first_nul < 0:
            blob, first_nul = blob + b"\x00", len(blob)
        # A NUL anywhere makes it binary, whatever bytes come before it (fairshare.yamlfile.decode_text).
        yield t.case(
            f"random bytes with a NUL ({i})",
            blob,
            f"binary data, not text (a NUL byte at {_position(blob, first_nul)})",
        )


def invalid_utf8(t: Target, rng: random.Random, n: int) -> Iterator[Case]:
    data = t.base.encode()
    # Bytes that can never start a UTF-8 sequence, so the decoder stops exactly there.
    never_first = [*range(0x80, 0xC0), 0xC0, 0xC1, *range(0xF5, 0x100)]
    for i in range(n):
        at = rng.randrange(len(data) + 1)
        byte = rng.choice(never_first)
        bad = data[:at] + bytes([byte]) + data[at:]
        yield t.case(
            f"byte 0x{byte:02x} at offset {at} ({i})",
            bad,
            f"not UTF-8 text (byte 0x{byte:02x} at {_position(bad, at)})",
        )


def deep_flow(t: Target, rng: random.Random, n: int) -> Iterator[Case]:
    for i in range(n):
        depth = rng.choice([rng.randrange(MAX_DEPTH + 1, 1000), rng.randrange(1000, 5001)])
        text = t.base + "deep: " + "[" * depth + "]" * depth + "\n"
        # The document's mapping is level 1, so the 100th "[" opens level 101; from 1,000 flow levels on,
        # libyaml's own cap stops at the 1,000th "[" first (fairshare/yamlfile.py says it there).
        at = LIBYAML_FLOW_LEVELS if depth >= LIBYAML_FLOW_LEVELS else MAX_DEPTH
        yield t.case(
            f"flow lists nested {depth} deep ({i})",
            text.encode(),
            f"invalid YAML at line {_lines(t.base) + 1}, column {6 + at}: nested more than "
            f"{MAX_DEPTH} levels deep",
        )


def deep_block(t: Target, rng: random.Random, n: int) -> Iterator[Case]:
    for i in range(n):
        depth = rng.randrange(MAX_DEPTH + 1, 1501)  # 1,500 levels of 2-space indents: 2.2 MB, under the cap
        text = t.base + "deep:\n" + "".join("  " * (k + 1) + f"k{k}:\n" for k in range(depth))
        # level k+2 starts at the line of key k, column 2(k+1)+1: level 101 is key 99.
        line = _lines(t.base) + 1 + 99 + 1
        yield t.case(
            f"block mappings nested {depth} deep ({i})",
            text.encode(),
            f"invalid YAML at line {line}, column {2 * 100 + 1}: nested more than {MAX_DEPTH} levels deep",
        )


_KEY_LINE = re.compile(r"^( *)([A-Za-z][A-Za-z0-9_.-]*):( |$)")


def duplicate_keys(t: Target, rng: random.Random, n: int) -> Iterator[Case]:
    lines = t.base.splitlines(keepends=True)
    # A key line outside flow collections and not a list item; copying it right below repeats the key
    # in the same mapping.
    candidates = [
        i for i, line in enumerate(lines) if _KEY_LINE.match(line) and "{" not in line.split(":")[0]
    ]
    for i in range(n):
        at = rng.choice(candidates)
        m = _KEY_LINE.match(lines[at])
        assert m is not None
        copy = lines[at] if lines[at].endswith("\n") else lines[at] + "\n"
        text = "".join(lines[: at + 1]) + copy + "".join(lines[at + 1 :])
        yield t.case(
            f"key {m.group(2)!r} of line {at + 1} repeated ({i})",
            text.encode(),
            f"invalid YAML at line {at + 2}, column {len(m.group(1)) + 1}: duplicate key "
            f"{m.group(2)!r} (first at line {at + 1})",
        )


def alias_bomb(t: Target, rng: random.Random, n: int) -> Iterator[Case]:
    del rng
    for i in range(n):
        lines = ["zz0: &z0 [" + ", ".join(["x"] * 10) + "]"]
        lines += [f"zz{k}: &z{k} [" + ", ".join([f"*z{k - 1}"] * 10) + "]" for k in range(1, 7)]
        text = t.base + "\n".join(lines) + "\n"
        # zz5 is the first to expand to more than 1,000,000 values (10^6 + ... > MAX + distinct nodes).
        yield t.case(
            f"aliases expanding to 10^7 values ({i})",
            text.encode(),
            f"invalid YAML at line {_lines(t.base) + 6}, column 6: aliases expand to more than "
            "1,000,000 values",
        )


def yaml_syntax(t: Target, rng: random.Random, n: int) -> Iterator[Case]:
    base_lines = _lines(t.base)
    for i in range(n):
        key = "".join(rng.choice("abcdefghij") for _ in range(rng.randrange(2, 9)))
        kind = i % 5
        if kind == 0:  # no newline after it: the stream ends right after "unclosed"
            text, msg = (
                f"{key}: [unclosed",
                (
                    f"invalid YAML at line {base_lines + 1}, column {len(key) + 12}: "
                    "expected ',' or ']', but got '<stream end>'"
                ),
            )
        elif kind == 1:
            text, msg = (
                f"{key}:\n\tx: 1",
                (
                    f"invalid YAML at line {base_lines + 2}, column 1: found character "
                    "'\\t' that cannot start any token"
                ),
            )
        elif kind == 2:
            text, msg = (
                f"{key}: !!python/object:os.system x",
                (
                    f"invalid YAML at line {base_lines + 1}, column {len(key) + 3}: could not determine a "
                    "constructor for the tag 'tag:yaml.org,2002:python/object:os.system'"
                ),
            )
        elif kind == 3:
            month = rng.randrange(13, 100)
            text, msg = (
                f"{key}: 2026-{month}-01",
                "invalid YAML: a value cannot be read: month must be in 1..12",
            )
        else:
            digits = rng.randrange(4301, 20000)
            text, msg = (
                f"{key}: {'9' * digits}",
                "invalid YAML: a value cannot be read: an integer has too many digits",
            )
        ending = "" if kind == 0 else "\n"
        yield t.case(f"YAML error kind {kind} under key {key} ({i})", (t.base + text + ending).encode(), msg)


def whole_file(t: Target, rng: random.Random, n: int) -> Iterator[Case]:
    del n
    yield t.case("an empty file", b"", t.empty)
    for i, text in enumerate(["\n", "   \n\n", "# only a comment\n", "---\n", "---\n---\n# x\n"]):
        yield t.case(f"a file with no document ({i})", text.encode(), t.empty)
    if t.command == "conformance":  # a directory is searched for case files (FORMAT.md): none is an error
        yield Case(
            "conformance: a directory without case files",
            "conformance",
            t.argv,
            None,
            "dir",
            2,
            "",
            "qm conformance: error: {f}: no case files (*.yaml, *.yml) in this directory\n",
        )
    else:
        yield t.case("a directory", None, "cannot read file: Is a directory", path_kind="dir")
    yield t.case("a missing file", None, "cannot read file: No such file or directory", path_kind="missing")
    size = MAX_BYTES + 1 + rng.randrange(1000)
    yield t.case(
        f"{size:,} bytes",
        (t.base + "#" * (size - len(t.base)) + "\n").encode(),
        f"file too large: more than {MAX_BYTES:,} bytes",
    )


FILE_FAMILIES: tuple[tuple[Callable[[Target, random.Random, int], Iterator[Case]], int], ...] = (
    (nul_bytes, 30),
    (binary_files, 10),
    (invalid_utf8, 30),
    (deep_flow, 8),
    (deep_block, 4),
    (duplicate_keys, 30),
    (alias_bomb, 1),
    (yaml_syntax, 25),
    (whole_file, 0),
)


# ------------------------------------------------------------------ flags
def run_flags(rng: random.Random) -> Iterator[Case]:
    def bad(id_: str, argv: tuple[str, ...], line: str) -> Case:
        return Case(f"run flags: {id_}", "run", argv, stderr=line + "\n")

    durations = ("--tick", "--history-persist", "--starvation-grace", "--lease-duration")
    for i in range(40):
        flag = rng.choice(durations)
        word = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randrange(1, 12)))
        if word in ("inf", "nan", "infinity") or re.fullmatch(r"[0-9smhdw.]+", word):
            continue
        yield bad(
            f"{flag} {word} ({i})",
            ("run", flag, word),
            f"qm run: error: argument {flag}: not a duration (e.g. {DURATION_EXAMPLES}, or seconds): "
            f"{word!r}",
        )
    for i in range(20):
        flag = rng.choice(durations)
        value = rng.choice(
            ["0", "-1", "-0.5", "inf", "-inf", "nan", "0s", "0ms", f"-{rng.randrange(1, 99999)}"]
        )
        yield bad(
            f"{flag} {value} ({i})",
            ("run", f"{flag}={value}"),
            f"qm run: error: argument {flag}: must be a finite duration > 0: {value!r}",
        )
    for i in range(10):
        value = rng.choice(["1s", "2s", "2999ms", "0.5", "1", "2.9"])
        yield bad(
            f"--lease-duration {value} ({i})",
            ("run", f"--lease-duration={value}"),
            f"qm run: error: argument --lease-duration: must be at least 3s: {value!r}",
        )
    for i in range(30):
        flag = rng.choice(("--metrics-port", "--health-port"))
        value = rng.choice([str(rng.randrange(65536, 10**9)), str(-rng.randrange(1, 10**6))])
        yield bad(
            f"{flag} {value} ({i})",
            ("run", f"{flag}={value}"),
            f"qm run: error: argument {flag}: port out of range: {value!r}",
        )
    for i in range(10):
        flag = rng.choice(("--metrics-port", "--health-port"))
        value = rng.choice(["http", "80a", "1e3", "8080.0", "", "0x50"])
        yield bad(
            f"{flag} {value!r} ({i})",
            ("run", f"{flag}={value}"),
            f"qm run: error: argument {flag}: not a port: {value!r}",
        )
    for i in range(10):
        flag = rng.choice(("--lease-namespace", "--lease-name"))
        value = rng.choice(["Queue-Manager", "qm_ns", "-qm", "qm-", "a.b", "x" * 64, ""])
        yield bad(
            f"{flag} {value!r} ({i})",
            ("run", f"{flag}={value}"),
            f"qm run: error: argument {flag}: not a DNS label (lowercase letters, digits and '-'): {value!r}",
        )
    for value in ("xml", "JSON", "yaml", ""):
        yield bad(
            f"--log-format {value!r}",
            ("run", f"--log-format={value}"),
            f"qm run: error: argument --log-format: invalid choice: {value!r} (choose from 'json', 'text')",
        )
    for value in ("debug", "TRACE", "5"):
        yield bad(
            f"--log-level {value!r}",
            ("run", f"--log-level={value}"),
            "qm run: error: argument --log-level: invalid choice: "
            f"{value!r} (choose from 'DEBUG', 'INFO', 'WARNING', 'ERROR')",
        )
    yield bad(
        "--dry-run with --no-dry-run",
        ("run", "--dry-run", "--no-dry-run"),
        "qm run: error: argument --no-dry-run: not allowed with argument --dry-run",
    )
    yield bad(
        "a missing kubeconfig",
        ("run", "--kubeconfig", "/nonexistent/kubeconfig"),
        "qm run: error: --kubeconfig: no such file: /nonexistent/kubeconfig",
    )
    for flag in ("--tick", "--kubeconfig", "--lease-duration"):
        yield bad(
            f"{flag} without a value", ("run", flag), f"qm run: error: argument {flag}: expected one argument"
        )
    for i in range(5):
        word = "--" + "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randrange(4, 10)))
        yield bad(f"unknown flag {word} ({i})", ("run", word), f"qm: error: unrecognized arguments: {word}")


def kubeconfig_shapes() -> Iterator[Case]:
    t = next(x for x in TARGETS if x.command == "run")
    edits = {
        "clusters is a mapping": (
            "clusters:\n- name: dev\n  cluster:",
            "clusters:\n  name: dev\n  cluster:",
            "field clusters: must be a list (got 'dict')",
        ),
        "a context without a name": (
            "- name: dev\n  context:",
            "- nick: dev\n  context:",
            "field contexts[0]: must be a mapping with a name (got {'nick': 'dev', "
            "'context': {'cluster': 'dev', 'user': 'dev'}})",
        ),
        "a user that is a string": (
            "  user:\n    token: not-a-real-token\n",
            "  user: token\n",
            "field users[0].user: must be a mapping (got 'str')",
        ),
        "current-context is a list": (
            "current-context: dev",
            "current-context: [dev]",
            "field current-context: must be a string (got ['dev'])",
        ),
        "a list at the top": (
            KUBECONFIG,
            "- apiVersion: v1\n- kind: Config\n",
            "document 1: the document must be a kubeconfig (kind: Config) (got 'list')",
        ),
        "two documents": (
            KUBECONFIG,
            KUBECONFIG + "---\n" + KUBECONFIG,
            "expected one YAML document (a kubeconfig (kind: Config)), found 2 documents",
        ),
    }
    # Right shape, but the Kubernetes client cannot use it (queue_manager/kube.py load_configuration).
    client = "not a usable kubeconfig: "
    edits |= {
        "current-context names no context": (
            "current-context: dev",
            "current-context: prod",
            client + "Invalid kube-config file. Expected object with name prod in {f}/contexts list",
        ),
        "a context names no cluster": (
            "    cluster: dev\n    user: dev",
            "    cluster: nope\n    user: dev",
            client + "Invalid kube-config file. Expected object with name nope in {f}/clusters list",
        ),
        "certificate data that is not base64": (
            "    insecure-skip-tls-verify: true",
            "    certificate-authority-data: '!!!notbase64'",
            client + "Invalid base64-encoded string: number of data characters (9) cannot be 1 more than a "
            "multiple of 4",
        ),
        "a CA file that does not exist": (
            "    insecure-skip-tls-verify: true",
            "    certificate-authority: /nonexistent/ca.crt",
            client + "File does not exist: /nonexistent/ca.crt",
        ),
        "a cluster without a server": (
            "    server: https://127.0.0.1:1\n",
            "",
            client + "the context's cluster has no server URL (https://host:port) (got '')",
        ),
    }
    for id_, (old, new, message) in edits.items():
        assert old in KUBECONFIG, id_
        yield t.case(id_, KUBECONFIG.replace(old, new, 1).encode(), message)


def dev_cluster_flags(rng: random.Random) -> Iterator[Case]:
    def bad(id_: str, argv: tuple[str, ...], line: str) -> Case:
        return Case(f"dev-cluster flags: {id_}", "dev-cluster", ("dev-cluster", *argv), stderr=line + "\n")

    for i in range(10):
        word = rng.choice(["abc", "1.5", "two", "", "1e3", "0x2"])
        yield bad(
            f"--nodes {word!r} ({i})",
            ("up", f"--nodes={word}"),
            f"qm dev-cluster up: error: argument --nodes: not a whole number: {word!r}",
        )
    for i in range(10):
        value = str(rng.choice([-1, -rng.randrange(2, 10**6), 65, rng.randrange(66, 10**9)]))
        yield bad(
            f"--nodes {value} ({i})",
            ("up", f"--nodes={value}"),
            f"qm dev-cluster up: error: argument --nodes: must be between 0 and 64: {value!r}",
        )
    for i in range(5):
        word = rng.choice(["soon", "abc", "1m30", "2 minutes"])
        yield bad(
            f"--timeout {word!r} ({i})",
            ("up", f"--timeout={word}"),
            "qm dev-cluster up: error: argument --timeout: not a duration (e.g. "
            f"{DURATION_EXAMPLES}, or seconds): {word!r}",
        )
    for i in range(5):
        value = rng.choice(["0", "-5", "nan", "inf", "0s"])
        yield bad(
            f"--timeout {value} ({i})",
            ("up", f"--timeout={value}"),
            f"qm dev-cluster up: error: argument --timeout: must be a finite duration > 0: {value!r}",
        )
    yield bad(
        "kubeconfig without --user",
        ("kubeconfig",),
        "qm dev-cluster kubeconfig: error: the following arguments are required: --user",
    )
    for flag in ("--user", "--group"):
        yield bad(
            f"kubeconfig with an empty {flag}",
            ("kubeconfig", "--user=alice", f"{flag}= "),
            f"qm dev-cluster kubeconfig: error: argument {flag}: must not be empty",
        )
    yield bad(
        "an unknown action",
        ("restart",),
        "qm dev-cluster: error: argument ACTION: invalid choice: 'restart' (choose from 'up', 'down', "
        "'status', 'kubeconfig')",
    )


# ------------------------------------------------------------------ field-level edits
def kueue_fields(rng: random.Random) -> Iterator[Case]:
    t = next(x for x in TARGETS if x.command == "explain")
    kinds = "ResourceFlavor, Cohort, ClusterQueue, LocalQueue, WorkloadPriorityClass, Workload"
    for i in range(15):
        word = rng.choice(["Zebra", "Flavour", "Queue", "ClusterQueues", "workload", "Job", "Pod"])
        text = KUEUE.replace("kind: ResourceFlavor", f"kind: {word}", 1)
        yield t.case(
            f"kind {word} ({i})",
            text.encode(),
            f"document 1 ({word} default): field kind: unknown kind (expected one of {kinds}) (got {word!r})",
        )
    for i in range(10):
        version = rng.choice(["kueue.x-k8s.io/v1beta1", "kueue.x-k8s.io/v1", "v1", "kueue/v1beta2"])
        text = KUEUE.replace(
            "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue",
            f"apiVersion: {version}\nkind: ClusterQueue",
            1,
        )
        yield t.case(
            f"apiVersion {version} ({i})",
            text.encode(),
            f"document 2 (ClusterQueue team-a): field apiVersion: unsupported apiVersion (expected "
            f"kueue.x-k8s.io/v1beta2) (got {version!r})",
        )


NOMINAL = "field spec.resourceGroups[0].flavors[0].resources[0].nominalQuota"
REQUESTS = "field spec.podSets[0].template.spec.containers[0].resources.requests"
# One edit of a Kueue object -> the exact message (document, field, value), as kubectl users read it.
KUEUE_EDITS: dict[str, tuple[str, str, str]] = {
    "a negative nominalQuota": (
        'nominalQuota: "4"',
        'nominalQuota: "-4"',
        f"document 2 (ClusterQueue team-a): {NOMINAL}: must not be negative (got '-4')",
    ),
    "a nominalQuota that is a list": (
        'nominalQuota: "4"',
        "nominalQuota: [4]",
        f"document 2 (ClusterQueue team-a): {NOMINAL}: not a quantity (got [4])",
    ),
    "an infinite nominalQuota": (
        'nominalQuota: "4"',
        "nominalQuota: .inf",
        f"document 2 (ClusterQueue team-a): {NOMINAL}: not a quantity: no digits (got inf)",
    ),
    "a nominalQuota that is true": (
        'nominalQuota: "4"',
        "nominalQuota: true",
        f"document 2 (ClusterQueue team-a): {NOMINAL}: not a quantity (got True)",
    ),
    "a negative pod count": (
        "count: 1",
        "count: -1",
        "document 4 (Workload job): field spec.podSets[0].count: must be a non-negative integer (got -1)",
    ),
    "a pod count in words": (
        "count: 1",
        "count: one",
        "document 4 (Workload job): field spec.podSets[0].count: must be an integer (got 'one')",
    ),
    "a pod count past int32": (
        "count: 1",
        "count: 99999999999999999999",
        "document 4 (Workload job): field spec.podSets[0].count: must be a 32-bit integer "
        "(-2147483648 to 2147483647) (got 99999999999999999999)",
    ),
    "a priority in words": (
        "priority: 0",
        "priority: high",
        "document 4 (Workload job): field spec.priority: must be an integer (got 'high')",
    ),
    "a fractional priority": (
        "priority: 0",
        "priority: 1.5",
        "document 4 (Workload job): field spec.priority: must be an integer (got 1.5)",
    ),
    "a negative CPU request": (
        'requests: {cpu: "1"}',
        'requests: {cpu: "-1"}',
        f"document 4 (Workload job): {REQUESTS}.cpu: must not be negative (got '-1')",
    ),
    "requests that are a list": (
        'requests: {cpu: "1"}',
        "requests: [cpu]",
        f"document 4 (Workload job): {REQUESTS}: must be a mapping (got ['cpu'])",
    ),
    "a creationTimestamp in words": (
        'creationTimestamp: "2026-01-01T00:00:00Z"',
        'creationTimestamp: "yesterday"',
        "document 4 (Workload job): field metadata.creationTimestamp: not an RFC 3339 time (got 'yesterday')",
    ),
    "metadata that is a list": (
        "metadata: {name: default}",
        "metadata: [default]",
        "document 1 (ResourceFlavor): field metadata: must be a mapping (got ['default'])",
    ),
    "a spec that is a string": (
        "spec: {clusterQueue: team-a}",
        "spec: team-a",
        "document 3 (LocalQueue main): field spec: must be a mapping (got 'team-a')",
    ),
    "a LocalQueue of a missing ClusterQueue": (
        "spec: {clusterQueue: team-a}",
        "spec: {clusterQueue: nope}",
        "document 3 (LocalQueue team-a/main): field spec.clusterQueue: ClusterQueue 'nope' does not exist",
    ),
    "a cohort name that is a number": (
        "cohortName: org",
        "cohortName: 7",
        "document 2 (ClusterQueue team-a): field spec.cohortName: must be a string (got 7)",
    ),
    "a quota on a missing flavor": (
        "    - name: default\n      resources:",
        "    - name: nope\n      resources:",
        "document 2 (ClusterQueue team-a): field spec.resourceGroups[0].flavors[0].name: "
        "ResourceFlavor 'nope' does not exist",
    ),
    "coveredResources that is a string": (
        "coveredResources: [cpu]",
        "coveredResources: cpu",
        "document 2 (ClusterQueue team-a): field spec.resourceGroups[0]."
        "coveredResources: must be a list (got 'cpu')",
    ),
    "a pending Workload without queueName": (
        "  queueName: main\n",
        "  queuename: main\n",
        "document 4 (Workload team-a/job): field spec.queueName: required field "
        "is missing: a pending Workload names its LocalQueue",
    ),
}


def kueue_edits() -> Iterator[Case]:
    for t in (x for x in TARGETS if x.command in ("explain", "conformance")):
        base = t.base
        shift = 1 if t.command == "conformance" else 0  # the case header is document 1
        for id_, (old, new, message) in KUEUE_EDITS.items():
            if old not in base:
                raise ValueError(f"edit {id_!r} does not apply")
            text = base.replace(old, new, 1)
            number, rest = re.fullmatch(r"document (\d+)(.*)", message, re.S).groups()  # type: ignore[union-attr]
            line = f"document {int(number) + shift}{rest}"
            yield t.case(id_, text.encode(), line)


GRADUAL = "gradual shrink 4 -> 1 over 14 days with drain"  # variants[2] of the bundled scenario
GRADUAL_PATCH = (
    f"  - name: {GRADUAL}\n    description: the policy's own transition (one step a day from day 7); a step "
    "never cuts below what research runs\n    overrides:\n      events:\n        - at: 7d\n          "
    "policyPatch:\n            spec:\n"
)
POLICY_STEP = "QuotaPolicy gpu-pool: field {where}spec.transitions.defaults.stepInterval"


def _longer_than_14d(rng: random.Random) -> str:
    """A stepInterval longer than the bundled policy's 14d duration, in one of the grammar's forms (the
    CRD's CEL cannot compare `d`/`w` forms: fairshare.durations.cel_is_go; the Python rule must)."""
    form = rng.randrange(4)
    if form == 0:
        return f"{rng.randrange(15, 400)}d"
    if form == 1:
        return f"{rng.randrange(337, 10000)}h"
    if form == 2:
        return f"{rng.randrange(3, 50)}w"
    return f"2w{rng.randrange(1, 7)}d"


def _other_spelling(name: str, rng: random.Random) -> str:
    """The same output folder (simulations.scenario.slug), a different name: case and punctuation."""
    out = "".join(c.upper() if c.isalpha() and rng.random() < 0.5 else c for c in name)
    out = out.replace(" ", rng.choice(["-", "_", " - ", "."]))  # one space at most: one_line() collapses runs
    out = out + rng.choice(["", "!", "?", " ."]) if out == name else out
    return out if out != name else name.upper()


def scenario_fields(rng: random.Random) -> Iterator[Case]:
    """Scenario files wrong in a field (issue 13's list): `qm simulate` must refuse them in one line before
    simulating anything. Bounded flags, so that a file wrongly accepted costs seconds, not minutes."""
    argv = ("simulate", "{f}", "--replications", "1", "--no-report", "--quiet")
    requests = (
        "{weight: 6, resources: {nvidia.com/gpu: 1}}\n        - {weight: 3, resources: "
        "{nvidia.com/gpu: 2}}\n        - {weight: 1, resources: {nvidia.com/gpu: 4}}"
    )
    edits: list[tuple[str, str, str, str]] = []
    for _ in range(4):
        days = rng.randrange(28, 400)
        edits.append(
            (
                f"warmup {days}d >= horizon 28d",
                "warmup: 1d",
                f"warmup: {days}d",
                f"field warmup: must be shorter than the horizon (28d) (got '{days}d')",
            )
        )
    for _ in range(4):
        gpus = -rng.randrange(1, 64)
        edits.append(
            (
                f"a request of {gpus} GPU",
                "{weight: 6, resources: {nvidia.com/gpu: 1}}",
                f"{{weight: 6, resources: {{nvidia.com/gpu: {gpus}}}}}",
                "field workloads[0].generator.requests[0].resources['nvidia.com/gpu']: must not be negative "
                f"(got {gpus})",
            )
        )
    for _ in range(2):
        millis = rng.randrange(1, 1000)
        edits.append(
            (
                f"a request of -{millis}m GPU",
                "{weight: 3, resources: {nvidia.com/gpu: 2}}",
                f"{{weight: 3, resources: {{nvidia.com/gpu: -{millis}m}}}}",
                "field workloads[0].generator.requests[1].resources['nvidia.com/gpu']: must not be negative "
                f"(got '-{millis}m')",
            )
        )
    edits.append(
        (
            "request weights all zero",
            requests,
            requests.replace("weight: 6", "weight: 0")
            .replace("weight: 3", "weight: 0")
            .replace("weight: 1", "weight: 0"),
            "field workloads[0].generator.requests[0].weight: Input should be greater than 0 (and 2 more "
            "problems) (got 0)",
        )
    )
    for i in range(3):
        n = rng.randrange(1, 6)
        values = ", ".join(f"{k + 1}h" for k in range(n))
        zeros = ", ".join(rng.choice(["0", "0.0"]) for _ in range(n))
        edits.append(
            (
                f"empirical duration weights all zero ({i})",
                "durations: {kind: lognormal, median: 6h, sigma: 0.8}",
                f"durations: {{kind: empirical, values: [{values}], weights: [{zeros}]}}",
                "field workloads[0].generator.durations.weights: weights must not all be zero",
            )
        )
    edits.append(
        (
            "an empty variant name",
            "  - name: no change",
            "  - name: ''",
            "field variants[0].name: String should have at least 1 character (got '')",
        )
    )
    edits.append(
        (
            "two variants with one name",
            "  - name: abrupt cut 4 -> 1",
            "  - name: no change",
            "field variants[1].name: variant name used twice (first at variants[0]) (got 'no change')",
        )
    )
    for _ in range(4):
        other = _other_spelling("no change", rng)
        edits.append(
            (
                f"variant names {other!r} and 'no change' share an output folder",
                "  - name: abrupt cut 4 -> 1",
                f"  - name: {other!r}",
                "field variants[1].name: variant name gives the same output folder 'no-change' as "
                f"variants[0] ('no change'): names must differ in more than punctuation or "
                f"case (got {other!r})",
            )
        )
    for _ in range(6):
        step = _longer_than_14d(rng)
        edits.append(
            (
                f"the policy's stepInterval {step} > duration 14d",
                "stepInterval: 1d",
                f"stepInterval: {step}",
                f"{POLICY_STEP.format(where='cluster.quotaPolicy.')}: stepInterval must not exceed duration "
                f"(14d) (got '{step}')",
            )
        )
    for _ in range(3):
        step = _longer_than_14d(rng)
        edits.append(
            (
                f"a variant's policy edit sets stepInterval {step} > duration 14d",
                GRADUAL_PATCH,
                GRADUAL_PATCH + f"              transitions: {{defaults: {{stepInterval: {step}}}}}\n",
                POLICY_STEP.format(where=f"variants[2] ({GRADUAL}).events[0].policyPatch.")
                + f": stepInterval must not exceed duration (14d) (got '{step}')",
            )
        )
    edits.append(
        (
            "a horizon of zero",
            "horizon: 28d",
            "horizon: 0s",
            "field horizon: Input should be greater than 0 (got 0.0)",
        )
    )
    edits.append(
        (
            "a sample interval of zero",
            "sampleInterval: 2h",
            "sampleInterval: 0s",
            "field sampleInterval: Input should be greater than 0 (got '0s')",
        )
    )
    edits.append(
        (
            "zero replications",
            "replications: 3",
            "replications: 0",
            "field replications: Input should be greater than or equal to 1 (got 0)",
        )
    )
    edits.append(
        (
            "a horizon in words",
            "horizon: 28d",
            "horizon: a month",
            f"field horizon: must be a duration such as {DURATION_EXAMPLES} (got 'a month')",
        )
    )
    for id_, old, new, message in edits:
        if old not in SCENARIO:  # the bundled scenario changed shape: the edit must still apply
            raise ValueError(f"scenario edit {id_!r} does not apply")
        yield Case(
            f"simulate: {id_}",
            "simulate",
            argv,
            SCENARIO.replace(old, new, 1).encode(),
            stderr=f"qm simulate: error: {{f}}: {message}\n",
        )


# The bundled scenario's cost, by hand (simulations/guards.py computes it from the file): per run, research
# arrives at 0.45/h and business at a diurnal mean of 2.6/h over the 28d = 672h horizon; a sample every 2h
# is 672/2 + 1 = 337 samples; the four variants have 0, 1, 1 and 1 policy edits.
HOURS = 672
RESEARCH, BUSINESS, SAMPLES, EDITS, VARIANTS = 0.45 * HOURS, 2.6 * HOURS, 337, 3, 4
GUARD_TAIL = (" (simulations/guards.py); check the rates, the horizon, the intervals and the replications, "
              "or run it anyway with --force")


def _about(n: float) -> str:
    """The guards' wording of a count: exact below a million, then 3 significant digits in words."""
    if n < 1e6:
        return f"{round(n):,}"
    shown = float(f"{n:.3g}")
    for scale, word in ((1e12, "trillion"), (1e9, "billion"), (1e6, "million")):
        if scale <= shown < 1e15:
            return f"{shown / scale:.3g} {word}"
    return f"{n:.2g}"


def _refusal(per_run: float, samples: float, reps: int, over: str) -> str:
    runs = VARIANTS * reps
    events = reps * (VARIANTS * (2 * per_run + samples) + EDITS)
    return (f"the scenario would simulate about {_about(runs * per_run)} workloads and {_about(events)} "
            f"events in {_about(runs)} runs: {over}{GUARD_TAIL}")


def runaway_scenarios() -> Iterator[Case]:
    """Issue 11 item 5: inputs that each hung `qm simulate` (or traced back) now end at once in one line: a
    non-finite or overlong horizon, rate, weight or shape is refused when the file is read; a finite but
    runaway one (a rate of 1e7/h, a sample every 1ms, 99999999999 replications) by the estimate."""
    argv = ("simulate", "{f}", "--replications", "1", "--no-report", "--quiet")
    rate = "ratePerHour: 0.45"
    finite = "Input should be a finite number"
    edits: list[tuple[str, str, str, str, tuple[str, ...]]] = [
        ("horizon .inf", "horizon: 28d", "horizon: .inf",
         "field horizon: must be a finite, non-negative number of seconds (got inf)", argv),
        ("horizon .nan", "horizon: 28d", "horizon: .nan",
         "field horizon: must be a finite, non-negative number of seconds (got nan)", argv),
        ("horizon 1e308 (a string)", "horizon: 28d", "horizon: 1e308",
         f"field horizon: must be a duration such as {DURATION_EXAMPLES} (got '1e308')", argv),
        ("horizon 1.0e308 (a number)", "horizon: 28d", "horizon: 1.0e+308",
         "field horizon: must be at most 3650d (ten years) (got 1e+308)", argv),
        ("horizon 100000d", "horizon: 28d", "horizon: 100000d",
         "field horizon: must be at most 3650d (ten years) (got '100000d')", argv),
        ("horizon 9999999999999999999999999999w", "horizon: 28d", "horizon: 9999999999999999999999999999w",
         "field horizon: must be at most 3650d (ten years) (got '9999999999999999999999999999w')", argv),
        ("ratePerHour .inf", rate, "ratePerHour: .inf",
         f"field workloads[0].generator.arrivals.ratePerHour: {finite} (got inf)", argv),
        ("ratePerHour .nan", rate, "ratePerHour: .nan",
         f"field workloads[0].generator.arrivals.ratePerHour: {finite} (got nan)", argv),
        ("meanRatePerHour .inf", "meanRatePerHour: 2.6", "meanRatePerHour: .inf",
         f"field workloads[1].generator.arrivals.meanRatePerHour: {finite} (got inf)", argv),
        ("a lognormal sigma of .inf", "sigma: 0.8", "sigma: .inf",
         f"field workloads[0].generator.durations.sigma: {finite} (got inf)", argv),
        ("a request weight of .inf", "{weight: 6, resources: {nvidia.com/gpu: 1}}",
         "{weight: .inf, resources: {nvidia.com/gpu: 1}}",
         f"field workloads[0].generator.requests[0].weight: {finite} (got inf)", argv),
        ("ratePerHour 1e7", rate, "ratePerHour: 1e7",
         _refusal(1e7 * HOURS + BUSINESS, SAMPLES, 1,
                  f"more than 2 million workloads in one run (no change: {_about(1e7 * HOURS + BUSINESS)})"),
         argv),
        ("ratePerHour 1e300", rate, "ratePerHour: 1e300",
         _refusal(1e300 * HOURS + BUSINESS, SAMPLES, 1,
                  f"more than 2 million workloads in one run (no change: {_about(1e300 * HOURS)})"), argv),
        ("sampleInterval 1ms", "sampleInterval: 2h", "sampleInterval: 1ms",
         _refusal(RESEARCH + BUSINESS, HOURS * 3600 * 1000 + 1, 1,
                  f"more than 200,000 samples in one run (no change: {_about(HOURS * 3600 * 1000 + 1)}; "
                  "sampleInterval)"), argv),
        ("--replications 99999999999", "replications: 3", "replications: 3",
         _refusal(RESEARCH + BUSINESS, SAMPLES, 99999999999,
                  "more than 10,000 runs (variants x replications)"),
         ("simulate", "{f}", "--replications", "99999999999", "--no-report", "--quiet")),
    ]
    for id_, old, new, message, args in edits:
        if old not in SCENARIO:  # the bundled scenario changed shape: the edit must still apply
            raise ValueError(f"scenario edit {id_!r} does not apply")
        yield Case(f"simulate runaway: {id_}", "simulate", args, SCENARIO.replace(old, new, 1).encode(),
                   stderr=f"qm simulate: error: {{f}}: {message}\n")


def explain_now(rng: random.Random) -> Iterator[Case]:
    for i in range(15):
        value = rng.choice(
            [
                "yesterday",
                "now",
                "2026-13-01T00:00:00Z",
                "2026-02-30T00:00:00Z",
                "2026-01-01 25:00",
                "1767225600",
                "2026-01-01T00:00:00+25:00",
                f"{rng.randrange(10000, 99999)}-01-01T00:00:00Z",
            ]
        )
        yield Case(
            f"explain flags: --now {value!r} ({i})",
            "explain",
            ("explain", "{f}", f"--now={value}"),
            KUEUE.encode(),
            stderr=f"qm explain: error: --now: not an RFC 3339 time: {value!r}\n",
        )


def policy_fields(rng: random.Random) -> Iterator[Case]:
    for t in (x for x in TARGETS if x.command.startswith("policy")):
        for i in range(10):
            name = rng.choice(["GPUs", "gpus_1", "-gpus", "gpus-", "g p u s", "Gpus.Pool"])
            text = POLICY.replace("metadata: {name: gpus}", f"metadata: {{name: {name!r}}}", 1)
            yield t.case(
                f"metadata.name {name!r} ({i})",
                text.encode(),
                f"document 1 (QuotaPolicy {name}): field metadata.name: must be a DNS subdomain: DNS "
                f"labels joined by '.' (got {name!r})",
            )
        for i in range(10):
            word = rng.choice(["lots", "four", "4 GPUs", "-4", "4x", "0x10"])
            text = POLICY.replace("nominal: 4}", f"nominal: {word!r}}}", 1)
            yield t.case(
                f"nominal {word!r} ({i})",
                text.encode(),
                "document 1 (QuotaPolicy gpus): field spec.teams[0].quotas[0].resources[0].nominal: must be "
                f"a non-negative Kubernetes quantity such as 4, 500m, 16Gi (got {word!r})",
            )
        # Rules the operator would otherwise meet only at reconcile time (fairshare.policy.semantics): the
        # same verdict and line from `qm policy`, the API server (CEL) and the operator.
        for i in range(4):
            floor = rng.randrange(5, 64)
            text = POLICY + f"  transitions: {{defaults: {{floor: {{nvidia.com/gpu: {floor}}}}}}}\n"
            yield t.case(
                f"a transition floor of {floor} GPUs above the nominal 4 ({i})",
                text.encode(),
                "document 1 (QuotaPolicy gpus): field spec.teams[0].quotas[0].resources[0].nominal: "
                f"nominal is below the transition floor of nvidia.com/gpu ({floor} GPUs, "
                "spec.transitions.defaults.floor): a quota never goes below its floor (got '4')",
            )
        for i in range(4):
            value = rng.randrange(0, 100000)
            threshold = value + rng.randrange(1, 100000)
            text = POLICY.replace(
                "  preemption:\n",
                f"  priorityClasses: [{{name: biz, value: {value}}}]\n  preemption:\n"
                f"    protectedClasses: [biz]\n    experimentPriorityThreshold: {threshold}\n",
                1,
            )
            yield t.case(
                f"experimentPriorityThreshold {threshold} above protected class value {value} ({i})",
                text.encode(),
                "document 1 (QuotaPolicy gpus): field spec.preemption.experimentPriorityThreshold: must not "
                f"exceed the value of protected class biz ({value}): its workloads would be experiments too "
                f"(got {threshold})",
            )
        exponent = rng.randrange(100, 100000)
        yield t.case(
            f"nominal 1e{exponent}",
            POLICY.replace("nominal: 4}", f"nominal: '1e{exponent}'}}", 1).encode(),
            "document 1 (QuotaPolicy gpus): field spec.teams[0].quotas[0].resources[0].nominal: quantity "
            f"exponent out of range (got '1e{exponent}')",
        )


def generate(seed: int = SEED) -> list[Case]:
    """Every case, in a stable order; ids are unique."""
    rng = random.Random(seed)
    cases: list[Case] = []
    for target in TARGETS:
        for family, n in FILE_FAMILIES:
            cases.extend(family(target, rng, n))
    cases.extend(run_flags(rng))
    cases.extend(kubeconfig_shapes())
    cases.extend(dev_cluster_flags(rng))
    cases.extend(kueue_fields(rng))
    cases.extend(kueue_edits())
    cases.extend(explain_now(rng))
    cases.extend(scenario_fields(rng))
    cases.extend(runaway_scenarios())
    cases.extend(policy_fields(rng))
    from .gen_plan import plan_cases  # (its module imports this one's Case)

    cases.extend(plan_cases(random.Random(f"{seed}:plan")))
    seen: dict[str, int] = {}
    unique = []
    for case in cases:
        n = seen.get(case.id, 0)
        seen[case.id] = n + 1
        unique.append(case if n == 0 else dataclasses.replace(case, id=f"{case.id} #{n + 1}"))
    return unique
