"""Publishing a shot's output: segments merged, signed, checksummed and published atomically.

Video outputs are merged from their segments (:mod:`cluster.publish.merge`); image-sequence
outputs are completed in place (:mod:`cluster.publish.sequences`).

Public API: :class:`Publisher`, :func:`merge_and_publish`, :class:`Published` and
:func:`complete_sequence`.
"""

from cluster.publish.merge import Published as Published
from cluster.publish.merge import Publisher as Publisher
from cluster.publish.merge import merge_and_publish as merge_and_publish
from cluster.publish.sequences import complete_sequence as complete_sequence
