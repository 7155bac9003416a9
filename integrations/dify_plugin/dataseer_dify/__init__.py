"""dataseer for Dify: thread mapping, the run bridge and the vendored stream adapter."""
