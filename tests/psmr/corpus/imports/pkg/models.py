from .util import *


class Model:
    def save(self):
        return helper()
