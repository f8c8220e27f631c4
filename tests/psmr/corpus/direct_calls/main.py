def a():
    b()


def b():
    c()


def c():
    pass


def unused():
    a()


a()
