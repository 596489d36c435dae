"""The analysis pass against the cost of its parts: is the actor as fast as its models?

``analysis`` (the actor's analysis of one clip beside decode, detector and recognizer alone;
also ``python -m bench.analysis_pass.analysis CLIP``), ``decode_reuse`` (a chunk's render fed by
its analysis' decoded pictures, against decoding again), ``detect_size`` (the detector at its
full input against the smaller one ``faces.detect_size: auto`` chooses) and ``decode_options``
(what the pass's decode costs and what cheaper options would save; ``python -m
bench.analysis_pass.decode_options CLIP``).  In-process, no Ray.
"""
