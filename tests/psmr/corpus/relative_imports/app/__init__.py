from .core.service import run as start
