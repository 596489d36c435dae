"""Provenance, consent and safety: who may be rendered, where files may go,
what was done (audit log, Content Credentials) and a mark that survives delivery.

Ray-free.  The driver calls, in order: ``policy.load_policy`` and
``policy.check_identities`` / ``policy.check_url_allowed`` before any work,
``paths.render_url`` for every output, pass and work area URL, ``watermark.embed`` in the frame
loop (optional), ``credentials.sign_video`` before publishing, and
``audit.AuditLog.append`` once the outputs are published.
"""
