"""The installation's own signing key: Content Credentials for every output, even without a studio key.

Every output is signed (EU AI Act, Article 50(2): AI-manipulated video is marked in a
machine-readable way).  A studio signs with its own key and certificate chain
(``provenance.signer`` in the spec, or ``signer`` in the cluster's studio policy);
without one, the driver signs with a key this installation made for itself the first
time it needed one: an ES256 root certificate and a signing certificate under it, both
named ``Recast installation key (untrusted)`` with the host's name.  Nobody's trust list
holds that root, so a verifier reports the signer as untrusted; the credentials still
say, verifiably, that faces were replaced by AI and that the file was not changed since.

The key lives in ``$RECAST_SIGNING_DIR`` (default ``~/.recast/signing``), readable by its
owner only: ``signer.pem`` (the signing certificate), ``signer.key`` (its PKCS#8 key) and
``root.pem`` (the root, what ``jobs.verify --trust-anchors`` would need to trust it).  Two
drivers creating it at once both end with the same key: it is made in a scratch folder and
renamed into place, and the loser of the race uses the winner's.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import socket
import tempfile
from collections.abc import Mapping
from pathlib import Path

from pipeline.errors import SpecError
from pipeline.provenance.config import SignerConfig

SIGNING_DIR_ENV = "RECAST_SIGNING_DIR"
UNTRUSTED_NAME = "Recast installation key (untrusted)"
"""Common-name prefix of the installation's certificates: what a verifier shows as the signer."""
VALID_DAYS = 3650
_FILES = ("signer.pem", "signer.key", "root.pem")


def signing_dir(env: Mapping[str, str] | None = None) -> Path:
    """Where the installation key lives: ``$RECAST_SIGNING_DIR`` or ``~/.recast/signing``."""
    env = os.environ if env is None else env
    configured = (env.get(SIGNING_DIR_ENV) or "").strip()
    return Path(configured).expanduser() if configured else Path.home() / ".recast" / "signing"


def installation_signer(folder: Path | None = None) -> SignerConfig:
    """The installation key's :class:`SignerConfig`, made on first use in ``folder`` (:func:`signing_dir`)."""
    folder = signing_dir() if folder is None else folder
    if not all((folder / name).is_file() for name in _FILES):
        try:
            _create(folder)
        except OSError as exc:
            raise SpecError(
                "provenance.signer",
                f"no studio key is named and the installation's own could not be made in {folder}: "
                f"{exc.strerror or exc}; set {SIGNING_DIR_ENV} to a writable folder, or name a studio key "
                "(provenance.signer, or signer in the studio policy)",
            ) from None
    return SignerConfig(
        certificate_chain_url=str(folder / "signer.pem"),
        private_key_url=str(folder / "signer.key"),
        algorithm="es256",
    )


def is_installation_certificate(common_name: str | None) -> bool:
    """Whether a signer's common name is an installation key's (not a studio's)."""
    return bool(common_name) and str(common_name).startswith(UNTRUSTED_NAME)


def _create(folder: Path) -> None:
    folder.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".signing-", dir=folder.parent))
    try:
        for name, data in _key_files().items():
            path = scratch / name
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
        os.chmod(scratch, 0o700)
        try:
            os.rename(scratch, folder)  # atomic; fails when another driver made it first
        except OSError:
            if not all((folder / name).is_file() for name in _FILES):
                raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _key_files() -> dict[str, bytes]:
    host = socket.gethostname() or "localhost"
    return signing_certificates(
        root_name=f"{UNTRUSTED_NAME} root {host}"[:64],
        signer_name=f"{UNTRUSTED_NAME} signer {host}"[:64],
        organisation="Recast installation (not a studio)",
        days=VALID_DAYS,
    )


def signing_certificates(
    *, root_name: str, signer_name: str, organisation: str, days: int
) -> dict[str, bytes]:
    """PEM files of a new ES256 root certificate and a signing certificate under it, as C2PA wants a
    signer (a leaf with the e-mail protection purpose, not self-signed): ``signer.pem`` (the chain to
    sign with: the leaf alone), ``signer.key`` (its PKCS#8 key), ``root.pem`` (the trust anchor)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = dt.datetime.now(dt.UTC)

    def name(common: str) -> x509.Name:
        return x509.Name(
            [
                x509.NameAttribute(NameOID.COMMON_NAME, common),
                x509.NameAttribute(NameOID.ORGANIZATION_NAME, organisation),
            ]
        )

    def usage(*, sign: bool, ca: bool) -> x509.KeyUsage:
        return x509.KeyUsage(
            digital_signature=sign,
            content_commitment=False,
            key_encipherment=False,
            data_encipherment=False,
            key_agreement=False,
            key_cert_sign=ca,
            crl_sign=ca,
            encipher_only=False,
            decipher_only=False,
        )

    root_key = ec.generate_private_key(ec.SECP256R1())
    root = (
        x509.CertificateBuilder()
        .subject_name(name(root_name))
        .issuer_name(name(root_name))
        .public_key(root_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(usage(sign=False, ca=True), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(root_key.public_key()), critical=False)
        .sign(root_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(name(signer_name))
        .issuer_name(root.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=days - 1))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(usage(sign=True, ca=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.EMAIL_PROTECTION]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(root_key.public_key()), critical=False
        )
        .sign(root_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    return {
        "signer.pem": cert.public_bytes(pem),
        "signer.key": key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()),
        "root.pem": root.public_bytes(pem),
    }
