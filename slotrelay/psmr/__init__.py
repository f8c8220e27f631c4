"""PSMR: a persistent semantic workspace over Python code, queried and changed through one API.

Entry points: `slotrelay.psmr.api` (`call`, `OPERATIONS`, `build_workspace`, `list_workspaces`) and
`slotrelay.psmr.effect_screen.effects` (a static screen of one code string). The flow of a build:
`build` discovers files -> `extract` (fast pass per file, cached by content hash) -> `link`
(resolution across files) -> `graph` (MultiDiGraph with evidence, unknowns, conflicts) -> `store`.
Operators live in `queries`, `analyses`, `findings`, `diff` and `infer`; `budgets` pages every result.
The change half: `delta` (propose; `delta_ops` expands the typed operations, `rewrite` edits through
libcst, `callbinding` binds call sites), `validation`, `projection` (preview, apply), `execution`
(tests in the sandbox), `verification` (rebuild, roundtrip, review); `grants` holds the capabilities.
"""
