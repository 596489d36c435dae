"""The documentation: a short README, a site whose pages exist, a job-spec reference that matches the models."""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from jobs import spec_reference

ROOT = Path(__file__).resolve().parent.parent
README_MAX_LINES = 200
SETUP_COMMANDS = (
    "bash infra/bootstrap.sh && .venv/bin/python -m jobs.demo",
    "bash infra/bootstrap.sh --test && .venv/bin/python -m pytest -q",
)


class _MkdocsLoader(yaml.SafeLoader):
    """mkdocs.yml with its ``!!python/name:`` tags read as plain strings (nothing is imported)."""


_MkdocsLoader.add_multi_constructor(
    "tag:yaml.org,2002:python/", lambda loader, suffix, node: f"python/{suffix}"
)


def _nav_pages(entries: Any) -> list[str]:
    if isinstance(entries, str):
        return [entries]
    if isinstance(entries, list):
        return [page for entry in entries for page in _nav_pages(entry)]
    if isinstance(entries, dict):
        return [page for value in entries.values() for page in _nav_pages(value)]
    return []


def test_spec_reference_is_generated_from_the_models() -> None:
    page = ROOT / spec_reference.PAGE
    assert page.is_file(), f"{spec_reference.PAGE} is missing; generate it: {spec_reference.REGENERATE}"
    assert page.read_text(encoding="utf-8") == spec_reference.render(), (
        f"{spec_reference.PAGE} differs from the job-spec models; regenerate it: {spec_reference.REGENERATE}"
    )


def test_spec_reference_names_every_key_with_its_type_default_bounds_and_docstring() -> None:
    rows = {
        html.unescape(re.sub(r"<[^>]+>", "", line.split(" | ")[0].removeprefix("| "))): line
        for line in spec_reference.render().splitlines()
        if line.startswith('| <code class="spec-key">')
    }
    assert " | int | `8` | >= 1, <= 256 | " in rows["faces.batch_size"]
    assert '`"sampled"` \\| `"full"` | `"sampled"`' in rows["resume.fingerprint"]
    assert "MiB of decoded pictures each actor keeps" in rows["resources.decode_cache_mb"]
    # WatermarkSpec's own fields and the docstrings of its base, WatermarkConfig.
    assert "Secret that scrambles bit positions" in rows["provenance.watermark.key"]
    assert " | `true` | " in rows["provenance.watermark.enabled"]  # every output marked (issue 43)
    assert "allow_unmarked_outputs" in rows["provenance.content_credentials"]
    assert " | required | length >= 1 | " in rows["identities.<name>.images"]
    assert " | str | required | " in rows["output.url"]
    # Every key says what it is for: a field added without a docstring fails here, naming it.
    undocumented = sorted(key for key, line in rows.items() if line.rstrip().endswith("|  |"))
    assert not undocumented, f"spec keys without a docstring under the field: {undocumented}"
    assert "resubmitting the same `job_id` resumes" in rows["job_id"]


def test_spec_reference_check_fails_naming_the_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    page = tmp_path / "job-spec.md"
    page.write_text("# an old page\n", encoding="utf-8")
    assert spec_reference.main(["--check", str(page)]) == 1
    assert spec_reference.REGENERATE in capsys.readouterr().err
    assert spec_reference.main(["--write", str(page)]) == 0
    assert spec_reference.main(["--check", str(page)]) == 0


def test_readme_is_short_and_starts_with_the_two_setup_commands() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    lines = text.splitlines()
    assert len(lines) <= README_MAX_LINES, (
        f"README.md has {len(lines)} lines (at most {README_MAX_LINES}): move the detail into docs/"
    )
    assert lines[0] == "# Recast"
    blocks = re.findall(r"^```(\w*)\n(.*?)\n```$", text, re.MULTILINE | re.DOTALL)
    assert [body for _, body in blocks[:2]] == list(SETUP_COMMANDS)
    assert [lang for lang, _ in blocks[:2]] == ["bash", "bash"]
    before = text[: text.index("```")]
    assert before.rstrip().endswith("On a fresh machine with Python 3.12 and pip:")


def test_every_page_in_the_navigation_exists() -> None:
    config = yaml.load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"), Loader=_MkdocsLoader)
    docs = ROOT / config.get("docs_dir", "docs")
    pages = _nav_pages(config["nav"])
    assert str(spec_reference.PAGE.relative_to("docs")) in pages
    missing = [page for page in pages if not (docs / page).is_file()]
    assert pages and missing == []


def test_summary_json_reference_is_generated_and_names_every_key() -> None:
    """``docs/reference/summary-json.md`` is what ``jobs.output_reference`` makes of the summary's and
    report's classes (CI checks it too), every key a summary or report writes has a row, and no row
    names a key no summary writes."""
    from jobs import output_reference

    page = output_reference.render()
    assert (ROOT / output_reference.PAGE).read_text(encoding="utf-8") == page
    data = output_reference.sample().to_dict()
    for key in [*data, *data["shots"][0]]:
        assert f"| `{key}` |" in page, key
    report = output_reference.sample_report()
    for key in [*report, *report["shots"][0], *report["timeline"][0]]:
        assert f"| `{key}` |" in page, key
    optional = {"fixes", "fixes_rerendered"}  # written only when a shot has some
    assert set(output_reference.DESCRIBED["job"]) <= set(data)
    assert set(output_reference.DESCRIBED["shot"]) <= set(data["shots"][0]) | optional
