"""PSMR's analysis: the fast pass over one file (`extract`), the resolution across files (`link`, its
memos, `relink` after an edit, `callbinding`) and what a callee does to the world (`effects`).
"""
