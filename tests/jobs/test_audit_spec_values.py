"""Issue 41 through the real entrypoint: values of a spec that used to end in a traceback, be garbled in
the refusal, or be accepted.  Every case exits 2 before Ray, names the field (or the file), prints no
traceback and no secret, and leaves the destination as it was.

* YAML tags whose value does not fit them (``!!int abc``), integers of thousands of digits, and
  ``!!binary`` / ``!!set`` / ``!!omap`` / ``!!pairs`` values, in a spec or a policy;
* refusals naming a path with ``secret`` or ``passwd`` in it, printed as written;
* box coordinates and key frames and resource amounts that are infinite, huge, or off the plate;
* two fixes that say different things of one track on the same frames;
* more fixes than a shot (or a job) takes;
* outputs, work areas, passes, review media (and inputs) on ``memory://``, a store inside one process.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from jobs.render import EXIT_BAD_INPUT
from tests.faultjobs import job_spec, make_media
from tests.jobs.refusals import refused, run_main

SECRET = "hunter2SECRET"


@pytest.fixture(scope="module")
def media(tmp_path_factory) -> dict[str, str]:
    return make_media(str(tmp_path_factory.mktemp("audit-values-media")))


def refused_cleanly(dest: Path, capsys, code: int, *words: str) -> str:
    """Exit 2 before Ray naming ``words``, no traceback, no secret, ``dest`` as it was (its stderr)."""
    assert code == EXIT_BAD_INPUT
    err = refused(dest, capsys, *words)
    assert "Traceback" not in err, err
    assert SECRET not in err, err
    return err


def spec_text(media: dict[str, str], dest: Path) -> str:
    return yaml.safe_dump(job_spec(media, str(dest), "audit-values"), sort_keys=False)


# -- YAML tags and huge integers ------------------------------------------------------------------

TAGGED = [
    # (text replaced, replacement, the field, words)
    ("max_actors: 2", "max_actors: !!int abc", "resources.max_actors", "!!int"),  # the audit's
    ("cpus_per_actor: 1", "cpus_per_actor: !!float abc", "resources.cpus_per_actor", "!!float"),
    ("max_actors: 2", "max_actors: " + "9" * 5000, "resources.max_actors", "more than 30 digits"),
    ("max_actors: 2", f"max_actors: !!int {SECRET}", "resources.max_actors", "!!int"),
    ("preset: ultrafast", f"preset: !!timestamp {SECRET}", "output.preset", "!!timestamp"),
    ("preset: ultrafast", f"preset: !!bool {SECRET}", "output.preset", "!!bool"),
    ("preset: ultrafast", f"preset: !!null {SECRET}", "output.preset", "!!null"),
    ("face_index: 0", "face_index: -" + "1" * 4400, "identities.hero.face_index", "more than 30 digits"),
    ("name: plate", "name: !!binary aGVsbG8=", "shots[0].name", "!!binary"),
    ("name: plate", "name: !!set {a: null}", "shots[0].name", "!!set"),
    ("name: plate", "name: !!omap [{a: 1}]", "shots[0].name", "!!omap"),
    ("name: plate", "name: !!pairs [{a: 1}]", "shots[0].name", "!!pairs"),
]


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("old", "new", "field", "words"), TAGGED, ids=[t[1][:28] for t in TAGGED])
def test_a_value_its_tag_does_not_fit_is_refused_naming_the_field(
    media, dest, tmp_path, capsys, old, new, field, words, no_ray
) -> None:
    text = spec_text(media, dest)
    assert old in text
    code = run_main(tmp_path, text.replace(old, new, 1))
    refused_cleanly(dest, capsys, code, f"{field}: line ", words, str(tmp_path / "job.yaml"))


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("where", "value"),
    [
        ("images", "!!binary L3RtcC9zb3VyY2UuanBn"),  # bytes skip the spelling of URLs: refused first
        ("images", "!!set {/tmp/source.jpg: null}"),
        ("url", "!!binary c2MwMS5tb3Y="),
    ],
)
def test_bytes_and_sets_never_reach_a_url_field(media, dest, tmp_path, capsys, where, value, no_ray) -> None:
    spec = job_spec(media, str(dest), "audit-values")
    if where == "images":
        spec["identities"]["hero"]["images"] = ["PLACEHOLDER"]
        field = "identities.hero.images"
    else:
        spec["shots"][0]["url"] = "PLACEHOLDER"
        field = "shots[0].url"
    text = yaml.safe_dump(spec).replace("PLACEHOLDER", value)
    refused_cleanly(dest, capsys, run_main(tmp_path, text), field, "values are not accepted here")


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("policy_text", "field"),
    [
        (f"identities:\n  hero: {{consent_ref: !!int {SECRET}, projects: [ep1]}}\n", "consent_ref"),
        (
            "identities:\n  hero: {consent_ref: REL-1, projects: [ep1], valid_until: !!timestamp abc}\n",
            "valid_until",
        ),
        (
            "identities:\n  hero: {consent_ref: REL-1, projects: [ep1], min_similarity: "
            + "7" * 5000
            + "}\n",
            "min_similarity",
        ),
    ],
    ids=["int", "timestamp", "5000-digits"],
)
def test_a_policy_value_its_tag_does_not_fit_is_refused(
    media, dest, tmp_path, capsys, policy_text, field, no_ray
) -> None:
    policy = tmp_path / "studio-policy.yaml"
    policy.write_text(policy_text)
    spec = job_spec(media, str(dest), "audit-policy")
    spec["provenance"] = {"policy_url": str(policy), "project": "ep1"}
    # The file, the field (as in a spec) and where: never the value.
    where = f"{policy}#identities.hero.{field}"
    refused_cleanly(dest, capsys, run_main(tmp_path, spec), where, "line 2, column ")


# -- paths that hold a word of a secret's key -----------------------------------------------------


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", ["secret_plates/sc01.mov", "plates/secret.mov", "passwd_copy/token.mov"])
def test_a_refused_path_is_printed_as_written(media, dest, tmp_path, capsys, name, no_ray) -> None:
    missing = str(tmp_path / name)
    spec = job_spec(media, str(dest), "audit-paths")
    spec["shots"][0]["url"] = missing
    err = refused_cleanly(dest, capsys, run_main(tmp_path, spec), f"{missing}: not found")
    assert "REDACTED" not in err, err


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", ["etc/passwd_copy", "plates/cookie", "keys/api-key"])
def test_an_identity_picture_named_like_a_secret_is_named_as_written(
    media, dest, tmp_path, capsys, name, no_ray
) -> None:
    folder = tmp_path / name
    folder.mkdir(parents=True)
    spec = job_spec(media, str(dest), "audit-paths")
    spec["identities"]["hero"]["images"] = [str(folder)]
    code = run_main(tmp_path, spec)
    err = refused_cleanly(dest, capsys, code, f"identities.hero.images[0]: {folder}: is a directory")
    assert "REDACTED" not in err, err


@pytest.mark.timeout(60)
def test_a_real_secret_is_still_redacted(media, dest, tmp_path, capsys, no_ray) -> None:
    spec = job_spec(media, str(dest), "audit-paths")
    spec["shots"][0]["url"] = f"s3://svcuser:{SECRET}@bucket/secret_plates/sc01.mov"
    refused_cleanly(dest, capsys, run_main(tmp_path, spec), "shots[0].url", "credentials do not belong")


# -- numbers in fixes and resources ---------------------------------------------------------------

BOX = [40, 30, 120, 110]
NUMBERS = [
    # (fix or resources, the field, words)
    ({"frames": "10-20", "box": {10: [0, 0, float("inf"), 50]}}, "shots[0].fixes[0].box[10][2]", "finite"),
    ({"frames": "10-20", "box": {10: [0, 0, 1e308, 50]}}, "shots[0].fixes[0].box[10][2]", "65536"),
    ({"frames": "10-20", "box": {99_999_999_999: BOX}}, "shots[0].fixes[0].box[99999999999]", "less than"),
    ({"frames": "10-20", "box": {10: [-1, 0, 5, 5]}}, "shots[0].fixes[0].box[10][0]", "greater than"),
    ({"frames": "10-20", "box": {10: [0, 0, 241, 50]}}, "shots[0].fixes[0].box", "not within the plate"),
    ({"frames": "10-20", "box": {10: [0, 0, 50, 181]}}, "shots[0].fixes[0].box", "240x180 pixels"),
    ({"frames": "10-20", "box": {10: BOX, 72: BOX}}, "shots[0].fixes[0].box", "key frame 72 is not a frame"),
    ({"frames": "10-99999999999", "track": 0, "action": "keep_plate"}, "shots[0].fixes[0].frames", "between"),
    ({"frames": "10-20", "track": 10**6, "action": "keep_plate"}, "shots[0].fixes[0].track", "less than"),
    ({"cpus_per_actor": float("inf")}, "resources.cpus_per_actor", "finite number"),  # the audit's
    ({"cpus_per_actor": 1e308}, "resources.cpus_per_actor", "less than or equal to 1024"),
    ({"gpus_per_actor": float("nan")}, "resources.gpus_per_actor", "finite number"),
    ({"custom": {"accelerator_type_L4": float("inf")}}, "resources.custom", "finite numbers above 0"),
    ({"max_inflight_per_actor": 10**20}, "resources.max_inflight_per_actor", "less than or equal to 64"),
]


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("value", "field", "words"), NUMBERS, ids=[n[1] + "-" + n[2] for n in NUMBERS])
def test_numbers_are_finite_and_within_the_plate_and_the_shot(
    media, dest, tmp_path, capsys, value, field, words, no_ray
) -> None:
    spec = job_spec(media, str(dest), "audit-numbers")
    if field.startswith("resources"):
        spec["resources"].update(value)
    else:
        spec["shots"][0]["fixes"] = [value]
    refused_cleanly(dest, capsys, run_main(tmp_path, spec), f"{field}: ", words)


# -- contradictory fixes --------------------------------------------------------------------------


def two_identities(media: dict[str, str], dest: Path) -> dict:
    spec = job_spec(media, str(dest), "audit-contradictions")
    spec["identities"]["double"] = dict(spec["identities"]["hero"])
    spec["selection"] = {"mode": "all", "source": "hero"}
    return spec


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("fixes", "later", "earlier"),
    [
        (  # the audit's: the plate kept and two identities for one track on overlapping frames
            [
                {"frames": "10-20", "track": 0, "action": "keep_plate"},
                {"frames": "1-2", "faces": {"enhance": True}},
                {"frames": "15-30", "track": 0, "identity": "hero"},
                {"frames": "25-40", "track": 0, "identity": "double"},
            ],
            2,
            0,
        ),
        (
            [
                {"frames": "30-40", "track": 1, "identity": "double"},
                {"frames": "40-50", "track": 1, "identity": "hero"},
            ],
            1,
            0,
        ),
        (
            [
                {"frames": "0-60", "track": 0, "identity": "hero"},
                {"frames": "1-1", "track": 0, "identity": "hero"},
                {"frames": "60-60", "track": 0, "action": "keep_plate"},
            ],
            2,
            0,
        ),
    ],
)
def test_contradicting_fixes_are_refused_naming_both(
    media, dest, tmp_path, capsys, fixes, later, earlier, no_ray
) -> None:
    spec = two_identities(media, dest)
    spec["shots"][0]["fixes"] = fixes
    refused_cleanly(
        dest,
        capsys,
        run_main(tmp_path, spec),
        f"shots[0].fixes[{later}]: ",
        f"but shots[0].fixes[{earlier}] says",
        "must agree",
    )


@pytest.mark.timeout(60)
def test_a_fixes_file_contradicting_the_spec_names_the_file_and_the_fix(
    media, dest, tmp_path, capsys, no_ray
) -> None:
    spec = two_identities(media, dest)
    spec["shots"][0]["fixes"] = [{"frames": "10-20", "track": 0, "identity": "hero"}]
    notes = tmp_path / "plate_fixes.yaml"
    notes.write_text(
        yaml.safe_dump(
            {
                "shot": "plate",
                "fixes": [
                    {"frames": "40-41", "track": 0, "identity": "double"},
                    {"frames": "20-25", "track": 0, "action": "keep_plate"},
                ],
            }
        )
    )
    code = run_main(tmp_path, spec, "--fixes", str(notes))
    refused_cleanly(dest, capsys, code, f"{notes} (shot plate, fixes[1]): ", "but shots[0].fixes[0] says")


# -- fixes per shot and per job -------------------------------------------------------------------


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("counts", "words"),
    [
        ([15_000], ["shots[0].fixes: 15,000 fixes; a shot takes at most 1,000"]),  # the audit's
        ([2, 1_001], ["shots[1].fixes: 1,001 fixes"]),
        ([1_000] * 10 + [1], ["shots: more than 10,000 fixes in the job (by shots[10])"]),
    ],
    ids=["15000", "1001-in-the-second", "10001-in-eleven-shots"],
)
def test_fixes_are_bounded(media, dest, tmp_path, capsys, counts, words, no_ray) -> None:
    spec = job_spec(media, str(dest), "audit-many-fixes")
    head = yaml.safe_dump({k: v for k, v in spec.items() if k != "shots"})
    shots = "".join(  # flow lines: 15,000 fixes within the spec's 1 MiB
        f"  - name: s{i}\n    url: {media['plate']}\n    fixes:\n"
        + "".join(f"      - {{frames: {k % 70}, faces: {{enhance: true}}}}\n" for k in range(n))
        for i, n in enumerate(counts)
    )
    refused_cleanly(dest, capsys, run_main(tmp_path, head + "shots:\n" + shots), *words)


# -- memory:// ------------------------------------------------------------------------------------

MEMORY = [
    ("output.url", lambda s: s["output"].update(url="memory://out/{shot}.mp4")),  # the audit's
    ("output.work_url", lambda s: s["output"].update(work_url="memory://work")),
    ("output.pass_url", lambda s: s["output"].update(passes=["matte"], pass_url="memory://p/{shot}_{pass}")),
    ("output.review.url", lambda s: s["output"].update(review={"url": "MEMORY://r/{shot}.mp4"})),
    ("shots[0].output", lambda s: s["shots"][0].update(output="memory://out/plate.mp4")),
    ("shots[0].url", lambda s: s["shots"][0].update(url="memory://plates/plate.mp4")),
    ("identities.hero.images[0]", lambda s: s["identities"]["hero"].update(images=["memory://r/a.jpg"])),
]


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("field", "edit"), MEMORY, ids=[m[0] for m in MEMORY])
def test_memory_store_is_refused_in_a_spec(media, dest, tmp_path, capsys, field, edit, no_ray) -> None:
    spec = job_spec(media, str(dest), "audit-memory")
    edit(spec)
    code = run_main(tmp_path, spec)
    refused_cleanly(dest, capsys, code, f"{field}: memory:// is a store inside one process", "s3://")
    assert not os.path.exists(tmp_path / "memory:")


# -- many --fixes files: bounded as they are read, not after all of them --------------------------


@pytest.mark.timeout(60)
def test_many_fixes_files_are_refused_by_the_one_that_passes_the_bound(
    media, dest, tmp_path, capsys, no_ray
) -> None:
    """An independent audit gave one shot 16 files of 1,000 fixes: refused after 82 s, all parsed.  Now
    the second file, which takes the shot past 1,000 fixes, is named, and the rest are never read."""
    notes = []
    for n in range(16):
        path = tmp_path / f"notes{n:02d}.yaml"
        path.write_text(
            yaml.safe_dump({"shot": "plate", "fixes": [{"frames": "0-3", "keep_plate": True}] * 600})
        )
        notes.append(path)
    notes[5].write_text("shot: [this file is never read")
    args = [arg for path in notes for arg in ("--fixes", str(path))]
    err = refused_cleanly(
        dest,
        capsys,
        run_main(tmp_path, job_spec(media, str(dest), "many-notes"), *args),
        f"{notes[1]} (shot plate)",
    )
    assert "1,200 fixes (by this one); a shot takes at most 1,000" in err


@pytest.mark.timeout(60)
def test_fixes_files_are_bounded_in_bytes_together(
    media, dest, tmp_path, capsys, no_ray, monkeypatch
) -> None:
    from cluster.spec import fixes_file

    monkeypatch.setattr(fixes_file, "MAX_FIXES_FILES_BYTES", 2_000)
    notes = []
    for n in range(3):
        path = tmp_path / f"big{n}.yaml"
        path.write_text(
            yaml.safe_dump(
                {"shot": "plate", "fixes": [{"frames": f"{k}-{k}", "keep_plate": True} for k in range(20)]}
            )
        )
        notes.append(path)
    args = [arg for path in notes for arg in ("--fixes", str(path))]
    err = refused_cleanly(
        dest,
        capsys,
        run_main(tmp_path, job_spec(media, str(dest), "big-notes"), *args),
        "the --fixes files hold more than",
    )
    assert any(str(p) in err for p in notes[1:])
