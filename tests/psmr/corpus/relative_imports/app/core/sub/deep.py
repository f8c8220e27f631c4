from ... import util
from .. import assist, service
from ..helpers import other


def go():
    util.tool()
    assist()
    other()
    return service.run()
