def on_start():
    pass


def on_stop():
    pass


handlers = {"start": on_start}
handlers["stop"] = on_stop
handlers["start"]()


def run(table):
    table["stop"]()


run(handlers)
