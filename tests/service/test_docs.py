"""The user documents stand on their own: no path outside the repository, every link resolves,
and the README opens with the commands that start the service and run the tests."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

PERFORMANCE = "docs/performance"
"""The plan, the notebook and the summary: the measurement documents."""


def pages(pattern: str) -> tuple[str, ...]:
    """The site's pages that ``pattern`` matches under ``docs/``, as repository paths."""
    return tuple(sorted(str(path.relative_to(ROOT)) for path in (ROOT / "docs").glob(pattern)))


MEASUREMENT_DOCUMENTS = pages("performance/**/*.md")
"""The plan and the results: commands as typed, with what stood outside the checkout named."""

USER_DOCUMENTS = (
    "README.md",
    *(page for page in pages("**/*.md") if not page.startswith(PERFORMANCE)),
)
"""What a user reads: the README and every page of the site but the measurements."""

DOCUMENTS = USER_DOCUMENTS + MEASUREMENT_DOCUMENTS

LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
PARENT_PATH = re.compile(r"(?<![\w.])\.\./[\w./-]+")
RUN_MACHINE_PATH = re.compile(r"(?<![\w.$<>/-])/(?:tmp|work|root|home|mnt|srv|opt)/[\w./-]*")
"""An absolute path into a folder that existed only on the machine of a run (a temporary tree,
a build folder, a workspace): a reader has none of them."""


def test_the_pages_are_found() -> None:
    """The globs find the site's pages: the operations guide among the user documents, the plan
    and the notebook among the measurements (the parametrized checks are not vacuous)."""
    assert "docs/operations/configuration.md" in USER_DOCUMENTS
    assert "docs/performance/plan/index.md" in MEASUREMENT_DOCUMENTS
    assert "docs/performance/notebook/index.md" in MEASUREMENT_DOCUMENTS


@pytest.mark.parametrize("name", DOCUMENTS)
def test_no_path_leaves_the_repository(name: str) -> None:
    """Every ``../`` path in a user document names something that exists in the repository."""
    document = ROOT / name
    escaping = [
        path for path in PARENT_PATH.findall(document.read_text()) if not _inside(document, path)
    ]
    assert escaping == [], escaping


def _inside(document: Path, path: str) -> bool:
    """Whether ``path``, read from ``document``'s folder, exists inside the repository."""
    target = (document.parent / path).resolve()
    return target.is_relative_to(ROOT) and target.exists()


@pytest.mark.parametrize("name", MEASUREMENT_DOCUMENTS)
def test_measurements_name_no_folder_of_the_run_machine(name: str) -> None:
    """The plan and the results name the public repositories and placeholders, never a
    temporary tree or a build folder of the machine a run was made on."""
    found = RUN_MACHINE_PATH.findall((ROOT / name).read_text())
    assert found == [], found


def test_the_check_sees_a_folder_of_the_run_machine() -> None:
    """Negative twin: a build folder and a temporary tree are found; placeholders are not."""
    text = "cmd:/work/cpp-port-build/bin/x and cmd:/tmp/burst-before/serve.sh; cmd:CPP_HOTPATH"
    assert RUN_MACHINE_PATH.findall(text) == [
        "/work/cpp-port-build/bin/x",
        "/tmp/burst-before/serve.sh",
    ]


REFERENCE = re.compile(r"\bthe reference\b", flags=re.IGNORECASE)
REFERENCE_REPOSITORY = "anaborne/prediction-market-infra"
"""The reference system's public repository, which a reader can open."""


def reference_unnamed(text: str) -> bool:
    """Whether ``text`` speaks of "the reference" without ever naming its repository."""
    return REFERENCE.search(text) is not None and REFERENCE_REPOSITORY not in text


@pytest.mark.parametrize("name", USER_DOCUMENTS)
def test_a_document_about_the_reference_names_its_repository(name: str) -> None:
    """A user document that speaks of "the reference" names its public repository at least once."""
    assert not reference_unnamed((ROOT / name).read_text())


def test_the_check_sees_the_reference_unnamed() -> None:
    """Negative twin: "the reference" alone is found; named once, or not spoken of, it is not."""
    assert reference_unnamed("It speaks the reference system's protocol.")
    assert not reference_unnamed(f"The reference ({REFERENCE_REPOSITORY}), the reference's rows.")
    assert not reference_unnamed("A referenced file.")


@pytest.mark.parametrize("name", DOCUMENTS)
def test_relative_links_resolve(name: str) -> None:
    """Every relative Markdown link names a file or folder that exists in the repository."""
    document = ROOT / name
    targets = [t for t in LINK.findall(document.read_text()) if "://" not in t]
    missing = [t for t in targets if not (document.parent / t).exists()]
    assert missing == [], missing


def test_the_check_sees_an_escaping_path() -> None:
    """The pattern finds a ``../shared/...`` reference (the check can fail)."""
    found = PARENT_PATH.findall("see `../shared/spec/SERVICE.md` and (../x.md)")
    assert found == ["../shared/spec/SERVICE.md", "../x.md"]
    page = ROOT / "docs" / "operations" / "deployment.md"
    assert not _inside(page, found[0])
    assert _inside(page, "../../deploy/systemd/trio-executor.service")


COUNT_WORDS = {1: "It", 2: "Both", 3: "All three", 4: "All four"}
"""How the sentence after the README's opening commands speaks of them, by their number."""


def opening_commands(readme: str) -> tuple[list[str], str]:
    """The commands of the README's first indented block (comments dropped) and the paragraph
    that follows it."""
    blocks = readme.split("\n\n")
    index = next(i for i, block in enumerate(blocks) if block.startswith("    "))
    commands = [
        line.split("#", 1)[0].strip()
        for line in blocks[index].splitlines()
        if line.split("#", 1)[0].strip()
    ]
    return commands, " ".join(blocks[index + 1].split())


def test_readme_opens_with_the_start_and_test_commands() -> None:
    """The README's first two commands start the service and run the tests, and the sentence
    after the opening commands counts them right."""
    commands, following = opening_commands((ROOT / "README.md").read_text())
    assert commands[:2] == ["python3 dev.py serve", "python3 dev.py test"]
    assert following.startswith(f"{COUNT_WORDS[len(commands)]} need only Python 3.11+")


PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```$", re.MULTILINE | re.DOTALL)
"""A fenced Python block of a Markdown document."""
TRY_OUT = "docs/getting-started/try-out.md"
"""The try-out page, which shows the README's client example (run by test_readme_example.py)."""


def test_the_try_out_example_is_the_readmes() -> None:
    """The try-out page's one Python block is the README's, which a test runs: the page cannot
    show an example that no longer works."""
    (page_block,) = PYTHON_BLOCK.findall((ROOT / TRY_OUT).read_text())
    (readme_block,) = PYTHON_BLOCK.findall((ROOT / "README.md").read_text())
    assert page_block == readme_block
    assert "executor.wire.client" in page_block  # the block was found, and is the client example


RESULTS_FOLDER = re.compile(r"bench/results/(\d{4}-\d{2}-\d{2}[\w-]*)")
"""A raw-data folder a document names (``bench/results/2026-12-06-yield/``)."""


def tracked_result_folders() -> set[str]:
    """The folders under ``bench/results/`` that hold a file git tracks (``bench/results/`` is
    ignored, so a folder a run left behind exists locally but never reaches a clone)."""
    listed = subprocess.run(
        ["git", "ls-files", "--", "bench/results"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return {path.split("/")[2] for path in listed if path.count("/") >= 3}


def named_result_folders(text: str) -> set[str]:
    return {name.rstrip("-") for name in RESULTS_FOLDER.findall(text)}


needs_git = pytest.mark.skipif(
    not (ROOT / ".git").exists() or shutil.which("git") is None, reason="not a git checkout"
)


@needs_git
def test_every_raw_data_folder_named_is_tracked() -> None:
    """Each ``bench/results/<folder>`` a document names is in the repository, not only on the
    machine of its run."""
    named = set().union(*(named_result_folders((ROOT / name).read_text()) for name in DOCUMENTS))
    assert "2026-12-06-yield" in named
    assert sorted(named - tracked_result_folders()) == []


@needs_git
def test_the_check_sees_an_untracked_raw_data_folder() -> None:
    """Negative twin: a named folder git does not track is found missing; a tracked one is not."""
    text = "raw: `bench/results/2026-12-06-pauses/`, and bench/results/2099-01-01-x"
    named = named_result_folders(text)
    assert named == {"2026-12-06-pauses", "2099-01-01-x"}
    assert named - tracked_result_folders() == {"2099-01-01-x"}
