"""Check the Content Credentials of a delivered video or image sequence.

    python -m jobs.verify out.mp4 [--trust-anchors root.pem] [--json]
    python -m jobs.verify out/sh010/sh010.####.exr [--trust-anchors root.pem]

The input may be a local path or a storage URL (s3://, gs://...).  MP4/MOV carry
an embedded C2PA manifest.  An image sequence (a pattern such as
``sh010.####.exr``, or its sidecar ``sh010.credentials.json``) and an MKV file
(``x.mkv``, sidecar ``x.mkv.credentials.json``) are checked against their signed
sidecar: every frame's sha256, and no frame of the sequence left out.  Prints
what the credentials say (consent references, model pack hash, job id; for
sidecars the frames checked and how many the AI modified) and any validation
failures.  Exit status: 0 valid and signed by a certificate that chains to the
given trust anchors, 1 tampered or untrusted (a valid file checked without
``--trust-anchors`` is untrusted: anyone can sign with a self-made
certificate), 2 no credentials or unreadable input.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pipeline.provenance.credentials import VerifyResult

EXIT_OK, EXIT_INVALID, EXIT_MISSING = 0, 1, 2


def uses_sidecar(url: str) -> bool:
    """Whether ``url`` is checked against a sidecar: a sequence pattern, a sidecar, an MKV file."""
    from pipeline.plates.sequence import is_sequence_url
    from pipeline.provenance.config import EMBEDDED_SUFFIXES
    from pipeline.provenance.sidecar import SIDECAR_SUFFIX

    suffix = PurePosixPath(url).suffix.lower()
    if suffix in EMBEDDED_SUFFIXES:
        return False
    return is_sequence_url(url) or url.endswith(SIDECAR_SUFFIX) or suffix == ".mkv"


def _counts(result: VerifyResult) -> tuple[int, int] | None:
    """(files listed, AI-modified among them) of a sidecar's claim, None without one."""
    files = (result.manifest or {}).get("files")
    if not isinstance(files, dict):
        return None
    modified = sum(
        1 for entry in files.values() if isinstance(entry, dict) and entry.get("ai_modified") is True
    )
    return len(files), modified


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m jobs.verify", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "video",
        help="MP4/MOV file, image sequence pattern (shot.####.exr) or its .credentials.json sidecar, "
        "or MKV file (local path or URL)",
    )
    parser.add_argument("--trust-anchors", help="PEM file or URL with the studio root certificate(s)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)

    from jobs.cli import url_credentials_refused
    from pipeline.errors import RecastError
    from pipeline.provenance.credentials import read_pem, verify_video
    from pipeline.provenance.install_key import is_installation_certificate
    from pipeline.provenance.sidecar import verify_sidecar_url
    from pipeline.store import storage
    from pipeline.store.redact import redact_process_output, redact_text

    redact_process_output()  # a URL given with a password (s3://user:pw@bucket/x.mp4) is never printed
    if url_credentials_refused("recast verify", args.video, args.trust_anchors):
        return EXIT_MISSING

    try:
        anchors = (
            read_pem(args.trust_anchors, "--trust-anchors", "CERTIFICATE") if args.trust_anchors else None
        )
        sidecar: str | None = None
        if uses_sidecar(args.video):
            sidecar, result = verify_sidecar_url(args.video, trust_anchors_pem=anchors)
        else:
            with storage.fetched(args.video, suffix=PurePosixPath(args.video).suffix) as local:
                result = verify_video(local, anchors)
    except RecastError as exc:
        print(f"recast verify: {redact_text(str(exc))}", file=sys.stderr)
        return EXIT_MISSING
    counts = _counts(result) if sidecar is not None else None
    if args.json:
        report = result.model_dump(mode="json", exclude={"manifest"})
        if sidecar is not None:
            report["sidecar"] = redact_text(sidecar)
            report["frames_checked"], report["ai_modified_frames"] = counts or (0, 0)
        print(json.dumps(report, indent=1))
    else:
        trust = (
            " (trusted signer)"
            if result.trusted
            else (" (untrusted signer)" if result.status == "valid" else "")
        )
        print(f"{redact_text(args.video)}: {result.status}{trust}")
        if sidecar is not None:
            print(f"  sidecar: {redact_text(sidecar)}")
        if result.signer:
            print(f"  signed by: {result.signer}")
            if is_installation_certificate(result.signer):
                print(
                    "  (a Recast installation's own key, not a studio's: no one's trust anchor; the "
                    "machine that signed has its root in $RECAST_SIGNING_DIR/root.pem)"
                )
        if result.job_id:
            print(f"  job: {result.job_id}")
        print(f"  faces replaced by AI: {'yes' if result.ai_replaced else 'not stated'}")
        if counts is not None:
            noun = "frames" if (result.manifest or {}).get("content") == "sequence" else "files"
            print(f"  {noun} checked: {counts[0]} ({counts[1]} AI-modified)")
        for name, ref in sorted(result.consent_refs.items()):
            print(f"  identity {name}: consent {ref}")
        if result.model_pack_sha256:
            print(f"  model pack sha256: {result.model_pack_sha256}")
        if result.content_sha256:
            print(f"  content sha256 (before signing): {result.content_sha256}")
        for failure in result.failures:
            print(f"  failure: {failure}")
    if result.status == "missing":
        return EXIT_MISSING
    if result.status == "tampered":
        return EXIT_INVALID
    if not result.trusted:
        why = "no --trust-anchors given" if not anchors else "the signer does not chain to the trust anchors"
        print(f"recast verify: {redact_text(args.video)}: untrusted ({why})", file=sys.stderr)
        return EXIT_INVALID
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
