"""The runnable-block convention (tests/runnable_docs.py): a `<!-- runnable -->` line before a ```bash fence.
The blocks themselves run in tests/integration/test_docs_runnable.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.runnable_docs import Block, MarkerError, blocks, marked


def test_a_marked_block_is_found_with_its_line_and_an_unmarked_one_is_not(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# t\n\n```bash\necho no\n```\n\n<!-- runnable -->\n```bash\necho yes\nls\n```\n")
    assert blocks(page) == [Block(str(page), 8, "bash", "echo yes\nls\n")]


@pytest.mark.parametrize(("text", "message"), [
    ("<!-- runnable -->\nsome prose\n",
     "page.md:1: <!-- runnable --> must be followed by a fenced code block"),
    ("<!-- runnable -->\n```bash\necho\n", "page.md:2: the marked block is never closed"),
], ids=["no-fence", "unclosed"])
def test_a_marker_without_its_block_is_an_error_naming_the_line(tmp_path: Path, text: str,
                                                                message: str) -> None:
    page = tmp_path / "page.md"
    page.write_text(text)
    with pytest.raises(MarkerError) as err:
        blocks(page)
    assert str(err.value).endswith(message)


def test_the_local_cluster_and_the_operator_blocks_are_marked_and_are_shell() -> None:
    found = marked()
    every = [b for page in found.values() for b in page]
    assert {b.language for b in every} == {"bash"}
    commands = {page: "".join(b.text for b in page_blocks) for page, page_blocks in found.items()}
    # The operator's walk-through, as the README and the operator's page give it: everything qm run needs.
    for page in ("README.md", "docs/operator.md"):
        for needle in ("--policy manifests/samples/quotapolicy.yaml",
                       "kubectl create namespace queue-manager", "kubectl apply -k manifests/samples",
                       "qm run", "kubectl create -f manifests/samples/jobs.yaml"):
            assert needle in commands[page], (page, needle)
