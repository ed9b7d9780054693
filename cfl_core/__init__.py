"""CFL Lab simulation core: data, partitions, batched engine, algorithms, records.

A plain library: it never imports Streamlit. The dashboard, the CLI, the
benchmark and the tests all drive the same public API.
"""

__version__ = "0.1.0"
