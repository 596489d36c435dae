"""The render actor's part of consent bound to faces: embed the identity pictures with the job's models.

The driver compares the result with the studio policy's reference embeddings
(:func:`pipeline.provenance.consent.check_faces`) before any chunk is read.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


class PictureEmbeddings:
    """Mixed into :class:`actors.render.RenderWorker`, which provides ``config``, ``models`` and ``_ready``."""

    config: Any
    models: Any

    def _ready(self) -> None:
        raise NotImplementedError

    def picture_embeddings(self, names: Sequence[str]) -> dict[str, list[tuple[str, np.ndarray]]]:
        """Each picture's face embedding (URL, unit vector) for the identities ``names``, as the job embeds them."""
        self._ready()
        from pipeline.provenance.consent import picture_embeddings

        sources = self.config.identities
        return {n: picture_embeddings(sources[n].images, self.models, sources[n].face_index) for n in names}
