def ident(x):
    return x


def first(items):
    return items[0]


def wrap(fn):
    return [fn]


def a():
    return "a"


def b():
    return "b"


def one():
    return ident(a)()


def two():
    return ident(b)()


def three():
    return first([b, a])()


def four():
    return wrap(a)[0]()


one()
two()
three()
four()
