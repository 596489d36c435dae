"""Studio policy: which identities are cleared (consent), for which projects and
dates, and which storage prefixes jobs may read from and write to.

The policy lives in a YAML or JSON file at a URL owned by the studio.  On a
cluster it is pinned by the ``RECAST_POLICY_URL`` environment variable (see
``cluster.checks.trust``) and always enforced; a local job spec may point at one.
Nothing in a job spec can relax it.  ``enforce: false`` in the policy file is
the only way to turn consent refusals into warnings, and only where no cluster
policy is set.

Consent is bound to faces, not only names: an identity may list the sha256 of
its approved reference pictures (``reference_sha256``) and/or a reference
embedding (``reference_embedding_url``, a ``.npy`` of one or more recognizer
embeddings) that the job's faces must match (``min_similarity``, cosine).
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import re
from collections.abc import Iterable, Mapping

from pydantic import Field, ValidationError, field_validator, model_validator

from pipeline.configbase import Frozen
from pipeline.errors import InputRefused, RecastError, SpecError
from pipeline.limits import SPEC_MAX_BYTES
from pipeline.provenance.config import SignerConfig
from pipeline.store import storage, urls, yamlload

log = logging.getLogger(__name__)

NOT_ENFORCED_REF = "none (policy enforce: false)"
"""Consent reference recorded for an uncleared identity when the policy does not enforce."""
DEFAULT_MIN_SIMILARITY = 0.4
"""Cosine similarity an identity picture's face must reach against the reference embedding.
Real recognizers put different people well below it (SFace <= 0.35, ArcFace about 0.1-0.3)
and the same person above it (0.5-0.9); studios tune it per identity."""
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


class PolicyError(RecastError):
    """The studio policy forbids what a job asks for (identity, path)."""

    def __init__(self, subject: str, reason: str) -> None:
        super().__init__(f"{subject}: {reason}")
        self.subject = subject
        self.reason = reason

    def __reduce__(self) -> tuple[type, tuple[str, str]]:
        # Pickle with both parts so Ray can re-raise it in the driver intact.
        return (type(self), (self.subject, self.reason))


class Clearance(Frozen):
    """Consent for one identity: a reference to the signed release and its scope."""

    consent_ref: str = Field(min_length=1)
    projects: tuple[str, ...] = Field(min_length=1)
    """Projects the consent covers; ``"*"`` means every project."""
    valid_from: dt.date | None = None
    valid_until: dt.date | None = None
    """Last day (inclusive) on which the consent may be used."""
    reference_sha256: tuple[str, ...] = ()
    """sha256 (hex) of the approved reference pictures; when set, every picture of the
    identity in a job must be one of them."""
    reference_embedding_url: tuple[str, ...] = ()
    """``.npy`` files of recognizer embeddings (D,) or (N, D) of the consenting person; when
    set, every picture's face must reach ``min_similarity`` against one of them."""
    min_similarity: float = Field(default=DEFAULT_MIN_SIMILARITY, gt=-1.0, le=1.0)

    @field_validator("reference_sha256", mode="before")
    @classmethod
    def _hashes(cls, value: object) -> object:
        values = [value] if isinstance(value, str) else value
        if isinstance(values, list | tuple):
            values = [v.lower() if isinstance(v, str) else v for v in values]
            for v in values:
                if not isinstance(v, str) or not _SHA256.match(v):
                    raise ValueError(f"{v!r} is not a sha256 (64 hex digits)")
        return values

    @field_validator("reference_embedding_url", mode="before")
    @classmethod
    def _one_or_many(cls, value: object) -> object:
        return [value] if isinstance(value, str) else value

    @model_validator(mode="after")
    def _dates_ordered(self) -> Clearance:
        if self.valid_from and self.valid_until and self.valid_until < self.valid_from:
            raise ValueError(f"valid_until {self.valid_until} is before valid_from {self.valid_from}")
        return self


class Policy(Frozen):
    """A studio policy file, validated."""

    enforce: bool = True
    identities: dict[str, Clearance] = Field(default_factory=dict)
    allowed_input_prefixes: tuple[str, ...] = ()
    """Inputs must lie under one of these URL prefixes; empty means unrestricted."""
    allowed_output_prefixes: tuple[str, ...] = ()
    """Outputs must lie under one of these URL prefixes; empty means unrestricted."""
    timestamp_url: str | None = None
    """RFC 3161 time-stamp authority for Content Credentials (never from a job spec)."""
    signer: SignerConfig | None = None
    """The studio's key and certificate chain for the Content Credentials of every job under this
    policy that names none of its own (``provenance.signer``); None: the installation's own key."""
    allow_unmarked_outputs: bool = False
    """Whether a job may switch AI marking off (``provenance.watermark.enabled: false`` or
    ``provenance.content_credentials: false``).  Honoured only in the cluster's policy
    (``RECAST_POLICY_URL``), never in one a job names; every such job is audited."""

    @field_validator("signer")
    @classmethod
    def _signer_without_timestamp(cls, value: SignerConfig | None) -> SignerConfig | None:
        if value is not None and value.timestamp_url is not None:
            raise ValueError("the time-stamp authority is the policy's timestamp_url, not the signer's")
        return value

    @field_validator("allowed_input_prefixes", "allowed_output_prefixes")
    @classmethod
    def _prefixes_clean(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for prefix in value:
            if not prefix or urls.has_dotdot(prefix):
                raise ValueError(f"prefix {prefix!r} is empty or contains '..'")
            reason = urls.problem(prefix)
            if reason is not None:
                raise ValueError(f"prefix {prefix!r} {reason}")
            if urls.is_local(prefix) and not os.path.isabs(urls.local_path(prefix)):
                raise ValueError(f"prefix {prefix!r} is a relative path: give an absolute path or URL")
        return value


def parse_policy(text: str | bytes, where: str = "<policy>") -> Policy:
    """Parse policy YAML/JSON text; SpecError names the file and the bad field."""
    try:
        data = yamlload.load(text)
    except yamlload.ImpossibleDateError as exc:
        field = ".".join(str(p) for p in exc.loc)
        raise SpecError(f"{where}#{field}", str(exc)) from None
    except yamlload.LoadError as exc:  # line, column, problem: never the line's text (a secret?)
        if exc.loc:  # a value refused (a tag it does not fit, a 5,000-digit integer): its field
            field = ".".join(str(p) for p in exc.loc)
            raise SpecError(f"{where}#{field}", str(exc)) from None
        raise SpecError(where, f"not valid YAML/JSON: {exc}") from None
    if not isinstance(data, Mapping):
        raise SpecError(where, "a policy must be a mapping at the top level")
    try:
        return Policy.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"])
        raise SpecError(f"{where}#{field}", str(first["msg"]).removeprefix("Value error, ")) from exc


def load_policy(url: str) -> Policy:
    """Read and validate the policy file at ``url`` (any storage URL; a regular file of at most 1 MiB)."""
    try:
        data = storage.read_bytes(url, max_bytes=SPEC_MAX_BYTES)
    except InputRefused as exc:
        raise SpecError(url, f"not a usable policy file: {exc.reason}") from None
    return parse_policy(data, where=url)


def check_identities(
    policy: Policy, project: str | None, identity_names: Iterable[str], today: dt.date
) -> dict[str, str]:
    """Consent references of ``identity_names`` for ``project`` on ``today``.

    Raises PolicyError naming the first identity that is not cleared, not cleared
    for this project, not yet valid or expired.  Call it before anything is
    rendered or written.  With ``enforce: false`` the refusal is logged as a
    warning and the identity is recorded with ``NOT_ENFORCED_REF``.
    """
    refs: dict[str, str] = {}
    # Names are compared exactly: a look-alike ("hеro" with a Cyrillic e) or "Hero" is another identity.
    for name in sorted(set(identity_names)):
        problem = _clearance_problem(policy.identities.get(name), project, today)
        if problem is None:
            refs[name] = policy.identities[name].consent_ref
            continue
        if policy.enforce:
            raise PolicyError(f"identity {name!r}", problem)
        log.warning("identity %r: %s; allowed because the policy sets enforce: false", name, problem)
        clearance = policy.identities.get(name)
        refs[name] = clearance.consent_ref if clearance else NOT_ENFORCED_REF
    return refs


def _clearance_problem(clearance: Clearance | None, project: str | None, today: dt.date) -> str | None:
    if clearance is None:
        return "not cleared: no consent on record in the studio policy"
    if project is None and "*" not in clearance.projects:
        return (
            f"consent {clearance.consent_ref} covers only projects {', '.join(clearance.projects)}: "
            "name the project in provenance.project"
        )
    if "*" not in clearance.projects and project not in clearance.projects:
        return (
            f"consent {clearance.consent_ref} does not cover project {project!r} "
            f"(covers {', '.join(clearance.projects)})"
        )
    if clearance.valid_from and today < clearance.valid_from:
        return f"consent {clearance.consent_ref} is not valid before {clearance.valid_from}"
    if clearance.valid_until and today > clearance.valid_until:
        return f"consent {clearance.consent_ref} expired on {clearance.valid_until}"
    return None


def check_url_allowed(policy: Policy, url: str, kind: str = "input") -> None:
    """Raise PolicyError unless ``url`` lies under an allowed prefix for ``kind``.

    ``kind`` is ``"input"`` or ``"output"``.  Matching is by whole path
    segments (``s3://b/in`` does not admit ``s3://b/inbox``), and URLs with
    ``..`` segments are refused outright.  Prefix lists apply whatever
    ``enforce`` says: they are hardening, not consent.
    """
    if kind not in ("input", "output"):
        raise ValueError(f"kind must be 'input' or 'output', not {kind!r}")
    if urls.has_dotdot(url):
        raise PolicyError(f"{kind} {url}", "'..' segments are not allowed in URLs")
    prefixes = policy.allowed_input_prefixes if kind == "input" else policy.allowed_output_prefixes
    if not prefixes:
        return
    target = _normalise(url)
    for prefix in prefixes:
        base = _normalise(prefix).rstrip("/")
        if target == base or target.startswith(base + "/"):
            return
    raise PolicyError(f"{kind} {url}", f"not under an allowed {kind} prefix ({', '.join(prefixes)})")


def comparable_url(url: str) -> str:
    """``url`` in the form prefix checks compare (two URLs of one place compare equal)."""
    return _normalise(url)


def _normalise(url: str) -> str:
    """Comparable form: the canonical URL (:func:`pipeline.store.urls.canonical`, every spelling of a
    place alike), local paths as resolved absolute ``file://`` URLs.

    Symbolic links are resolved (``os.path.realpath``), so a link inside an
    allowed folder that points outside it is judged by where it points.  A URL
    that has no canonical form (chained, unknown scheme) is a PolicyError.
    """
    try:
        canonical = urls.canonical(url)
    except InputRefused as exc:
        raise PolicyError(url, exc.reason) from None
    if urls.is_local(canonical):
        return "file://" + os.path.realpath(canonical)
    return canonical


def check_pictures(policy: Policy, name: str, picture_sha256: Mapping[str, str]) -> None:
    """Raise PolicyError unless every picture (URL -> sha256) of ``name`` is an approved reference.

    Does nothing when the identity's clearance lists no ``reference_sha256``.
    """
    clearance = policy.identities.get(name)
    if clearance is None or not clearance.reference_sha256:
        return
    for url, digest in picture_sha256.items():
        if digest not in clearance.reference_sha256:
            raise PolicyError(
                f"identity {name!r}",
                f"picture {url} (sha256 {digest}) is not one of the reference pictures approved "
                f"with consent {clearance.consent_ref} (reference_sha256 in the studio policy)",
            )


def authorise_job(
    policy: Policy,
    *,
    project: str | None,
    identity_names: Iterable[str],
    input_urls: Iterable[str],
    output_urls: Iterable[str],
    today: dt.date,
) -> dict[str, str]:
    """Every pre-render check in one call: consent, then input and output prefixes.

    The driver calls this after loading the spec and before creating actors or
    writing anything; it returns identity -> consent reference for the audit
    record and the C2PA manifest, or raises PolicyError.
    """
    refs = check_identities(policy, project, identity_names, today)
    for url in input_urls:
        check_url_allowed(policy, url, "input")
    for url in output_urls:
        check_url_allowed(policy, url, "output")
    return refs
