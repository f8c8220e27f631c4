from . import helpers
from .. import util
from ..util import tool
from .helpers import assist


def run():
    assist()
    tool()
    util.tool()
    return helpers.other()
