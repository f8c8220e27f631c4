"""PSMR's operators over a built workspace: queries, slices, analyses, findings, semantic diffs,
inferred contracts, and the budgets that page every answer.
"""
