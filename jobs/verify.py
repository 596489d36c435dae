"""Check the Content Credentials (C2PA) of a delivered video.

    python -m jobs.verify out.mp4 [--trust-anchors root.pem] [--json]

The file may be a local path or a storage URL (s3://, gs://...).  Prints what
the manifest says (consent references, model pack hash, job id) and any
validation failures.  Exit status: 0 valid and signed by a certificate that
chains to the given trust anchors, 1 tampered or untrusted (a valid file
checked without ``--trust-anchors`` is untrusted: anyone can sign with a
self-made certificate), 2 no credentials or unreadable input.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import PurePosixPath

EXIT_OK, EXIT_INVALID, EXIT_MISSING = 0, 1, 2


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m jobs.verify", description=__doc__.split("\n\n")[0])
    parser.add_argument("video", help="MP4/MOV file (local path or URL)")
    parser.add_argument("--trust-anchors", help="PEM file or URL with the studio root certificate(s)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)

    from jobs.cli import url_credentials_refused
    from pipeline.errors import RecastError
    from pipeline.provenance.credentials import read_pem, verify_video
    from pipeline.store import storage
    from pipeline.store.redact import redact_process_output, redact_text

    redact_process_output()  # a URL given with a password (s3://user:pw@bucket/x.mp4) is never printed
    if url_credentials_refused("recast verify", args.video, args.trust_anchors):
        return EXIT_MISSING

    try:
        anchors = (
            read_pem(args.trust_anchors, "--trust-anchors", "CERTIFICATE") if args.trust_anchors else None
        )
        with storage.fetched(args.video, suffix=PurePosixPath(args.video).suffix) as local:
            result = verify_video(local, anchors)
    except RecastError as exc:
        print(f"recast verify: {redact_text(str(exc))}", file=sys.stderr)
        return EXIT_MISSING
    if args.json:
        print(json.dumps(result.model_dump(mode="json", exclude={"manifest"}), indent=1))
    else:
        trust = (
            " (trusted signer)"
            if result.trusted
            else (" (untrusted signer)" if result.status == "valid" else "")
        )
        print(f"{redact_text(args.video)}: {result.status}{trust}")
        if result.signer:
            print(f"  signed by: {result.signer}")
        if result.job_id:
            print(f"  job: {result.job_id}")
        print(f"  faces replaced by AI: {'yes' if result.ai_replaced else 'not stated'}")
        for name, ref in sorted(result.consent_refs.items()):
            print(f"  identity {name}: consent {ref}")
        if result.model_pack_sha256:
            print(f"  model pack sha256: {result.model_pack_sha256}")
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
