"""Stand-in ONNX models with the production I/O contract of each role, for tests and benchmarks.

``standins`` (tiny models whose behaviour a test can predict, and production-cost ones sized
like the real recognizer, swapper, enhancer and detector; written into a model pack) and
``onnxgraph`` (the small graph builder they use, counting parameters and multiply-adds, with
seeded weights so the same calls write the same bytes).  Never in the wheel.
"""
