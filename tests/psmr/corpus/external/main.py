import os
import json as js
from collections import OrderedDict
from os.path import join


def paths():
    return join("a", "b")


os.getcwd()
js.dumps({})
OrderedDict()
paths()
