class Handlers:
    def on_start(self):
        return "start"

    def on_stop(self):
        return "stop"

    def helper(self):
        return "helper"


def dispatch(event):
    handlers = Handlers()
    return getattr(handlers, "on_" + event)()


def run_code():
    namespace = {"fn": Handlers().helper}
    exec("fn()", namespace)


def lookup(name):
    table = vars(Handlers)
    return table[name]


dispatch("start")
run_code()
lookup("helper")
