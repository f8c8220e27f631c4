"""PSMR's workspace: a build (`build`) of a tree into its graph (`graph`, `parts`, `importgraph`), kept
in the sealed store (`store`, `sealed`) and kept up to date (`watch`).
"""
