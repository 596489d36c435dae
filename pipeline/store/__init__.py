"""Reading and writing by URL, within bounds: the storage layer every other concern stands on.

``storage`` (local paths and object stores behind one URL API), ``urls`` (parsing and
checking them), ``atomic`` (all-or-nothing local writes), ``hashing`` (content digests),
``yamlload`` / ``jsonload`` / ``npycheck`` (documents and arrays read with size and shape
bounds) and ``redact`` (credentials kept out of logs, errors and records).

Import the modules themselves (``from pipeline.store import storage``); this package
re-exports nothing and imports nothing above ``pipeline.errors``.
"""
