from .util import helper
from . import models
