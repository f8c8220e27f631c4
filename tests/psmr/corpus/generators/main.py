def produce():
    yield first
    yield second


def first():
    return 1


def second():
    return 2


def consume():
    for fn in produce():
        fn()


def numbers():
    return [1, 2]


def gen_expr():
    return sum(x for x in numbers())


consume()
gen_expr()
