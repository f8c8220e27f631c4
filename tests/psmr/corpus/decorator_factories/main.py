from functools import partial

REGISTRY = {}


def register(func=None, *, name=None):
    def attach(func, name):
        REGISTRY[name or func.__name__] = func
        return func

    if func is None:
        return partial(attach, name=name)
    return attach(func, name)


def traced(cls):
    cls.traced = True
    return cls


@register
def alpha():
    return "a"


@register(name="b")
def beta():
    return "b"


@traced
class Plain:
    def run(self):
        return alpha()


@traced
class Fancy:
    def run(self):
        return beta()


def run():
    alpha()
    beta()
    Plain().run()
    return Fancy().run()


run()
