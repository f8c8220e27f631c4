def f():
    pass


def g():
    pass


a = f
b, c = g, f
a()
b()
c()
d = a
d()
