def double(x):
    return x * 2


def apply(fn, value):
    return fn(value)


def call_kw(fn=None):
    return fn()


def zero():
    return 0


apply(double, 2)
call_kw(fn=zero)
