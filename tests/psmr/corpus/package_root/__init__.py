from .engine import start
