def red():
    return "red"


def green():
    return "green"


def blue():
    return "blue"


def palette():
    yield red
    yield green


def from_palette():
    return palette()


def primaries():
    return [red, blue]


def favourites():
    return [blue]


def chained():
    yield from primaries()


class Registry:
    def __init__(self):
        self.hooks = (green, blue)

    def __iter__(self):
        yield from self.hooks


def paint():
    for colour in from_palette():
        colour()


def first():
    return next(iter(favourites()))()


def every():
    for colour in chained():
        colour()


def hooks():
    for hook in Registry():
        hook()


paint()
first()
every()
hooks()
