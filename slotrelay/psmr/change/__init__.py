"""PSMR's change half: a delta proposed (`delta`, through `rewrite`), validated (`validation`), previewed
and applied (`projection`), its tests run (`execution`) and verified (`verification`).
"""
