from . import helpers
from .helpers import assist
