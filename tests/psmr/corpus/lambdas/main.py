square = lambda x: x * x


def apply(f, v):
    return f(v)


apply(square, 2)
apply(lambda y: helper(y), 3)


def helper(v):
    return v
