def target():
    pass


def other():
    pass


def dispatch(a, b=None, *, c=None):
    b()
    c()


dispatch(1, b=target, c=other)
