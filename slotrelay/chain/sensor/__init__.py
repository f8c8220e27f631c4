"""The watchdog sensor: routes output slots written by agents outside the engine, exactly once.

    watcher.SlotSensor      watchdog observer + handler, reconcile on start, clean stop on SIGINT
    router.ChainRouter      one chain: read, check, evaluate routes, write input slots, ledger
    coalescer.RunCoalescer  routed targets -> one run per chain per short window

The action that starts a run is injected (`StartRun`), so this package never imports Prefect; the
Prefect implementation is `deployments.sensor.DeploymentStarter`. The ledger is `slotrelay.chain.ledger`.
"""

from slotrelay.chain.sensor.coalescer import RunCoalescer, StartRun
from slotrelay.chain.sensor.router import ChainRouter
from slotrelay.chain.sensor.watcher import SlotSensor

__all__ = ["ChainRouter", "RunCoalescer", "SlotSensor", "StartRun"]
