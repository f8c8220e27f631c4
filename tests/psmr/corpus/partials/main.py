from functools import partial


def scale(factor, value):
    return factor * value


def shout(text, *, suffix="!"):
    return text.upper() + suffix


double = partial(scale, 2)
loud = partial(shout, suffix="!!")


def apply(fn, value):
    return fn(value)


double(3)
apply(loud, "hi")
