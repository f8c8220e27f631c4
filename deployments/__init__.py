"""How flows run outside one `slotrelay run`: the local API server (`server.py`), serving the chain flow
as deployments (`serve.py`) or creating them on a work pool (`pool.py`), and the sensor's action that
starts a run of a chain's deployment when a routed slot asks for one (`sensor.py`)."""
