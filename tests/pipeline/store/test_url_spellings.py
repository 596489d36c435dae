"""Two spellings of one place always compare equal, and an output onto an input is always refused
(issue 29): properties checked with Hypothesis over generated spellings of real files.

Local spellings: plain absolute, relative to the spec's folder, ``./``, ``file://``, ``file:``,
``local://``, ``local:``, ``FILE://``, doubled slashes, ``.`` segments, ``x/..`` detours, and a
symlinked folder.  Object-store spellings: scheme case and aliases (``s3a``, ``gcs``), doubled
slashes, ``.`` segments, an empty first segment.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from fsspec.core import url_to_fs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cluster.checks.destinations import check_destinations, normalise
from cluster.spec.job import parse_spec
from cluster.spec.shot_refs import expand_shots, work_url_for
from pipeline.errors import InputRefused, SpecError
from pipeline.provenance.policy import comparable_url
from pipeline.store import urls

PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """``site/plates/plate.mp4``, ``site/jobs`` (the spec's folder) and ``site/link`` -> ``plates``."""
    root = tmp_path_factory.mktemp("spellings") / "site"
    (root / "plates").mkdir(parents=True)
    (root / "jobs").mkdir()
    (root / "plates" / "plate.mp4").write_bytes(b"a plate")
    os.symlink(root / "plates", root / "link")
    return root


PREFIXES = ["", "file://", "file:", "local://", "local:", "FILE://", "Local://"]


@st.composite
def local_spelling(draw, site: Path, *, base: str = "jobs", with_dotdot: bool = True) -> str:
    """A spelling of ``site/plates/plate.mp4``; relative ones against ``site/<base>`` (``jobs`` or ``.``)."""
    parts = [draw(st.sampled_from(["plates", "link"])), "plate.mp4"]
    if with_dotdot and draw(st.booleans()):
        parts.insert(0, draw(st.sampled_from(["x/..", "plates/..", "./x/.."])))
    if draw(st.booleans()):
        parts.insert(draw(st.integers(0, len(parts))), ".")
    tail = draw(st.sampled_from(["/", "//", "/./"])).join(parts)
    prefix = draw(st.sampled_from(PREFIXES))
    if draw(st.booleans()):
        # file://rel and file:rel are relative too, as fsspec reads them
        if base == "jobs":
            return prefix + draw(st.sampled_from(["../", "./../", "..//"])) + tail
        return (
            prefix + draw(st.sampled_from(["", "./", ".//"] + (["jobs/../"] if with_dotdot else []))) + tail
        )
    # An absolute path; 'file:' + '//tmp/x' would be file://tmp/x, the relative tmp/x to fsspec.
    lead = draw(st.sampled_from(["", "/"])) if not prefix.endswith(":") else ""
    return prefix + lead + f"{site}/" + tail


@settings(PROPERTY)
@given(data=st.data())
def test_local_spellings_of_one_place_compare_equal(site, data) -> None:
    base = str(site / "jobs")
    a, b = data.draw(local_spelling(site)), data.draw(local_spelling(site))
    ca, cb = urls.canonical(a, base), urls.canonical(b, base)
    assert os.path.realpath(ca) == os.path.realpath(cb) == str((site / "plates" / "plate.mp4").resolve())
    assert normalise(ca) == normalise(cb)
    assert comparable_url(ca) == comparable_url(cb)
    for spelling, canonical in ((a, ca), (b, cb)):
        assert urls.is_local(spelling) and urls.is_local(canonical)
        if not spelling.startswith(("FILE", "Local")) and os.path.isabs(urls.local_path(spelling)):
            # fsspec itself reaches the same file through the spelling
            _, path = url_to_fs(spelling)
            assert os.path.realpath(urls.canonical_path(path)) == os.path.realpath(canonical)


@settings(PROPERTY)
@given(data=st.data())
def test_an_output_onto_an_input_is_always_refused(site, data) -> None:
    """Source and output are two spellings of one file: refused whatever ``if_exists`` says."""
    source = data.draw(local_spelling(site, base="."))
    # An output's '..' is refused as written (another rule): the output spellings go without.
    output = data.draw(local_spelling(site, base=".", with_dotdot=False))
    spec = parse_spec(
        {
            "job_id": "p",
            "shots": [{"name": "plate", "url": source, "output": output}],
            "identities": {"hero": {"images": [f"{site}/hero.jpg"]}},
            "output": {
                "url": f"{site}/out/{{shot}}.mp4",
                "if_exists": data.draw(st.sampled_from(["overwrite", "skip"])),
            },
        },
        base_dir=str(site),
    )
    shots = expand_shots(spec)
    with pytest.raises(SpecError, match="would replace"):
        check_destinations(spec, shots, work_url_for(spec, shots))


STORES = [("s3", "s3"), ("S3", "s3"), ("s3a", "s3"), ("gs", "gs"), ("GCS", "gs")]
"""Schemes of stores a job spec may name, each with its canonical spelling."""


@st.composite
def store_spelling(draw, *, in_one_process: bool = True) -> tuple[str, str]:
    """(a spelling of ``<store>://bucket/plates/plate.mp4``, the canonical form); ``in_one_process``:
    ``memory://`` too, which a job spec may not name."""
    scheme, canonical_scheme = draw(
        st.sampled_from([*STORES, ("memory", "memory"), ("MEMORY", "memory")] if in_one_process else STORES)
    )
    sep = draw(st.sampled_from(["/", "//", "/./", "/././"]))
    lead = draw(st.sampled_from(["", "/", "./"]))
    return (
        f"{scheme}://{lead}bucket{sep}plates{sep}plate.mp4",
        f"{canonical_scheme}://bucket/plates/plate.mp4",
    )


@settings(PROPERTY)
@given(a=store_spelling(), b=store_spelling())
def test_object_store_spellings_of_one_place_compare_equal(a, b) -> None:
    (url_a, want_a), (url_b, want_b) = a, b
    assert urls.canonical(url_a) == want_a and urls.canonical(url_b) == want_b
    assert not urls.is_local(url_a)
    if want_a == want_b:
        assert normalise(url_a) == normalise(url_b) == want_a
        assert comparable_url(url_a) == comparable_url(url_b)


@settings(PROPERTY)
@given(a=store_spelling(in_one_process=False), b=store_spelling(in_one_process=False))
def test_an_object_store_output_onto_its_input_is_refused(site, a, b) -> None:
    (source, want_source), (output, want_output) = a, b
    spec = parse_spec(
        {
            "job_id": "p",
            "shots": [{"name": "plate", "url": source, "output": output}],
            "identities": {"hero": {"images": [f"{site}/hero.jpg"]}},
            "output": {"url": "s3://out/{shot}.mp4", "if_exists": "overwrite"},
        }
    )
    shots = expand_shots(spec)
    if want_source != want_output:  # another store: not the same place
        check_destinations(spec, shots, work_url_for(spec, shots))
        return
    with pytest.raises(SpecError, match="would replace"):
        check_destinations(spec, shots, work_url_for(spec, shots))


IN_A_SPEC = {
    "output.url": lambda data, url: data["output"].update(url=url.replace("plate.mp4", "{shot}.mp4")),
    "output.work_url": lambda data, url: data["output"].update(work_url=url),
    "shots[0].output": lambda data, url: data["shots"][0].update(output=url),
    "shots[0].url": lambda data, url: data["shots"][0].update(url=url),
}


@settings(PROPERTY)
@given(place=store_spelling())
def test_a_spec_names_no_store_inside_one_process(site, place) -> None:
    """``memory://`` is a store of this process only: the job's actors would not see what is there,
    and what they write would not be there for the driver.  Refused in every field, however spelt."""
    url, canonical = place
    for field, edit in IN_A_SPEC.items():
        data = {
            "job_id": "p",
            "shots": [{"name": "plate", "url": "s3://b/plate.mp4"}],
            "identities": {"hero": {"images": [f"{site}/hero.jpg"]}},
            "output": {"url": "s3://o/{shot}.mp4"},
        }
        edit(data, url)
        if not canonical.startswith("memory://"):
            parse_spec(data)
            continue
        with pytest.raises(SpecError, match="memory:// is a store inside one process") as err:
            parse_spec(data)
        assert err.value.field == field


@pytest.mark.parametrize(
    "url",
    ["simplecache::file:///x", "dir::/x", "s3://b/x::y", "ftp://host/x", "http://host/x.mp4", "s3://", "s3://b/../x",
     "data:,abc", "/x\n/y", ""],
)  # fmt: skip
def test_spellings_without_a_canonical_form_are_refused(url) -> None:
    assert urls.problem(url) is not None
    with pytest.raises(InputRefused):
        urls.canonical(url)


def test_an_absolute_path_is_canonical_where_the_current_folder_is_gone(tmp_path) -> None:
    """A job submitted with a working directory can outlive that folder (Ray removes its copy when no
    worker on the node uses it): absolute paths, such as the report's links, must not need it."""
    gone = tmp_path / "working_dir"
    gone.mkdir()
    here = os.getcwd()
    os.chdir(gone)
    try:
        gone.rmdir()
        assert urls.canonical_path("/work/out/./qc//sh010.json") == "/work/out/qc/sh010.json"
        assert urls.canonical("/work/out/../out/x.json") == "/work/out/x.json"
    finally:
        os.chdir(here)
