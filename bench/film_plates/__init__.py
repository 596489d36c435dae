"""Film plates for the benchmark's ``--plates`` scenario: the plates, the figures and their table.

``plates`` (generated EXR half and DPX 10-bit log frames of a real face, and their ProRes 4444
twin), ``plate_figures`` (an actor's frame I/O, the colour round trip, and a whole job beside
ProRes 4444) and ``plate_table`` (the scenario's markdown table, from ``plates.json``).
"""
