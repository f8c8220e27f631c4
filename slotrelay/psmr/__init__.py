"""PSMR: a persistent semantic workspace over Python code, queried through a read-only API.

Entry points: `slotrelay.psmr.api` (`call`, `OPERATIONS`, `build_workspace`, `list_workspaces`) and
`slotrelay.psmr.screen.effects` (a static screen of one code string). The flow of a build:
`build` discovers files -> `extract` (fast pass per file, cached by content hash) -> `link`
(resolution across files) -> `graph` (MultiDiGraph with evidence, unknowns, conflicts) -> `store`.
Operators live in `queries`, `analyses`, `findings`, `diff` and `infer`; `budgets` pages every result.
"""
