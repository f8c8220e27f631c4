def load():
    return "load"


def save():
    return "save"


def pair():
    return load, save


def swap(first, second):
    return second, first


def run():
    reader, writer = pair()
    reader()
    a, b = swap(load, save)
    a()
    (c, d), e = (save, load), load
    d()
    return writer


run()
