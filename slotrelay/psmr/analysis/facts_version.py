"""The version of the fast pass's facts (`slotrelay.psmr.analysis.extract`), bumped whenever what it extracts
changes.

It is part of every file's content key (`slotrelay.psmr.workspace.build`) and of every cached facts record
(`slotrelay.psmr.workspace.store`), so a new version extracts every file again. A module of its own so that
checking whether a stored workspace is up to date does not import the fast pass.
"""

FACTS_VERSION = 21
