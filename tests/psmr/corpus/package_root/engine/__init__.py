from .parts import gear
from .parts.gear import spin as start
