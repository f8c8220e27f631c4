import importlib


def alpha():
    pass


def beta():
    pass


class Plugin:
    def run(self):
        pass


getattr(Plugin(), "run")()
name = "alp" + "ha"
globals()[name]()
eval("beta()")
mod = importlib.import_module("json")
mod.dumps({})
